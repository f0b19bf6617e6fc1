//===- StoreRendezvous.h - Ranks meeting through a c10d store ---*- C++ -*-===//
//
// Private to lib/Runtime/Comm: the rendezvous of a RANK/WORLD_SIZE launch,
// whose store the store channel (StoreChannel.cpp) also uses.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_COMM_STOREREZDEZVOUS_H
#define DS_LIB_RUNTIME_COMM_STOREREZDEZVOUS_H

#include "ds/Runtime/Launch.h"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <functional>

namespace ds::runtime::detail {

class StoreRendezvous final : public Rendezvous {
public:
  StoreRendezvous(const LaunchInfo &launch,
                  c10::intrusive_ptr<c10d::Store> store,
                  std::chrono::milliseconds timeout);
  /// Every rank checks out; the rank that serves the store (rank 0 without
  /// torchrun's agent) waits for the others, at most the timeout, so that
  /// none loses the store while it still reads from it.
  ~StoreRendezvous() override;

  int64_t rank() const override { return launch_.rank; }
  int64_t size() const override { return launch_.size; }
  int64_t localRank() const override { return launch_.localRank; }
  int64_t localSize() const override { return launch_.localSize; }
  std::string describe() const override { return launch_.describe(); }
  std::vector<uint8_t> broadcast(const std::string &key,
                                 const std::vector<uint8_t> &bytes) override;

  const c10::intrusive_ptr<c10d::Store> &store() { return store_; }
  /// A fresh key prefix for one channel ("ch0/", "ch1/", ...): the same on
  /// every rank when every rank makes its channels in the same order.
  std::string nextChannelPrefix() {
    return "ch" + std::to_string(channels_++) + "/";
  }

private:
  LaunchInfo launch_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  int64_t channels_ = 0;
};

/// Blocks until `key` is in `store`, checking `stop` (a channel being
/// aborted) at least every 2 ms: returns false when stopped.
bool waitForKey(c10d::Store &store, const std::string &key,
                const std::function<bool()> &stop);

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_COMM_STOREREZDEZVOUS_H
