//===- ElementwiseRules.cpp - gradients of pointwise operators ------------===//

#include "RuleHelpers.h"

#include <cmath>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

namespace {

/// The dims a reduction (operand 1, a constant list; empty: all) removes,
/// sorted, and whether it keeps them (operand 2).
struct ReducedDims {
  SmallVector<int64_t> dims;
  bool keep = false;
  RankedTensorType keptType;

  /// `v` (the result or its gradient) with the reduced dims back, of size 1.
  Value restore(GradientBuilder &gb, Value v) const {
    if (keep)
      return v;
    auto t = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> shape(t.getShape());
    for (int64_t d : dims) {
      shape.insert(shape.begin() + d, 1);
      v = gb.aten("aten::unsqueeze", {v, gb.constInt(d)},
                  RankedTensorType::get(shape, t.getElementType()));
    }
    return v;
  }
};

FailureOr<ReducedDims> reducedDims(GradientBuilder &gb) {
  auto dims = staticIntList(gb, gb.operand(1));
  auto keep = gb.staticInt(gb.operand(2));
  if (!dims || !keep)
    return gb.op.emitOpError() << "gradient of " << gb.op.getOp()
                               << " needs constant dims and keepdim";
  auto at = cast<RankedTensorType>(gb.operand(0).getType());
  int64_t rank = at.getRank();
  ReducedDims r;
  r.keep = *keep;
  for (int64_t d : *dims)
    r.dims.push_back(d < 0 ? d + rank : d);
  if (r.dims.empty())
    for (int64_t d = 0; d < rank; ++d)
      r.dims.push_back(d);
  llvm::sort(r.dims);
  SmallVector<int64_t> kept(at.getShape());
  for (int64_t d : r.dims)
    kept[d] = 1;
  r.keptType = RankedTensorType::get(kept, at.getElementType());
  return r;
}

/// g * s for a Scalar operand s (skipped when s is the constant 1).
Value scaleBy(GradientBuilder &gb, Value g, Value s) {
  if (auto f = gb.staticFloat(s); f && *f == 1.0)
    return g;
  return gb.aten("aten::mul.Scalar", {g, s}, g.getType());
}

/// maximum(a, b) / minimum(a, b): the gradient goes to the larger (smaller)
/// operand; ties share it equally, as PyTorch's derivatives do.
LogicalResult extremumGrad(GradientBuilder &gb, bool isMax) {
  Value g = gb.resultGradOrZeros(0);
  Value a = gb.operand(0), b = gb.operand(1);
  Type out = gb.result(0).getType();
  auto boolType = RankedTensorType::get(cast<RankedTensorType>(out).getShape(),
                                        gb.b.getI1Type());
  Value eq = gb.aten("aten::eq.Tensor", {a, b}, boolType);
  Value half = gb.aten("aten::div.Scalar", {g, gb.constFloat(2.0)}, out);
  Value shared = gb.aten("aten::where.self", {eq, half, g}, out);
  Value zero = gb.constFloat(0.0);
  // a loses where a < b (max) or a > b (min); b loses in the other case.
  StringRef aLoses = isMax ? "aten::lt.Tensor" : "aten::gt.Tensor";
  StringRef bLoses = isMax ? "aten::gt.Tensor" : "aten::lt.Tensor";
  if (gb.needsGrad(0)) {
    Value lose = gb.aten(aLoses, {a, b}, boolType);
    gb.setGrad(0, gb.sumToShapeOf(gb.aten("aten::masked_fill.Scalar",
                                          {shared, lose, zero}, out),
                                  a));
  }
  if (gb.needsGrad(1)) {
    Value lose = gb.aten(bLoses, {a, b}, boolType);
    gb.setGrad(1, gb.sumToShapeOf(gb.aten("aten::masked_fill.Scalar",
                                          {shared, lose, zero}, out),
                                  b));
  }
  return success();
}

Value unaryResult(GradientBuilder &gb, StringRef backward, bool useOutput) {
  Value g = gb.resultGradOrZeros(0);
  Value x = useOutput ? gb.result(0) : gb.operand(0);
  return gb.aten(backward, {g, x}, gb.operand(0).getType());
}

} // namespace

void mlir::ds::rules::addElementwiseRules(RuleTable &t) {
  t["aten::add.Tensor"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(0, gb.sumToShapeOf(g, gb.operand(0)));
    if (gb.needsGrad(1))
      gb.setGrad(1,
                 gb.sumToShapeOf(scaleBy(gb, g, gb.operand(2)), gb.operand(1)));
    return success();
  };
  t["aten::sub.Tensor"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(0, gb.sumToShapeOf(g, gb.operand(0)));
    if (gb.needsGrad(1)) {
      Value n =
          gb.aten("aten::neg", {scaleBy(gb, g, gb.operand(2))}, g.getType());
      gb.setGrad(1, gb.sumToShapeOf(n, gb.operand(1)));
    }
    return success();
  };
  auto passThrough = [](GradientBuilder &gb) {
    gb.setGrad(0, gb.resultGradOrZeros(0));
    return success();
  };
  t["aten::add.Scalar"] = passThrough;
  t["aten::sub.Scalar"] = passThrough;
  t["aten::contiguous"] = passThrough;
  t["aten::clone"] = passThrough;
  t["aten::alias"] = passThrough;
  t["aten::lift_fresh_copy"] = passThrough; // torch.export's copy of a constant
  t["aten::rsub.Scalar"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(
        0, gb.aten("aten::neg", {scaleBy(gb, g, gb.operand(2))}, g.getType()));
    return success();
  };
  t["aten::mul.Tensor"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    Type out = gb.result(0).getType();
    if (gb.needsGrad(0))
      gb.setGrad(0, gb.sumToShapeOf(
                        gb.aten("aten::mul.Tensor", {g, gb.operand(1)}, out),
                        gb.operand(0)));
    if (gb.needsGrad(1))
      gb.setGrad(1, gb.sumToShapeOf(
                        gb.aten("aten::mul.Tensor", {g, gb.operand(0)}, out),
                        gb.operand(1)));
    return success();
  };
  t["aten::mul.Scalar"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(0, gb.aten("aten::mul.Scalar", {g, gb.operand(1)}, g.getType()));
    return success();
  };
  t["aten::div.Tensor"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    Type out = gb.result(0).getType();
    if (gb.needsGrad(0))
      gb.setGrad(0, gb.sumToShapeOf(
                        gb.aten("aten::div.Tensor", {g, gb.operand(1)}, out),
                        gb.operand(0)));
    if (gb.needsGrad(1)) {
      // d(a/b)/db = -(a/b)/b
      Value q = gb.aten("aten::div.Tensor", {gb.result(0), gb.operand(1)}, out);
      Value m = gb.aten("aten::mul.Tensor", {g, q}, out);
      Value n = gb.aten("aten::neg", {m}, out);
      gb.setGrad(1, gb.sumToShapeOf(n, gb.operand(1)));
    }
    return success();
  };
  t["aten::div.Scalar"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(0, gb.aten("aten::div.Scalar", {g, gb.operand(1)}, g.getType()));
    return success();
  };
  t["aten::neg"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(0, gb.aten("aten::neg", {g}, g.getType()));
    return success();
  };
  t["aten::pow.Tensor_Scalar"] = [](GradientBuilder &gb) -> LogicalResult {
    Value g = gb.resultGradOrZeros(0);
    auto e = gb.staticFloat(gb.operand(1));
    if (!e)
      return gb.op.emitOpError() << "gradient of pow needs a constant exponent";
    Type type = gb.operand(0).getType();
    Value p = gb.aten("aten::pow.Tensor_Scalar",
                      {gb.operand(0), gb.constFloat(*e - 1.0)}, type);
    Value s = gb.aten("aten::mul.Scalar", {p, gb.constFloat(*e)}, type);
    gb.setGrad(0, gb.aten("aten::mul.Tensor", {g, s}, type));
    return success();
  };
  t["aten::pow.Tensor_Tensor"] = [](GradientBuilder &gb) {
    // d a^e / da = e * a^(e - 1); d a^e / de = a^e * log(a)
    Value g = gb.resultGradOrZeros(0);
    Value a = gb.operand(0), e = gb.operand(1);
    Type out = gb.result(0).getType();
    if (gb.needsGrad(0)) {
      Value em1 = gb.aten("aten::sub.Scalar",
                          {e, gb.constInt(1), gb.constInt(1)}, e.getType());
      Value p = gb.aten("aten::pow.Tensor_Tensor", {a, em1}, out);
      Value d = gb.aten("aten::mul.Tensor", {p, e}, out);
      gb.setGrad(0,
                 gb.sumToShapeOf(gb.aten("aten::mul.Tensor", {g, d}, out), a));
    }
    if (gb.needsGrad(1)) {
      Value la = gb.aten("aten::log", {a}, a.getType());
      Value d = gb.aten("aten::mul.Tensor", {gb.result(0), la}, out);
      gb.setGrad(1,
                 gb.sumToShapeOf(gb.aten("aten::mul.Tensor", {g, d}, out), e));
    }
    return success();
  };
  t["aten::pow.Scalar"] = [](GradientBuilder &gb) -> LogicalResult {
    // s^e: d/de = s^e * log(s)
    auto base = gb.staticFloat(gb.operand(0));
    if (!base)
      return gb.op.emitOpError() << "gradient of pow needs a constant base";
    Value g = gb.resultGradOrZeros(0);
    Type out = gb.result(0).getType();
    Value d = gb.aten("aten::mul.Scalar",
                      {gb.result(0), gb.constFloat(std::log(*base))}, out);
    gb.setGrad(1, gb.aten("aten::mul.Tensor", {g, d}, out));
    return success();
  };
  t["aten::maximum"] = [](GradientBuilder &gb) {
    return extremumGrad(gb, true);
  };
  t["aten::max.other"] = [](GradientBuilder &gb) {
    return extremumGrad(gb, true);
  };
  t["aten::minimum"] = [](GradientBuilder &gb) {
    return extremumGrad(gb, false);
  };
  t["aten::min.other"] = [](GradientBuilder &gb) {
    return extremumGrad(gb, false);
  };
  t["aten::leaky_relu"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(0,
               gb.aten("aten::leaky_relu_backward",
                       {g, gb.operand(0), gb.operand(1), gb.constBool(false)},
                       g.getType()));
    return success();
  };
  t["aten::elu"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(0, gb.aten("aten::elu_backward",
                          {g, gb.operand(1), gb.operand(2), gb.operand(3),
                           gb.constBool(false), gb.operand(0)},
                          g.getType()));
    return success();
  };
  t["aten::softplus"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(0, gb.aten("aten::softplus_backward",
                          {g, gb.operand(0), gb.operand(1), gb.operand(2)},
                          g.getType()));
    return success();
  };
  t["aten::hardtanh"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(0, gb.aten("aten::hardtanh_backward",
                          {g, gb.operand(0), gb.operand(1), gb.operand(2)},
                          g.getType()));
    return success();
  };
  // hardswish / hardsigmoid: their backward kernels take the input alone.
  for (StringRef op : {"hardswish", "hardsigmoid"})
    t[("aten::" + op).str()] = [op = op.str()](GradientBuilder &gb) {
      Value g = gb.resultGradOrZeros(0);
      gb.setGrad(0, gb.aten("aten::" + op + "_backward", {g, gb.operand(0)},
                            g.getType()));
      return success();
    };
  t["aten::abs"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    Value sign = gb.aten("aten::sign", {gb.operand(0)}, g.getType());
    gb.setGrad(0, gb.aten("aten::mul.Tensor", {g, sign}, g.getType()));
    return success();
  };
  t["aten::square"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    Value twice = gb.aten("aten::mul.Scalar",
                          {gb.operand(0), gb.constFloat(2.0)}, g.getType());
    gb.setGrad(0, gb.aten("aten::mul.Tensor", {g, twice}, g.getType()));
    return success();
  };
  t["aten::reciprocal"] = [](GradientBuilder &gb) {
    // d(1/x) = -(1/x)^2
    Value g = gb.resultGradOrZeros(0);
    Type type = g.getType();
    Value sq = gb.aten("aten::mul.Tensor", {gb.result(0), gb.result(0)}, type);
    Value m = gb.aten("aten::mul.Tensor", {g, sq}, type);
    gb.setGrad(0, gb.aten("aten::neg", {m}, type));
    return success();
  };
  t["aten::erf"] = [](GradientBuilder &gb) {
    // d erf(x) = 2 / sqrt(pi) * exp(-x^2)
    Value g = gb.resultGradOrZeros(0);
    Type type = g.getType();
    Value x = gb.operand(0);
    Value sq = gb.aten("aten::mul.Tensor", {x, x}, type);
    Value e = gb.aten("aten::exp", {gb.aten("aten::neg", {sq}, type)}, type);
    Value d = gb.aten("aten::mul.Scalar",
                      {e, gb.constFloat(1.1283791670955126)}, type);
    gb.setGrad(0, gb.aten("aten::mul.Tensor", {g, d}, type));
    return success();
  };
  t["aten::clamp"] = [](GradientBuilder &gb) {
    // The gradient passes where min <= x <= max.
    Value g = gb.resultGradOrZeros(0);
    Value x = gb.operand(0);
    auto xt = cast<RankedTensorType>(x.getType());
    auto maskType = RankedTensorType::get(xt.getShape(), gb.b.getI1Type());
    Value mask;
    if (!isa<ds::NoneType>(gb.operand(1).getType()))
      mask = gb.aten("aten::ge.Scalar", {x, gb.operand(1)}, maskType);
    if (!isa<ds::NoneType>(gb.operand(2).getType())) {
      Value le = gb.aten("aten::le.Scalar", {x, gb.operand(2)}, maskType);
      mask = mask ? gb.aten("aten::logical_and", {mask, le}, maskType) : le;
    }
    if (!mask) {
      gb.setGrad(0, g);
      return success();
    }
    gb.setGrad(0, gb.aten("aten::where.ScalarOther",
                          {mask, g, gb.constFloat(0.0)}, g.getType()));
    return success();
  };
  // clamp_min(x, lo) / clamp_max(x, hi) with a Scalar bound: the gradient
  // passes where the bound did not apply (x >= lo, x <= hi), as for clamp.
  auto oneSidedClamp = [](StringRef keep) {
    return [keep](GradientBuilder &gb) {
      Value g = gb.resultGradOrZeros(0);
      Value x = gb.operand(0);
      auto maskType = cast<RankedTensorType>(x.getType()).clone(gb.b.getI1Type());
      Value mask = gb.aten(keep, {x, gb.operand(1)}, maskType);
      gb.setGrad(0, gb.aten("aten::where.ScalarOther",
                            {mask, g, gb.constFloat(0.0)}, g.getType()));
      return success();
    };
  };
  t["aten::clamp_min"] = oneSidedClamp("aten::ge.Scalar");
  t["aten::clamp_max"] = oneSidedClamp("aten::le.Scalar");
  // amax / amin over dims: the gradient is shared evenly among the extrema
  // of each reduced slice (autograd's scale_grad_by_count).
  auto extremeOverDims = [](GradientBuilder &gb) -> LogicalResult {
    FailureOr<ReducedDims> r = reducedDims(gb);
    if (failed(r))
      return failure();
    Value a = gb.operand(0);
    auto at = cast<RankedTensorType>(a.getType());
    Value result = r->restore(gb, gb.result(0));
    Value gk = r->restore(gb, gb.resultGradOrZeros(0));
    auto maskType = RankedTensorType::get(at.getShape(), gb.b.getI1Type());
    Value mask = gb.aten("aten::eq.Tensor", {a, result}, maskType);
    Value f = gb.constBool(false);
    Value maskF = gb.aten(
        "aten::to.dtype",
        {mask, gb.constInt(scalarTypeCode(at.getElementType())), f, f, gb.none()},
        at);
    Value count = gb.aten("aten::sum.dim_IntList",
                          {maskF, gb.intList(r->dims), gb.constBool(true), gb.none()},
                          r->keptType);
    Value share = gb.aten("aten::div.Tensor", {gk, count}, r->keptType);
    gb.setGrad(0, gb.aten("aten::mul.Tensor", {maskF, share}, at));
    return success();
  };
  // logsumexp over dims: g * exp(x - result), as autograd's logsumexp_backward.
  t["aten::logsumexp"] = [](GradientBuilder &gb) -> LogicalResult {
    FailureOr<ReducedDims> r = reducedDims(gb);
    if (failed(r))
      return failure();
    Value a = gb.operand(0);
    Value result = r->restore(gb, gb.result(0));
    Value gk = r->restore(gb, gb.resultGradOrZeros(0));
    Value centred =
        gb.aten("aten::sub.Tensor", {a, result, gb.constInt(1)}, a.getType());
    Value weights = gb.aten("aten::exp", {centred}, a.getType());
    gb.setGrad(0, gb.aten("aten::mul.Tensor", {gk, weights}, a.getType()));
    return success();
  };
  t["aten::amax"] = extremeOverDims;
  t["aten::amin"] = extremeOverDims;
  t["aten::max"] = [](GradientBuilder &gb) {
    // Full reduction: the gradient is shared evenly among the maxima.
    Value g = gb.resultGradOrZeros(0);
    Value a = gb.operand(0);
    auto at = cast<RankedTensorType>(a.getType());
    auto maskType = RankedTensorType::get(at.getShape(), gb.b.getI1Type());
    Value mask = gb.aten("aten::eq.Tensor", {a, gb.result(0)}, maskType);
    Value f = gb.constBool(false);
    Value maskF =
        gb.aten("aten::to.dtype",
                {mask, gb.constInt(scalarTypeCode(at.getElementType())), f, f,
                 gb.none()},
                at);
    Value count = gb.aten("aten::sum", {maskF, gb.none()}, g.getType());
    Value share = gb.aten("aten::div.Tensor", {g, count}, g.getType());
    gb.setGrad(0, gb.aten("aten::mul.Tensor", {maskF, share}, at));
    return success();
  };
  t["aten::sqrt"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    Type type = g.getType();
    Value twice =
        gb.aten("aten::mul.Scalar", {gb.result(0), gb.constFloat(2.0)}, type);
    gb.setGrad(0, gb.aten("aten::div.Tensor", {g, twice}, type));
    return success();
  };
  t["aten::rsqrt"] = [](GradientBuilder &gb) {
    // d rsqrt(x) = -0.5 * rsqrt(x)^3
    Value g = gb.resultGradOrZeros(0);
    Type type = g.getType();
    Value cube = gb.aten("aten::pow.Tensor_Scalar",
                         {gb.result(0), gb.constFloat(3.0)}, type);
    Value s = gb.aten("aten::mul.Scalar", {cube, gb.constFloat(-0.5)}, type);
    gb.setGrad(0, gb.aten("aten::mul.Tensor", {g, s}, type));
    return success();
  };
  t["aten::exp"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(0, gb.aten("aten::mul.Tensor", {g, gb.result(0)}, g.getType()));
    return success();
  };
  t["aten::expm1"] = [](GradientBuilder &gb) {
    // d/dx (e^x - 1) = e^x = result + 1, as autograd computes it.
    Value g = gb.resultGradOrZeros(0);
    Value e = gb.aten("aten::add.Scalar",
                      {gb.result(0), gb.constFloat(1.0), gb.constInt(1)},
                      g.getType());
    gb.setGrad(0, gb.aten("aten::mul.Tensor", {g, e}, g.getType()));
    return success();
  };
  t["aten::log1p"] = [](GradientBuilder &gb) {
    // g / (1 + x), as autograd computes it.
    Value g = gb.resultGradOrZeros(0);
    Value x = gb.operand(0);
    Value plus = gb.aten("aten::add.Scalar",
                         {x, gb.constFloat(1.0), gb.constInt(1)}, x.getType());
    gb.setGrad(0, gb.aten("aten::div.Tensor", {g, plus}, g.getType()));
    return success();
  };
  t["aten::log"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(0, gb.aten("aten::div.Tensor", {g, gb.operand(0)}, g.getType()));
    return success();
  };
  t["aten::relu"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(0, gb.aten("aten::threshold_backward",
                          {g, gb.result(0), gb.constInt(0)}, g.getType()));
    return success();
  };
  t["aten::gelu"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(0, gb.aten("aten::gelu_backward",
                          {g, gb.operand(0), gb.operand(1)}, g.getType()));
    return success();
  };
  t["aten::silu"] = [](GradientBuilder &gb) {
    gb.setGrad(0, unaryResult(gb, "aten::silu_backward", false));
    return success();
  };
  t["aten::tanh"] = [](GradientBuilder &gb) {
    gb.setGrad(0, unaryResult(gb, "aten::tanh_backward", true));
    return success();
  };
  t["aten::sigmoid"] = [](GradientBuilder &gb) {
    gb.setGrad(0, unaryResult(gb, "aten::sigmoid_backward", true));
    return success();
  };
  // Trigonometric and hyperbolic functions and their inverses, and logs of
  // other bases: g times the derivative, built from x (or the result y).
  auto times = [](GradientBuilder &gb, Value d) {
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(0, gb.aten("aten::mul.Tensor", {g, d}, g.getType()));
    return success();
  };
  auto unary = [](GradientBuilder &gb, StringRef name, Value v) {
    return gb.aten(name, {v}, v.getType());
  };
  /// 1 - x^2 (sign -1) or x^2 + s (s = 1, -1): the radicands of the inverses.
  auto squarePlus = [](GradientBuilder &gb, Value x, double s, bool negate) {
    Type type = x.getType();
    Value sq = gb.aten("aten::mul.Tensor", {x, x}, type);
    if (negate)
      return gb.aten("aten::rsub.Scalar", {sq, gb.constFloat(s), gb.constInt(1)},
                     type);
    return gb.aten("aten::add.Scalar", {sq, gb.constFloat(s), gb.constInt(1)},
                   type);
  };
  t["aten::sin"] = [=](GradientBuilder &gb) {
    return times(gb, unary(gb, "aten::cos", gb.operand(0)));
  };
  t["aten::cos"] = [=](GradientBuilder &gb) {
    Value s = unary(gb, "aten::sin", gb.operand(0));
    return times(gb, unary(gb, "aten::neg", s));
  };
  t["aten::tan"] = [=](GradientBuilder &gb) { // 1 + tan(x)^2
    return times(gb, squarePlus(gb, gb.result(0), 1.0, false));
  };
  t["aten::sinh"] = [=](GradientBuilder &gb) {
    return times(gb, unary(gb, "aten::cosh", gb.operand(0)));
  };
  t["aten::cosh"] = [=](GradientBuilder &gb) {
    return times(gb, unary(gb, "aten::sinh", gb.operand(0)));
  };
  t["aten::asin"] = [=](GradientBuilder &gb) { // 1 / sqrt(1 - x^2)
    return times(gb, unary(gb, "aten::rsqrt",
                           squarePlus(gb, gb.operand(0), 1.0, true)));
  };
  t["aten::acos"] = [=](GradientBuilder &gb) { // -1 / sqrt(1 - x^2)
    Value r =
        unary(gb, "aten::rsqrt", squarePlus(gb, gb.operand(0), 1.0, true));
    return times(gb, unary(gb, "aten::neg", r));
  };
  t["aten::atan"] = [=](GradientBuilder &gb) { // 1 / (1 + x^2)
    return times(gb, unary(gb, "aten::reciprocal",
                           squarePlus(gb, gb.operand(0), 1.0, false)));
  };
  t["aten::asinh"] = [=](GradientBuilder &gb) { // 1 / sqrt(x^2 + 1)
    return times(gb, unary(gb, "aten::rsqrt",
                           squarePlus(gb, gb.operand(0), 1.0, false)));
  };
  t["aten::acosh"] = [=](GradientBuilder &gb) { // 1 / sqrt(x^2 - 1)
    return times(gb, unary(gb, "aten::rsqrt",
                           squarePlus(gb, gb.operand(0), -1.0, false)));
  };
  t["aten::atanh"] = [=](GradientBuilder &gb) { // 1 / (1 - x^2)
    return times(gb, unary(gb, "aten::reciprocal",
                           squarePlus(gb, gb.operand(0), 1.0, true)));
  };
  auto logBase = [=](double lnBase) {
    return [=](GradientBuilder &gb) { // 1 / (x ln b)
      Value x = gb.operand(0);
      Value xl = gb.aten("aten::mul.Scalar", {x, gb.constFloat(lnBase)},
                         x.getType());
      return times(gb, unary(gb, "aten::reciprocal", xl));
    };
  };
  t["aten::log2"] = logBase(std::log(2.0));
  t["aten::log10"] = logBase(std::log(10.0));
  t["aten::atan2"] = [](GradientBuilder &gb) {
    // atan2(a, b): da = b / (a^2 + b^2), db = -a / (a^2 + b^2).
    Value g = gb.resultGradOrZeros(0);
    Value a = gb.operand(0), b = gb.operand(1);
    Type out = g.getType();
    Value a2 = gb.aten("aten::mul.Tensor", {a, a}, a.getType());
    Value b2 = gb.aten("aten::mul.Tensor", {b, b}, b.getType());
    Value r2 = gb.aten("aten::add.Tensor", {a2, b2, gb.constInt(1)}, out);
    Value gOver = gb.aten("aten::div.Tensor", {g, r2}, out);
    if (gb.needsGrad(0))
      gb.setGrad(0, gb.sumToShapeOf(
                        gb.aten("aten::mul.Tensor", {gOver, b}, out), a));
    if (gb.needsGrad(1)) {
      Value m = gb.aten("aten::mul.Tensor", {gOver, a}, out);
      gb.setGrad(1, gb.sumToShapeOf(gb.aten("aten::neg", {m}, out), b));
    }
    return success();
  };
  t["aten::log_sigmoid"] = [=](GradientBuilder &gb) { // sigmoid(-x)
    Value x = gb.operand(0);
    return times(gb, unary(gb, "aten::sigmoid", unary(gb, "aten::neg", x)));
  };
  auto softmaxLike = [](StringRef backward) {
    return [backward](GradientBuilder &gb) -> LogicalResult {
      Value g = gb.resultGradOrZeros(0);
      // softmax(x, dim, dtype=) is x.to(dtype) then softmax (as autograd
      // sees it): the backward runs in the result's dtype and its gradient
      // is cast back to x's.
      Type resultElem = elementOf(gb.result(0));
      Value code = gb.constInt(scalarTypeCode(resultElem));
      Value gx = gb.aten(backward, {g, gb.result(0), gb.operand(1), code},
                         gb.result(0).getType());
      gb.setGrad(0, castTo(gb, gx, elementOf(gb.operand(0))));
      return success();
    };
  };
  t["aten::softmax.int"] = softmaxLike("aten::_softmax_backward_data");
  t["aten::log_softmax.int"] = softmaxLike("aten::_log_softmax_backward_data");
  // Core ATen's spellings: (self, dim, half_to_float).
  t["aten::_softmax"] = softmaxLike("aten::_softmax_backward_data");
  // softmax whose rows of -inf give zeros (attention's math path): autograd
  // differentiates it as softmax.
  t["aten::_safe_softmax"] = softmaxLike("aten::_softmax_backward_data");
  t["aten::_log_softmax"] = softmaxLike("aten::_log_softmax_backward_data");
  t["aten::masked_fill.Scalar"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(0,
               gb.sumToShapeOf(gb.aten("aten::masked_fill.Scalar",
                                       {g, gb.operand(1), gb.constFloat(0.0)},
                                       g.getType()),
                               gb.operand(0)));
    return success();
  };
  // masked_fill(x, mask, value) with a 0-dim tensor value: x's gradient as
  // for a Scalar value; the value's is the sum of g where the mask is set.
  t["aten::masked_fill.Tensor"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    Value mask = gb.operand(1), value = gb.operand(2);
    if (gb.needsGrad(0))
      gb.setGrad(0, gb.sumToShapeOf(
                        gb.aten("aten::masked_fill.Scalar",
                                {g, mask, gb.constFloat(0.0)}, g.getType()),
                        gb.operand(0)));
    if (gb.needsGrad(2)) {
      Value kept = gb.aten("aten::where.ScalarOther",
                           {mask, g, gb.constFloat(0.0)}, g.getType());
      Value sum = gb.aten("aten::sum", {kept, gb.none()},
                          RankedTensorType::get({}, elementOf(g)));
      gb.setGrad(2, castTo(gb, sum, elementOf(value)));
    }
    return success();
  };
  // where(cond, x, scalar) / where(cond, scalar, x): x's gradient where it
  // was chosen.
  t["aten::where.ScalarOther"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(1, gb.sumToShapeOf(gb.aten("aten::where.ScalarOther",
                                          {gb.operand(0), g, gb.constFloat(0.0)},
                                          g.getType()),
                                  gb.operand(1)));
    return success();
  };
  t["aten::where.ScalarSelf"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(2, gb.sumToShapeOf(gb.aten("aten::where.ScalarSelf",
                                          {gb.operand(0), gb.constFloat(0.0), g},
                                          g.getType()),
                                  gb.operand(2)));
    return success();
  };
  // tril / triu keep a triangle: the gradient is the same triangle of g.
  for (StringRef name : {"aten::tril", "aten::triu"})
    t[name] = [name](GradientBuilder &gb) {
      Value g = gb.resultGradOrZeros(0);
      gb.setGrad(0, gb.aten(name, {g, gb.operand(1)}, gb.operand(0).getType()));
      return success();
    };
  t["aten::where.self"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    Value zero = gb.constFloat(0.0);
    if (gb.needsGrad(1))
      gb.setGrad(1,
                 gb.sumToShapeOf(gb.aten("aten::where.ScalarOther",
                                         {gb.operand(0), g, zero}, g.getType()),
                                 gb.operand(1)));
    if (gb.needsGrad(2))
      gb.setGrad(2,
                 gb.sumToShapeOf(gb.aten("aten::where.ScalarSelf",
                                         {gb.operand(0), zero, g}, g.getType()),
                                 gb.operand(2)));
    return success();
  };
  t["aten::to.dtype"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    Value code = gb.constInt(scalarTypeCode(elementOf(gb.operand(0))));
    Value f = gb.constBool(false);
    gb.setGrad(0, gb.aten("aten::to.dtype", {g, code, f, f, gb.none()},
                          gb.operand(0).getType()));
    return success();
  };
  // _to_copy(x, dtype?, ...) (core ATen's x.to(...)): back to x's dtype.
  t["aten::_to_copy"] = [](GradientBuilder &gb) {
    gb.setGrad(0, castTo(gb, gb.resultGradOrZeros(0), elementOf(gb.operand(0))));
    return success();
  };
  // copy(self, src): every element comes from src (broadcast to self's shape
  // and cast to its dtype); self's values are overwritten.
  t["aten::copy"] = [](GradientBuilder &gb) {
    Value src = gb.operand(1);
    gb.setGrad(1, gb.sumToShapeOf(
                      castTo(gb, gb.resultGradOrZeros(0), elementOf(src)), src));
    return success();
  };
  // type_as(self, other) is self.to(other.dtype): the gradient goes back to
  // self's dtype; `other` only lends its dtype.
  t["aten::type_as"] = [](GradientBuilder &gb) {
    gb.setGrad(0, castTo(gb, gb.resultGradOrZeros(0), elementOf(gb.operand(0))));
    return success();
  };
  t["aten::native_dropout"] = [](GradientBuilder &gb) -> LogicalResult {
    auto p = gb.staticFloat(gb.operand(1));
    if (!p)
      return gb.op.emitOpError() << "gradient of dropout needs a constant p";
    Value g = gb.resultGradOrZeros(0);
    double scale = *p >= 1.0 ? 0.0 : 1.0 / (1.0 - *p);
    gb.setGrad(0,
               gb.aten("aten::native_dropout_backward",
                       {g, gb.result(1), gb.constFloat(scale)}, g.getType()));
    return success();
  };
  t["aten::dropout"] = [](GradientBuilder &gb) -> LogicalResult {
    auto p = gb.staticFloat(gb.operand(1));
    auto c = gb.operand(2).getDefiningOp<ConstantOp>();
    bool train = !c || cast<IntegerAttr>(c.getValue()).getInt() != 0;
    if (!train || (p && *p == 0.0)) {
      gb.setGrad(0, gb.resultGradOrZeros(0));
      return success();
    }
    return gb.op.emitOpError()
           << "gradient of training-mode dropout needs its mask: run "
              "-ds-lower-dropout first (for a p that is a constant in (0, 1))";
  };
}
