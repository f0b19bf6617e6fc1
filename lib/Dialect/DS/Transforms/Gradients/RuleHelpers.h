//===- RuleHelpers.h - shared helpers of the gradient rule files ----------===//

#ifndef DS_LIB_DIALECT_DS_TRANSFORMS_GRADIENTS_RULEHELPERS_H
#define DS_LIB_DIALECT_DS_TRANSFORMS_GRADIENTS_RULEHELPERS_H

#include "ds/Dialect/DS/Utils/DTypeInference.h"
#include "ds/Dialect/DS/Transforms/GradientRules.h"

namespace mlir::ds::detail {

/// ATen's ScalarType code of an element type (as TorchScript passes dtypes);
/// float32's for element types ATen has no code for here.
inline int64_t scalarTypeCode(Type elem) {
  int64_t code = scalarTypeCodeOf(elem);
  return code < 0 ? 6 : code;
}

inline Type elementOf(Value v) {
  return cast<TensorType>(v.getType()).getElementType();
}

inline int64_t rankOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getRank();
}

/// `v` cast to element type `elem` (`aten::to.dtype`); `v` when it has it.
inline Value castTo(GradientBuilder &gb, Value v, Type elem) {
  if (elementOf(v) == elem)
    return v;
  return gb.aten("aten::to.dtype",
                 {v, gb.constInt(scalarTypeCode(elem)), gb.constBool(false),
                  gb.constBool(false), gb.none()},
                 cast<RankedTensorType>(v.getType()).clone(elem));
}

/// Static int list of a ds.list_construct of constants.
inline std::optional<SmallVector<int64_t>> staticIntList(GradientBuilder &gb,
                                                         Value list) {
  auto construct = list.getDefiningOp<ListConstructOp>();
  if (!construct)
    return std::nullopt;
  SmallVector<int64_t> out;
  for (Value e : construct.getElements()) {
    auto i = gb.staticInt(e);
    if (!i)
      return std::nullopt;
    out.push_back(*i);
  }
  return out;
}

/// The sizes of `v` as an int list value (constants when static).
inline Value sizesOf(GradientBuilder &gb, Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.hasStaticShape())
    return gb.intList(type.getShape());
  return gb.aten("aten::size", {v},
                 ds::ListType::get(gb.b.getContext(), gb.b.getI64Type()));
}

/// `v` with size-1 dims inserted at the sorted positions `dims` (a reduction
/// without keepdim undone).
inline Value unsqueezeAll(GradientBuilder &gb, Value v, ArrayRef<int64_t> dims) {
  for (int64_t d : dims) {
    auto t = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> shape(t.getShape());
    shape.insert(shape.begin() + d, 1);
    v = gb.aten("aten::unsqueeze", {v, gb.constInt(d)},
                RankedTensorType::get(shape, t.getElementType()));
  }
  return v;
}

/// `g` reshaped to the shape of `like`.
inline Value reshapeLike(GradientBuilder &gb, Value g, Value like) {
  return gb.aten("aten::reshape", {g, sizesOf(gb, like)}, like.getType());
}

} // namespace mlir::ds::detail

#endif
