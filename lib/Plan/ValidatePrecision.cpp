//===- ValidatePrecision.cpp - An engine's mixed precision ----------------===//
//
// docs/plan-format.md, "Mixed precision": the mode against the dtypes of the
// engine's state, the master and gradient dtypes, and the loss scaler.
//
//===----------------------------------------------------------------------===//

#include "PlanValidator.h"

namespace ds::plan::detail {

void PlanValidator::checkPrecision(const EngineDesc &engine,
                                   const PrecisionDesc &precision,
                                   const std::string &where) const {
  const std::string mode = precisionModeName(precision.mode);
  DType expected = precision.mode == PrecisionMode::BF16   ? DType::BFloat16
                   : precision.mode == PrecisionMode::FP16 ? DType::Float16
                                                           : DType::Float32;
  if (precision.paramDtype != expected)
    fail(where + ".param_dtype", "a " + mode +
                                     " engine stores its parameters as " +
                                     dtypeName(expected) + ", found " +
                                     dtypeName(precision.paramDtype));
  if (precision.masterDtype != DType::Float32)
    fail(where + ".master_dtype", std::string("must be float32, found ") +
                                      dtypeName(precision.masterDtype));
  if (!isFloat(precision.gradAccumDtype))
    fail(where + ".grad_accum_dtype",
         std::string("must be a float dtype, found ") +
             dtypeName(precision.gradAccumDtype));
  bool autocast = precision.mode == PrecisionMode::Autocast;
  if (autocast != precision.autocastDtype.has_value())
    fail(where + ".autocast_dtype",
         autocast ? "an autocast engine needs its autocast_dtype"
                  : "only autocast engines have an autocast_dtype");
  if (autocast && *precision.autocastDtype != DType::BFloat16 &&
      *precision.autocastDtype != DType::Float16)
    fail(where + ".autocast_dtype",
         std::string("must be bfloat16 or float16, found ") +
             dtypeName(*precision.autocastDtype));
  // fp16 engines scale their loss with DeepSpeed's scaler, fp16 autocast
  // engines with the torch.amp.GradScaler DeepSpeed creates for them.
  bool fp16 = precision.mode == PrecisionMode::FP16;
  bool fp16Autocast = autocast && *precision.autocastDtype == DType::Float16;
  if (precision.lossScaler && !fp16 && !fp16Autocast)
    fail(where + ".loss_scaler",
         "only fp16 and fp16 autocast engines scale their loss, this one "
         "is " +
             mode +
             (autocast ? std::string(" with autocast_dtype ") +
                             dtypeName(*precision.autocastDtype)
                       : std::string()));
  if (fp16 && engine.optimizer && !precision.lossScaler)
    fail(where, "a trainable fp16 engine needs a loss_scaler");
  if (fp16Autocast && engine.optimizer && !precision.lossScaler)
    fail(where, "a trainable fp16 autocast engine needs a loss_scaler "
                "(DeepSpeed's torch.amp.GradScaler: type \"grad_scaler\")");
  if (precision.lossScaler)
    checkLossScaler(*precision.lossScaler, where + ".loss_scaler",
                    fp16Autocast);
  // Native modes store every float parameter and buffer in the low dtype.
  if (autocast)
    return;
  for (size_t i = 0; i < plan_.state.size(); ++i) {
    const StateDesc &state = plan_.state[i];
    if (state.engine == engine.name && isFloat(state.dtype) &&
        state.dtype != expected)
      fail(joinIndex("state", i) + ".dtype",
           quoted(state.name) + " of " + mode + " engine " +
               quoted(engine.name) + " must be " + dtypeName(expected) +
               ", found " + dtypeName(state.dtype));
  }
}

void PlanValidator::checkLossScaler(const LossScalerDesc &scaler,
                                    const std::string &where,
                                    bool gradScaler) const {
  if (gradScaler && scaler.type != LossScalerType::GradScaler)
    fail(where + ".type", "an fp16 autocast engine scales with \"grad_scaler\" "
                          "(DeepSpeed's torch.amp.GradScaler), found " +
                              quoted(lossScalerTypeName(scaler.type)));
  if (!gradScaler && scaler.type == LossScalerType::GradScaler)
    fail(where + ".type", "\"grad_scaler\" is for fp16 autocast engines; "
                          "an fp16 engine's is \"dynamic\" or \"static\"");
  checkFinite(scaler.scale, where + ".scale");
  if (scaler.scale <= 0)
    fail(where + ".scale",
         "must be positive, found " + formatNumber(scaler.scale));
  if (scaler.scaleWindow < 1)
    fail(where + ".scale_window",
         "must be >= 1, found " + std::to_string(scaler.scaleWindow));
  if (scaler.hysteresis < 1)
    fail(where + ".hysteresis",
         "must be >= 1, found " + std::to_string(scaler.hysteresis));
  checkFinite(scaler.minScale, where + ".min_scale");
  if (gradScaler) {
    if (scaler.minScale != 0)
      fail(where + ".min_scale",
           "must be 0 for a grad_scaler (torch.amp.GradScaler has no "
           "minimum scale), found " +
               formatNumber(scaler.minScale));
    if (scaler.hysteresis != 1 || scaler.consecutiveHysteresis)
      fail(where + ".hysteresis",
           "a grad_scaler has hysteresis 1 and consecutive_hysteresis "
           "false (torch.amp.GradScaler halves on every overflow), found " +
               std::to_string(scaler.hysteresis) +
               (scaler.consecutiveHysteresis ? " (consecutive)" : ""));
    return;
  }
  if (scaler.minScale <= 0)
    fail(where + ".min_scale",
         "must be positive, found " + formatNumber(scaler.minScale));
}

} // namespace ds::plan::detail
