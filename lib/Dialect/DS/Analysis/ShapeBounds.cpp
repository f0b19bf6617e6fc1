//===- ShapeBounds.cpp - upper bounds of data-dependent sizes -------------===//
//
// The forward walk: each op's dynamic results get the bounds its rule gives
// (*BoundRules.cpp), a `ds.if`'s the larger of its branches', a list
// unpack's those of the listed elements. Static dims are taken from the
// types and never stored.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/Analysis/ShapeBounds.h"

#include "ShapeBoundRules.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::bounds;

ShapeBounds::ShapeBounds(Operation *root) {
  // Post-order visits a ds.if's branches before the op itself.
  root->walk<WalkOrder::PostOrder>([&](Operation *op) { visit(op); });
}

bool ShapeBounds::isDynamic(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && !type.hasStaticShape();
}

SmallVector<int64_t> ShapeBounds::getBounds(Value value) const {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type)
    return {};
  if (auto it = dynamicBounds.find(value); it != dynamicBounds.end())
    return it->second;
  SmallVector<int64_t> shape(type.getShape());
  for (int64_t &dim : shape)
    if (ShapedType::isDynamic(dim))
      dim = kUnbounded;
  return shape;
}

std::optional<int64_t> ShapeBounds::getNumelBound(Value value) const {
  if (!isa<RankedTensorType>(value.getType()))
    return std::nullopt;
  return product(getBounds(value));
}

std::optional<int64_t> ShapeBounds::getIntBound(Value value) const {
  if (auto constant = value.getDefiningOp<ConstantOp>()) {
    auto attr = dyn_cast<IntegerAttr>(constant.getValue());
    if (attr && !attr.getType().isInteger(1))
      return attr.getInt();
    return std::nullopt;
  }
  auto aten = value.getDefiningOp<AtenOp>();
  if (!aten || aten.getArgs().empty())
    return std::nullopt;
  Value tensor = aten.getArgs()[0];
  if (aten.getOp() == "aten::numel")
    return getNumelBound(tensor);
  if (aten.getOp() == "aten::size.int" && aten.getArgs().size() == 2) {
    SmallVector<int64_t> dims = getBounds(tensor);
    std::optional<int64_t> dim = getIntBound(aten.getArgs()[1]);
    if (!dim || !aten.getArgs()[1].getDefiningOp<ConstantOp>())
      return std::nullopt;
    int64_t d = *dim < 0 ? *dim + int64_t(dims.size()) : *dim;
    if (d < 0 || d >= int64_t(dims.size()) || dims[d] == kUnbounded)
      return std::nullopt;
    return dims[d];
  }
  return std::nullopt;
}

std::optional<SmallVector<int64_t>>
ShapeBounds::getIntListBounds(Value list) const {
  if (auto construct = list.getDefiningOp<ListConstructOp>()) {
    SmallVector<int64_t> out;
    for (Value element : construct.getElements())
      out.push_back(getIntBound(element).value_or(kUnbounded));
    return out;
  }
  if (auto aten = list.getDefiningOp<AtenOp>())
    if (aten.getOp() == "aten::size" && aten.getArgs().size() == 1 &&
        isa<RankedTensorType>(aten.getArgs()[0].getType()))
      return getBounds(aten.getArgs()[0]);
  return std::nullopt;
}

void ShapeBounds::setBounds(Value value, ArrayRef<int64_t> candidate) {
  auto type = cast<RankedTensorType>(value.getType());
  bool usable = int64_t(candidate.size()) == type.getRank();
  SmallVector<int64_t> out;
  for (auto [d, size] : llvm::enumerate(type.getShape())) {
    if (!ShapedType::isDynamic(size))
      out.push_back(size);
    else if (usable && candidate[d] >= 0)
      out.push_back(candidate[d]);
    else
      out.push_back(kUnbounded);
  }
  dynamicBounds[value] = std::move(out);
}

void ShapeBounds::visit(Operation *op) {
  if (llvm::none_of(op->getResults(), isDynamic))
    return;
  if (auto aten = dyn_cast<AtenOp>(op)) {
    std::optional<SmallVector<int64_t>> first;
    if (const BoundRule *rule = lookupBoundRule(aten.getOp()))
      first = (*rule)(BoundQuery(*this, aten));
    for (Value result : op->getResults())
      if (isDynamic(result))
        setBounds(result,
                  first ? ArrayRef<int64_t>(*first) : ArrayRef<int64_t>());
    return;
  }
  if (auto ifOp = dyn_cast<IfOp>(op)) {
    Operation *thenYield = ifOp.getThenRegion().front().getTerminator();
    Operation *elseYield = ifOp.getElseRegion().front().getTerminator();
    for (auto [i, result] : llvm::enumerate(ifOp.getResults())) {
      if (!isDynamic(result))
        continue;
      SmallVector<int64_t> joined = getBounds(thenYield->getOperand(i));
      SmallVector<int64_t> other = getBounds(elseYield->getOperand(i));
      if (joined.size() != other.size())
        joined.clear();
      for (auto [a, b] : llvm::zip(joined, other))
        a = maxBounds(a, b);
      setBounds(result, joined);
    }
    return;
  }
  if (auto unpack = dyn_cast<ListUnpackOp>(op)) {
    auto construct = unpack.getList().getDefiningOp<ListConstructOp>();
    // A list an operator returns (torch.where(c) as Tensor[]): its rule
    // bounds every element.
    std::optional<SmallVector<int64_t>> listed;
    if (auto aten = unpack.getList().getDefiningOp<AtenOp>())
      if (const BoundRule *rule = lookupBoundRule(aten.getOp()))
        listed = (*rule)(BoundQuery(*this, aten));
    for (auto [i, result] : llvm::enumerate(unpack.getResults())) {
      if (!isDynamic(result))
        continue;
      if (construct && construct.getElements().size() == unpack.getNumResults())
        setBounds(result, getBounds(construct.getElements()[i]));
      else
        setBounds(result,
                  listed ? ArrayRef<int64_t>(*listed) : ArrayRef<int64_t>());
    }
    return;
  }
  // No rule: every dynamic dim unbounded.
  for (Value result : op->getResults())
    if (isDynamic(result))
      setBounds(result, {});
}
