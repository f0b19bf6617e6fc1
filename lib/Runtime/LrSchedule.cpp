//===- LrSchedule.cpp - DeepSpeed's learning rate schedules ---------------===//
//
// The formulas of DeepSpeed's runtime/lr_schedules.py, operation for
// operation so that the values agree with DeepSpeed's bit for bit:
// warmup_num_steps is clamped to at least 2, the log warmup multiplies by a
// precomputed 1 / log(warmup_num_steps), and before the first
// scheduler.step() (iteration -1) WarmupLR/WarmupDecayLR give warmup_min_lr
// and WarmupCosineLR gives 0.
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/LrSchedule.h"

#include <algorithm>
#include <cmath>

namespace ds::runtime {

using plan::SchedulerDesc;
using plan::SchedulerType;
using plan::WarmupType;

namespace {

/// Python's math.pi.
constexpr double kPi = 3.141592653589793;

/// Warmup progress in [0, 1) for iteration < warmupSteps.
double warmupGamma(const SchedulerDesc &scheduler, int64_t warmupSteps,
                   int64_t iteration) {
  if (scheduler.warmupType == WarmupType::Log) {
    double inverseLogWarmUp = 1.0 / std::log(double(warmupSteps));
    return inverseLogWarmUp * std::log(double(iteration + 1));
  }
  return double(iteration) / double(warmupSteps);
}

double warmupDecayGamma(const SchedulerDesc &scheduler, int64_t warmupSteps,
                        int64_t iteration) {
  if (iteration < warmupSteps)
    return warmupGamma(scheduler, warmupSteps, iteration);
  if (scheduler.type == SchedulerType::WarmupLR)
    return 1.0;
  int64_t total = scheduler.totalNumSteps.value_or(0);
  return std::max(0.0, double(total - iteration) /
                           std::max(1.0, double(total - warmupSteps)));
}

double cosineRatio(const SchedulerDesc &scheduler, int64_t warmupSteps,
                   int64_t iteration) {
  if (iteration < warmupSteps) {
    double ratio = warmupGamma(scheduler, warmupSteps, iteration);
    double ratioDelta = 1.0 - scheduler.warmupMinRatio;
    return scheduler.warmupMinRatio + ratio * ratioDelta;
  }
  int64_t realLastStep = iteration - warmupSteps + 1;
  int64_t realTotalSteps =
      std::max<int64_t>(1, scheduler.totalNumSteps.value_or(0) - warmupSteps);
  double progress =
      std::min(1.0, double(realLastStep) / double(realTotalSteps));
  double ratioDelta = 1.0 - scheduler.cosMinRatio;
  double ratio = (1.0 + std::cos(kPi * progress)) / 2.0;
  return std::max(0.0, scheduler.cosMinRatio + ratioDelta * ratio);
}

} // namespace

double schedulerLr(const SchedulerDesc &scheduler, double baseLr,
                   int64_t step) {
  int64_t warmupSteps = std::max<int64_t>(2, scheduler.warmupNumSteps);
  if (scheduler.type == SchedulerType::WarmupCosineLR) {
    if (step < 0)
      return 0.0;
    return baseLr * cosineRatio(scheduler, warmupSteps, step);
  }
  double minLr = scheduler.warmupMinLr;
  double maxLr = scheduler.warmupMaxLr.value_or(baseLr);
  if (step < 0)
    return minLr;
  double deltaLr = maxLr - minLr;
  return minLr + deltaLr * warmupDecayGamma(scheduler, warmupSteps, step);
}

double schedulerLrForUpdate(const SchedulerDesc &scheduler, double baseLr,
                            int64_t appliedUpdates) {
  return schedulerLr(scheduler, baseLr, appliedUpdates - 1);
}

} // namespace ds::runtime
