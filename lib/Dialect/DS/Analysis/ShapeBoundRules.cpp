//===- ShapeBoundRules.cpp - the rule tables of ShapeBounds --------------===//
//
// The rule tables, keyed as the gradient table is
// (lib/Dialect/DS/Transforms/Gradients): by qualified name with overload;
// elementwise and shape-preserving operators by their name without it, so
// every overload shares the rule. Every rule is an upper bound of what ATen
// computes for any data. Also the query and the helpers the rule files share.
//
//===----------------------------------------------------------------------===//

#include "ShapeBoundRules.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::bounds;

//===----------------------------------------------------------------------===//
// Arithmetic and the query
//===----------------------------------------------------------------------===//

int64_t bounds::addBounds(int64_t a, int64_t b) {
  int64_t sum;
  if (a == kUnbounded || b == kUnbounded || llvm::AddOverflow(a, b, sum))
    return kUnbounded;
  return sum;
}

int64_t bounds::mulBounds(int64_t a, int64_t b) {
  int64_t product;
  if (a == kUnbounded || b == kUnbounded || llvm::MulOverflow(a, b, product))
    return kUnbounded;
  return product;
}

int64_t bounds::maxBounds(int64_t a, int64_t b) {
  return a == kUnbounded || b == kUnbounded ? kUnbounded : std::max(a, b);
}

int64_t bounds::minBounds(int64_t a, int64_t b) {
  if (a == kUnbounded)
    return b;
  if (b == kUnbounded)
    return a;
  return std::min(a, b);
}

std::optional<int64_t> bounds::product(ArrayRef<int64_t> dims) {
  int64_t numel = 1;
  for (int64_t dim : dims)
    numel = mulBounds(numel, dim);
  if (numel == kUnbounded)
    return std::nullopt;
  return numel;
}

std::optional<int64_t> BoundQuery::constInt(unsigned i) const {
  if (i >= numArgs())
    return std::nullopt;
  if (auto constant = arg(i).getDefiningOp<ConstantOp>())
    if (auto attr = dyn_cast<IntegerAttr>(constant.getValue()))
      return attr.getInt();
  return std::nullopt;
}

std::optional<bool> BoundQuery::constBool(unsigned i) const {
  if (i >= numArgs())
    return std::nullopt;
  if (auto constant = arg(i).getDefiningOp<ConstantOp>()) {
    if (auto attr = dyn_cast<BoolAttr>(constant.getValue()))
      return attr.getValue();
    if (auto attr = dyn_cast<IntegerAttr>(constant.getValue()))
      return attr.getInt() != 0;
  }
  return std::nullopt;
}

int64_t BoundQuery::dim(unsigned i, int64_t rank) const {
  std::optional<int64_t> value = constInt(i);
  return value ? normalizeDim(*value, rank) : -1;
}

std::optional<SmallVector<Value>> BoundQuery::listElements(unsigned i) const {
  if (i >= numArgs())
    return std::nullopt;
  auto construct = arg(i).getDefiningOp<ListConstructOp>();
  if (!construct)
    return std::nullopt;
  return SmallVector<Value>(construct.getElements());
}

int64_t BoundQuery::resultRank() const {
  if (op->getNumResults() == 0)
    return -1;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  return type ? type.getRank() : -1;
}

//===----------------------------------------------------------------------===//
// Helpers shared by the rule files
//===----------------------------------------------------------------------===//

int64_t bounds::normalizeDim(int64_t dim, int64_t rank) {
  int64_t d = dim < 0 ? dim + rank : dim;
  return d >= 0 && d < rank ? d : -1;
}

Bounds bounds::broadcastBounds(ArrayRef<Bounds> shapes) {
  size_t rank = 0;
  for (const Bounds &shape : shapes)
    rank = std::max(rank, shape.size());
  // 0 is below every bound: a dim an operand lacks does not count.
  Bounds out(rank, 0);
  for (const Bounds &shape : shapes)
    for (size_t i = 0; i < shape.size(); ++i) {
      size_t d = rank - shape.size() + i;
      out[d] = maxBounds(out[d], shape[i]);
    }
  return out;
}

MaybeBounds bounds::likeOperand0(const BoundQuery &q) { return q.tensor(0); }

MaybeBounds bounds::withDim(const BoundQuery &q, unsigned dimArg, int64_t size,
                            bool shrinksOnly) {
  Bounds x = q.tensor(0);
  int64_t d = q.dim(dimArg, x.size());
  if (d < 0)
    return shrinksOnly ? MaybeBounds(x) : std::nullopt;
  x[d] = shrinksOnly ? minBounds(x[d], size) : size;
  return x;
}

namespace {

struct RuleTables {
  /// By qualified name with overload.
  RuleTable exact;
  /// By name without overload: every overload.
  RuleTable base;
};

const RuleTables &ruleTables() {
  static const RuleTables tables = [] {
    RuleTables t;
    addIndexingRules(t.exact);
    addViewRules(t.exact);
    addComputeRules(t.exact, t.base);
    return t;
  }();
  return tables;
}

} // namespace

const BoundRule *bounds::lookupBoundRule(StringRef name) {
  const RuleTables &tables = ruleTables();
  if (auto it = tables.exact.find(name); it != tables.exact.end())
    return &it->second;
  StringRef base = name.take_front(name.find('.', name.find("::")));
  if (auto it = tables.base.find(base); it != tables.base.end())
    return &it->second;
  return nullptr;
}
