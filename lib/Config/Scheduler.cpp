//===- Scheduler.cpp - The "scheduler" section and its formulas -----------===//
//
// Parameters and formulas of DeepSpeed's runtime/lr_schedules.py, operation
// for operation so that the values agree with DeepSpeed's bit for bit:
// warmup_num_steps is clamped to at least 2, the log warmup multiplies by a
// precomputed 1 / log(warmup_num_steps), and before the first
// scheduler.step() (iteration -1) WarmupLR/WarmupDecayLR give warmup_min_lr
// and WarmupCosineLR gives 0.
//
//===----------------------------------------------------------------------===//

#include "Sections.h"

#include <algorithm>
#include <cmath>

namespace ds::config {

const char *schedulerTypeName(SchedulerType type) {
  switch (type) {
  case SchedulerType::WarmupLR:
    return "WarmupLR";
  case SchedulerType::WarmupDecayLR:
    return "WarmupDecayLR";
  case SchedulerType::WarmupCosineLR:
    return "WarmupCosineLR";
  }
  return "?";
}

namespace {

/// Python's math.pi.
constexpr double kPi = 3.141592653589793;

/// Warmup progress in [0, 1) for iteration < warmupSteps.
double warmupGamma(const SchedulerConfig &scheduler, int64_t warmupSteps,
                   int64_t iteration) {
  if (scheduler.warmupType == WarmupType::Log) {
    double inverseLogWarmUp = 1.0 / std::log(double(warmupSteps));
    return inverseLogWarmUp * std::log(double(iteration + 1));
  }
  return double(iteration) / double(warmupSteps);
}

double warmupDecayGamma(const SchedulerConfig &scheduler, int64_t warmupSteps,
                        int64_t iteration) {
  if (iteration < warmupSteps)
    return warmupGamma(scheduler, warmupSteps, iteration);
  if (scheduler.type == SchedulerType::WarmupLR)
    return 1.0;
  int64_t total = scheduler.totalNumSteps.value_or(0);
  return std::max(0.0, double(total - iteration) /
                           std::max(1.0, double(total - warmupSteps)));
}

double cosineRatio(const SchedulerConfig &scheduler, int64_t warmupSteps,
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

double schedulerLr(const SchedulerConfig &scheduler, double baseLr,
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

double schedulerLrForUpdate(const SchedulerConfig &scheduler, double baseLr,
                            int64_t appliedUpdates) {
  return schedulerLr(scheduler, baseLr, appliedUpdates - 1);
}

namespace detail {

namespace {

SchedulerType parseSchedulerType(ObjectReader &section) {
  std::optional<std::string> name = section.string("type");
  if (!name)
    section.fail("type", "missing: the scheduler needs a \"type\" (WarmupLR, "
                         "WarmupDecayLR or WarmupCosineLR)");
  if (*name == "WarmupLR")
    return SchedulerType::WarmupLR;
  if (*name == "WarmupDecayLR")
    return SchedulerType::WarmupDecayLR;
  if (*name == "WarmupCosineLR")
    return SchedulerType::WarmupCosineLR;
  section.fail("type",
               "scheduler \"" + *name +
                   "\" is not supported (supported: WarmupLR, WarmupDecayLR, "
                   "WarmupCosineLR; names are case-sensitive as in DeepSpeed)");
}

double readRatio(ObjectReader &params, const char *key, double fallback) {
  std::optional<double> value = params.number(key);
  if (!value)
    return fallback;
  if (!(*value >= 0.0 && *value <= 1.0))
    params.fail(key, "must be in [0, 1], got " + ordered_json(*value).dump());
  return *value;
}

} // namespace

SchedulerConfig
parseScheduler(ObjectReader &section,
               const std::optional<OptimizerConfig> &optimizer) {
  SchedulerConfig scheduler;
  scheduler.type = parseSchedulerType(section);
  if (!optimizer)
    section.fail("type", "a scheduler needs an \"optimizer\" section (an "
                         "engine without one is frozen)");

  ordered_json noParams = ordered_json::object();
  std::optional<ObjectReader> given = section.object("params");
  ObjectReader params =
      given ? *given : ObjectReader(noParams, section.keyPath("params"));

  if (auto last = params.integer("last_batch_iteration"); last && *last != -1)
    params.fail("last_batch_iteration",
                "resuming a schedule through \"last_batch_iteration\" is not "
                "supported (load a checkpoint instead)");

  if (scheduler.type != SchedulerType::WarmupCosineLR) {
    if (auto minLr = params.number("warmup_min_lr")) {
      requireMin(*minLr, 0.0, params.keyPath("warmup_min_lr"));
      scheduler.warmupMinLr = *minLr;
    }
    if (auto maxLr = params.number("warmup_max_lr")) {
      requireMin(*maxLr, 0.0, params.keyPath("warmup_max_lr"));
      scheduler.warmupMaxLr = *maxLr;
    } else if (scheduler.type == SchedulerType::WarmupDecayLR) {
      scheduler.warmupMaxLr = 0.001;
    }
  } else {
    scheduler.warmupMinRatio = readRatio(params, "warmup_min_ratio", 0.0);
    scheduler.cosMinRatio = readRatio(params, "cos_min_ratio", 0.0001);
  }

  if (auto steps = params.integer("warmup_num_steps")) {
    requireMin(*steps, 1, params.keyPath("warmup_num_steps"));
    scheduler.warmupNumSteps = *steps;
  }
  if (auto warmupType = params.string("warmup_type")) {
    if (*warmupType == "log")
      scheduler.warmupType = WarmupType::Log;
    else if (*warmupType == "linear")
      scheduler.warmupType = WarmupType::Linear;
    else
      params.fail("warmup_type",
                  "must be \"log\" or \"linear\", got \"" + *warmupType + "\"");
  }

  if (scheduler.type != SchedulerType::WarmupLR) {
    std::optional<int64_t> total = params.integer("total_num_steps");
    if (!total)
      params.fail("total_num_steps", std::string("missing: required by ") +
                                         schedulerTypeName(scheduler.type));
    requireMin(*total, 1, params.keyPath("total_num_steps"));
    scheduler.totalNumSteps = *total;
  }

  params.rejectUnknownKeys(std::string("for scheduler ") +
                           schedulerTypeName(scheduler.type));
  section.rejectUnknownKeys();
  return scheduler;
}

} // namespace detail
} // namespace ds::config
