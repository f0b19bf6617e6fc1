//===- Scheduler.cpp - The "scheduler" section ----------------------------===//
//
// The parameters of DeepSpeed's runtime/lr_schedules.py with its defaults
// (the formulas are the runtime's: lib/Runtime/LrSchedule.cpp).
//
//===----------------------------------------------------------------------===//

#include "Sections.h"

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
