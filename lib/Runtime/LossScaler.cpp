//===- LossScaler.cpp - fp16 loss scaling as DeepSpeed does it ------------===//

#include "ds/Runtime/LossScaler.h"

#include "ds/TensorIO/RuntimeError.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace ds::runtime {

LossScaler::LossScaler(const plan::LossScalerDesc &desc)
    : dynamic_(desc.type != plan::LossScalerType::Static),
      gradScaler_(desc.type == plan::LossScalerType::GradScaler),
      window_(desc.scaleWindow), minScale_(desc.minScale),
      hysteresis_(desc.hysteresis),
      consecutiveHysteresis_(desc.consecutiveHysteresis) {
  state_.scale = desc.scale;
  state_.hysteresisLeft = desc.hysteresis;
}

bool LossScaler::update(bool overflow) {
  State &s = state_;
  if (!dynamic_) {
    ++s.iteration;
    return !overflow;
  }
  if (gradScaler_) {
    // torch._amp_update_scale_ (backoff 0.5, growth 2).
    if (overflow) {
      s.scale *= 0.5;
      s.lastOverflow = s.iteration;
    } else if (s.iteration - s.lastOverflow == window_) {
      // The scale is a float32 tensor there: it grows only while finite.
      if (std::isfinite(float(s.scale * factor_)))
        s.scale *= factor_;
      s.lastOverflow = s.iteration;
    }
    ++s.iteration;
    return !overflow;
  }
  if (overflow) {
    if (hysteresis_ == 1 || s.hysteresisLeft == 1) {
      if (s.scale == minScale_)
        throw RuntimeError(
            "fp16: the gradients overflowed with the loss scale already at "
            "min_loss_scale (" +
            std::to_string(minScale_) +
            "): it cannot decrease any more (DeepSpeed stops here too: "
            "\"Current loss scale already at minimum\")");
      s.scale = std::max(s.scale / factor_, minScale_);
    } else {
      --s.hysteresisLeft;
    }
    s.lastOverflow = s.iteration;
  } else {
    if (consecutiveHysteresis_)
      s.hysteresisLeft = hysteresis_;
    int64_t stable = (s.iteration - s.lastOverflow) - 1;
    if (stable > 0 && stable % window_ == 0) {
      if (!consecutiveHysteresis_)
        s.hysteresisLeft = hysteresis_;
      s.scale *= factor_;
    }
  }
  ++s.iteration;
  return !overflow;
}

} // namespace ds::runtime
