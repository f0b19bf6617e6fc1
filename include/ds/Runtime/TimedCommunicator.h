//===- TimedCommunicator.h - How collectives overlap compute ----*- C++ -*-===//
//
// A Communicator that passes every collective to another one and measures,
// per kind, how long each was in flight (from the call that started it to
// its completion) and how long the calling thread was blocked on it (in
// that call and in wait()). The difference is the communication that
// overlapped computation. The engine's training collectives go through one
// (docs/runtime.md, "Reports": the measured report's "overlap").
//
// Volume is counted by the wrapped communicator, not by this one (its
// volume() stays zero): callers read the wrapped one's.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_TIMEDCOMMUNICATOR_H
#define DS_RUNTIME_TIMEDCOMMUNICATOR_H

#include "ds/Plan/Report.h"
#include "ds/Runtime/Communicator.h"

#include <memory>
#include <mutex>
#include <vector>

namespace ds::runtime {

class TimedCommunicator final : public Communicator {
public:
  explicit TimedCommunicator(std::shared_ptr<Communicator> inner);

  int64_t rank() const override { return inner_->rank(); }
  int64_t size() const override { return inner_->size(); }
  const char *backendName() const override { return inner_->backendName(); }

  CommHandle allReduce(const at::Tensor &tensor, ReduceOp op) override;
  CommHandle reduceScatter(const at::Tensor &output, const at::Tensor &input,
                           ReduceOp op) override;
  CommHandle allGather(const at::Tensor &output,
                       const at::Tensor &input) override;
  CommHandle broadcast(const at::Tensor &tensor, int64_t root) override;
  CommHandle barrier() override { return inner_->barrier(); }
  [[noreturn]] void abort(int exitCode) override;

  /// Every collective waited since construction or reset() (trainSeconds
  /// is 0: the engine fills it).
  plan::OverlapReport timing() const;
  void reset();

  /// The timings, shared with the handles (which may outlive this object).
  struct Stats {
    std::mutex mutex;
    plan::OverlapReport report;
    /// Collectives waited with waitOn (the host did not wait for them):
    /// their time in flight is added once they have completed.
    struct InFlight {
      CommHandle handle;
      plan::CollectiveTiming plan::OverlapReport::*kind;
      std::chrono::steady_clock::time_point started;
    };
    std::vector<InFlight> inFlight;
    /// Adds the time in flight of those that completed (all of them, and
    /// waiting for them, when `all`). Called with `mutex` held.
    void resolve(bool all);
  };

private:
  enum class Kind { AllReduce, ReduceScatter, AllGather, Broadcast };
  template <typename Start> CommHandle timed(Kind kind, Start start);

  std::shared_ptr<Communicator> inner_;
  std::shared_ptr<Stats> stats_;
};

} // namespace ds::runtime

#endif // DS_RUNTIME_TIMEDCOMMUNICATOR_H
