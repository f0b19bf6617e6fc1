//===- LaunchProbe.cpp - What a rank learns from its launcher -------------===//
//
// Started by a launcher (mpirun, torchrun, or RANK/WORLD_SIZE/MASTER_ADDR/
// MASTER_PORT by hand), prints one JSON line: the rank, size, local rank and
// local size the launcher gave, how the ranks met, and a 128-byte id that
// rank 0 drew and every rank received through the rendezvous: the path a
// GPU job's NCCL unique id takes (World::connect), without NCCL.
// launch_check.py compares the lines of all ranks.
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/Launch.h"

#include <cstdio>
#include <exception>
#include <random>

using namespace ds::runtime;

int main() {
  try {
    LaunchInfo launch = LaunchInfo::fromEnvironment();
    CommOptions options = CommOptions::fromEnvironment();
    std::shared_ptr<Communicator> mpi;
    std::unique_ptr<Rendezvous> rendezvous;
    if (launch.kind == LaunchInfo::Kind::Mpi) {
      mpi = createMpiCommunicator(options);
      rendezvous = createCommRendezvous(mpi, launch);
    } else {
      rendezvous = createStoreRendezvous(launch, options.timeoutSeconds);
    }
    std::vector<uint8_t> id(128);
    if (rendezvous->rank() == 0) {
      std::random_device device;
      for (uint8_t &byte : id)
        byte = uint8_t(device());
    }
    std::vector<uint8_t> received = rendezvous->broadcast("probe-id", id);
    std::string hex;
    for (uint8_t byte : received) {
      char digits[3];
      std::snprintf(digits, sizeof digits, "%02x", byte);
      hex += digits;
    }
    std::printf("{\"rank\": %lld, \"size\": %lld, \"local_rank\": %lld, "
                "\"local_size\": %lld, \"rendezvous\": \"%s\", \"id\": \"%s\"}\n",
                (long long)rendezvous->rank(), (long long)rendezvous->size(),
                (long long)rendezvous->localRank(),
                (long long)rendezvous->localSize(),
                rendezvous->describe().c_str(), hex.c_str());
    std::fflush(stdout);
    // The rendezvous's destructor keeps a store's server up until every
    // rank has checked out.
    rendezvous.reset();
    if (mpi)
      mpi->barrier().wait();
    return 0;
  } catch (const std::exception &error) {
    std::fprintf(stderr, "ds-launch-probe: error: %s\n", error.what());
    return 1;
  }
}
