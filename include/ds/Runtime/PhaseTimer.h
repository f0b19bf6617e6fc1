//===- PhaseTimer.h - Where a training step's time goes ---------*- C++ -*-===//
//
// wall_clock_breakdown: an ExecutionObserver that sums, per phase, the wall
// time of DeepSpeed's global timers (deepspeed/utils/timer.py): fwd, bwd,
// bwd_inner (backward without its collectives), bwd_allreduce (the
// backward's collectives: starting them and waiting for them), step
// (programs.step); and two of ours: optimizer (its optimizer_step ops) and
// comm (every collective start and wait, step included).
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_PHASETIMER_H
#define DS_RUNTIME_PHASETIMER_H

#include "ds/Runtime/ExecutionObserver.h"

#include <array>
#include <chrono>
#include <string>

namespace ds::runtime {

class PhaseTimer final : public ExecutionObserver {
public:
  enum Phase {
    Forward,
    Backward,
    BackwardInner,
    BackwardAllReduce,
    Step,
    OptimizerStep,
    Comm,
    kNumPhases
  };
  /// DeepSpeed's timer names ("fwd", "bwd", ...), then "optimizer", "comm".
  static const char *phaseName(Phase phase);

  void partBegin(ProgramPart part) override;
  void partEnd(ProgramPart part) override;
  void opBegin(const plan::Op &op) override;
  void opEnd(const plan::Op &op) override;

  using Seconds = std::array<double, kNumPhases>;
  /// Seconds per phase since construction.
  const Seconds &totals() const { return seconds_; }
  /// "time (ms) | fwd: 1.23 | bwd: ..." as DeepSpeed's timers log it: each
  /// phase's `now - before`, in milliseconds, divided by `steps`.
  static std::string line(const Seconds &now, const Seconds &before,
                          int64_t steps);

private:
  using Clock = std::chrono::steady_clock;
  Seconds seconds_{};
  ProgramPart part_ = ProgramPart::Eval;
  Clock::time_point partStart_;
  Clock::time_point opStart_;
};

} // namespace ds::runtime

#endif // DS_RUNTIME_PHASETIMER_H
