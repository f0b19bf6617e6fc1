//===- FaultPoints.cpp - Named points where a test may fail a rank --------===//

#include "ds/Runtime/FaultPoints.h"

#include <mutex>

namespace ds::runtime {

namespace detail {
std::atomic<bool> faultPointArmed{false};
} // namespace detail

namespace {

struct Armed {
  std::mutex mutex;
  FaultPoint point = FaultPoint::AllGather;
  int64_t occurrence = 0;
  int64_t reached = 0;
  FaultAction action;
};

Armed &armed() {
  static Armed instance;
  return instance;
}

} // namespace

const char *faultPointName(FaultPoint point) {
  switch (point) {
  case FaultPoint::AllGather:
    return "allgather";
  case FaultPoint::OptimizerStep:
    return "optimizer";
  }
  return "?";
}

std::optional<FaultPoint> parseFaultPoint(const std::string &name) {
  for (FaultPoint point : {FaultPoint::AllGather, FaultPoint::OptimizerStep})
    if (name == faultPointName(point))
      return point;
  return std::nullopt;
}

void armFaultPoint(FaultPoint point, int64_t occurrence, FaultAction action) {
  Armed &a = armed();
  std::lock_guard<std::mutex> lock(a.mutex);
  a.point = point;
  a.occurrence = occurrence;
  a.reached = 0;
  a.action = std::move(action);
  detail::faultPointArmed.store(bool(a.action), std::memory_order_relaxed);
}

void disarmFaultPoints() {
  Armed &a = armed();
  std::lock_guard<std::mutex> lock(a.mutex);
  a.action = nullptr;
  detail::faultPointArmed.store(false, std::memory_order_relaxed);
}

void detail::faultPointReached(FaultPoint point) {
  FaultAction action;
  int64_t occurrence = 0;
  {
    Armed &a = armed();
    std::lock_guard<std::mutex> lock(a.mutex);
    if (!a.action || a.point != point || ++a.reached != a.occurrence)
      return;
    occurrence = a.reached;
    action = std::move(a.action);
    a.action = nullptr;
    faultPointArmed.store(false, std::memory_order_relaxed);
  }
  action(point, occurrence); // Outside the lock: it may not return.
}

} // namespace ds::runtime
