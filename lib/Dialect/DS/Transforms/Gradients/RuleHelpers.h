//===- RuleHelpers.h - shared helpers of the gradient rule files ----------===//

#ifndef DS_LIB_DIALECT_DS_TRANSFORMS_GRADIENTS_RULEHELPERS_H
#define DS_LIB_DIALECT_DS_TRANSFORMS_GRADIENTS_RULEHELPERS_H

#include "ds/Dialect/DS/Utils/DTypeInference.h"
#include "ds/Dialect/DS/Transforms/GradientRules.h"

#include <array>

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

/// Type of `v` with its last two dims swapped.
inline Type transposedType(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(t.getShape());
  std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  return RankedTensorType::get(shape, t.getElementType());
}

/// `v` with its last two dims swapped (a view).
inline Value transposeLast(GradientBuilder &gb, Value v) {
  return gb.aten("aten::transpose.int", {v, gb.constInt(-2), gb.constInt(-1)},
                 transposedType(v));
}

/// The string of a ds.constant operand, if it is one.
inline std::optional<StringRef> staticStr(Value v) {
  if (auto c = v.getDefiningOp<ConstantOp>())
    if (auto s = dyn_cast<StringAttr>(c.getValue()))
      return s.getValue();
  return std::nullopt;
}

/// Type of an optional weight/bias operand's gradient: its own type, or
/// `fallback` when the operand is None (the backward still returns an
/// undefined tensor in that slot).
inline Type gradTypeOr(Value operand, Type fallback) {
  return isa<ds::NoneType>(operand.getType()) ? fallback : operand.getType();
}

/// Sets the gradients of operands (input, weight, bias) from the three
/// results of a masked *_backward operator.
inline void setMaskedGrads(GradientBuilder &gb, ArrayRef<Value> grads,
                           std::array<unsigned, 3> operands) {
  for (unsigned i = 0; i < 3; ++i)
    if (gb.needsGrad(operands[i]))
      gb.setGrad(operands[i], grads[i]);
}

/// Output mask for the *_backward operators that take bool[3]: which of
/// operands a, b, c need a gradient.
inline Value outputMask(GradientBuilder &gb, unsigned a, unsigned b,
                        unsigned c) {
  return gb.boolList({gb.needsGrad(a), gb.needsGrad(b), gb.needsGrad(c)});
}

/// The element type of the statistics (mean, rstd / invstd) that
/// native_layer_norm and native_batch_norm return for an input of type
/// `elem`. The CPU kernels keep them in `cpuElem` (the input's or the
/// weights' dtype); the CUDA kernels in the input's accumulate type
/// (at::toAccumulateType(dtype, /*is_cuda=*/true): f32 for f16 and bf16), as
/// the GPU check's probe confirms on a GPU.
inline Type statisticsElementType(GradientBuilder &gb, Type elem,
                                  Type cpuElem) {
  if (getTargetDevice(gb.op) != TargetDevice::CUDA)
    return cpuElem;
  if (elem.isF16() || elem.isBF16())
    return gb.b.getF32Type();
  return elem;
}

/// Refuses the op when a gradient reaches one of its results from `first`
/// on (statistics, indices, ... that the rule does not differentiate).
inline LogicalResult refuseResultGrads(GradientBuilder &gb, unsigned first,
                                       StringRef what) {
  for (unsigned i = first; i < gb.op.getNumResults(); ++i)
    if (gb.resultGrad(i))
      return gb.op.emitOpError()
             << "gradient through " << what << " (result #" << i
             << ") is not supported";
  return success();
}

} // namespace mlir::ds::detail

#endif
