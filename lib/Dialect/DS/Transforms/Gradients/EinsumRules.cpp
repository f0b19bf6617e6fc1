//===- EinsumRules.cpp - the gradient of einsum ---------------------------===//

#include "RuleHelpers.h"

#include <map>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

namespace {

/// An einsum equation with its ellipses written out as letters the equation
/// does not use, and its output made explicit.
struct Equation {
  SmallVector<std::string> inputs;
  std::string output;
};

FailureOr<Equation> parseEquation(GradientBuilder &gb, StringRef text,
                                  ArrayRef<Value> operands) {
  std::string eq;
  for (char c : text)
    if (c != ' ')
      eq.push_back(c);
  StringRef lhs = eq, rhs;
  bool explicitOutput = false;
  if (size_t arrow = lhs.find("->"); arrow != StringRef::npos) {
    rhs = lhs.substr(arrow + 2);
    lhs = lhs.substr(0, arrow);
    explicitOutput = true;
  }
  SmallVector<StringRef> terms;
  lhs.split(terms, ',');
  if (terms.size() != operands.size())
    return gb.op.emitOpError() << "einsum equation '" << text << "' has "
                               << terms.size() << " operands, the call "
                               << operands.size();
  std::string unused;
  for (char c = 'A'; c <= 'Z'; ++c)
    if (eq.find(c) == std::string::npos)
      unused.push_back(c);
  for (char c = 'a'; c <= 'z'; ++c)
    if (eq.find(c) == std::string::npos)
      unused.push_back(c);
  // Ellipsis dims are aligned from the right, as they broadcast.
  int64_t ellipsis = 0;
  SmallVector<int64_t> ellipsisOf;
  for (auto [term, x] : llvm::zip(terms, operands)) {
    int64_t named = llvm::count_if(term, [](char c) { return c != '.'; });
    int64_t dims = term.contains("...") ? rankOf(x) - named : 0;
    if (dims < 0 || (!term.contains("...") && named != rankOf(x)))
      return gb.op.emitOpError() << "einsum term '" << term
                                 << "' does not match its operand's rank "
                                 << rankOf(x);
    ellipsisOf.push_back(dims);
    ellipsis = std::max(ellipsis, dims);
  }
  if (ellipsis > static_cast<int64_t>(unused.size()))
    return gb.op.emitOpError() << "einsum with too many ellipsis dims";
  std::string all = unused.substr(0, ellipsis);
  auto expand = [&](StringRef term, int64_t dims) {
    std::string out;
    size_t dots = term.find("...");
    if (dots == StringRef::npos)
      return term.str();
    out = term.substr(0, dots).str();
    out += all.substr(ellipsis - dims);
    out += term.substr(dots + 3).str();
    return out;
  };
  Equation e;
  for (auto [term, dims] : llvm::zip(terms, ellipsisOf))
    e.inputs.push_back(expand(term, dims));
  if (explicitOutput) {
    e.output = expand(rhs, ellipsis);
  } else {
    // Implicit output: the ellipsis dims, then the letters used once, sorted.
    std::map<char, int> uses;
    for (StringRef term : terms)
      for (char c : term)
        if (c != '.')
          ++uses[c];
    e.output = all;
    for (auto [c, n] : uses)
      if (n == 1)
        e.output.push_back(c);
  }
  return e;
}

std::string join(ArrayRef<std::string> terms) {
  std::string out;
  for (const std::string &t : terms)
    out += (out.empty() ? "" : ",") + t;
  return out;
}

} // namespace

void mlir::ds::rules::addEinsumRules(RuleTable &t) {
  // einsum(eq, [x0, x1, ...]): each operand's gradient is the einsum of the
  // result's gradient with the other operands back to the operand's letters.
  // Letters only that operand has (summed within it) come back as an expand;
  // dims of size 1 that broadcast against the others are summed back.
  t["aten::einsum"] = [](GradientBuilder &gb) -> LogicalResult {
    auto eqConst = gb.operand(0).getDefiningOp<ConstantOp>();
    auto eqAttr = eqConst ? dyn_cast<StringAttr>(eqConst.getValue()) : nullptr;
    if (!eqAttr)
      return gb.op.emitOpError() << "gradient of einsum needs a constant "
                                    "equation";
    ArrayRef<Value> xs = gb.listOperand(1);
    FailureOr<Equation> eq = parseEquation(gb, eqAttr.getValue(), xs);
    if (failed(eq))
      return failure();
    // Each letter's size: the largest over the operands (1 broadcasts).
    std::map<char, int64_t> sizes;
    for (auto [term, x] : llvm::zip(eq->inputs, xs)) {
      auto type = cast<RankedTensorType>(x.getType());
      for (auto [d, c] : llvm::enumerate(term)) {
        int64_t s = type.getDimSize(d);
        auto [it, fresh] = sizes.try_emplace(c, s);
        if (!fresh && (it->second == 1 || ShapedType::isDynamic(it->second)))
          it->second = s;
      }
    }
    Value g = gb.resultGradOrZeros(0);
    Type elemList = UnrankedTensorType::get(elementOf(g));
    SmallVector<Value> grads(xs.size());
    for (unsigned i = 0; i < xs.size(); ++i) {
      if (!gb.needsGrad(1) || !isa<FloatType>(elementOf(xs[i])))
        continue;
      const std::string &term = eq->inputs[i];
      std::string others = eq->output;
      SmallVector<std::string> terms = {eq->output};
      SmallVector<Value> operands = {g};
      for (unsigned j = 0; j < xs.size(); ++j)
        if (j != i) {
          terms.push_back(eq->inputs[j]);
          operands.push_back(xs[j]);
          others += eq->inputs[j];
        }
      std::string target;
      SmallVector<int64_t> targetShape, keptShape;
      for (char c : term) {
        if (llvm::count(term, c) > 1)
          return gb.op.emitOpError()
                 << "gradient of einsum with a repeated index in one operand "
                    "('"
                 << term << "', a diagonal) is not supported";
        bool lonely = others.find(c) == std::string::npos;
        if (!lonely) {
          target.push_back(c);
          targetShape.push_back(sizes[c]);
        }
        keptShape.push_back(lonely ? 1 : sizes[c]);
      }
      Value list = ListConstructOp::create(
          gb.b, gb.op.getLoc(), ds::ListType::get(gb.b.getContext(), elemList),
          operands);
      Type elem = elementOf(g);
      Value gi = gb.aten(
          "aten::einsum",
          {gb.constStr(join(terms) + "->" + target), list, gb.none()},
          RankedTensorType::get(targetShape, elem));
      auto xt = cast<RankedTensorType>(xs[i].getType());
      if (target.size() != term.size()) {
        gi = gb.aten("aten::reshape", {gi, gb.intList(keptShape)},
                     RankedTensorType::get(keptShape, elem));
        gi = gb.aten("aten::expand", {gi, sizesOf(gb, xs[i]),
                                      gb.constBool(false)},
                     xt.clone(elem));
      }
      grads[i] = gb.sumToShapeOf(castTo(gb, gi, xt.getElementType()), xs[i]);
    }
    gb.setListGrads(1, grads);
    return success();
  };
}
