//===- UpdateProgress.cpp - Where a trainable engine's updates are --------===//

#include "UpdateProgress.h"

namespace ds::runtime::detail {

namespace {

config::SchedulerType schedulerType(plan::SchedulerType type) {
  switch (type) {
  case plan::SchedulerType::WarmupLR:
    return config::SchedulerType::WarmupLR;
  case plan::SchedulerType::WarmupDecayLR:
    return config::SchedulerType::WarmupDecayLR;
  case plan::SchedulerType::WarmupCosineLR:
    return config::SchedulerType::WarmupCosineLR;
  }
  return config::SchedulerType::WarmupLR; // Unreachable: every enumerator.
}

config::WarmupType warmupType(plan::WarmupType type) {
  switch (type) {
  case plan::WarmupType::Log:
    return config::WarmupType::Log;
  case plan::WarmupType::Linear:
    return config::WarmupType::Linear;
  }
  return config::WarmupType::Log; // Unreachable: every enumerator.
}

config::SchedulerConfig schedulerConfig(const plan::SchedulerDesc &desc) {
  config::SchedulerConfig config;
  config.type = schedulerType(desc.type);
  config.warmupMinLr = desc.warmupMinLr;
  config.warmupMaxLr = desc.warmupMaxLr;
  config.warmupNumSteps = desc.warmupNumSteps;
  config.warmupType = warmupType(desc.warmupType);
  config.totalNumSteps = desc.totalNumSteps;
  config.warmupMinRatio = desc.warmupMinRatio;
  config.cosMinRatio = desc.cosMinRatio;
  return config;
}

config::LossScalerConfig::Kind lossScalerKind(plan::LossScalerType type) {
  using Kind = config::LossScalerConfig::Kind;
  switch (type) {
  case plan::LossScalerType::Dynamic:
    return Kind::Dynamic;
  case plan::LossScalerType::Static:
    return Kind::Static;
  case plan::LossScalerType::GradScaler:
    return Kind::GradScaler;
  }
  return Kind::Dynamic; // Unreachable: every enumerator.
}

config::LossScalerConfig lossScalerConfig(const plan::LossScalerDesc &desc) {
  config::LossScalerConfig config;
  config.kind = lossScalerKind(desc.type);
  config.initialScale = desc.scale;
  config.window = desc.scaleWindow;
  config.hysteresis = desc.hysteresis;
  config.consecutiveHysteresis = desc.consecutiveHysteresis;
  config.minScale = desc.minScale;
  return config;
}

} // namespace

UpdateProgress::UpdateProgress(std::string engine,
                               const plan::OptimizerDesc &optimizer,
                               const plan::PrecisionDesc *precision)
    : engine_(std::move(engine)), baseLr_(optimizer.lr) {
  if (optimizer.scheduler)
    scheduler_ = schedulerConfig(*optimizer.scheduler);
  if (precision && precision->lossScaler)
    scaler_ =
        std::make_unique<LossScaler>(lossScalerConfig(*precision->lossScaler));
}

double UpdateProgress::nextLr() const {
  if (!scheduler_)
    return baseLr_;
  return config::schedulerLrForUpdate(*scheduler_, baseLr_, appliedUpdates_);
}

void UpdateProgress::recordApplied(double lr, double gradNorm, double scale) {
  ++appliedUpdates_;
  lastGradNorm_ = gradNorm;
  stepped_ = EngineStepReport{engine_, lr, gradNorm, scale, false};
}

void UpdateProgress::recordSkipped(double lr, double scale) {
  ++skippedSteps_;
  stepped_ = EngineStepReport{engine_, lr, lastGradNorm_, scale, true};
}

} // namespace ds::runtime::detail
