//===- TrainMonitor.h - Progress, timings, monitors and trace ---*- C++ -*-===//
//
// What ds-run reports besides the loss lines (docs/config.md,
// "Monitoring"): every steps_per_print optimizer steps a progress line with
// samples/s on stderr (and, with wall_clock_breakdown, the per-phase times
// as DeepSpeed's timers print them); every step the csv_monitor and
// tensorboard events; and ds-run --trace's trace file. Rank 0 prints and
// writes the monitors; every rank writes its own trace.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TOOLS_DSRUN_TRAINMONITOR_H
#define DS_TOOLS_DSRUN_TRAINMONITOR_H

#include "MetricSink.h"
#include "Options.h"
#include "World.h"

#include "ds/Plan/Monitor.h"
#include "ds/Runtime/Engine.h"
#include "ds/Runtime/ExecutionObserver.h"
#include "ds/Runtime/PhaseTimer.h"
#include "ds/Runtime/TraceWriter.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <vector>

namespace ds::run {

class TrainMonitor {
public:
  /// Reads the plan's monitoring settings and installs the observers the
  /// run needs on `engine` (none without --trace and wall_clock_breakdown).
  TrainMonitor(const Options &options, runtime::Engine &engine,
               const World &world, int64_t steps);
  ~TrainMonitor();

  void stepBegin(int64_t step);
  /// After step `step`'s loss line (rank 0's holds the loss and the LR).
  void stepEnd(int64_t step, const nlohmann::ordered_json &line);
  /// Writes the trace. Throws RuntimeError.
  void finish();

private:
  void printProgress(int64_t step, const nlohmann::ordered_json &line);
  void writeEvents(int64_t step, const nlohmann::ordered_json &line);

  using Clock = std::chrono::steady_clock;
  const Options &options_;
  runtime::Engine &engine_;
  const World &world_;
  plan::MonitorDesc settings_;
  int64_t steps_;
  int64_t trainBatchSize_;
  bool lossScaled_ = false;
  runtime::ObserverList observers_;
  std::unique_ptr<runtime::PhaseTimer> timer_;
  /// The timer's totals at the previous step's events and at the previous
  /// progress line.
  runtime::PhaseTimer::Seconds eventSeconds_{};
  runtime::PhaseTimer::Seconds printedSeconds_{};
  std::unique_ptr<runtime::TraceWriter> trace_;
  std::vector<std::unique_ptr<MetricSink>> sinks_;
  Clock::time_point start_;
  Clock::time_point lastPrint_;
  int64_t firstStep_ = 0;
  int64_t lastPrintStep_ = 0;
};

} // namespace ds::run

#endif // DS_TOOLS_DSRUN_TRAINMONITOR_H
