//===- TestRendezvous.h - Ranks as threads of one process -------*- C++ -*-===//
//
// A ds::runtime::Rendezvous for tests: the ranks are threads sharing a
// Board, where rank 0 posts each key's bytes and the others wait for them
// (at most `timeout`, then throw naming the key). Header-only, for the NCCL
// channel's tests (NcclHostTest.cpp on the CPU, NcclChannelTest.cpp on
// GPUs).
//
//===----------------------------------------------------------------------===//

#ifndef DS_UNITTESTS_RUNTIME_TESTRENDEZVOUS_H
#define DS_UNITTESTS_RUNTIME_TESTRENDEZVOUS_H

#include "ds/Runtime/Channel.h"

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace ds::runtime::test {

/// What the threads of one job share.
struct Board {
  std::mutex mutex;
  std::condition_variable posted;
  std::map<std::string, std::vector<uint8_t>> values;
  /// How many broadcast() calls, every rank's, so far.
  int calls = 0;
};

class ThreadRendezvous final : public Rendezvous {
public:
  ThreadRendezvous(
      Board &board, int64_t rank, int64_t size,
      std::chrono::milliseconds timeout = std::chrono::milliseconds(60000))
      : board_(board), rank_(rank), size_(size), timeout_(timeout) {}

  int64_t rank() const override { return rank_; }
  int64_t size() const override { return size_; }
  int64_t localRank() const override { return rank_; }
  int64_t localSize() const override { return size_; }
  std::string describe() const override {
    return "threads (" + std::to_string(size_) + ")";
  }
  std::vector<uint8_t> broadcast(const std::string &key,
                                 const std::vector<uint8_t> &bytes) override {
    std::unique_lock<std::mutex> lock(board_.mutex);
    ++board_.calls;
    if (rank_ == 0) {
      if (!board_.values.emplace(key, bytes).second)
        throw std::runtime_error("test rendezvous: key '" + key +
                                 "' broadcast twice");
      board_.posted.notify_all();
      return bytes;
    }
    if (!board_.posted.wait_for(lock, timeout_,
                                [&] { return board_.values.count(key) != 0; }))
      throw std::runtime_error("test rendezvous: rank " +
                               std::to_string(rank_) + " waited out key '" +
                               key + "'");
    return board_.values[key];
  }

private:
  Board &board_;
  int64_t rank_;
  int64_t size_;
  std::chrono::milliseconds timeout_;
};

} // namespace ds::runtime::test

#endif // DS_UNITTESTS_RUNTIME_TESTRENDEZVOUS_H
