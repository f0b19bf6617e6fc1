//===- World.h - This process's rank and the number of ranks ----*- C++ -*-===//
//
// The one place ds-run learns its rank and world size, and the one place
// that combines per-rank numbers. Started directly, ds-run is rank 0 of 1
// and needs no MPI; started by an MPI launcher (mpirun -n W), it initialises
// MPI and takes rank and size from it; started by torchrun (or any launcher
// that sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), it joins the
// launcher's TCP store. The World owns the run's Communicator, which the
// engine shares for the gradient reduction: made once the run's device is
// known (connect): NCCL on GPUs, MPI or the store channel on CPUs.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TOOLS_DSRUN_WORLD_H
#define DS_TOOLS_DSRUN_WORLD_H

#include "ds/Runtime/Communicator.h"
#include "ds/Runtime/Launch.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ds::run {

struct World {
  int64_t rank = 0;
  int64_t size = 1;
  /// The job's ranks as the launcher started them (null: one rank).
  /// Declared first, so that it goes last: MPI finalises and the store
  /// closes after the communicator.
  std::shared_ptr<runtime::RankGroup> group;
  /// The ranks' communicator: MPI under mpirun, the local one for one
  /// rank; under torchrun null until connect(). Null in a
  /// default-constructed World (one rank).
  std::shared_ptr<runtime::Communicator> comm;

  /// The communicator for a run on `device` (RankGroup::communicator: NCCL
  /// on GPUs, MPI or the store channel on CPUs), which becomes `comm`.
  std::shared_ptr<runtime::Communicator>
  connect(const std::shared_ptr<runtime::Device> &device);

  /// Detects the launcher: Open MPI's mpirun (OMPI_COMM_WORLD_SIZE) or a
  /// PMI/PMIx launcher (PMIX_RANK, PMI_SIZE) starts MPI; RANK/WORLD_SIZE
  /// (torchrun) join the TCP store; otherwise one local rank. Under several ranks, sets LibTorch's intra-op threads to
  /// the cores per local rank unless OMP_NUM_THREADS says otherwise. Throws
  /// std::runtime_error (MPI missing or failing, a launcher that does not
  /// match the MPI library, a bad DS_COMM_TIMEOUT_SECONDS or DS_TEST_FAULT).
  static World detect();

  /// Element-wise sum over all ranks, in place (identity for one rank).
  /// Every rank must call it at the same point.
  void sumAcrossRanks(std::vector<double> &values) const;

  bool isLeader() const { return rank == 0; }

  /// After an error on this rank of a multi-rank run: ends the whole job
  /// (the other ranks would wait for this one until their timeout). Returns
  /// when this is the only rank.
  void abortIfOthersRun(int exitCode) const;

  /// A training step (1-based) begins: timeout messages name it, and the
  /// fault below may fire or be armed.
  void beginStep(int64_t step) const;

  /// Test hook for the failure tests (test/mpi/fault_check.py): with
  /// DS_TEST_FAULT=MODE:RANK:STEP[:POINT[:N]], rank RANK exits (MODE exit:
  /// code 3, without MPI_Finalize, like a crash), hangs (hang) or is killed
  /// (kill: SIGKILL) in training step STEP (1-based), at POINT:
  ///   step       (the default) when the step begins;
  ///   allgather  once it has issued the step's N-th all_gather (default 1;
  ///              ZeRO-3: a parameter bucket's gather), so that the other
  ///              ranks are inside a collective;
  ///   optimizer  in the step's N-th optimizer_step (one per training
  ///              engine), after the gradient reduction, before the update.
  /// allgather and optimizer are the runtime's fault points
  /// (lib/Runtime/FaultPoints.h), armed for step STEP only: a step with
  /// fewer than N of them leaves the run alone. Prints
  /// "ds-run: DS_TEST_FAULT: rank R: MODE at step S[ (POINT #N)]" first.
  void faultPoint(int64_t step) const;

  /// Parsed DS_TEST_FAULT; mode empty when unset.
  struct Fault {
    std::string mode;
    int64_t rank = -1;
    int64_t step = -1;
    /// "step", "allgather" or "optimizer".
    std::string point = "step";
    /// The point's occurrence in the step (1-based).
    int64_t occurrence = 1;
  };
  Fault fault;
};

} // namespace ds::run

#endif // DS_TOOLS_DSRUN_WORLD_H
