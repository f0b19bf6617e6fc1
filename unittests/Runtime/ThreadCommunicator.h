//===- ThreadCommunicator.h - W ranks as threads of one test ----*- C++ -*-===//
//
// A test backend of the Communicator interface: W ranks are W threads of
// one process. The k-th collective of every rank meets in one slot; the
// last rank to arrive combines the deposits and completes it for all. By
// default each call then waits for that (a blocking rendezvous: the handle
// it returns is complete); an asynchronous group returns at once with a
// handle that completes when the last rank arrives, so a collective
// started early progresses (here: completes) while its caller computes, as
// with the MPI backend's communication thread. It lets gtest run a
// data-parallel Engine on several ranks without MPI. Reductions add the
// ranks in rank order, so every rank gets the same bits, as MPI's do. Every
// collective is logged ("allReduce avg 5") and counted
// (Communicator::volume()).
//
//===----------------------------------------------------------------------===//

#ifndef DS_UNITTESTS_RUNTIME_THREADCOMMUNICATOR_H
#define DS_UNITTESTS_RUNTIME_THREADCOMMUNICATOR_H

#include "ds/Runtime/Communicator.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace ds::test {

class ThreadGroup {
public:
  /// `async`: collectives return before the other ranks arrive (see above).
  explicit ThreadGroup(int64_t size, bool async = false)
      : size_(size), async_(async), next_(size_t(size), 0) {}

  /// One communicator per rank.
  std::shared_ptr<runtime::Communicator> member(int64_t rank);
  /// Runs `body(rank)` on one thread per rank and joins them; rethrows the
  /// first exception a rank threw.
  void run(const std::function<void(int64_t rank)> &body);

  /// Rank 0's collectives, in order.
  std::vector<std::string> log() const;

  int64_t size() const { return size_; }
  bool async() const { return async_; }

  using Combine = std::function<void(const std::vector<at::Tensor> &,
                                     const std::vector<at::Tensor> &)>;

  /// One collective's meeting point.
  struct Slot {
    std::vector<at::Tensor> inputs, outputs;
    int64_t arrived = 0;
    bool done = false;
    std::chrono::steady_clock::time_point completedAt;
  };

  /// Rank `rank` deposits (input, output) in its next slot; the last rank
  /// to arrive runs `combine` over all deposits and completes the slot.
  /// Returns the slot (complete unless the group is asynchronous).
  std::shared_ptr<Slot> collective(int64_t rank, const std::string &what,
                                   at::Tensor input, at::Tensor output,
                                   const Combine &combine);
  /// Blocks until `slot` is complete (a CommTimeoutError after 120 s: a
  /// rank that failed never arrives).
  void wait(const Slot &slot);
  bool isCompleted(const Slot &slot) const;
  std::optional<std::chrono::steady_clock::time_point>
  completedAt(const Slot &slot) const;

private:
  int64_t size_;
  bool async_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  /// Per rank: the sequence number of its next collective.
  std::vector<uint64_t> next_;
  /// Slots some rank has arrived at and that are not complete.
  std::map<uint64_t, std::shared_ptr<Slot>> open_;
  std::vector<std::string> log_;
};

} // namespace ds::test

#endif // DS_UNITTESTS_RUNTIME_THREADCOMMUNICATOR_H
