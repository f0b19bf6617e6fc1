//===- NNRules.cpp - gradients of matmuls, norms, attention, conv --------===//

#include "RuleHelpers.h"

#include <array>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

namespace {


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

/// `t`'s shape with its last two dims replaced by `rows` and `cols`.
RankedTensorType withLastTwo(Type t, int64_t rows, int64_t cols,
                             Type elem = {}) {
  auto rt = cast<RankedTensorType>(t);
  SmallVector<int64_t> shape(rt.getShape());
  shape[shape.size() - 2] = rows;
  shape[shape.size() - 1] = cols;
  return RankedTensorType::get(shape, elem ? elem : rt.getElementType());
}

int64_t dimFromEnd(Value v, int64_t i) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getDimSize(t.getRank() - i);
}

/// Key/value heads repeated to the query's (enable_gqa): `v` [.., Hk, S, E]
/// -> [.., Hk * groups, S, E] as repeat_interleave(groups, dim=-3) does.
Value repeatHeads(GradientBuilder &gb, Value v, int64_t groups) {
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(t.getShape());
  int64_t r = shape.size();
  SmallVector<int64_t> unsq(shape);
  unsq.insert(unsq.begin() + (r - 2), 1);
  Value u = gb.aten("aten::unsqueeze", {v, gb.constInt(-3)},
                    RankedTensorType::get(unsq, t.getElementType()));
  SmallVector<int64_t> expanded(unsq);
  expanded[r - 2] = groups;
  Value e =
      gb.aten("aten::expand", {u, gb.intList(expanded), gb.constBool(false)},
              RankedTensorType::get(expanded, t.getElementType()));
  SmallVector<int64_t> merged(shape);
  merged[r - 3] *= groups;
  return gb.aten("aten::reshape", {e, gb.intList(merged)},
                 RankedTensorType::get(merged, t.getElementType()));
}

/// The gradient of repeatHeads: `g` [.., Hk * groups, S, E] summed over the
/// groups back to `like` [.., Hk, S, E].
Value sumHeads(GradientBuilder &gb, Value g, Value like, int64_t groups) {
  auto lt = cast<RankedTensorType>(like.getType());
  SmallVector<int64_t> split(lt.getShape());
  int64_t r = split.size();
  split.insert(split.begin() + (r - 2), groups);
  Value s = gb.aten("aten::reshape", {g, gb.intList(split)},
                    RankedTensorType::get(split, elementOf(g)));
  return gb.aten("aten::sum.dim_IntList",
                 {s, gb.intList({-3}), gb.constBool(false), gb.none()},
                 lt.clone(elementOf(g)));
}

//===----------------------------------------------------------------------===//
// scaled_dot_product_attention
//===----------------------------------------------------------------------===//
//
// sdpa(q, k, v, attn_mask?, dropout_p, is_causal, scale?, enable_gqa) runs
// one of two CPU backends in LibTorch, and autograd differentiates the one
// it ran; the rule takes the same one, so that gradients agree to the
// rounding (which matters where the true gradient is exactly zero, such as
// an attention key bias):
//
// - the flash kernel (`_scaled_dot_product_flash_attention_for_cpu`, whose
//   backward ATen has), chosen as LibTorch 2.15 chooses it: no dropout,
//   query/key/value of rank 3 (run unsqueezed to rank 4) or 4 with equal
//   batch and head dims, key heads equal to the query's, 1, or (enable_gqa)
//   a divisor of them, no mask or a mask that needs no gradient and has rank
//   2 or 4 (3 with rank-3 inputs) with broadcastable dims; its statistics
//   (logsumexp) are recomputed next to the backward;
// - otherwise ATen's math path, recomputed op for op:
//   s = (q * sqrt(scale)) @ (k^T * sqrt(scale)) + mask, p = _safe_softmax(s),
//   then dv = p^T @ g, ds = softmax_backward(g @ v^T, p), dmask = ds,
//   dq = ds @ k' * sqrt(scale), dk = (q'^T @ ds)^T * sqrt(scale).
//
// A plan compiled for CUDA (ds.target_device) always takes the math path:
// the flash kernel here is the CPU's.
//
// The flash choice also needs the head dim to be the innermost (stride 1)
// dim at run time, which the IR does not show: a query/key/value whose last
// dim is transposed makes LibTorch take the math path while the rule takes
// flash (the gradients then differ by rounding only).

struct SdpaArgs {
  Value q, k, v, mask;
  bool causal = false, gqa = false;
  double scale = 0.0;
};

bool flashEligible(GradientBuilder &gb, const SdpaArgs &a) {
  auto qt = cast<RankedTensorType>(a.q.getType());
  auto kt = cast<RankedTensorType>(a.k.getType());
  auto vt = cast<RankedTensorType>(a.v.getType());
  int64_t rank = qt.getRank();
  if ((rank != 3 && rank != 4) || kt.getRank() != rank ||
      vt.getRank() != rank || !qt.hasStaticShape() || !kt.hasStaticShape() ||
      !vt.hasStaticShape())
    return false;
  Type elem = qt.getElementType();
  if (!isa<Float32Type, Float64Type, BFloat16Type, Float16Type>(elem) ||
      kt.getElementType() != elem || vt.getElementType() != elem)
    return false;
  // Rank 3 runs as [1, N, L, E]: N plays the heads.
  auto dim4 = [&](RankedTensorType t, int64_t d) {
    return rank == 4 ? t.getDimSize(d) : (d == 0 ? 1 : t.getDimSize(d - 1));
  };
  int64_t batch = dim4(qt, 0), heads = dim4(qt, 1);
  int64_t lenQ = dim4(qt, 2), lenK = dim4(kt, 2), headDim = dim4(qt, 3);
  if (dim4(kt, 0) != batch || dim4(vt, 0) != batch ||
      dim4(kt, 1) != dim4(vt, 1) || dim4(kt, 3) != headDim ||
      dim4(vt, 3) != headDim || dim4(vt, 2) != lenK || lenQ == 0 || lenK == 0)
    return false;
  int64_t kvHeads = dim4(kt, 1);
  if (kvHeads != heads && kvHeads != 1 && !(a.gqa && heads % kvHeads == 0))
    return false;
  if (!isa<RankedTensorType>(a.mask.getType()))
    return true;
  if (gb.needsGrad(3))
    return false;
  auto mt = cast<RankedTensorType>(a.mask.getType());
  if (!mt.hasStaticShape() ||
      (!mt.getElementType().isInteger(1) && mt.getElementType() != elem))
    return false;
  int64_t mrank = mt.getRank();
  auto fits = [](int64_t dim, int64_t full) { return dim == full || dim == 1; };
  if (mrank < 2 || !fits(mt.getDimSize(mrank - 2), lenQ) ||
      !fits(mt.getDimSize(mrank - 1), lenK))
    return false;
  if (mrank == 2)
    return true;
  if (mrank != rank) // rank 4, or rank 3 beside rank-3 inputs
    return false;
  auto mdim4 = [&](int64_t d) {
    return rank == 4 ? mt.getDimSize(d) : (d == 0 ? 1 : mt.getDimSize(d - 1));
  };
  return fits(mdim4(0), batch) && fits(mdim4(1), heads);
}

Value unsqueezeFront(GradientBuilder &gb, Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(t.getShape());
  shape.insert(shape.begin(), 1);
  return gb.aten("aten::unsqueeze", {v, gb.constInt(0)},
                 RankedTensorType::get(shape, t.getElementType()));
}

Value squeezeFront(GradientBuilder &gb, Value v, Type type) {
  return gb.aten("aten::squeeze.dim", {v, gb.constInt(0)}, type);
}

/// A boolean mask (true: attend) as the additive float mask LibTorch
/// converts it to: 0 where true, -inf where false.
Value additiveMask(GradientBuilder &gb, Value mask, Type elem) {
  auto mt = cast<RankedTensorType>(mask.getType());
  Value zeros = gb.aten("aten::zeros_like",
                        {mask, gb.constInt(scalarTypeCode(elem)), gb.none(),
                         gb.none(), gb.none(), gb.none()},
                        mt.clone(elem));
  Value masked = gb.aten("aten::logical_not", {mask}, mt);
  return gb.aten(
      "aten::masked_fill.Scalar",
      {zeros, masked, gb.constFloat(-std::numeric_limits<double>::infinity())},
      mt.clone(elem));
}

LogicalResult sdpaFlash(GradientBuilder &gb, const SdpaArgs &a) {
  auto qt = cast<RankedTensorType>(a.q.getType());
  bool threeD = qt.getRank() == 3;
  auto lift = [&](Value v) { return threeD ? unsqueezeFront(gb, v) : v; };
  Value q = lift(a.q), k = lift(a.k), v = lift(a.v);
  Value mask = gb.none();
  if (auto mt = dyn_cast<RankedTensorType>(a.mask.getType())) {
    mask = a.mask;
    if (mt.getElementType().isInteger(1))
      mask = additiveMask(gb, mask, qt.getElementType());
    if (threeD && mt.getRank() == 3)
      mask = unsqueezeFront(gb, mask);
  }
  Value g = lift(gb.resultGradOrZeros(0));
  auto q4 = cast<RankedTensorType>(q.getType());
  Type statElem = q4.getElementType().isF64() ? q4.getElementType()
                                              : Type(gb.b.getF32Type());
  auto lseType = RankedTensorType::get(
      {q4.getDimSize(0), q4.getDimSize(1), q4.getDimSize(2)}, statElem);
  Value dropout = gb.operand(4), causal = gb.operand(5), scale = gb.operand(6);
  auto fwd =
      gb.atenN("aten::_scaled_dot_product_flash_attention_for_cpu",
               {q, k, v, dropout, causal, mask, scale}, {g.getType(), lseType});
  auto grads =
      gb.atenN("aten::_scaled_dot_product_flash_attention_for_cpu_backward",
               {g, q, k, v, fwd[0], fwd[1], dropout, causal, mask, scale},
               {q.getType(), k.getType(), v.getType()});
  Value operands[3] = {a.q, a.k, a.v};
  for (unsigned i = 0; i < 3; ++i)
    if (gb.needsGrad(i))
      gb.setGrad(i, threeD ? squeezeFront(gb, grads[i], operands[i].getType())
                           : grads[i]);
  return success();
}

/// ATen's math path up to the probabilities: the scaled query and key, the
/// key and value with their heads repeated (enable_gqa), and
/// p = _safe_softmax(s).
struct MathAttention {
  Value qs, kts, kr, vr, probs;
  Value qFactor, kFactor;
  int64_t groups = 1;
  RankedTensorType scoreType;
};

FailureOr<MathAttention> mathAttention(GradientBuilder &gb, const SdpaArgs &a) {
  MathAttention m;
  Value q = a.q, k = a.k, v = a.v, mask = a.mask;
  // Grouped-query attention: key and value heads repeated to the query's.
  if (a.gqa && rankOf(q) >= 3 && dimFromEnd(q, 3) != dimFromEnd(k, 3)) {
    auto qt = cast<RankedTensorType>(q.getType());
    auto kt = cast<RankedTensorType>(k.getType());
    auto vt = cast<RankedTensorType>(v.getType());
    if (!qt.hasStaticShape() || !kt.hasStaticShape() || !vt.hasStaticShape() ||
        dimFromEnd(q, 3) % dimFromEnd(k, 3) != 0 ||
        dimFromEnd(k, 3) != dimFromEnd(v, 3))
      return gb.op.emitOpError()
             << "gradient of scaled_dot_product_attention with enable_gqa "
                "needs static shapes whose query heads are a multiple of the "
                "key and value heads";
    m.groups = dimFromEnd(q, 3) / dimFromEnd(k, 3);
  }
  m.kr = m.groups > 1 ? repeatHeads(gb, k, m.groups) : k;
  m.vr = m.groups > 1 ? repeatHeads(gb, v, m.groups) : v;

  // ATen scales q and k by sqrt(|scale|) each (q by its negative for a
  // negative scale) before the product.
  double root = std::sqrt(std::abs(a.scale));
  m.qFactor = gb.constFloat(a.scale < 0 ? -root : root);
  m.kFactor = gb.constFloat(root);
  Type outType = gb.result(0).getType();
  int64_t lenQ = dimFromEnd(q, 2), lenK = dimFromEnd(k, 2);
  m.scoreType = withLastTwo(outType, lenQ, lenK);
  m.qs = gb.aten("aten::mul.Scalar", {q, m.qFactor}, q.getType());
  Value kt = transposeLast(gb, m.kr);
  m.kts = gb.aten("aten::mul.Scalar", {kt, m.kFactor}, kt.getType());
  Value scores = gb.aten("aten::matmul", {m.qs, m.kts}, m.scoreType);
  Value minusInf = gb.constFloat(-std::numeric_limits<double>::infinity());
  if (a.causal) {
    if (ShapedType::isDynamic(lenQ) || ShapedType::isDynamic(lenK))
      return gb.op.emitOpError()
             << "gradient of scaled_dot_product_attention with is_causal "
                "needs static sequence lengths";
    // ATen's causal mask keeps the lower triangle (tril, diagonal 0).
    auto boolType = RankedTensorType::get({lenQ, lenK}, gb.b.getI1Type());
    Value ones = gb.aten("aten::ones",
                         {gb.intList({lenQ, lenK}), gb.constInt(11), gb.none(),
                          gb.none(), gb.none()},
                         boolType);
    Value above = gb.aten("aten::triu", {ones, gb.constInt(1)}, boolType);
    scores = gb.aten("aten::masked_fill.Scalar", {scores, above, minusInf},
                     m.scoreType);
  }
  if (isa<RankedTensorType>(mask.getType())) {
    if (elementOf(mask).isInteger(1)) {
      Value masked = gb.aten("aten::logical_not", {mask}, mask.getType());
      scores = gb.aten("aten::masked_fill.Scalar", {scores, masked, minusInf},
                       m.scoreType);
    } else {
      scores = gb.aten("aten::add.Tensor", {scores, mask, gb.constInt(1)},
                       m.scoreType);
    }
  }
  m.probs = gb.aten("aten::_safe_softmax",
                    {scores, gb.constInt(-1), gb.none()}, m.scoreType);
  return m;
}

LogicalResult sdpaMath(GradientBuilder &gb, const SdpaArgs &a) {
  FailureOr<MathAttention> forward = mathAttention(gb, a);
  if (failed(forward))
    return failure();
  Value q = a.q, k = a.k, v = a.v, mask = a.mask;
  Value qs = forward->qs, kts = forward->kts, vr = forward->vr;
  Value probs = forward->probs, qFactor = forward->qFactor,
        kFactor = forward->kFactor;
  int64_t groups = forward->groups;
  RankedTensorType scoreType = forward->scoreType;
  Type outType = gb.result(0).getType();
  int64_t lenQ = dimFromEnd(q, 2), lenK = dimFromEnd(k, 2);
  int64_t headDim = dimFromEnd(q, 1);
  bool hasMask = isa<RankedTensorType>(mask.getType());
  Value g = gb.resultGradOrZeros(0);
  auto finish = [&](unsigned i, Value grad, Value like) {
    if (groups > 1 && i != 0)
      grad = sumHeads(gb, grad, like, groups);
    gb.setGrad(i, gb.sumToShapeOf(grad, like));
  };
  if (gb.needsGrad(2)) {
    auto type = withLastTwo(outType, lenK, dimFromEnd(v, 1));
    finish(2, gb.aten("aten::matmul", {transposeLast(gb, probs), g}, type), v);
  }
  bool maskNeedsGrad = hasMask && gb.needsGrad(3);
  if (!gb.needsGrad(0) && !gb.needsGrad(1) && !maskNeedsGrad)
    return success();
  Value dProbs = gb.aten("aten::matmul", {g, transposeLast(gb, vr)}, scoreType);
  Value dScores = gb.aten("aten::_softmax_backward_data",
                          {dProbs, probs, gb.constInt(-1),
                           gb.constInt(scalarTypeCode(elementOf(probs)))},
                          scoreType);
  if (maskNeedsGrad)
    gb.setGrad(3, gb.sumToShapeOf(dScores, mask));
  if (gb.needsGrad(0)) {
    auto type = withLastTwo(outType, lenQ, headDim);
    Value dqs =
        gb.aten("aten::matmul", {dScores, transposeLast(gb, kts)}, type);
    finish(0, gb.aten("aten::mul.Scalar", {dqs, qFactor}, type), q);
  }
  if (gb.needsGrad(1)) {
    auto type = withLastTwo(outType, headDim, lenK);
    Value dkts =
        gb.aten("aten::matmul", {transposeLast(gb, qs), dScores}, type);
    Value dkt = gb.aten("aten::mul.Scalar", {dkts, kFactor}, type);
    finish(1, transposeLast(gb, dkt), k);
  }
  return success();
}

/// The constant arguments of an sdpa op (dropout_p aside).
FailureOr<SdpaArgs> sdpaArgs(GradientBuilder &gb) {
  SdpaArgs a{gb.operand(0), gb.operand(1), gb.operand(2), gb.operand(3)};
  auto causal = gb.staticInt(gb.operand(5));
  auto gqa = gb.staticInt(gb.operand(7));
  if (!causal || !gqa)
    return gb.op.emitOpError() << "gradient of scaled_dot_product_attention "
                                  "needs constant is_causal and enable_gqa";
  a.causal = *causal;
  a.gqa = *gqa;
  if (rankOf(a.q) < 2 || rankOf(a.k) < 2 || rankOf(a.v) < 2)
    return gb.op.emitOpError() << "gradient of scaled_dot_product_attention "
                                  "needs query, key and value of rank >= 2";
  if (isa<ds::NoneType>(gb.operand(6).getType())) {
    int64_t headDim = dimFromEnd(a.q, 1);
    if (ShapedType::isDynamic(headDim))
      return gb.op.emitOpError()
             << "gradient of scaled_dot_product_attention with a dynamic "
                "head dim needs an explicit scale";
    a.scale = 1.0 / std::sqrt(static_cast<double>(headDim));
  } else {
    auto given = gb.staticFloat(gb.operand(6));
    if (!given)
      return gb.op.emitOpError() << "gradient of scaled_dot_product_attention "
                                    "needs a constant scale";
    a.scale = *given;
  }
  return a;
}

LogicalResult scaledDotProductAttention(GradientBuilder &gb) {
  auto dropout = gb.staticFloat(gb.operand(4));
  if (!dropout || *dropout != 0.0)
    return gb.op.emitOpError()
           << "gradient of scaled_dot_product_attention with dropout_p != 0 "
              "needs -ds-lower-dropout first (the kernel draws its mask "
              "internally; that pass writes the attention with its dropout "
              "as ATen's math path computes it)";
  FailureOr<SdpaArgs> a = sdpaArgs(gb);
  if (failed(a))
    return failure();
  // The flash kernel above is the CPU's; a plan for CUDA takes the math
  // path, which runs on any device (its gradients agree with those of
  // CUDA's flash and memory-efficient kernels to the rounding).
  if (mlir::ds::getTargetDevice(gb.op) == mlir::ds::TargetDevice::CPU &&
      flashEligible(gb, *a))
    return sdpaFlash(gb, *a);
  return sdpaMath(gb, *a);
}

} // namespace

FailureOr<Value> mlir::ds::emitAttentionWithDropout(OpBuilder &builder,
                                                    AtenOp op, double dropout) {
  GradientBuilder gb(builder, op, {}, {}, {});
  FailureOr<SdpaArgs> a = sdpaArgs(gb);
  if (failed(a))
    return failure();
  FailureOr<MathAttention> m = mathAttention(gb, *a);
  if (failed(m))
    return failure();
  // ATen's math path: attn = dropout(p, dropout_p, train=true); attn @ v.
  Value dropped =
      gb.aten("aten::dropout",
              {m->probs, gb.constFloat(dropout), gb.constBool(true)},
              m->probs.getType());
  return gb.aten("aten::matmul", {dropped, m->vr}, op.getResult(0).getType());
}

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
  // beta * self + alpha * (a @ b), for addmm (mm) and baddbmm (bmm).
  auto productPlus = [](StringRef name) {
    return [name](GradientBuilder &gb) -> LogicalResult {
      Value g = gb.resultGradOrZeros(0);
      Value self = gb.operand(0), a = gb.operand(1), b = gb.operand(2);
      if (gb.needsGrad(0))
        gb.setGrad(0, gb.sumToShapeOf(gb.aten("aten::mul.Scalar",
                                              {g, gb.operand(3)}, g.getType()),
                                      self));
      if (gb.needsGrad(1)) {
        Value m = gb.aten(name, {g, transposeLast(gb, b)}, a.getType());
        gb.setGrad(
            1, gb.aten("aten::mul.Scalar", {m, gb.operand(4)}, a.getType()));
      }
      if (gb.needsGrad(2)) {
        Value m = gb.aten(name, {transposeLast(gb, a), g}, b.getType());
        gb.setGrad(
            2, gb.aten("aten::mul.Scalar", {m, gb.operand(4)}, b.getType()));
      }
      return success();
    };
  };
  t["aten::addmm"] = productPlus("aten::mm");
  t["aten::baddbmm"] = productPlus("aten::bmm");
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
    auto statType = RankedTensorType::get(
        statShape, statisticsElementType(gb, xt.getElementType(),
                                         xt.getElementType()));
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
  t["aten::rms_norm"] = [](GradientBuilder &gb) -> LogicalResult {
    // rms_norm(x, normalized_shape, weight?, eps?) as ATen's CPU kernel
    // computes it: xc = x in its math type (float for 16-bit x),
    // r = rsqrt(mean(xc^2) + eps), y = ((xc * r) * w).type_as(x); and its
    // gradient as autograd derives it from those ops, in the same order, so
    // that both round alike. With gy = g in the dtype of (xc * r) * w and
    // u = gy * w in the math type:
    //   gw = sum_to(gy * (xc * r)) in w's dtype,
    //   gx = u * r + expand(-0.5 * sum(u * xc) * r^3) / N * (2 * xc).
    Value x = gb.operand(0), w = gb.operand(2);
    auto xt = cast<RankedTensorType>(x.getType());
    auto normalized = staticIntList(gb, gb.operand(1));
    if (!normalized)
      return gb.op.emitOpError()
             << "gradient of rms_norm needs a constant normalized_shape";
    Type elem = xt.getElementType();
    Type math = elem;
    if (!elem.isF32() && !elem.isF64())
      math = gb.b.getF32Type();
    double eps = math.isF64() ? std::numeric_limits<double>::epsilon()
                              : std::numeric_limits<float>::epsilon();
    if (!isa<ds::NoneType>(gb.operand(3).getType())) {
      auto given = gb.staticFloat(gb.operand(3));
      if (!given)
        return gb.op.emitOpError()
               << "gradient of rms_norm needs a constant eps";
      eps = *given;
    }
    int64_t k = normalized->size();
    int64_t count = 1;
    SmallVector<int64_t> dims, statShape(xt.getShape());
    for (int64_t i = 0; i < k; ++i) {
      int64_t d = xt.getRank() - 1 - i;
      if (xt.isDynamicDim(d))
        return gb.op.emitOpError() << "gradient of rms_norm over a dynamic dim";
      dims.push_back(d);
      count *= xt.getDimSize(d);
      statShape[d] = 1;
    }
    auto mathType = xt.clone(math);
    auto statType = RankedTensorType::get(statShape, math);
    Value xc = castTo(gb, x, math);
    Value sq =
        gb.aten("aten::pow.Tensor_Scalar", {xc, gb.constInt(2)}, mathType);
    Value mean = gb.aten("aten::mean.dim",
                         {sq, gb.intList(dims), gb.constBool(true), gb.none()},
                         statType);
    Value r =
        gb.aten("aten::rsqrt",
                {gb.aten("aten::add.Scalar",
                         {mean, gb.constFloat(eps), gb.constInt(1)}, statType)},
                statType);
    bool hasWeight = !isa<ds::NoneType>(w.getType());
    Type productElem = hasWeight ? promoteFloatTypes(math, elementOf(w)) : math;
    auto productType = xt.clone(productElem);
    Value gy = castTo(gb, gb.resultGradOrZeros(0), productElem);
    if (hasWeight && gb.needsGrad(2)) {
      Value normed = gb.aten("aten::mul.Tensor", {xc, r}, mathType);
      Value prod = gb.aten("aten::mul.Tensor", {gy, normed}, productType);
      auto wt = cast<RankedTensorType>(w.getType());
      Value summed = prod;
      if (wt.getShape() != xt.getShape())
        summed = gb.aten("aten::sum_to_size", {prod, gb.intList(wt.getShape())},
                         wt.clone(productElem));
      gb.setGrad(2, castTo(gb, summed, wt.getElementType()));
    }
    if (gb.needsGrad(0)) {
      Value u = gy;
      if (hasWeight)
        u = gb.aten("aten::mul.Tensor", {gy, w}, productType);
      u = castTo(gb, u, math);
      Value direct = gb.aten("aten::mul.Tensor", {u, r}, mathType);
      Value gr = gb.aten("aten::sum.dim_IntList",
                         {gb.aten("aten::mul.Tensor", {u, xc}, mathType),
                          gb.intList(dims), gb.constBool(true), gb.none()},
                         statType);
      Value gs = gb.aten(
          "aten::mul.Tensor",
          {gb.aten("aten::mul.Scalar", {gr, gb.constFloat(-0.5)}, statType),
           gb.aten("aten::pow.Tensor_Scalar", {r, gb.constInt(3)}, statType)},
          statType);
      Value gm =
          gb.aten("aten::div.Scalar",
                  {gb.aten("aten::expand",
                           {gs, gb.intList(xt.getShape()), gb.constBool(false)},
                           mathType),
                   gb.constInt(count)},
                  mathType);
      Value gp = gb.aten(
          "aten::mul.Tensor",
          {gm, gb.aten("aten::mul.Scalar", {xc, gb.constInt(2)}, mathType)},
          mathType);
      Value gx =
          gb.aten("aten::add.Tensor", {direct, gp, gb.constInt(1)}, mathType);
      gb.setGrad(0, castTo(gb, gx, elem));
    }
    return success();
  };
  t["aten::scaled_dot_product_attention"] = scaledDotProductAttention;
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
    auto statType = RankedTensorType::get(
        {xt.getDimSize(1)},
        statisticsElementType(gb, xt.getElementType(), statElem));
    auto fwd = gb.atenN("aten::native_batch_norm",
                        {x, w, b, gb.none(), gb.none(), gb.constBool(true),
                         gb.operand(6), gb.operand(7)},
                        {xt, statType, statType});
    // The weights' gradients take the weights' dtype (the statistics' on
    // the CPU).
    auto paramType = RankedTensorType::get({xt.getDimSize(1)}, statElem);
    auto grads = gb.atenN(
        "aten::native_batch_norm_backward",
        {gb.resultGradOrZeros(0), x, w, gb.none(), gb.none(), fwd[1], fwd[2],
         gb.constBool(true), gb.operand(7), outputMask(gb, 0, 1, 2)},
        {xt, gradTypeOr(w, paramType), gradTypeOr(b, paramType)});
    setMaskedGrads(gb, grads, {0, 1, 2});
    return success();
  };
  auto conv = [](GradientBuilder &gb) -> LogicalResult {
    // conv{1,2}d(x, w, b, stride, padding, dilation, groups); the .padding
    // overloads take "valid" or "same" for the padding.
    Value x = gb.operand(0), w = gb.operand(1), b = gb.operand(2);
    int64_t spatial = rankOf(x) - 2;
    Value padding = gb.operand(4), input = x;
    SmallVector<int64_t> pads; // constant_pad_nd's, last dim first
    if (!isa<ds::ListType>(padding.getType())) {
      std::optional<StringRef> mode = staticStr(padding);
      auto dilation = staticIntList(gb, gb.operand(5));
      auto wt = cast<RankedTensorType>(w.getType());
      if (!mode || (*mode != "valid" && *mode != "same"))
        return gb.op.emitOpError()
               << "gradient of convolution with a padding that is neither "
                  "'valid' nor 'same' is not supported";
      if (*mode == "same" && (!dilation || !wt.hasStaticShape()))
        return gb.op.emitOpError()
               << "gradient of convolution with padding 'same' needs a "
                  "constant dilation and a weight of static shape";
      // 'same' pads d * (k - 1) per dim, the odd one on the right (as
      // LibTorch does); symmetric padding is the list form's, otherwise the
      // input is padded first and its gradient cropped.
      SmallVector<int64_t> total(spatial, 0), left(spatial, 0);
      for (int64_t d = 0; *mode == "same" && d < spatial; ++d) {
        total[d] = (*dilation)[dilation->size() == 1 ? 0 : d] *
                   (wt.getDimSize(2 + d) - 1);
        left[d] = total[d] / 2;
      }
      padding = gb.intList(left);
      if (llvm::any_of(total, [](int64_t t) { return t % 2; })) {
        auto xt = cast<RankedTensorType>(x.getType());
        SmallVector<int64_t> shape(xt.getShape());
        for (int64_t d = spatial - 1; d >= 0; --d) {
          pads.append({left[d], total[d] - left[d]});
          if (!xt.isDynamicDim(2 + d))
            shape[2 + d] += total[d];
        }
        input = gb.aten("aten::constant_pad_nd",
                        {x, gb.intList(pads), gb.constInt(0)},
                        RankedTensorType::get(shape, xt.getElementType()));
        padding = gb.intList(SmallVector<int64_t>(spatial, 0));
      }
    }
    Value biasSizes = gb.none();
    if (!isa<ds::NoneType>(b.getType()))
      biasSizes = gb.intList(cast<RankedTensorType>(b.getType()).getShape());
    auto grads =
        gb.atenN("aten::convolution_backward",
                 {gb.resultGradOrZeros(0), input, w, biasSizes, gb.operand(3),
                  padding, gb.operand(5), gb.constBool(false),
                  gb.intList(SmallVector<int64_t>(spatial, 0)), gb.operand(6),
                  outputMask(gb, 0, 1, 2)},
                 {input.getType(), w.getType(), gradTypeOr(b, w.getType())});
    if (input != x && gb.needsGrad(0)) {
      SmallVector<int64_t> crop;
      for (int64_t p : pads)
        crop.push_back(-p);
      grads[0] = gb.aten("aten::constant_pad_nd",
                         {grads[0], gb.intList(crop), gb.constInt(0)},
                         x.getType());
    }
    setMaskedGrads(gb, grads, {0, 1, 2});
    return success();
  };
  t["aten::conv1d"] = conv;
  t["aten::conv2d"] = conv;
  t["aten::conv1d.padding"] = conv;
  t["aten::conv2d.padding"] = conv;
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
