//===- NNRules.cpp - gradients of matmuls, normalisation, conv, pooling ---===//

#include "RuleHelpers.h"

#include <array>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

namespace {

/// Type of `v` with its last two dims swapped.
Type transposedType(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(t.getShape());
  std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  return RankedTensorType::get(shape, t.getElementType());
}

Value transposeLast(GradientBuilder &gb, Value v) {
  return gb.aten("aten::transpose.int", {v, gb.constInt(-2), gb.constInt(-1)},
                 transposedType(v));
}

/// `v` as a 2-D [rows, last] tensor; `last` is its last dim, known from the
/// weight even where `v`'s type leaves it dynamic.
Value flatten2D(GradientBuilder &gb, Value v, int64_t last) {
  auto t = cast<RankedTensorType>(v.getType());
  int64_t rows = ShapedType::kDynamic;
  if (t.hasStaticShape())
    rows = t.getNumElements() / std::max<int64_t>(last, 1);
  return gb.aten("aten::reshape", {v, gb.intList({-1, last})},
                 RankedTensorType::get({rows, last}, t.getElementType()));
}

/// Type of an optional weight/bias operand's gradient: its own type, or
/// `fallback` when the operand is None (the backward still returns an
/// undefined tensor in that slot).
Type gradTypeOr(Value operand, Type fallback) {
  return isa<ds::NoneType>(operand.getType()) ? fallback : operand.getType();
}

/// Sets the gradients of operands (input, weight, bias) from the three
/// results of a masked *_backward operator.
void setMaskedGrads(GradientBuilder &gb, ArrayRef<Value> grads,
                    std::array<unsigned, 3> operands) {
  for (unsigned i = 0; i < 3; ++i)
    if (gb.needsGrad(operands[i]))
      gb.setGrad(operands[i], grads[i]);
}

/// Output mask for the *_backward operators that take bool[3].
Value outputMask(GradientBuilder &gb, unsigned a, unsigned b, unsigned c) {
  return gb.boolList({gb.needsGrad(a), gb.needsGrad(b), gb.needsGrad(c)});
}

} // namespace

void mlir::ds::rules::addNNRules(RuleTable &t) {
  t["aten::linear"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    Value x = gb.operand(0), w = gb.operand(1);
    if (gb.needsGrad(0))
      gb.setGrad(0, gb.aten("aten::matmul", {g, w}, x.getType()));
    if (gb.needsGrad(1)) {
      auto wt = cast<RankedTensorType>(w.getType());
      Value g2 = flatten2D(gb, g, wt.getDimSize(0));
      Value x2 = flatten2D(gb, x, wt.getDimSize(1));
      gb.setGrad(1,
                 gb.aten("aten::mm", {transposeLast(gb, g2), x2}, w.getType()));
    }
    if (gb.needsGrad(2))
      gb.setGrad(2, gb.sumToShapeOf(g, gb.operand(2)));
    return success();
  };
  // (a @ b)': ga = g @ b^T, gb = a^T @ g, for mm and bmm alike.
  auto product = [](StringRef name) {
    return [name](GradientBuilder &gb) -> LogicalResult {
      Value g = gb.resultGradOrZeros(0);
      Value a = gb.operand(0), b = gb.operand(1);
      if (gb.needsGrad(0))
        gb.setGrad(0, gb.aten(name, {g, transposeLast(gb, b)}, a.getType()));
      if (gb.needsGrad(1))
        gb.setGrad(1, gb.aten(name, {transposeLast(gb, a), g}, b.getType()));
      return success();
    };
  };
  t["aten::mm"] = product("aten::mm");
  t["aten::bmm"] = product("aten::bmm");
  t["aten::matmul"] = [](GradientBuilder &gb) -> LogicalResult {
    Value g = gb.resultGradOrZeros(0);
    Value a = gb.operand(0), b = gb.operand(1);
    Type out = gb.result(0).getType();
    // Matrix-vector products: [n, k] @ [k] and [k] @ [k, m].
    auto unsqueezed = [&](Value v, int64_t dim) {
      auto t = cast<RankedTensorType>(v.getType());
      SmallVector<int64_t> shape(t.getShape());
      shape.insert(shape.begin() + (dim < 0 ? shape.size() + 1 + dim : dim), 1);
      return gb.aten("aten::unsqueeze", {v, gb.constInt(dim)},
                     RankedTensorType::get(shape, t.getElementType()));
    };
    if (rankOf(a) == 2 && rankOf(b) == 1) {
      if (gb.needsGrad(0)) // outer(g, b)
        gb.setGrad(0, gb.aten("aten::mul.Tensor", {unsqueezed(g, -1), b},
                              a.getType()));
      if (gb.needsGrad(1))
        gb.setGrad(
            1, gb.aten("aten::matmul", {transposeLast(gb, a), g}, b.getType()));
      return success();
    }
    if (rankOf(a) == 1 && rankOf(b) == 2) {
      if (gb.needsGrad(0))
        gb.setGrad(0, gb.aten("aten::matmul", {b, g}, a.getType()));
      if (gb.needsGrad(1)) // outer(a, g)
        gb.setGrad(1, gb.aten("aten::mul.Tensor", {unsqueezed(a, -1), g},
                              b.getType()));
      return success();
    }
    if (rankOf(a) < 2 || rankOf(b) < 2)
      return gb.op.emitOpError()
             << "gradient of matmul with a 1-D operand is supported for "
                "matrix-vector products only";
    if (gb.needsGrad(0)) {
      Value ga = gb.aten("aten::matmul", {g, transposeLast(gb, b)}, out);
      // Broadcast batch dims and the [.., n, k] shape: reduce to a's shape.
      auto at = cast<RankedTensorType>(a.getType());
      auto gt = cast<RankedTensorType>(out);
      SmallVector<int64_t> shape(gt.getShape());
      shape.back() = at.getShape().back();
      ga.setType(RankedTensorType::get(shape, at.getElementType()));
      gb.setGrad(0, gb.sumToShapeOf(ga, a));
    }
    if (gb.needsGrad(1)) {
      auto bt = cast<RankedTensorType>(b.getType());
      auto gt = cast<RankedTensorType>(out);
      SmallVector<int64_t> shape(gt.getShape());
      shape[shape.size() - 2] = bt.getShape()[bt.getRank() - 2];
      Value gbv = gb.aten("aten::matmul", {transposeLast(gb, a), g},
                          RankedTensorType::get(shape, bt.getElementType()));
      gb.setGrad(1, gb.sumToShapeOf(gbv, b));
    }
    return success();
  };
  t["aten::baddbmm"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    Value self = gb.operand(0), b1 = gb.operand(1), b2 = gb.operand(2);
    if (gb.needsGrad(0))
      gb.setGrad(0, gb.sumToShapeOf(gb.aten("aten::mul.Scalar",
                                            {g, gb.operand(3)}, g.getType()),
                                    self));
    if (gb.needsGrad(1)) {
      Value m = gb.aten("aten::bmm", {g, transposeLast(gb, b2)}, b1.getType());
      gb.setGrad(1,
                 gb.aten("aten::mul.Scalar", {m, gb.operand(4)}, b1.getType()));
    }
    if (gb.needsGrad(2)) {
      Value m = gb.aten("aten::bmm", {transposeLast(gb, b1), g}, b2.getType());
      gb.setGrad(2,
                 gb.aten("aten::mul.Scalar", {m, gb.operand(4)}, b2.getType()));
    }
    return success();
  };
  t["aten::layer_norm"] = [](GradientBuilder &gb) -> LogicalResult {
    // Recompute the statistics the backward needs.
    Value x = gb.operand(0);
    auto xt = cast<RankedTensorType>(x.getType());
    auto normalized = staticIntList(gb, gb.operand(1));
    if (!normalized)
      return gb.op.emitOpError()
             << "gradient of layer_norm needs a constant normalized_shape";
    SmallVector<int64_t> statShape(xt.getShape());
    for (size_t i = 0; i < normalized->size(); ++i)
      statShape[statShape.size() - 1 - i] = 1;
    auto statType = RankedTensorType::get(statShape, xt.getElementType());
    auto fwd = gb.atenN(
        "aten::native_layer_norm",
        {x, gb.operand(1), gb.operand(2), gb.operand(3), gb.operand(4)},
        {xt, statType, statType});
    Value w = gb.operand(2), b = gb.operand(3);
    // Without an affine weight/bias the backward still has three results
    // (undefined tensors); they are typed as the normalized shape.
    SmallVector<int64_t> normShape(xt.getShape().end() - normalized->size(),
                                   xt.getShape().end());
    auto normType = RankedTensorType::get(normShape, xt.getElementType());
    auto grads =
        gb.atenN("aten::native_layer_norm_backward",
                 {gb.resultGradOrZeros(0), x, gb.operand(1), fwd[1], fwd[2], w,
                  b, outputMask(gb, 0, 2, 3)},
                 {xt, gradTypeOr(w, normType), gradTypeOr(b, normType)});
    setMaskedGrads(gb, grads, {0, 2, 3});
    return success();
  };
  t["aten::batch_norm"] = [](GradientBuilder &gb) -> LogicalResult {
    auto training = gb.staticInt(gb.operand(5));
    if (!training || !*training)
      return gb.op.emitOpError()
             << "gradient of batch_norm is supported in training mode only";
    Value x = gb.operand(0), w = gb.operand(1), b = gb.operand(2);
    auto xt = cast<RankedTensorType>(x.getType());
    // LibTorch's mixed-type batch norm (a bf16 input, f32 weights, as under
    // autocast) keeps its statistics in the weights' dtype.
    Type statElem = xt.getElementType();
    if (auto wt = dyn_cast<RankedTensorType>(w.getType()))
      statElem = wt.getElementType();
    auto statType = RankedTensorType::get({xt.getDimSize(1)}, statElem);
    auto fwd = gb.atenN("aten::native_batch_norm",
                        {x, w, b, gb.none(), gb.none(), gb.constBool(true),
                         gb.operand(6), gb.operand(7)},
                        {xt, statType, statType});
    auto grads = gb.atenN(
        "aten::native_batch_norm_backward",
        {gb.resultGradOrZeros(0), x, w, gb.none(), gb.none(), fwd[1], fwd[2],
         gb.constBool(true), gb.operand(7), outputMask(gb, 0, 1, 2)},
        {xt, gradTypeOr(w, statType), gradTypeOr(b, statType)});
    setMaskedGrads(gb, grads, {0, 1, 2});
    return success();
  };
  auto conv = [](GradientBuilder &gb) -> LogicalResult {
    // conv{1,2}d(x, w, b, stride, padding, dilation, groups)
    Value x = gb.operand(0), w = gb.operand(1), b = gb.operand(2);
    if (!isa<ds::ListType>(gb.operand(4).getType()))
      return gb.op.emitOpError()
             << "gradient of convolution with string padding is not supported";
    int64_t spatial = rankOf(x) - 2;
    Value biasSizes = gb.none();
    if (!isa<ds::NoneType>(b.getType()))
      biasSizes = gb.intList(cast<RankedTensorType>(b.getType()).getShape());
    auto grads =
        gb.atenN("aten::convolution_backward",
                 {gb.resultGradOrZeros(0), x, w, biasSizes, gb.operand(3),
                  gb.operand(4), gb.operand(5), gb.constBool(false),
                  gb.intList(SmallVector<int64_t>(spatial, 0)), gb.operand(6),
                  outputMask(gb, 0, 1, 2)},
                 {x.getType(), w.getType(), gradTypeOr(b, w.getType())});
    setMaskedGrads(gb, grads, {0, 1, 2});
    return success();
  };
  t["aten::conv1d"] = conv;
  t["aten::conv2d"] = conv;
  t["aten::max_pool2d"] = [](GradientBuilder &gb) {
    Value x = gb.operand(0);
    auto out = cast<RankedTensorType>(gb.result(0).getType());
    auto idxType = RankedTensorType::get(out.getShape(), gb.b.getI64Type());
    auto fwd = gb.atenN("aten::max_pool2d_with_indices",
                        {x, gb.operand(1), gb.operand(2), gb.operand(3),
                         gb.operand(4), gb.operand(5)},
                        {out, idxType});
    gb.setGrad(
        0, gb.aten("aten::max_pool2d_with_indices_backward",
                   {gb.resultGradOrZeros(0), x, gb.operand(1), gb.operand(2),
                    gb.operand(3), gb.operand(4), gb.operand(5), fwd[1]},
                   x.getType()));
    return success();
  };
  t["aten::avg_pool2d"] = [](GradientBuilder &gb) {
    Value x = gb.operand(0);
    gb.setGrad(
        0, gb.aten("aten::avg_pool2d_backward",
                   {gb.resultGradOrZeros(0), x, gb.operand(1), gb.operand(2),
                    gb.operand(3), gb.operand(4), gb.operand(5), gb.operand(6)},
                   x.getType()));
    return success();
  };
  t["aten::adaptive_avg_pool2d"] = [](GradientBuilder &gb) {
    Value x = gb.operand(0);
    gb.setGrad(0, gb.aten("aten::_adaptive_avg_pool2d_backward",
                          {gb.resultGradOrZeros(0), x}, x.getType()));
    return success();
  };
  t["aten::embedding"] = [](GradientBuilder &gb) -> LogicalResult {
    // embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)
    Value w = gb.operand(0);
    auto wt = cast<RankedTensorType>(w.getType());
    gb.setGrad(0, gb.aten("aten::embedding_dense_backward",
                          {gb.resultGradOrZeros(0), gb.operand(1),
                           gb.constInt(wt.getDimSize(0)), gb.operand(2),
                           gb.operand(3)},
                          w.getType()));
    return success();
  };
}
