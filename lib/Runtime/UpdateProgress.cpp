//===- UpdateProgress.cpp - Where a trainable engine's updates are --------===//

#include "UpdateProgress.h"

#include "ds/Runtime/LrSchedule.h"

namespace ds::runtime::detail {

UpdateProgress::UpdateProgress(std::string engine,
                               const plan::OptimizerDesc &optimizer,
                               const plan::PrecisionDesc *precision)
    : engine_(std::move(engine)), baseLr_(optimizer.lr),
      scheduler_(optimizer.scheduler) {
  if (precision && precision->lossScaler)
    scaler_ = std::make_unique<LossScaler>(*precision->lossScaler);
}

double UpdateProgress::nextLr() const {
  if (!scheduler_)
    return baseLr_;
  return schedulerLrForUpdate(*scheduler_, baseLr_, appliedUpdates_);
}

void UpdateProgress::recordApplied(double lr, double gradNorm, double scale) {
  ++appliedUpdates_;
  lastGradNorm_ = gradNorm;
  stepped_ = EngineStepReport{engine_, lr, gradNorm, scale, false};
}

void UpdateProgress::recordApplied(double lr, at::Tensor gradNorm,
                                   double scale) {
  recordApplied(lr, 0.0, scale);
  pendingNorm_ = std::move(gradNorm);
}

void UpdateProgress::resolveNorm(double norm) {
  lastGradNorm_ = norm;
  if (stepped_)
    stepped_->gradNorm = norm;
  pendingNorm_ = at::Tensor();
}

void UpdateProgress::recordPending(double lr, at::Tensor gradNorm,
                                   at::Tensor foundInf, double scale) {
  stepped_.reset();
  pendingLr_ = lr;
  pendingScale_ = scale;
  pendingNorm_ = std::move(gradNorm);
  pendingOverflow_ = std::move(foundInf);
}

bool UpdateProgress::resolveOverflow(bool overflow, double norm) {
  pendingOverflow_ = at::Tensor();
  pendingNorm_ = at::Tensor();
  if (scaler_)
    scaler_->update(overflow); // Throws at min_loss_scale.
  if (overflow)
    recordSkipped(pendingLr_, pendingScale_);
  else
    recordApplied(pendingLr_, norm, pendingScale_);
  return overflow;
}

void UpdateProgress::recordSkipped(double lr, double scale) {
  ++skippedSteps_;
  stepped_ = EngineStepReport{engine_, lr, lastGradNorm_, scale, true};
}

} // namespace ds::runtime::detail
