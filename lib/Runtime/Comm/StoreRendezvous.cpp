//===- StoreRendezvous.cpp - Ranks meeting through a c10d::TCPStore -------===//
//
// The store is LibTorch's (libtorch_cpu): the same server torchrun's agent
// runs, so a rank of ours joins it as torch.distributed's env:// init does,
// under the same key prefix (/worker/attempt_<restart>).
//
//===----------------------------------------------------------------------===//

#include "StoreRendezvous.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <c10/util/Exception.h>

#include <algorithm>
#include <thread>

namespace ds::runtime {

namespace detail {

StoreRendezvous::StoreRendezvous(const LaunchInfo &launch,
                                 c10::intrusive_ptr<c10d::Store> store,
                                 std::chrono::milliseconds timeout)
    : launch_(launch), store_(std::move(store)), timeout_(timeout) {}

StoreRendezvous::~StoreRendezvous() {
  try {
    store_->add("rendezvous/closed", 1);
    if (launch_.rank != 0 || launch_.agentStore)
      return;
    // At most a minute: a peer that crashed does not check out.
    auto deadline = std::chrono::steady_clock::now() +
                    std::min<std::chrono::milliseconds>(
                        timeout_, std::chrono::milliseconds(60000));
    while (store_->add("rendezvous/closed", 0) < launch_.size &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  } catch (const std::exception &) {
    // A peer or the store is gone: nothing left to protect.
  }
}

std::vector<uint8_t>
StoreRendezvous::broadcast(const std::string &key,
                           const std::vector<uint8_t> &bytes) {
  std::string full = "rendezvous/" + key;
  if (launch_.rank == 0) {
    store_->set(full, bytes);
    return bytes;
  }
  try {
    return store_->get(full); // Blocks up to the store's timeout.
  } catch (const c10::Error &error) {
    throw CommError("rank " + std::to_string(launch_.rank) +
                    ": no '" + key + "' from rank 0 through the store (" +
                    launch_.describe() + "): " + error.what_without_backtrace());
  }
}

bool waitForKey(c10d::Store &store, const std::string &key,
                const std::function<bool()> &stop) {
  // Polled: the store's own bounded wait logs a warning at every timeout.
  auto pause = std::chrono::microseconds(20);
  while (!store.check({key})) {
    if (stop())
      return false;
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2,
                                                std::chrono::milliseconds(2));
  }
  return true;
}

} // namespace detail

std::unique_ptr<Rendezvous> createStoreRendezvous(const LaunchInfo &launch,
                                                  double timeoutSeconds) {
  if (launch.kind != LaunchInfo::Kind::Store)
    throw CommError("a store rendezvous needs RANK, WORLD_SIZE, MASTER_ADDR "
                    "and MASTER_PORT from the launcher");
  c10d::TCPStoreOptions options;
  options.port = uint16_t(launch.masterPort);
  options.isServer = launch.rank == 0 && !launch.agentStore;
  options.numWorkers = size_t(launch.size);
  options.waitWorkers = true; // Clients count themselves in; the server waits.
  // No limit: a day. The watchdog bounds the collectives themselves.
  std::chrono::milliseconds timeout(
      timeoutSeconds > 0 ? int64_t(timeoutSeconds * 1000) : 86400000);
  options.timeout = timeout;
  options.multiTenant = true;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    auto tcp = c10::make_intrusive<c10d::TCPStore>(launch.masterAddr, options);
    c10::intrusive_ptr<c10d::Store> base = tcp;
    if (launch.agentStore)
      base = c10::make_intrusive<c10d::PrefixStore>(
          "/worker/attempt_" + std::to_string(launch.restartCount), base);
    store = c10::make_intrusive<c10d::PrefixStore>("ds", base);
  } catch (const c10::Error &error) {
    throw CommError("rank " + std::to_string(launch.rank) +
                    ": cannot reach the store of " + launch.describe() + ": " +
                    error.what_without_backtrace());
  }
  return std::make_unique<detail::StoreRendezvous>(launch, std::move(store),
                                                   timeout);
}

} // namespace ds::runtime
