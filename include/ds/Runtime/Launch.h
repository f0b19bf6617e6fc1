//===- Launch.h - What the launcher says, and how ranks meet ----*- C++ -*-===//
//
// A job's ranks are started by a launcher, which tells each process who it
// is through its environment:
//   mpirun           OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}
//                    (PMI/PMIx launchers: PMIX_RANK, PMI_SIZE); the ranks
//                    meet through MPI;
//   torchrun         RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
//                    MASTER_ADDR, MASTER_PORT, and
//                    TORCHELASTIC_USE_AGENT_STORE=True: its agent already
//                    serves a c10d::TCPStore on MASTER_PORT, which every rank
//                    joins as a client;
//   other launchers  (DeepSpeed's, a hand-written script) the same
//                    variables without the agent's store: rank 0 serves the
//                    store on MASTER_PORT.
// torchrun's variables win over MPI's (torchrun's workers started under
// mpirun or srun inherit the agent's MPI variables).
// From a rendezvous, a device channel (NCCL) or the runtime's store channel
// is made (Channel.h, Communicator.h: createChannelCommunicator).
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_LAUNCH_H
#define DS_RUNTIME_LAUNCH_H

#include "ds/Runtime/Channel.h"
#include "ds/Runtime/Communicator.h"

#include <cstdint>
#include <memory>
#include <string>

namespace ds::runtime {

struct LaunchInfo {
  enum class Kind {
    /// No launcher: one rank.
    None,
    /// mpirun or another MPI launcher.
    Mpi,
    /// RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT (torchrun and others).
    Store,
  };
  Kind kind = Kind::None;
  int64_t rank = 0;
  int64_t size = 1;
  int64_t localRank = 0;
  int64_t localSize = 1;
  /// Kind::Store: where the store is served.
  std::string masterAddr;
  int64_t masterPort = 0;
  /// torchrun's agent serves the store (TORCHELASTIC_USE_AGENT_STORE=True);
  /// its keys of this attempt live under /worker/attempt_<restart>.
  bool agentStore = false;
  int64_t restartCount = 0;

  /// The launcher's variables; Kind::None when there are none. Throws
  /// CommError naming the variable that is missing or malformed (a
  /// WORLD_SIZE without MASTER_ADDR, a RANK outside [0, WORLD_SIZE)).
  static LaunchInfo fromEnvironment();
  /// "mpirun", "torchrun (agent store 127.0.0.1:29500)",
  /// "RANK/WORLD_SIZE (store 127.0.0.1:29500, served by rank 0)".
  std::string describe() const;
};

/// The ranks of a Kind::Store launch meet through a c10d::TCPStore (served
/// by rank 0, or torchrun's agent). Blocks until the store answers (rank 0:
/// until every rank has joined), at most `timeoutSeconds` (0: no limit);
/// throws CommError naming the address on failure.
std::unique_ptr<Rendezvous> createStoreRendezvous(const LaunchInfo &launch,
                                                  double timeoutSeconds);

/// The ranks of `communicator` (MPI's, under mpirun) meet through it: the
/// broadcast is the communicator's, on CPU tensors.
std::unique_ptr<Rendezvous>
createCommRendezvous(std::shared_ptr<Communicator> communicator,
                     const LaunchInfo &launch);

/// The runtime's CPU channel: collectives through the store of a
/// rendezvous made by createStoreRendezvous (every rank posts its blocks as
/// keys and reads the ones it needs; reduce-scatter and all-gather move one
/// block per pair of ranks). For CPU jobs started by torchrun and for
/// tests, not for speed: mpirun with MPI is the fast CPU path. Throws
/// CommError for another kind of rendezvous.
std::unique_ptr<Channel> createStoreChannel(Rendezvous &rendezvous);

/// The ranks of this process's job as its launcher started them, and their
/// communicators: ds-run's World and dsopt share it. Defined in
/// DSRuntimeMPI (it starts MPI under mpirun).
class RankGroup {
public:
  /// Reads the launcher's variables and meets the other ranks: under
  /// mpirun starts MPI (checking that MPI's rank count is the launcher's),
  /// under a RANK/WORLD_SIZE launch joins the TCP store. Throws CommError
  /// or std::runtime_error (MPI missing or failing, bad variables).
  static std::shared_ptr<RankGroup> join(const CommOptions &options);
  ~RankGroup();

  const LaunchInfo &launch() const { return launch_; }
  int64_t rank() const { return launch_.rank; }
  int64_t size() const { return launch_.size; }
  const CommOptions &options() const { return options_; }

  /// The communicator for collectives on `device`, made on the first call
  /// for a device with a channel of its own (cuda: NCCL, its id exchanged
  /// over MPI or the store), else the group's host communicator.
  std::shared_ptr<Communicator>
  communicator(const std::shared_ptr<Device> &device);
  /// The host communicator: MPI under mpirun, the store channel under a
  /// store launch (made on the first call), the local one for one rank.
  std::shared_ptr<Communicator> hostCommunicator();

private:
  RankGroup() = default;
  LaunchInfo launch_;
  CommOptions options_;
  std::unique_ptr<Rendezvous> rendezvous_;
  std::shared_ptr<Communicator> host_;
  /// Device channels' communicators, by device ("cuda:0").
  std::vector<std::pair<std::string, std::shared_ptr<Communicator>>> devices_;
};

} // namespace ds::runtime

#endif // DS_RUNTIME_LAUNCH_H
