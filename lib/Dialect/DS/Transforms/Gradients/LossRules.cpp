//===- LossRules.cpp - gradients of the loss functions --------------------===//

#include "RuleHelpers.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

namespace {

/// Backward of nll_loss on log-probabilities `logp` ([N, C] or [N, C, ...]).
Value nllBackward(GradientBuilder &gb, Value g, Value logp, Value target,
                  Value weight, Value reduction, Value ignoreIndex) {
  bool spatial = rankOf(logp) == 4;
  StringRef fwdName =
      spatial ? "aten::nll_loss2d_forward" : "aten::nll_loss_forward";
  StringRef bwdName =
      spatial ? "aten::nll_loss2d_backward" : "aten::nll_loss_backward";
  auto scalar = RankedTensorType::get({}, elementOf(logp));
  auto fwd = gb.atenN(fwdName, {logp, target, weight, reduction, ignoreIndex},
                      {g.getType(), scalar});
  return gb.aten(bwdName,
                 {g, logp, target, weight, reduction, ignoreIndex, fwd[1]},
                 logp.getType());
}

} // namespace

void mlir::ds::rules::addLossRules(RuleTable &t) {
  t["aten::mse_loss"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    Value x = gb.operand(0), y = gb.operand(1);
    Value gx = gb.aten("aten::mse_loss_backward", {g, x, y, gb.operand(2)},
                       x.getType());
    if (gb.needsGrad(0))
      gb.setGrad(0, gx);
    if (gb.needsGrad(1))
      gb.setGrad(1, gb.aten("aten::neg", {gx}, y.getType()));
    return success();
  };
  t["aten::nll_loss_nd"] = [](GradientBuilder &gb) -> LogicalResult {
    Value logp = gb.operand(0);
    if (rankOf(logp) != 2 && rankOf(logp) != 4)
      return gb.op.emitOpError()
             << "gradient of nll_loss supports [N, C] and [N, C, H, W] inputs";
    gb.setGrad(0, nllBackward(gb, gb.resultGradOrZeros(0), logp, gb.operand(1),
                              gb.operand(2), gb.operand(3), gb.operand(4)));
    return success();
  };
  t["aten::cross_entropy_loss"] = [](GradientBuilder &gb) -> LogicalResult {
    // cross_entropy_loss(x, target, weight, reduction, ignore_index,
    //                    label_smoothing) == nll_loss(log_softmax(x, 1), ...)
    Value x = gb.operand(0);
    auto smoothing = gb.staticFloat(gb.operand(5));
    auto reduction = gb.staticInt(gb.operand(3));
    if (!smoothing || !reduction)
      return gb.op.emitOpError() << "gradient of cross_entropy needs constant "
                                    "label_smoothing and reduction";
    if (*smoothing != 0.0 &&
        (rankOf(x) != 2 || !isa<ds::NoneType>(gb.operand(2).getType()) ||
         *reduction == 0))
      return gb.op.emitOpError()
             << "gradient of cross_entropy with label smoothing is supported "
                "for [N, C] inputs without class weights and with a mean or "
                "sum reduction";
    if (rankOf(x) < 2 || rankOf(x) > 4)
      return gb.op.emitOpError() << "gradient of cross_entropy supports "
                                    "[N, C], [N, C, T] and [N, C, H, W] inputs";
    Value one = gb.constInt(1);
    Value logp =
        gb.aten("aten::log_softmax.int", {x, one, gb.none()}, x.getType());
    Value target = gb.operand(1);
    Value nllInput = logp;
    if (rankOf(x) == 3) {
      // [N, C, T] as [N, C, T, 1], as ATen's nll_loss_nd does.
      auto xt = cast<RankedTensorType>(x.getType());
      auto tt = cast<RankedTensorType>(target.getType());
      SmallVector<int64_t> xs(xt.getShape()), ts(tt.getShape());
      xs.push_back(1);
      ts.push_back(1);
      nllInput = gb.aten("aten::unsqueeze", {logp, gb.constInt(3)},
                         RankedTensorType::get(xs, xt.getElementType()));
      target = gb.aten("aten::unsqueeze", {target, gb.constInt(2)},
                       RankedTensorType::get(ts, tt.getElementType()));
    }
    Value gl = nllBackward(gb, gb.resultGradOrZeros(0), nllInput, target,
                           gb.operand(2), gb.operand(3), gb.operand(4));
    if (rankOf(x) == 3)
      gl = gb.aten("aten::squeeze.dim", {gl, gb.constInt(3)}, x.getType());
    if (*smoothing != 0.0) {
      // loss = (1 - e) * nll + e / C * smooth, smooth = -sum_c logp over the
      // rows whose target is not ignore_index (mean: divided by their count).
      auto xt = cast<RankedTensorType>(x.getType());
      Type elem = xt.getElementType();
      Value g = gb.resultGradOrZeros(0);
      gl = gb.aten("aten::mul.Scalar", {gl, gb.constFloat(1.0 - *smoothing)},
                   x.getType());
      auto tt = cast<RankedTensorType>(gb.operand(1).getType());
      auto rowsBool = RankedTensorType::get(tt.getShape(), gb.b.getI1Type());
      auto rows = RankedTensorType::get(tt.getShape(), elem);
      Value keep =
          gb.aten("aten::ne.Scalar", {gb.operand(1), gb.operand(4)}, rowsBool);
      Value f = gb.constBool(false);
      Value keepF = gb.aten(
          "aten::to.dtype",
          {keep, gb.constInt(scalarTypeCode(elem)), f, f, gb.none()}, rows);
      Value scale = gb.aten("aten::mul.Scalar",
                            {g, gb.constFloat(-*smoothing / xt.getDimSize(1))},
                            g.getType());
      if (*reduction == 1) {
        Value count = gb.aten("aten::sum", {keepF, gb.none()}, g.getType());
        scale = gb.aten("aten::div.Tensor", {scale, count}, g.getType());
      }
      Value perRow = gb.aten("aten::mul.Tensor", {keepF, scale}, rows);
      SmallVector<int64_t> colShape(tt.getShape());
      colShape.push_back(1);
      Value col = gb.aten("aten::unsqueeze", {perRow, gb.constInt(1)},
                          RankedTensorType::get(colShape, elem));
      Value smooth = gb.aten("aten::expand_as", {col, x}, x.getType());
      gl = gb.aten("aten::add.Tensor", {gl, smooth, gb.constInt(1)},
                   x.getType());
    }
    Value code = gb.constInt(scalarTypeCode(elementOf(x)));
    gb.setGrad(0, gb.aten("aten::_log_softmax_backward_data",
                          {gl, logp, one, code}, x.getType()));
    return success();
  };
  t["aten::kl_div"] = [](GradientBuilder &gb) -> LogicalResult {
    // kl_div(input, target, reduction, log_target): pointwise
    //   target * (log(target) - input)        (log_target false)
    //   exp(target) * (target - input)        (log_target true)
    Value g = gb.resultGradOrZeros(0);
    Value input = gb.operand(0), target = gb.operand(1);
    auto reduction = gb.staticInt(gb.operand(2));
    auto logTarget = gb.staticInt(gb.operand(3));
    if (!reduction || !logTarget)
      return gb.op.emitOpError()
             << "gradient of kl_div needs constant reduction and log_target";
    Type type = input.getType();
    // The upstream gradient, per element.
    Value ge = gb.aten("aten::expand_as", {g, input}, type);
    if (*reduction == 1) // mean
      ge = gb.aten("aten::div.Scalar",
                   {ge, gb.aten("aten::numel", {input}, gb.b.getI64Type())},
                   type);
    Value p = *logTarget ? gb.aten("aten::exp", {target}, type) : target;
    if (gb.needsGrad(0)) {
      Value m = gb.aten("aten::mul.Tensor", {ge, p}, type);
      gb.setGrad(0, gb.aten("aten::neg", {m}, type));
    }
    if (gb.needsGrad(1)) {
      // d/dt: log(t) + 1 - input  (or exp(t) * (t + 1 - input) for log_target)
      Value base = *logTarget ? target : gb.aten("aten::log", {target}, type);
      Value diff =
          gb.aten("aten::sub.Tensor", {base, input, gb.constInt(1)}, type);
      Value plus = gb.aten("aten::add.Scalar",
                           {diff, gb.constFloat(1.0), gb.constInt(1)}, type);
      Value d =
          *logTarget ? gb.aten("aten::mul.Tensor", {p, plus}, type) : plus;
      gb.setGrad(1, gb.aten("aten::mul.Tensor", {ge, d}, target.getType()));
    }
    return success();
  };
}
