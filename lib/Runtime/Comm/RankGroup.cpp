//===- RankGroup.cpp - The ranks of this process's job --------------------===//
//
// MPI is started only under an MPI launcher: a plain run must not pay for
// it (nor need mpirun), and an MPI singleton of Open MPI starts helper
// daemons. Under a launcher, the rank count MPI reports is checked against
// the launcher's own variable, which catches N copies of a program each
// believing it is rank 0 of 1 (e.g. MPICH's mpiexec starting an Open MPI
// build).
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/Launch.h"

#include <cstdlib>
#include <stdexcept>

namespace ds::runtime {

namespace {

/// The launcher's rank count, when it says: (count, variable).
std::pair<int64_t, const char *> launcherSize() {
  for (const char *variable : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char *value = std::getenv(variable); value && *value)
      return {std::atoll(value), variable};
  return {0, nullptr};
}

} // namespace

RankGroup::~RankGroup() {
  // Device channels first: their last collectives may still read the store.
  devices_.clear();
  host_.reset();
}

std::shared_ptr<RankGroup> RankGroup::join(const CommOptions &options) {
  std::shared_ptr<RankGroup> group(new RankGroup());
  group->options_ = options;
  group->launch_ = LaunchInfo::fromEnvironment();
  LaunchInfo &launch = group->launch_;
  switch (launch.kind) {
  case LaunchInfo::Kind::None:
    group->host_ = createLocalCommunicator();
    return group;
  case LaunchInfo::Kind::Store:
    if (launch.size == 1)
      group->host_ = createLocalCommunicator();
    else
      group->rendezvous_ =
          createStoreRendezvous(launch, options.timeoutSeconds);
    return group;
  case LaunchInfo::Kind::Mpi:
    break;
  }
  auto [expected, variable] = launcherSize();
  if (!mpiCommunicatorAvailable()) {
    if (expected > 1)
      throw std::runtime_error("launched with " + std::to_string(expected) +
                               " ranks (" + variable +
                               "), but this build has no MPI");
    group->host_ = createLocalCommunicator();
    launch.size = 1;
    return group;
  }
  group->host_ = createMpiCommunicator(options);
  int64_t size = group->host_->size();
  if (expected > 0 && expected != size)
    throw std::runtime_error(
        "launched with " + std::to_string(expected) + " ranks (" + variable +
        "), but MPI reports " + std::to_string(size) +
        ": the launcher does not belong to the MPI library of this build");
  if (!std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
    launch.localSize = size;
  launch.rank = group->host_->rank();
  launch.size = size;
  return group;
}

std::shared_ptr<Communicator> RankGroup::hostCommunicator() {
  if (!host_)
    host_ = createChannelCommunicator(createStoreChannel(*rendezvous_),
                                      createStoreChannel(*rendezvous_),
                                      cpuDevice(), "store", options_);
  return host_;
}

std::shared_ptr<Communicator>
RankGroup::communicator(const std::shared_ptr<Device> &device) {
  if (launch_.size <= 1 || !deviceHasChannel(*device))
    return hostCommunicator();
  std::string key = device->device().str();
  for (const auto &[name, communicator] : devices_)
    if (name == key)
      return communicator;
  std::unique_ptr<Rendezvous> viaHost;
  Rendezvous *meeting = rendezvous_.get();
  if (!meeting) {
    viaHost = createCommRendezvous(hostCommunicator(), launch_);
    meeting = viaHost.get();
  }
  std::string name =
      device->backendName() == "cuda" ? "nccl" : device->backendName();
  // Two channels (two NCCL communicators): reductions and gathers, each on
  // its own stream.
  std::string id = name + "-id-" + std::to_string(devices_.size());
  std::unique_ptr<Channel> reductions =
      createDeviceChannel(*device, *meeting, id + "-reduce");
  std::unique_ptr<Channel> gathers =
      createDeviceChannel(*device, *meeting, id + "-gather");
  std::shared_ptr<Communicator> communicator = createChannelCommunicator(
      std::move(reductions), std::move(gathers), device, name, options_);
  devices_.emplace_back(key, communicator);
  return communicator;
}

} // namespace ds::runtime
