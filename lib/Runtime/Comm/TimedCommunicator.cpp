//===- TimedCommunicator.cpp - How long collectives take, and block -------===//
//
// Each collective's handle is wrapped: the first wait() on it records the
// collective's time in flight (start to completion: the backend's
// completion time when it reports one, else the end of the start call for
// a handle that was complete when it returned, else the end of wait()) and
// the time the caller was blocked (the start call plus the wait). A handle
// waited with waitOn(stream) (a device stream waits; the host does not)
// records the blocked time at once and its time in flight once the
// collective has completed: at the next wait or when the timings are read.
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/TimedCommunicator.h"

#include <algorithm>
#include <cstdlib>

namespace ds::runtime {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration duration) {
  return std::chrono::duration<double>(duration).count();
}

class TimedWork final : public CommWork {
public:
  TimedWork(CommHandle inner, plan::CollectiveTiming plan::OverlapReport::*kind,
            Clock::time_point started, Clock::time_point returned,
            std::shared_ptr<TimedCommunicator::Stats> stats)
      : inner_(std::move(inner)), kind_(kind), started_(started),
        returned_(returned), stats_(std::move(stats)) {}

  bool isCompleted() override { return inner_.isCompleted(); }
  std::string describe() const override { return inner_.describe(); }
  std::optional<Clock::time_point> completedAt() const override {
    return inner_.completedAt();
  }

  void wait() override {
    Clock::time_point begin = Clock::now();
    inner_.wait();
    Clock::time_point end = Clock::now();
    if (recorded_)
      return;
    recorded_ = true;
    Clock::time_point completed = end;
    if (std::optional<Clock::time_point> at = inner_.completedAt())
      completed = *at;
    else if (!inner_.hasWork())
      completed = returned_; // Done before the start call returned.
    completed = std::max(completed, started_);
    std::lock_guard<std::mutex> lock(stats_->mutex);
    plan::CollectiveTiming &timing = stats_->report.*kind_;
    ++timing.count;
    timing.collectiveSeconds += seconds(completed - started_);
    timing.waitSeconds += seconds(returned_ - started_) + seconds(end - begin);
    stats_->resolve(false);
  }

  void waitOn(const c10::Stream &stream) override {
    Clock::time_point begin = Clock::now();
    inner_.waitOn(stream);
    Clock::time_point end = Clock::now();
    if (recorded_)
      return;
    recorded_ = true;
    std::lock_guard<std::mutex> lock(stats_->mutex);
    plan::CollectiveTiming &timing = stats_->report.*kind_;
    ++timing.count;
    timing.waitSeconds += seconds(returned_ - started_) + seconds(end - begin);
    stats_->inFlight.push_back({inner_, kind_, started_});
    stats_->resolve(false);
  }

private:
  CommHandle inner_;
  plan::CollectiveTiming plan::OverlapReport::*kind_;
  Clock::time_point started_, returned_;
  std::shared_ptr<TimedCommunicator::Stats> stats_;
  bool recorded_ = false;
};

plan::CollectiveTiming plan::OverlapReport::*member(int kind) {
  switch (kind) {
  case 0:
    return &plan::OverlapReport::allReduce;
  case 1:
    return &plan::OverlapReport::reduceScatter;
  case 2:
    return &plan::OverlapReport::allGather;
  default:
    return &plan::OverlapReport::broadcast;
  }
}

} // namespace

void TimedCommunicator::Stats::resolve(bool all) {
  std::vector<InFlight> still;
  for (InFlight &entry : inFlight) {
    if (all)
      entry.handle.wait();
    else if (!entry.handle.isCompleted()) {
      still.push_back(std::move(entry));
      continue;
    }
    Clock::time_point completed =
        entry.handle.completedAt().value_or(Clock::now());
    (report.*entry.kind).collectiveSeconds +=
        seconds(std::max(completed, entry.started) - entry.started);
  }
  inFlight = std::move(still);
}

TimedCommunicator::TimedCommunicator(std::shared_ptr<Communicator> inner)
    : inner_(std::move(inner)), stats_(std::make_shared<Stats>()) {}

template <typename Start>
CommHandle TimedCommunicator::timed(Kind kind, Start start) {
  Clock::time_point started = Clock::now();
  CommHandle handle = start();
  Clock::time_point returned = Clock::now();
  return CommHandle(std::make_shared<TimedWork>(
      std::move(handle), member(int(kind)), started, returned, stats_));
}

CommHandle TimedCommunicator::allReduce(const at::Tensor &tensor, ReduceOp op) {
  return timed(Kind::AllReduce, [&] { return inner_->allReduce(tensor, op); });
}

CommHandle TimedCommunicator::reduceScatter(const at::Tensor &output,
                                            const at::Tensor &input,
                                            ReduceOp op) {
  return timed(Kind::ReduceScatter,
               [&] { return inner_->reduceScatter(output, input, op); });
}

CommHandle TimedCommunicator::allGather(const at::Tensor &output,
                                        const at::Tensor &input) {
  return timed(Kind::AllGather,
               [&] { return inner_->allGather(output, input); });
}

CommHandle TimedCommunicator::broadcast(const at::Tensor &tensor,
                                        int64_t root) {
  return timed(Kind::Broadcast,
               [&] { return inner_->broadcast(tensor, root); });
}

void TimedCommunicator::abort(int exitCode) {
  inner_->abort(exitCode);
  std::_Exit(exitCode); // Not reached: abort() does not return.
}

plan::OverlapReport TimedCommunicator::timing() const {
  std::lock_guard<std::mutex> lock(stats_->mutex);
  stats_->resolve(true);
  return stats_->report;
}

void TimedCommunicator::reset() {
  std::lock_guard<std::mutex> lock(stats_->mutex);
  stats_->resolve(true);
  stats_->report = plan::OverlapReport();
}

} // namespace ds::runtime
