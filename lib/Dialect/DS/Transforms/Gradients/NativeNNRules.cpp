//===- NativeNNRules.cpp - gradients of ATen's native NN operators --------===//
//
// The forms core ATen writes (torch.export after run_decompositions):
// convolution, native_layer_norm, native_group_norm, the
// _native_batch_norm_legit family, and the operators whose composite and
// native forms share a backward kernel: group_norm, embedding_bag, cdist,
// pdist. Each gradient is the backward kernel autograd calls
// (derivatives.yaml); the statistics and indices the forward returns feed it
// and take no gradient themselves.
//
//===----------------------------------------------------------------------===//

#include "RuleHelpers.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

namespace {

/// A 1-D tensor type of `n` elements of `elem` (a norm's weight gradient
/// when the weight is None: the backward returns an undefined tensor).
RankedTensorType vectorType(int64_t n, Type elem) {
  return RankedTensorType::get({n}, elem);
}

/// native_batch_norm_backward for the _native_batch_norm_legit family:
/// operands (input, weight, bias, running_mean?, running_var?), the saved
/// statistics as results #1 and #2, `train` and `eps` as given.
LogicalResult batchNormBackward(GradientBuilder &gb, Value runningMean,
                                Value runningVar, Value train, Value eps) {
  if (failed(refuseResultGrads(gb, 1, "batch norm's statistics")))
    return failure();
  Value x = gb.operand(0), w = gb.operand(1), b = gb.operand(2);
  auto xt = cast<RankedTensorType>(x.getType());
  Type statElem = xt.getElementType();
  if (auto wt = dyn_cast<RankedTensorType>(w.getType()))
    statElem = wt.getElementType();
  auto paramType = vectorType(xt.getDimSize(1), statElem);
  auto grads = gb.atenN(
      "aten::native_batch_norm_backward",
      {gb.resultGradOrZeros(0), x, w, runningMean, runningVar, gb.result(1),
       gb.result(2), train, eps, outputMask(gb, 0, 1, 2)},
      {xt, gradTypeOr(w, paramType), gradTypeOr(b, paramType)});
  setMaskedGrads(gb, grads, {0, 1, 2});
  return success();
}

/// native_group_norm_backward(g, x, mean, rstd, weight, N, C, HxW, group).
void groupNormBackward(GradientBuilder &gb, Value mean, Value rstd, Value n,
                       Value c, Value hxw, Value group, unsigned weightOperand,
                       unsigned biasOperand) {
  Value x = gb.operand(0), w = gb.operand(weightOperand),
        b = gb.operand(biasOperand);
  auto xt = cast<RankedTensorType>(x.getType());
  auto paramType = vectorType(xt.getDimSize(1), xt.getElementType());
  auto grads = gb.atenN(
      "aten::native_group_norm_backward",
      {gb.resultGradOrZeros(0), x, mean, rstd, w, n, c, hxw, group,
       outputMask(gb, 0, weightOperand, biasOperand)},
      {xt, gradTypeOr(w, paramType), gradTypeOr(b, paramType)});
  setMaskedGrads(gb, grads, {0, weightOperand, biasOperand});
}

/// cdist(x1, x2, p, ...): _cdist_backward for x1, and for x2 the same with
/// the roles and the distances transposed (autograd's formula).
LogicalResult cdist(GradientBuilder &gb) {
  Value x1 = gb.operand(0), x2 = gb.operand(1), p = gb.operand(2);
  Value g = gb.resultGradOrZeros(0), d = gb.result(0);
  auto contiguousT = [&](Value v) {
    Value vt = transposeLast(gb, v);
    return gb.aten("aten::contiguous", {vt, gb.constInt(0)}, vt.getType());
  };
  // The backward returns each gradient in the broadcast batch shape of the
  // distances ([*batch, rows, M]); summed back where an input broadcast.
  auto dt = cast<RankedTensorType>(d.getType());
  auto gradType = [&](Value x, int64_t rows) {
    auto xt = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> shape(dt.getShape().drop_back(2));
    shape.push_back(rows);
    shape.push_back(xt.getShape().back());
    return RankedTensorType::get(shape, xt.getElementType());
  };
  int64_t rank = dt.getRank();
  if (gb.needsGrad(0)) {
    Value gc = gb.aten("aten::contiguous", {g, gb.constInt(0)}, g.getType());
    Value grad = gb.aten("aten::_cdist_backward", {gc, x1, x2, p, d},
                         gradType(x1, dt.getDimSize(rank - 2)));
    gb.setGrad(0, gb.sumToShapeOf(grad, x1));
  }
  if (gb.needsGrad(1)) {
    Value grad = gb.aten("aten::_cdist_backward",
                         {contiguousT(g), x2, x1, p, contiguousT(d)},
                         gradType(x2, dt.getDimSize(rank - 1)));
    gb.setGrad(1, gb.sumToShapeOf(grad, x2));
  }
  return success();
}

/// embedding_bag / _embedding_bag(weight, indices, offsets,
/// scale_grad_by_freq, mode, sparse, per_sample_weights, include_last_offset
/// [, padding_idx]) -> (out, offset2bag, bag_size, max_indices), through
/// _embedding_bag_backward as autograd does: it rebuilds offset2bag where the
/// CPU's float32 sum path left it empty. 2-D indices are taken flat with the
/// given offsets, as ATen does (F.embedding_bag flattens them itself).
LogicalResult embeddingBag(GradientBuilder &gb) {
  if (failed(refuseResultGrads(gb, 1, "embedding_bag's bag indices")))
    return failure();
  if (gb.needsGrad(6))
    return gb.op.emitOpError()
           << "gradient of embedding_bag's per_sample_weights is not supported";
  Value w = gb.operand(0), indices = gb.operand(1), offsets = gb.operand(2);
  auto wt = cast<RankedTensorType>(w.getType());
  auto it = cast<RankedTensorType>(indices.getType());
  int64_t numWeights = wt.getDimSize(0);
  if (wt.isDynamicDim(0) || (it.getRank() == 2 && !it.hasStaticShape()))
    return gb.op.emitOpError() << "gradient of embedding_bag needs a static "
                                  "number of embeddings and of 2-D indices";
  if (it.getRank() == 2) {
    int64_t n = it.getNumElements();
    indices = gb.aten("aten::reshape", {indices, gb.intList({n})},
                      RankedTensorType::get({n}, it.getElementType()));
  }
  // The forward wraps a negative padding_idx (-1: the last row); the
  // backward kernel reads -1 as no padding.
  int64_t padding = -1;
  if (gb.op.getArgs().size() > 8 &&
      !isa<ds::NoneType>(gb.operand(8).getType())) {
    auto given = gb.staticInt(gb.operand(8));
    if (!given)
      return gb.op.emitOpError()
             << "gradient of embedding_bag needs a constant padding_idx";
    // _embedding_bag's own default -1 means none; embedding_bag's
    // padding_idx counts from the end.
    padding = *given;
    if (padding < 0 && gb.op.getOp() != "aten::_embedding_bag")
      padding += numWeights;
  }
  Value paddingIdx = gb.constInt(padding);
  gb.setGrad(0, gb.aten("aten::_embedding_bag_backward",
                        {gb.resultGradOrZeros(0), indices, offsets,
                         gb.result(1), gb.result(2), gb.result(3),
                         gb.constInt(numWeights), gb.operand(3),
                         gb.operand(4), gb.constBool(false), gb.operand(6),
                         paddingIdx},
                        wt));
  return success();
}

} // namespace

void mlir::ds::rules::addNativeNNRules(RuleTable &t) {
  // convolution(x, w, b, stride, padding, dilation, transposed,
  //             output_padding, groups), transposed or not.
  t["aten::convolution"] = [](GradientBuilder &gb) -> LogicalResult {
    Value x = gb.operand(0), w = gb.operand(1), b = gb.operand(2);
    Value biasSizes = gb.none();
    if (auto bt = dyn_cast<RankedTensorType>(b.getType()))
      biasSizes = gb.intList(bt.getShape());
    auto grads = gb.atenN(
        "aten::convolution_backward",
        {gb.resultGradOrZeros(0), x, w, biasSizes, gb.operand(3),
         gb.operand(4), gb.operand(5), gb.operand(6), gb.operand(7),
         gb.operand(8), outputMask(gb, 0, 1, 2)},
        {x.getType(), w.getType(), gradTypeOr(b, w.getType())});
    setMaskedGrads(gb, grads, {0, 1, 2});
    return success();
  };
  // native_layer_norm(x, normalized_shape, w, b, eps) -> (y, mean, rstd)
  t["aten::native_layer_norm"] = [](GradientBuilder &gb) -> LogicalResult {
    if (failed(refuseResultGrads(gb, 1, "native_layer_norm's statistics")))
      return failure();
    Value x = gb.operand(0), w = gb.operand(2), b = gb.operand(3);
    auto xt = cast<RankedTensorType>(x.getType());
    auto normalized = staticIntList(gb, gb.operand(1));
    if (!normalized)
      return gb.op.emitOpError() << "gradient of native_layer_norm needs a "
                                    "constant normalized_shape";
    auto normType = RankedTensorType::get(*normalized, xt.getElementType());
    auto grads = gb.atenN(
        "aten::native_layer_norm_backward",
        {gb.resultGradOrZeros(0), x, gb.operand(1), gb.result(1), gb.result(2),
         w, b, outputMask(gb, 0, 2, 3)},
        {xt, gradTypeOr(w, normType), gradTypeOr(b, normType)});
    setMaskedGrads(gb, grads, {0, 2, 3});
    return success();
  };
  // native_group_norm(x, w, b, N, C, HxW, group, eps) -> (y, mean, rstd)
  t["aten::native_group_norm"] = [](GradientBuilder &gb) -> LogicalResult {
    if (failed(refuseResultGrads(gb, 1, "native_group_norm's statistics")))
      return failure();
    groupNormBackward(gb, gb.result(1), gb.result(2), gb.operand(3),
                      gb.operand(4), gb.operand(5), gb.operand(6), 1, 2);
    return success();
  };
  // group_norm(x, groups, w, b, eps, cudnn_enabled): the statistics again
  // from native_group_norm, as the composite computes them.
  t["aten::group_norm"] = [](GradientBuilder &gb) -> LogicalResult {
    Value x = gb.operand(0);
    auto xt = cast<RankedTensorType>(x.getType());
    auto groups = gb.staticInt(gb.operand(1));
    if (!groups || !xt.hasStaticShape())
      return gb.op.emitOpError() << "gradient of group_norm needs a constant "
                                    "group count and a static input shape";
    int64_t n = xt.getDimSize(0), c = xt.getDimSize(1);
    int64_t hxw = c == 0 ? 0 : xt.getNumElements() / std::max<int64_t>(n * c, 1);
    // Mixed types (a bf16 input, f32 weights) keep the statistics in the
    // weights' dtype, as ATen's kernel does.
    Type statElem = xt.getElementType();
    if (auto wt = dyn_cast<RankedTensorType>(gb.operand(2).getType()))
      statElem = wt.getElementType();
    auto statType = RankedTensorType::get({n, *groups}, statElem);
    Value vn = gb.constInt(n), vc = gb.constInt(c), vhxw = gb.constInt(hxw);
    auto fwd = gb.atenN("aten::native_group_norm",
                        {x, gb.operand(2), gb.operand(3), vn, vc, vhxw,
                         gb.operand(1), gb.operand(4)},
                        {xt, statType, statType});
    groupNormBackward(gb, fwd[1], fwd[2], vn, vc, vhxw, gb.operand(1), 2, 3);
    return success();
  };
  // _native_batch_norm_legit_functional(x, w, b, running_mean, running_var,
  //   training, momentum, eps) -> (y, mean, invstd, new_mean, new_var);
  // ds-import rewrites it to batch_norm unless its statistics are read.
  t["aten::_native_batch_norm_legit_functional"] = [](GradientBuilder &gb) {
    return batchNormBackward(gb, gb.operand(3), gb.operand(4), gb.operand(5),
                             gb.operand(7));
  };
  // _native_batch_norm_legit_no_training(x, w, b, running_mean, running_var,
  //   momentum, eps): eval mode, normalised by the running statistics.
  t["aten::_native_batch_norm_legit_no_training"] = [](GradientBuilder &gb) {
    return batchNormBackward(gb, gb.operand(3), gb.operand(4),
                             gb.constBool(false), gb.operand(6));
  };
  // _native_batch_norm_legit.no_stats(x, w, b, training, momentum, eps):
  // batch statistics, no running ones.
  t["aten::_native_batch_norm_legit.no_stats"] = [](GradientBuilder &gb) {
    return batchNormBackward(gb, gb.none(), gb.none(), gb.operand(3),
                             gb.operand(5));
  };
  t["aten::embedding_bag"] = embeddingBag;
  t["aten::embedding_bag.padding_idx"] = embeddingBag;
  t["aten::_embedding_bag"] = embeddingBag;
  t["aten::cdist"] = cdist;
  t["aten::_cdist_forward"] = cdist;
  // pdist(x, p): _pdist_backward with the forward's distances.
  auto pdist = [](GradientBuilder &gb) -> LogicalResult {
    Value x = gb.operand(0);
    gb.setGrad(0, gb.aten("aten::_pdist_backward",
                          {gb.resultGradOrZeros(0), x, gb.operand(1),
                           gb.result(0)},
                          x.getType()));
    return success();
  };
  t["aten::pdist"] = pdist;
  t["aten::_pdist_forward"] = pdist;
}
