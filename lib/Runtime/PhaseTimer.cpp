//===- PhaseTimer.cpp - Where a training step's time goes -----------------===//

#include "ds/Runtime/PhaseTimer.h"

#include <cstdio>

namespace ds::runtime {

const char *PhaseTimer::phaseName(Phase phase) {
  static const char *const names[kNumPhases] = {
      "fwd", "bwd", "bwd_inner", "bwd_allreduce", "step", "optimizer", "comm"};
  return names[phase];
}

void PhaseTimer::partBegin(ProgramPart part) {
  part_ = part;
  partStart_ = Clock::now();
}

void PhaseTimer::partEnd(ProgramPart part) {
  double elapsed =
      std::chrono::duration<double>(Clock::now() - partStart_).count();
  switch (part) {
  case ProgramPart::Forward:
    seconds_[Forward] += elapsed;
    break;
  case ProgramPart::Backward:
    seconds_[Backward] += elapsed;
    break;
  case ProgramPart::Step:
    seconds_[Step] += elapsed;
    break;
  case ProgramPart::Eval:
    break;
  }
  // Backward minus its collectives, once the backward is whole.
  if (part == ProgramPart::Backward)
    seconds_[BackwardInner] = seconds_[Backward] - seconds_[BackwardAllReduce];
}

static bool timedOp(const plan::Op &op) {
  return plan::isCollective(op.kind) || op.kind == plan::OpKind::Wait ||
         op.kind == plan::OpKind::OptimizerStep;
}

void PhaseTimer::opBegin(const plan::Op &op) {
  if (timedOp(op))
    opStart_ = Clock::now();
}

void PhaseTimer::opEnd(const plan::Op &op) {
  if (!timedOp(op))
    return;
  double elapsed =
      std::chrono::duration<double>(Clock::now() - opStart_).count();
  if (op.kind == plan::OpKind::OptimizerStep) {
    seconds_[OptimizerStep] += elapsed;
    return;
  }
  seconds_[Comm] += elapsed;
  if (part_ == ProgramPart::Backward)
    seconds_[BackwardAllReduce] += elapsed;
}

std::string PhaseTimer::line(const Seconds &now, const Seconds &before,
                             int64_t steps) {
  std::string text = "time (ms)";
  double divisor = steps > 0 ? double(steps) : 1.0;
  for (int phase = 0; phase < kNumPhases; ++phase) {
    char value[64];
    std::snprintf(value, sizeof(value), " | %s: %.2f", phaseName(Phase(phase)),
                  (now[phase] - before[phase]) * 1000.0 / divisor);
    text += value;
  }
  return text;
}

} // namespace ds::runtime
