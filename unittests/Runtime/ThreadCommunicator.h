//===- ThreadCommunicator.h - W ranks as threads of one test ----*- C++ -*-===//
//
// A test backend of the Communicator interface: W ranks are W threads of
// one process, and each collective is a rendezvous of all of them (blocking;
// the handle it returns is complete). It lets gtest run a data-parallel
// Engine on several ranks without MPI. Reductions add the ranks in rank
// order, so every rank gets the same bits, as MPI's do. Every collective
// is logged ("allReduce avg 5") and counted (Communicator::volume()).
//
//===----------------------------------------------------------------------===//

#ifndef DS_UNITTESTS_RUNTIME_THREADCOMMUNICATOR_H
#define DS_UNITTESTS_RUNTIME_THREADCOMMUNICATOR_H

#include "ds/Runtime/Communicator.h"

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ds::test {

class ThreadGroup {
public:
  explicit ThreadGroup(int64_t size)
      : size_(size), inputs_(size), outputs_(size) {}

  /// One communicator per rank.
  std::shared_ptr<runtime::Communicator> member(int64_t rank);
  /// Runs `body(rank)` on one thread per rank and joins them; rethrows the
  /// first exception a rank threw.
  void run(const std::function<void(int64_t rank)> &body);

  /// Rank 0's collectives, in order.
  std::vector<std::string> log() const;

  int64_t size() const { return size_; }

  /// A rendezvous: every rank deposits (input, output); the last to arrive
  /// runs `combine` over all deposits, then all return.
  void collective(
      int64_t rank, const std::string &what, at::Tensor input,
      at::Tensor output,
      const std::function<void(const std::vector<at::Tensor> &,
                               const std::vector<at::Tensor> &)> &combine);

private:
  int64_t size_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  int64_t arrived_ = 0;
  uint64_t generation_ = 0;
  std::vector<at::Tensor> inputs_, outputs_;
  std::vector<std::string> log_;
};

} // namespace ds::test

#endif // DS_UNITTESTS_RUNTIME_THREADCOMMUNICATOR_H
