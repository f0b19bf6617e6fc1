//===- ReductionRules.cpp - gradients of scans, products, sorts, scatters ===//
//
// Core ATen's reductions and data movement beyond the ones in ShapeRules.cpp:
// cumsum, var, linalg_vector_norm, sort, min.dim, scatter, scatter_add, and
// the remainders (whose gradient, as autograd's, treats the rounded quotient
// as a constant).
//
//===----------------------------------------------------------------------===//

#include "RuleHelpers.h"

#include <cmath>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

namespace {

int64_t normalized(int64_t d, int64_t rank) { return d < 0 ? d + rank : d; }

/// zeros(x).scatter_add(dim, index, g): the gradient of picking `index`
/// along `dim` (sort, min.dim: every position picked at most once).
Value scatterBack(GradientBuilder &gb, Value g, Value index, Value dim) {
  Value x = gb.operand(0);
  return gb.aten("aten::scatter_add", {gb.zerosLike(x), dim, index, g},
                 x.getType());
}

/// var over `dims` (all when empty) with `correction`, keepdim `keep`:
/// d var / d x = 2 (x - mean) / (N - correction).
LogicalResult varianceGrad(GradientBuilder &gb, std::optional<double> correction,
                           std::optional<SmallVector<int64_t>> dims,
                           std::optional<int64_t> keep) {
  if (!correction || !dims || !keep)
    return gb.op.emitOpError()
           << "gradient of var needs constant dims, correction and keepdim";
  Value x = gb.operand(0);
  auto xt = cast<RankedTensorType>(x.getType());
  int64_t rank = xt.getRank();
  SmallVector<int64_t> ds;
  for (int64_t d : *dims)
    ds.push_back(normalized(d, rank));
  if (ds.empty())
    for (int64_t d = 0; d < rank; ++d)
      ds.push_back(d);
  llvm::sort(ds);
  int64_t n = 1;
  SmallVector<int64_t> kept(xt.getShape());
  for (int64_t d : ds) {
    if (xt.isDynamicDim(d))
      return gb.op.emitOpError() << "gradient of var over a dynamic dim";
    n *= xt.getDimSize(d);
    kept[d] = 1;
  }
  auto keptType = RankedTensorType::get(kept, xt.getElementType());
  Value mean = gb.aten("aten::mean.dim",
                       {x, gb.intList(ds), gb.constBool(true), gb.none()},
                       keptType);
  Value centered =
      gb.aten("aten::sub.Tensor", {x, mean, gb.constInt(1)}, xt);
  Value g = gb.resultGradOrZeros(0);
  if (!*keep)
    g = unsqueezeAll(gb, g, ds);
  Value scaled = gb.aten(
      "aten::mul.Scalar",
      {centered, gb.constFloat(2.0 / (static_cast<double>(n) - *correction))},
      xt);
  gb.setGrad(0, gb.aten("aten::mul.Tensor", {scaled, g}, xt));
  return success();
}

/// The correction a constant `unbiased` flag means (1 or 0).
std::optional<double> correctionOf(GradientBuilder &gb, Value unbiased) {
  if (auto u = gb.staticInt(unbiased))
    return *u ? 1.0 : 0.0;
  return std::nullopt;
}

/// The dims of a reduction's optional int list operand (None: all).
std::optional<SmallVector<int64_t>> optionalDims(GradientBuilder &gb, Value v) {
  if (isa<ds::NoneType>(v.getType()))
    return SmallVector<int64_t>();
  return staticIntList(gb, v);
}

/// For x [..., K]: the product of each slice along the last dim but the
/// element itself ([..., K]): the exclusive cumulative product from the left
/// times the one from the right, exact where x has zeros (no division), as
/// autograd's prod backward computes it where the input has zeros.
Value productOfOthers(GradientBuilder &gb, Value x) {
  auto t = cast<RankedTensorType>(x.getType());
  int64_t k = t.getShape().back();
  if (k == 0)
    return x;
  Value last = gb.intList({-1});
  // [1, x0, x0 x1, ...]: cumprod without its last element, a one before it.
  auto exclusive = [&](Value v) {
    Value scan = gb.aten("aten::cumprod", {v, gb.constInt(-1), gb.none()}, t);
    SmallVector<int64_t> shorter(t.getShape());
    shorter.back() = k - 1;
    Value head = gb.aten("aten::slice.Tensor",
                         {scan, gb.constInt(-1), gb.constInt(0),
                          gb.constInt(k - 1), gb.constInt(1)},
                         RankedTensorType::get(shorter, t.getElementType()));
    return gb.aten("aten::constant_pad_nd",
                   {head, gb.intList({1, 0}), gb.constFloat(1.0)}, t);
  };
  Value fromLeft = exclusive(x);
  Value fromRight = gb.aten(
      "aten::flip", {exclusive(gb.aten("aten::flip", {x, last}, t)), last}, t);
  return gb.aten("aten::mul.Tensor", {fromLeft, fromRight}, t);
}

/// x with dims `a` and `b` swapped (x itself when they are equal).
Value swapDims(GradientBuilder &gb, Value x, int64_t a, int64_t b) {
  if (a == b)
    return x;
  auto t = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape(t.getShape());
  std::swap(shape[a], shape[b]);
  return gb.aten("aten::transpose.int", {x, gb.constInt(a), gb.constInt(b)},
                 RankedTensorType::get(shape, t.getElementType()));
}

Value mulTensors(GradientBuilder &gb, Value a, Value b, Type type) {
  return gb.aten("aten::mul.Tensor", {a, b}, type);
}

} // namespace

void mlir::ds::rules::addReductionRules(RuleTable &t) {
  // cumsum(x, dim): each input adds into every later output, so the
  // gradient is the reversed cumulative sum of g.
  t["aten::cumsum"] = [](GradientBuilder &gb) -> LogicalResult {
    auto dim = gb.staticInt(gb.operand(1));
    if (!dim)
      return gb.op.emitOpError() << "gradient of cumsum needs a constant dim";
    Value x = gb.operand(0);
    Value g = castTo(gb, gb.resultGradOrZeros(0), elementOf(x));
    Type type = x.getType();
    Value dims = gb.intList({*dim});
    Value flipped = gb.aten("aten::flip", {g, dims}, type);
    Value summed =
        gb.aten("aten::cumsum", {flipped, gb.constInt(*dim), gb.none()}, type);
    gb.setGrad(0, gb.aten("aten::flip", {summed, dims}, type));
    return success();
  };
  // prod(x) and prod(x, dim, keepdim): d prod / d x_i is the product of the
  // other elements of x_i's slice (productOfOthers).
  t["aten::prod"] = [](GradientBuilder &gb) -> LogicalResult {
    Value x = gb.operand(0);
    auto xt = cast<RankedTensorType>(x.getType());
    if (!xt.hasStaticShape())
      return gb.op.emitOpError() << "gradient of prod needs a static shape";
    Value g = castTo(gb, gb.resultGradOrZeros(0), xt.getElementType());
    int64_t n = xt.getNumElements();
    Value flat = gb.aten("aten::reshape", {x, gb.intList({n})},
                         RankedTensorType::get({n}, xt.getElementType()));
    Value others = reshapeLike(gb, productOfOthers(gb, flat), x);
    gb.setGrad(0, mulTensors(gb, g, others, xt));
    return success();
  };
  t["aten::prod.dim_int"] = [](GradientBuilder &gb) -> LogicalResult {
    Value x = gb.operand(0);
    auto xt = cast<RankedTensorType>(x.getType());
    auto dim = gb.staticInt(gb.operand(1));
    auto keep = gb.staticInt(gb.operand(2));
    if (!dim || !keep || !xt.hasStaticShape())
      return gb.op.emitOpError() << "gradient of prod needs a constant dim "
                                    "and keepdim and a static shape";
    Value g = castTo(gb, gb.resultGradOrZeros(0), xt.getElementType());
    int64_t rank = xt.getRank();
    if (rank == 0) {
      gb.setGrad(0, g);
      return success();
    }
    int64_t d = normalized(*dim, rank);
    Value others = swapDims(
        gb, productOfOthers(gb, swapDims(gb, x, d, rank - 1)), d, rank - 1);
    if (!*keep)
      g = unsqueezeAll(gb, g, {d});
    gb.setGrad(0, mulTensors(gb, g, others, xt));
    return success();
  };
  t["aten::var.correction"] = [](GradientBuilder &gb) {
    // var.correction(x, dim?, *, correction?, keepdim): correction None is 1.
    std::optional<double> correction =
        isa<ds::NoneType>(gb.operand(2).getType())
            ? std::optional<double>(1.0)
            : gb.staticFloat(gb.operand(2));
    return varianceGrad(gb, correction, optionalDims(gb, gb.operand(1)),
                        gb.staticInt(gb.operand(3)));
  };
  t["aten::var.dim"] = [](GradientBuilder &gb) {
    // var.dim(x, dim?, unbiased, keepdim).
    return varianceGrad(gb, correctionOf(gb, gb.operand(2)),
                        optionalDims(gb, gb.operand(1)),
                        gb.staticInt(gb.operand(3)));
  };
  t["aten::var"] = [](GradientBuilder &gb) {
    // var(x, unbiased): over every element.
    return varianceGrad(gb, correctionOf(gb, gb.operand(1)),
                        SmallVector<int64_t>(),
                        std::optional<int64_t>(0));
  };
  // linalg_vector_norm(x, ord, dim, keepdim, dtype): with n the norm,
  // d n / d x = sign(x) |x|^(p-1) / n^(p-1) (x / n for p = 2), zero where
  // n is zero, as autograd's norm_backward.
  t["aten::linalg_vector_norm"] = [](GradientBuilder &gb) -> LogicalResult {
    auto p = gb.staticFloat(gb.operand(1));
    auto keep = gb.staticInt(gb.operand(3));
    if (!p || !keep || !std::isfinite(*p) || *p == 0.0)
      return gb.op.emitOpError() << "gradient of linalg_vector_norm needs a "
                                    "constant finite, non-zero ord and keepdim";
    Value x = gb.operand(0);
    auto xt = cast<RankedTensorType>(x.getType());
    Type elem = xt.getElementType();
    Value g = castTo(gb, gb.resultGradOrZeros(0), elem);
    Value n = castTo(gb, gb.result(0), elem);
    if (!*keep) {
      SmallVector<int64_t> dims;
      if (!isa<ds::NoneType>(gb.operand(2).getType())) {
        auto list = staticIntList(gb, gb.operand(2));
        if (!list)
          return gb.op.emitOpError()
                 << "gradient of linalg_vector_norm needs constant dims";
        dims.assign(list->begin(), list->end());
      }
      if (dims.empty())
        for (int64_t d = 0; d < xt.getRank(); ++d)
          dims.push_back(d);
      for (int64_t &d : dims)
        d = d < 0 ? d + xt.getRank() : d;
      llvm::sort(dims);
      g = unsqueezeAll(gb, g, dims);
      n = unsqueezeAll(gb, n, dims);
    }
    Type nType = n.getType();
    // scale = g / n^(p-1), zero where n == 0.
    Value np = *p == 2.0 ? n
                         : gb.aten("aten::pow.Tensor_Scalar",
                                   {n, gb.constFloat(*p - 1.0)}, nType);
    Value scale = gb.aten("aten::div.Tensor", {g, np}, nType);
    auto boolType =
        cast<RankedTensorType>(nType).clone(gb.b.getI1Type());
    Value zero = gb.aten("aten::eq.Scalar", {n, gb.constFloat(0.0)}, boolType);
    scale = gb.aten("aten::masked_fill.Scalar",
                    {scale, zero, gb.constFloat(0.0)}, nType);
    Value dx;
    if (*p == 2.0) {
      dx = x;
    } else if (*p == 1.0) {
      dx = gb.aten("aten::sign", {x}, xt);
    } else {
      Value a = gb.aten("aten::abs", {x}, xt);
      Value ap = gb.aten("aten::pow.Tensor_Scalar",
                         {a, gb.constFloat(*p - 1.0)}, xt);
      dx = gb.aten("aten::mul.Tensor", {gb.aten("aten::sign", {x}, xt), ap},
                   xt);
    }
    gb.setGrad(0, gb.aten("aten::mul.Tensor", {dx, scale}, xt));
    return success();
  };
  // sort(x, dim, descending) and min.dim(x, dim, keepdim): the values'
  // gradient goes back to the positions the indices name.
  t["aten::sort"] = [](GradientBuilder &gb) {
    gb.setGrad(0, scatterBack(gb, gb.resultGradOrZeros(0), gb.result(1),
                              gb.operand(1)));
    return success();
  };
  t["aten::min.dim"] = [](GradientBuilder &gb) -> LogicalResult {
    auto dim = gb.staticInt(gb.operand(1));
    auto keep = gb.staticInt(gb.operand(2));
    if (!dim || !keep)
      return gb.op.emitOpError() << "gradient of min needs a constant dim";
    Value g = gb.resultGradOrZeros(0), index = gb.result(1);
    if (!*keep) {
      int64_t d = normalized(*dim, rankOf(gb.operand(0)));
      g = unsqueezeAll(gb, g, {d});
      index = unsqueezeAll(gb, index, {d});
    }
    gb.setGrad(0, scatterBack(gb, g, index, gb.operand(1)));
    return success();
  };
  // scatter(x, dim, index, src|value): x's gradient is g with the written
  // positions zeroed; src's, g gathered at them.
  auto scatterRule = [](bool hasSrc) {
    return [hasSrc](GradientBuilder &gb) {
      Value g = gb.resultGradOrZeros(0);
      Value dim = gb.operand(1), index = gb.operand(2);
      if (gb.needsGrad(0))
        gb.setGrad(0, gb.aten("aten::scatter.value",
                              {g, dim, index, gb.constFloat(0.0)},
                              gb.operand(0).getType()));
      if (hasSrc && gb.needsGrad(3))
        gb.setGrad(3, gb.aten("aten::gather",
                              {g, dim, index, gb.constBool(false)},
                              gb.operand(3).getType()));
      return success();
    };
  };
  t["aten::scatter.src"] = scatterRule(true);
  t["aten::scatter.value"] = scatterRule(false);
  // scatter_reduce(self, dim, index, src, reduce, include_self) for reduce
  // sum, mean, amax, amin, as autograd's scatter_reduce_backward: mean
  // divides by the count that reached each position; amax / amin share the
  // gradient evenly among the elements equal to the result; without
  // include_self, self's scattered-into positions get none.
  t["aten::scatter_reduce.two"] = [](GradientBuilder &gb) -> LogicalResult {
    std::optional<StringRef> reduce = staticStr(gb.operand(4));
    auto includeSelf = gb.staticInt(gb.operand(5));
    if (!reduce || !includeSelf)
      return gb.op.emitOpError() << "gradient of scatter_reduce needs a "
                                    "constant reduce and include_self";
    if (*reduce != "sum" && *reduce != "mean" && *reduce != "amax" &&
        *reduce != "amin")
      return gb.op.emitOpError() << "gradient of scatter_reduce with reduce '"
                                 << *reduce << "' is not supported";
    Value self = gb.operand(0), dim = gb.operand(1), index = gb.operand(2),
          src = gb.operand(3);
    Type selfType = self.getType(), srcType = src.getType();
    // Gathered at `index`, src's gradient has index's shape (autograd's
    // formula has the same limit).
    if (cast<RankedTensorType>(index.getType()).getShape() !=
        cast<RankedTensorType>(srcType).getShape())
      return gb.op.emitOpError() << "gradient of scatter_reduce needs an "
                                    "index of src's shape";
    Value g = gb.resultGradOrZeros(0);
    Value none = gb.none();
    auto like = [&](StringRef factory, Value v) {
      return gb.aten(factory, {v, none, none, none, none, none}, v.getType());
    };
    auto gather = [&](Value v) {
      return gb.aten("aten::gather", {v, dim, index, gb.constBool(false)},
                     srcType);
    };
    auto div = [&](Value a, Value b, Type type) {
      return gb.aten("aten::div.Tensor", {a, b}, type);
    };
    Value gradSelf = g, gradSrc;
    if (*reduce == "sum") {
      gradSrc = gather(g);
    } else if (*reduce == "mean") {
      Value count = gb.aten(
          "aten::scatter_add",
          {like(*includeSelf ? "aten::ones_like" : "aten::zeros_like", g), dim,
           index, like("aten::ones_like", src)},
          selfType);
      auto maskType = cast<RankedTensorType>(selfType).clone(gb.b.getI1Type());
      count = gb.aten("aten::masked_fill.Scalar",
                      {count,
                       gb.aten("aten::eq.Scalar", {count, gb.constInt(0)},
                               maskType),
                       gb.constFloat(1.0)},
                      selfType);
      gradSelf = div(g, count, selfType);
      gradSrc = div(gather(g), gather(count), srcType);
    } else {
      Value result = gb.result(0);
      Value value = gather(result);
      auto asFloat = [&](Value a, Value b, Type type) {
        Value eq = gb.aten(
            "aten::eq.Tensor", {a, b},
            cast<RankedTensorType>(type).clone(gb.b.getI1Type()));
        return castTo(gb, eq, elementOf(self));
      };
      Value selfIsResult = asFloat(self, result, selfType);
      Value srcIsResult = asFloat(src, value, srcType);
      Value count = gb.aten("aten::scatter_add",
                            {selfIsResult, dim, index, srcIsResult}, selfType);
      Value shared = div(g, count, selfType);
      gradSelf = mulTensors(gb, selfIsResult, shared, selfType);
      gradSrc = mulTensors(gb, srcIsResult, gather(shared), srcType);
    }
    if (!*includeSelf)
      gradSelf = gb.aten("aten::scatter.value",
                         {gradSelf, dim, index, gb.constFloat(0.0)}, selfType);
    if (gb.needsGrad(0))
      gb.setGrad(0, gradSelf);
    if (gb.needsGrad(3))
      gb.setGrad(3, gradSrc);
    return success();
  };
  t["aten::scatter_add"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    if (gb.needsGrad(0))
      gb.setGrad(0, g);
    if (gb.needsGrad(3))
      gb.setGrad(3, gb.aten("aten::gather",
                            {g, gb.operand(1), gb.operand(2),
                             gb.constBool(false)},
                            gb.operand(3).getType()));
    return success();
  };
  // remainder(a, b) = a - floor(a / b) * b and fmod(a, b) = a - trunc(a / b)
  // * b: a's gradient is g; b's is -g times the rounded quotient.
  auto remainderRule = [](StringRef rounding, bool tensorOther) {
    return [rounding, tensorOther](GradientBuilder &gb) {
      Value g = gb.resultGradOrZeros(0);
      Value a = gb.operand(0), b = gb.operand(1);
      if (gb.needsGrad(0))
        gb.setGrad(0, gb.sumToShapeOf(g, a));
      if (tensorOther && gb.needsGrad(1)) {
        Type out = g.getType();
        Value q = gb.aten("aten::div.Tensor_mode", {a, b, gb.constStr(rounding)},
                          out);
        Value m = gb.aten("aten::mul.Tensor", {g, q}, out);
        gb.setGrad(1, gb.sumToShapeOf(gb.aten("aten::neg", {m}, out), b));
      }
      return success();
    };
  };
  // div with a rounding mode is piecewise constant (zero gradient, as
  // autograd's); without one it is div.
  t["aten::div.Tensor_mode"] = [](GradientBuilder &gb) -> LogicalResult {
    if (!isa<ds::NoneType>(gb.operand(2).getType()))
      return success();
    return (*lookupGradientRule("aten::div.Tensor"))(gb);
  };
  t["aten::div.Scalar_mode"] = [](GradientBuilder &gb) -> LogicalResult {
    if (!isa<ds::NoneType>(gb.operand(2).getType()))
      return success();
    return (*lookupGradientRule("aten::div.Scalar"))(gb);
  };
  t["aten::remainder.Tensor"] = remainderRule("floor", true);
  t["aten::remainder.Scalar"] = remainderRule("floor", false);
  t["aten::fmod.Tensor"] = remainderRule("trunc", true);
  t["aten::fmod.Scalar"] = remainderRule("trunc", false);
  // clamp(x, min, max) with tensor bounds, as autograd's clamp_backward and
  // clamp_backward_min_max: x's gradient passes where min <= x <= max; min's
  // where x < min < max; max's where x > max or max < min (then the result
  // is max everywhere).
  t["aten::clamp.Tensor"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    Value x = gb.operand(0), lo = gb.operand(1), hi = gb.operand(2);
    Type out = g.getType();
    auto maskType = cast<RankedTensorType>(out).clone(gb.b.getI1Type());
    bool hasLo = !isa<ds::NoneType>(lo.getType());
    bool hasHi = !isa<ds::NoneType>(hi.getType());
    // A comparison of the two bounds has their broadcast shape.
    auto boundsMask = [&]() -> Type {
      auto l = cast<RankedTensorType>(lo.getType()).getShape();
      auto h = cast<RankedTensorType>(hi.getType()).getShape();
      size_t rank = std::max(l.size(), h.size());
      SmallVector<int64_t> shape(rank, 1);
      for (size_t i = 0; i < rank; ++i) {
        int64_t a = i < rank - l.size() ? 1 : l[i - (rank - l.size())];
        int64_t b = i < rank - h.size() ? 1 : h[i - (rank - h.size())];
        shape[i] = a == 1 ? b : a;
      }
      return RankedTensorType::get(shape, gb.b.getI1Type());
    };
    auto cmp = [&](StringRef op, Value a, Value b) {
      bool bounds = (a == lo || a == hi) && (b == lo || b == hi);
      return gb.aten(op, {a, b}, bounds ? boundsMask() : Type(maskType));
    };
    auto pass = [&](Value mask, Value like) {
      return gb.sumToShapeOf(
          gb.aten("aten::where.ScalarOther", {mask, g, gb.constFloat(0.0)}, out),
          like);
    };
    Value inside;
    if (hasLo && hasHi)
      inside = cmp("aten::logical_and", cmp("aten::ge.Tensor", x, lo),
                    cmp("aten::le.Tensor", x, hi));
    else if (hasLo)
      inside = cmp("aten::ge.Tensor", x, lo);
    else if (hasHi)
      inside = cmp("aten::le.Tensor", x, hi);
    if (gb.needsGrad(0))
      gb.setGrad(0, inside ? pass(inside, x) : gb.sumToShapeOf(g, x));
    if (hasLo && gb.needsGrad(1)) {
      Value m = cmp("aten::lt.Tensor", x, lo);
      if (hasHi)
        m = cmp("aten::logical_and", m, cmp("aten::lt.Tensor", lo, hi));
      gb.setGrad(1, pass(m, lo));
    }
    if (hasHi && gb.needsGrad(2)) {
      Value m = cmp("aten::gt.Tensor", x, hi);
      if (hasLo)
        m = cmp("aten::logical_or", m, cmp("aten::lt.Tensor", hi, lo));
      gb.setGrad(2, pass(m, hi));
    }
    return success();
  };
}
