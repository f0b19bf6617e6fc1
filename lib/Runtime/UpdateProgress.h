//===- UpdateProgress.h - An engine's update progress -----------*- C++ -*-===//
//
// What a trainable engine's next updates depend on besides its parameters
// and optimizer state: the updates applied (the LR schedule's position), the
// steps skipped for an fp16 overflow, the last applied update's gradient
// norm and the loss scaler. Checkpoints save and restore it
// (CheckpointSave.cpp, CheckpointLoad.cpp). Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_UPDATEPROGRESS_H
#define DS_LIB_RUNTIME_UPDATEPROGRESS_H

#include "ds/Plan/Plan.h"
#include "ds/Runtime/Engine.h"
#include "ds/Runtime/LossScaler.h"

#include <memory>
#include <optional>
#include <string>

namespace ds::runtime::detail {

class UpdateProgress {
public:
  /// The LR schedule of `optimizer`, and the loss scaler of `precision`
  /// (null: none).
  UpdateProgress(std::string engine, const plan::OptimizerDesc &optimizer,
                 const plan::PrecisionDesc *precision);

  /// The LR the next update uses.
  double nextLr() const;

  /// Updates applied so far: the LR schedule's position.
  int64_t appliedUpdates() const { return appliedUpdates_; }
  void setAppliedUpdates(int64_t updates) { appliedUpdates_ = updates; }
  /// Steps skipped for an fp16 overflow (DeepSpeed's skipped_steps).
  int64_t skippedSteps() const { return skippedSteps_; }
  void setSkippedSteps(int64_t steps) { skippedSteps_ = steps; }
  /// The norm of the last applied update (what a skipped step reports).
  double lastGradNorm() const { return lastGradNorm_; }
  void setLastGradNorm(double norm) { lastGradNorm_ = norm; }
  /// The fp16 loss scaler (DeepSpeed's, or fp16 autocast's
  /// torch.amp.GradScaler); nullptr without one.
  const LossScaler *lossScaler() const { return scaler_.get(); }
  LossScaler *lossScaler() { return scaler_.get(); }
  /// The loss scale the step runs with: the scaler's, else 1.
  double scale() const { return scaler_ ? scaler_->scale() : 1.0; }

  /// An update at `lr` with gradient norm `gradNorm` and loss scale `scale`
  /// was applied.
  void recordApplied(double lr, double gradNorm, double scale);
  /// The same with the norm still where the gradients are (a 0-dim tensor;
  /// undefined: 0): stepped()'s gradNorm and lastGradNorm() take its value
  /// when resolveNorm() gives it, after Trainer::endStep read every
  /// engine's norm at once.
  void recordApplied(double lr, at::Tensor gradNorm, double scale);
  /// The norm recordApplied left unread; undefined when none is.
  const at::Tensor &pendingNorm() const { return pendingNorm_; }
  void resolveNorm(double norm);
  /// fp16 on the device: the update at `lr` ran with found_inf `foundInf`
  /// (a 0-dim tensor, not 0 when the gradients overflowed) and `gradNorm`;
  /// whether it was applied or skipped is known at resolveOverflow(), after
  /// Trainer::endStep read the flag (with the norms).
  void recordPending(double lr, at::Tensor gradNorm, at::Tensor foundInf,
                     double scale);
  const at::Tensor &pendingOverflow() const { return pendingOverflow_; }
  /// Records the pending update as skipped (overflow) or applied with norm
  /// `norm`, and updates the loss scaler. Returns `overflow`.
  bool resolveOverflow(bool overflow, double norm);
  /// A step at `lr` was skipped for an overflow: the LR schedule stays
  /// where it is, and the norm reported is the last applied update's
  /// (DeepSpeed).
  void recordSkipped(double lr, double scale);
  /// This step's report; nullopt until the engine stepped.
  const std::optional<EngineStepReport> &stepped() const { return stepped_; }
  void beginStep() {
    stepped_.reset();
    pendingNorm_ = at::Tensor();
    pendingOverflow_ = at::Tensor();
  }

private:
  std::string engine_;
  double baseLr_;
  std::optional<plan::SchedulerDesc> scheduler_;
  std::unique_ptr<LossScaler> scaler_;
  int64_t appliedUpdates_ = 0;
  int64_t skippedSteps_ = 0;
  double lastGradNorm_ = 0.0;
  at::Tensor pendingNorm_;
  at::Tensor pendingOverflow_;
  double pendingLr_ = 0.0;
  double pendingScale_ = 1.0;
  std::optional<EngineStepReport> stepped_;
};

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_UPDATEPROGRESS_H
