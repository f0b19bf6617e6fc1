//===- FaultPoints.h - Named points where a test may fail a rank -*- C++ -*-===//
//
// The failure tests (test/mpi/fault_check.py) need a rank to die in the middle
// of a training step, while the other ranks are inside a collective. The
// runtime calls reachFaultPoint() at a few named points of a step; nothing
// happens unless a test harness armed one of them (ds-run, from
// DS_TEST_FAULT: tools/ds-run/World.h). Unarmed, a call is one relaxed atomic
// load. Armed, the occurrence-th time the armed point is reached after
// armFaultPoint() the action runs (it kills, ends or hangs the process); the
// point is then disarmed.
//
// The points (Executor.cpp):
//   allgather  a plan's all_gather once this rank has issued it (ZeRO-3: a
//              parameter bucket's gather; the peers then wait in it or in a
//              later collective)
//   optimizer  a plan's optimizer_step before it runs (after the gradient
//              reduction's waits)
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_FAULTPOINTS_H
#define DS_RUNTIME_FAULTPOINTS_H

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace ds::runtime {

enum class FaultPoint { AllGather, OptimizerStep };

/// "allgather", "optimizer".
const char *faultPointName(FaultPoint point);
/// The point named `name` (faultPointName's spelling); nullopt if none is.
std::optional<FaultPoint> parseFaultPoint(const std::string &name);

/// What an armed point does when reached: the point and its occurrence.
using FaultAction = std::function<void(FaultPoint, int64_t occurrence)>;

/// Arms `point`: its `occurrence`-th (1-based) reach from now on runs
/// `action`. Replaces an armed point (one at a time).
void armFaultPoint(FaultPoint point, int64_t occurrence, FaultAction action);
/// Nothing armed any more.
void disarmFaultPoints();

namespace detail {
extern std::atomic<bool> faultPointArmed;
void faultPointReached(FaultPoint point);
} // namespace detail

/// The runtime's call at a named point: does nothing unless armed.
inline void reachFaultPoint(FaultPoint point) {
  if (detail::faultPointArmed.load(std::memory_order_relaxed))
    detail::faultPointReached(point);
}

} // namespace ds::runtime

#endif // DS_RUNTIME_FAULTPOINTS_H
