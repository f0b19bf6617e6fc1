//===- Monitor.h - What ds-run reports while it trains ----------*- C++ -*-===//
//
// The monitoring keys of a plan's engine config (steps_per_print,
// wall_clock_breakdown, csv_monitor, tensorboard), read from the `ds_config`
// the plan records: the compiler checked them (lib/Config), no pass changes
// them, so the plan carries them there rather than in fields of its own.
//
//===----------------------------------------------------------------------===//

#ifndef DS_PLAN_MONITOR_H
#define DS_PLAN_MONITOR_H

#include "ds/Plan/Plan.h"

#include <cstdint>
#include <optional>
#include <string>

namespace ds::plan {

/// A file monitor's folder: output_path/job_name (output_path "" is the
/// working directory, as in DeepSpeed).
struct MonitorOutputDesc {
  std::string outputPath;
  std::string jobName = "DeepSpeedJobName";

  /// outputPath/jobName, or jobName alone when outputPath is empty.
  std::string directory() const;
};

struct MonitorDesc {
  /// Optimizer steps between progress (and wall-clock) lines.
  int64_t stepsPerPrint = 10;
  bool wallClockBreakdown = false;
  /// Set when enabled.
  std::optional<MonitorOutputDesc> csv;
  std::optional<MonitorOutputDesc> tensorboard;
};

/// The settings of the plan's first engine (a session's engines share one
/// training loop; DeepSpeed's defaults without engines). Throws PlanError
/// naming engines[0].ds_config.KEY for a value of the wrong type.
MonitorDesc monitorOf(const Plan &plan, const std::string &origin);

} // namespace ds::plan

#endif // DS_PLAN_MONITOR_H
