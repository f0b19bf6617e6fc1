//===- LossScaler.h - fp16 loss scaling as DeepSpeed does it ----*- C++ -*-===//
//
// DeepSpeed's loss scalers: fp16's (deepspeed/runtime/fp16/loss_scaler.py),
// and the torch.amp.GradScaler of fp16 torch_autocast. Either way
// the loss is multiplied by scale() before the backward and the gradients
// divided by it before the update. After every optimizer step update() is
// told whether any gradient on any rank overflowed (inf or NaN; the caller
// reduces the flag with one MAX all-reduce over the shards); an overflowing
// step is skipped.
//
//  - Static scaling (fp16.loss_scale > 0): the scale never changes.
//  - Dynamic scaling (fp16.loss_scale == 0), DynamicLossScaler.update_scale:
//    on an overflow with hysteresis left (hysteresis > 1 and the current
//    count > 1), the count drops by one and the scale stays; otherwise the
//    scale halves, down to min_loss_scale, and an overflow at
//    min_loss_scale is an error (DeepSpeed raises "Current loss scale
//    already at minimum"). Without an overflow, consecutive_hysteresis
//    refills the count at once; every loss_scale_window-th step since the
//    last overflow doubles the scale (and refills the count).
//  - torch.amp.GradScaler (fp16 torch_autocast: DeepSpeed creates one with
//    torch's defaults), torch._amp_update_scale_: an overflow halves the
//    scale (no floor, no hysteresis) and resets the growth tracker; a clean
//    step counts, and the window-th consecutive one (growth_interval)
//    doubles the scale, unless that is not finite in float32, and resets
//    the tracker. Unlike DeepSpeed's rule, the first doubling comes after
//    exactly `window` clean steps, not window + 1.
//
// Plain C++: no ATen, no MPI.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_LOSSSCALER_H
#define DS_RUNTIME_LOSSSCALER_H

#include "ds/Plan/Plan.h"

#include <cstdint>

namespace ds::runtime {

class LossScaler {
public:
  /// What a checkpoint keeps (DeepSpeed's attribute names in comments).
  struct State {
    double scale = 1.0;    // cur_scale
    int64_t iteration = 0; // cur_iter
    /// DeepSpeed's last_overflow_iter; a GradScaler's last overflow or
    /// growth (its _growth_tracker is iteration - lastOverflow - 1).
    int64_t lastOverflow = -1;
    int64_t hysteresisLeft = 2; // cur_hysteresis
  };

  /// The scaler an engine's plan::PrecisionDesc names.
  explicit LossScaler(const plan::LossScalerDesc &desc);

  double scale() const { return state_.scale; }
  bool dynamic() const { return dynamic_; }
  /// torch.amp.GradScaler's rule (fp16 autocast).
  bool gradScaler() const { return gradScaler_; }

  /// After an optimizer step's overflow check: adjusts the scale and
  /// returns whether the step's update is applied (false: skipped). Throws
  /// RuntimeError on an overflow the scale cannot absorb (at
  /// min_loss_scale; never for a GradScaler), naming the scale.
  bool update(bool overflow);

  const State &state() const { return state_; }
  void restore(const State &state) { state_ = state; }

private:
  bool dynamic_ = false;
  bool gradScaler_ = false;
  double factor_ = 2.0;
  int64_t window_ = 1000;
  double minScale_ = 1.0;
  int64_t hysteresis_ = 2;
  bool consecutiveHysteresis_ = false;
  State state_;
};

} // namespace ds::runtime

#endif // DS_RUNTIME_LOSSSCALER_H
