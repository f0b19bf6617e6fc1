//===- GradientBuilder.cpp - helpers and the rule table -------------------===//

#include "ds/Dialect/DS/Transforms/GradientRules.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::ds;

Value GradientBuilder::aten(StringRef name, ArrayRef<Value> args,
                            Type resultType) {
  return atenN(name, args, resultType).front();
}

SmallVector<Value> GradientBuilder::atenN(StringRef name, ArrayRef<Value> args,
                                          TypeRange resultTypes) {
  OperationState st(op.getLoc(), AtenOp::getOperationName());
  st.addOperands(args);
  st.addTypes(resultTypes);
  st.addAttribute("op", b.getStringAttr(name));
  st.addAttribute("module", op.getModuleAttr());
  st.addAttribute("module_class", op.getModuleClassAttr());
  Operation *created = b.create(st);
  return SmallVector<Value>(created->getResults());
}

Value GradientBuilder::constInt(int64_t v) {
  return ConstantOp::create(b, op.getLoc(), b.getI64Type(),
                            b.getI64IntegerAttr(v));
}
Value GradientBuilder::constFloat(double v) {
  return ConstantOp::create(b, op.getLoc(), b.getF64Type(),
                            b.getF64FloatAttr(v));
}
Value GradientBuilder::constBool(bool v) {
  return ConstantOp::create(b, op.getLoc(), b.getI1Type(), b.getBoolAttr(v));
}
Value GradientBuilder::constStr(StringRef v) {
  return ConstantOp::create(b, op.getLoc(), StrType::get(b.getContext()),
                            b.getStringAttr(v));
}
Value GradientBuilder::none() {
  return ConstantOp::create(b, op.getLoc(), NoneType::get(b.getContext()),
                            b.getUnitAttr());
}
Value GradientBuilder::intList(ArrayRef<int64_t> values) {
  SmallVector<Value> items;
  for (int64_t v : values)
    items.push_back(constInt(v));
  return ListConstructOp::create(
      b, op.getLoc(), ListType::get(b.getContext(), b.getI64Type()), items);
}
Value GradientBuilder::boolList(ArrayRef<bool> values) {
  SmallVector<Value> items;
  for (bool v : values)
    items.push_back(constBool(v));
  return ListConstructOp::create(
      b, op.getLoc(), ListType::get(b.getContext(), b.getI1Type()), items);
}

Value GradientBuilder::resultGradOrZeros(unsigned i) {
  if (Value g = resultGrad(i))
    return g;
  return zerosLike(result(i));
}

FailureOr<SmallVector<Value>> GradientBuilder::pieceGrads() {
  SmallVector<Value> pieces;
  if (op.getNumResults() == 1 && isa<ds::ListType>(result(0).getType())) {
    if (resultListElements.empty())
      return op.emitOpError()
             << "gradient of a list result that is never unpacked is not "
                "supported";
    for (auto [g, e] : llvm::zip(resultListGrads, resultListElements))
      pieces.push_back(g ? g : zerosLike(e));
    return pieces;
  }
  for (unsigned i = 0; i < op.getNumResults(); ++i)
    pieces.push_back(resultGradOrZeros(i));
  return pieces;
}

Value GradientBuilder::zerosLike(Value v) {
  return aten("aten::zeros_like", {v, none(), none(), none(), none(), none()},
              v.getType());
}

Value GradientBuilder::sumToShapeOf(Value grad, Value like) {
  auto g = cast<RankedTensorType>(grad.getType());
  auto l = cast<RankedTensorType>(like.getType());
  if (g.hasStaticShape() && l.hasStaticShape() && g.getShape() == l.getShape())
    return grad;
  Value size;
  if (l.hasStaticShape())
    size = intList(l.getShape());
  else
    size = aten("aten::size", {like},
                ListType::get(b.getContext(), b.getI64Type()));
  return aten("aten::sum_to_size", {grad, size}, like.getType());
}

std::optional<int64_t> GradientBuilder::staticInt(Value v) const {
  if (auto c = v.getDefiningOp<ConstantOp>())
    if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
      return i.getInt();
  return std::nullopt;
}

std::optional<double> GradientBuilder::staticFloat(Value v) const {
  if (auto c = v.getDefiningOp<ConstantOp>()) {
    if (auto f = dyn_cast<FloatAttr>(c.getValue()))
      return f.getValueAsDouble();
    if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
      return static_cast<double>(i.getInt());
  }
  return std::nullopt;
}

static const rules::RuleTable &ruleTable() {
  static const rules::RuleTable table = [] {
    rules::RuleTable t;
    rules::addElementwiseRules(t);
    rules::addShapeRules(t);
    rules::addNNRules(t);
    rules::addEinsumRules(t);
    rules::addReductionRules(t);
    rules::addLossRules(t);
    rules::addSpatialRules(t);
    rules::addNativeNNRules(t);
    return t;
  }();
  return table;
}

const GradientRule *mlir::ds::lookupGradientRule(StringRef name) {
  auto it = ruleTable().find(name);
  return it == ruleTable().end() ? nullptr : &it->second;
}

bool mlir::ds::isNonDifferentiable(StringRef name) {
  static const llvm::StringSet<> names = {"aten::nonzero",
                                          "aten::numel",
                                          "aten::size",
                                          "aten::size.int",
                                          "aten::eq.Scalar",
                                          "aten::eq.Tensor",
                                          "aten::ne.Scalar",
                                          "aten::ne.Tensor",
                                          "aten::lt.Scalar",
                                          "aten::lt.Tensor",
                                          "aten::le.Scalar",
                                          "aten::le.Tensor",
                                          "aten::gt.Scalar",
                                          "aten::gt.Tensor",
                                          "aten::ge.Scalar",
                                          "aten::ge.Tensor",
                                          "aten::bitwise_not",
                                          "aten::logical_not",
                                          "aten::argmax",
                                          "aten::argmin",
                                          "aten::arange",
                                          "aten::arange.start",
                                          "aten::arange.start_step",
                                          "aten::ones",
                                          "aten::zeros",
                                          "aten::zeros_like",
                                          "aten::ones_like",
                                          "aten::full",
                                          "aten::eye",
                                          "aten::eye.m",
                                          "aten::full_like",
                                          "aten::detach",
                                          "aten::bernoulli",
                                          "aten::bernoulli.p",
                                          "aten::rand_like",
                                          "aten::Int.Tensor",
                                          "aten::Bool.Tensor",
                                          "aten::Float.Tensor",
                                          "aten::item",
                                          "aten::is_nonzero",
                                          "aten::empty.memory_format",
                                          "aten::empty_like",
                                          "aten::new_zeros",
                                          "aten::new_ones",
                                          "aten::new_empty",
                                          "aten::one_hot",
                                          "prim::NumToTensor.Scalar",
                                          "aten::eq.int",
                                          "aten::gt.int",
                                          "aten::lt.int",
                                          "aten::ge.int",
                                          "aten::le.int",
                                          "aten::ne.int",
                                          "aten::len.t",
                                          "aten::__getitem__.t",
                                          "aten::ceil",
                                          "aten::floor",
                                          "aten::round",
                                          "aten::round.decimals",
                                          "aten::trunc",
                                          "aten::sign",
                                          "aten::isinf",
                                          "aten::isnan",
                                          "aten::logical_and",
                                          "aten::logical_or",
                                          "aten::logical_xor",
                                          "aten::bitwise_and.Tensor",
                                          "aten::bitwise_and.Scalar",
                                          "aten::bitwise_or.Tensor",
                                          "aten::bitwise_or.Scalar",
                                          "aten::bitwise_xor.Tensor",
                                          "aten::bitwise_xor.Scalar",
                                          "aten::any",
                                          "aten::any.dim",
                                          "aten::any.dims",
                                          "aten::all",
                                          "aten::all.dim",
                                          "aten::all.dims",
                                          "aten::fill.Scalar",
                                          "aten::scalar_tensor"};
  return names.contains(name);
}
