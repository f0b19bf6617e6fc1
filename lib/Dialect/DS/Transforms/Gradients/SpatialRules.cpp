//===- SpatialRules.cpp - gradients of pools, pads, resampling, fold ------===//
//
// Operators over the spatial dims of [N, C, *spatial] inputs. Each gradient
// is ATen's own backward kernel for the op, the one autograd calls
// (derivatives.yaml), with the forward's arguments.
//
//===----------------------------------------------------------------------===//

#include "RuleHelpers.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

namespace {

/// grad = backward(g, x, operands 1..n-1): the kernels whose arguments are
/// the forward's (avg pools, reflection and replication pads).
GradientRule withForwardArgs(std::string backward) {
  return [backward](GradientBuilder &gb) -> LogicalResult {
    Value x = gb.operand(0);
    SmallVector<Value> args = {gb.resultGradOrZeros(0), x};
    for (unsigned i = 1, e = gb.op.getArgs().size(); i < e; ++i)
      args.push_back(gb.operand(i));
    gb.setGrad(0, gb.aten(backward, args, x.getType()));
    return success();
  };
}

/// max_pool{2,3}d_with_indices: the backward takes the forward's arguments
/// and its indices (result #1).
GradientRule maxPoolWithIndices(StringRef backward) {
  return [backward](GradientBuilder &gb) -> LogicalResult {
    if (failed(refuseResultGrads(gb, 1, "max pooling's indices")))
      return failure();
    Value x = gb.operand(0);
    SmallVector<Value> args = {gb.resultGradOrZeros(0), x};
    for (unsigned i = 1; i <= 5; ++i)
      args.push_back(gb.operand(i));
    args.push_back(gb.result(1));
    gb.setGrad(0, gb.aten(backward, args, x.getType()));
    return success();
  };
}

/// max_pool{2,3}d (no indices): recompute them with *_with_indices.
GradientRule maxPool(StringRef withIndices, StringRef backward) {
  return [withIndices, backward](GradientBuilder &gb) -> LogicalResult {
    Value x = gb.operand(0);
    auto out = cast<RankedTensorType>(gb.result(0).getType());
    auto idxType = out.clone(gb.b.getI64Type());
    SmallVector<Value> fwdArgs = {x};
    for (unsigned i = 1; i <= 5; ++i)
      fwdArgs.push_back(gb.operand(i));
    auto fwd = gb.atenN(withIndices, fwdArgs, {out, idxType});
    SmallVector<Value> args = {gb.resultGradOrZeros(0), x};
    for (unsigned i = 1; i <= 5; ++i)
      args.push_back(gb.operand(i));
    args.push_back(fwd[1]);
    gb.setGrad(0, gb.aten(backward, args, x.getType()));
    return success();
  };
}

/// grad = backward(g, x): the adaptive average pools.
GradientRule adaptiveAvgPool(StringRef backward) {
  return [backward](GradientBuilder &gb) -> LogicalResult {
    Value x = gb.operand(0);
    gb.setGrad(0, gb.aten(backward, {gb.resultGradOrZeros(0), x},
                          x.getType()));
    return success();
  };
}

/// The scale factors of an upsample's `.vec` overload: the elements of a
/// constant list, or two Nones (the output size decides).
SmallVector<Value> scales(GradientBuilder &gb, unsigned operand) {
  if (isa<ds::NoneType>(gb.operand(operand).getType()))
    return {gb.none(), gb.none()};
  ArrayRef<Value> elems = gb.listOperand(operand);
  return SmallVector<Value>(elems.begin(), elems.end());
}

/// upsample_{nearest,bilinear}2d[.vec]: the backward wants the output's and
/// the input's sizes and the scales the forward used.
GradientRule upsample2d(StringRef backward, bool bilinear, bool vec) {
  return [backward, bilinear, vec](GradientBuilder &gb) -> LogicalResult {
    Value x = gb.operand(0);
    auto xt = cast<RankedTensorType>(x.getType());
    auto out = cast<RankedTensorType>(gb.result(0).getType());
    if (!xt.hasStaticShape() || !out.hasStaticShape())
      return gb.op.emitOpError()
             << "gradient of upsampling needs static input and output sizes";
    SmallVector<Value> args = {gb.resultGradOrZeros(0),
                               gb.intList(out.getShape().take_back(2)),
                               gb.intList(xt.getShape())};
    if (bilinear)
      args.push_back(gb.operand(2)); // align_corners
    unsigned first = bilinear ? 3 : 2;
    if (vec) {
      SmallVector<Value> s = scales(gb, first);
      if (s.size() != 2)
        return gb.op.emitOpError()
               << "gradient of upsampling needs two constant scale factors";
      args.append(s);
    } else {
      args.push_back(gb.operand(first));
      args.push_back(gb.operand(first + 1));
    }
    gb.setGrad(0, gb.aten(backward, args, xt));
    return success();
  };
}

} // namespace

void mlir::ds::rules::addSpatialRules(RuleTable &t) {
  t["aten::max_pool2d"] = maxPool("aten::max_pool2d_with_indices",
                                  "aten::max_pool2d_with_indices_backward");
  t["aten::max_pool3d"] = maxPool("aten::max_pool3d_with_indices",
                                  "aten::max_pool3d_with_indices_backward");
  t["aten::max_pool2d_with_indices"] =
      maxPoolWithIndices("aten::max_pool2d_with_indices_backward");
  t["aten::max_pool3d_with_indices"] =
      maxPoolWithIndices("aten::max_pool3d_with_indices_backward");
  t["aten::avg_pool2d"] = withForwardArgs("aten::avg_pool2d_backward");
  t["aten::avg_pool3d"] = withForwardArgs("aten::avg_pool3d_backward");
  for (StringRef name :
       {"aten::adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d"})
    t[name] = adaptiveAvgPool("aten::_adaptive_avg_pool2d_backward");
  for (StringRef name :
       {"aten::adaptive_avg_pool3d", "aten::_adaptive_avg_pool3d"})
    t[name] = adaptiveAvgPool("aten::_adaptive_avg_pool3d_backward");
  // adaptive_avg_pool1d(x, [L]) is the 2-D pool of x with a height of 1 (as
  // LibTorch computes it): its gradient through the 2-D pool's backward.
  t["aten::adaptive_avg_pool1d"] = [](GradientBuilder &gb) -> LogicalResult {
    Value x = gb.operand(0), g = gb.resultGradOrZeros(0);
    auto unsqueezed = [&](Value v) {
      auto type = cast<RankedTensorType>(v.getType());
      SmallVector<int64_t> shape(type.getShape());
      shape.insert(shape.end() - 1, 1);
      return gb.aten("aten::unsqueeze", {v, gb.constInt(-2)},
                     RankedTensorType::get(shape, type.getElementType()));
    };
    Value x2 = unsqueezed(x);
    Value gx = gb.aten("aten::_adaptive_avg_pool2d_backward",
                       {unsqueezed(g), x2}, x2.getType());
    gb.setGrad(0, gb.aten("aten::squeeze.dim", {gx, gb.constInt(-2)},
                          x.getType()));
    return success();
  };
  for (StringRef kind : {"reflection", "replication"})
    for (StringRef dims : {"1d", "2d", "3d"}) {
      std::string name = ("aten::" + kind + "_pad" + dims).str();
      t[name] = withForwardArgs(name + "_backward");
    }
  t["aten::upsample_nearest2d"] =
      upsample2d("aten::upsample_nearest2d_backward", false, false);
  t["aten::upsample_nearest2d.vec"] =
      upsample2d("aten::upsample_nearest2d_backward", false, true);
  t["aten::upsample_bilinear2d"] =
      upsample2d("aten::upsample_bilinear2d_backward", true, false);
  t["aten::upsample_bilinear2d.vec"] =
      upsample2d("aten::upsample_bilinear2d_backward", true, true);
  // grid_sampler(input, grid, mode, padding_mode, align_corners): both the
  // input and the sampling grid get a gradient (grid_sampler_2d_backward).
  auto gridSampler = [](GradientBuilder &gb) -> LogicalResult {
    Value x = gb.operand(0), grid = gb.operand(1);
    if (rankOf(x) != 4)
      return gb.op.emitOpError()
             << "gradient of grid_sampler supports 4-D inputs only";
    auto grads = gb.atenN(
        "aten::grid_sampler_2d_backward",
        {gb.resultGradOrZeros(0), x, grid, gb.operand(2), gb.operand(3),
         gb.operand(4), gb.boolList({gb.needsGrad(0), gb.needsGrad(1)})},
        {x.getType(), grid.getType()});
    for (unsigned i = 0; i < 2; ++i)
      if (gb.needsGrad(i))
        gb.setGrad(i, grads[i]);
    return success();
  };
  t["aten::grid_sampler"] = gridSampler;
  t["aten::grid_sampler_2d"] = gridSampler;
  // fold (col2im) and unfold (im2col) are each other's adjoints.
  t["aten::col2im"] = [](GradientBuilder &gb) -> LogicalResult {
    // col2im(x, output_size, kernel, dilation, padding, stride)
    Value x = gb.operand(0);
    gb.setGrad(0, gb.aten("aten::im2col",
                          {gb.resultGradOrZeros(0), gb.operand(2),
                           gb.operand(3), gb.operand(4), gb.operand(5)},
                          x.getType()));
    return success();
  };
  t["aten::im2col"] = [](GradientBuilder &gb) -> LogicalResult {
    // im2col(x, kernel, dilation, padding, stride)
    Value x = gb.operand(0);
    auto xt = cast<RankedTensorType>(x.getType());
    if (xt.isDynamicDim(xt.getRank() - 1) || xt.isDynamicDim(xt.getRank() - 2))
      return gb.op.emitOpError()
             << "gradient of im2col needs static spatial sizes";
    gb.setGrad(0, gb.aten("aten::col2im",
                          {gb.resultGradOrZeros(0),
                           gb.intList(xt.getShape().take_back(2)),
                           gb.operand(1), gb.operand(2), gb.operand(3),
                           gb.operand(4)},
                          xt));
    return success();
  };
}
