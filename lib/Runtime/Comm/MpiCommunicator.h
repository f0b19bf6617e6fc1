//===- MpiCommunicator.h - Open MPI collectives on a thread -----*- C++ -*-===//
//
// Open MPI on these machines has no asynchronous progress: a non-blocking
// collective advances only while some thread is inside an MPI call. The
// communicator therefore owns one communication thread that makes every MPI
// call of the process (MPI_Init_thread, the MPI_I* starts, MPI_Testsome,
// MPI_Finalize). Callers queue operations; the thread starts them in queue
// order (so every rank starts its collectives in the same order) and keeps
// testing the started ones, which is what moves their data while the
// caller computes. MPI_Abort is the one call made elsewhere, and only when
// MPI granted MPI_THREAD_MULTIPLE. Private to lib/Runtime; no MPI type
// appears here either.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_COMM_MPICOMMUNICATOR_H
#define DS_LIB_RUNTIME_COMM_MPICOMMUNICATOR_H

#include "ds/Runtime/Communicator.h"

#include <memory>

namespace ds::runtime::detail {

class MpiCore;

class MpiCommunicator final : public Communicator {
public:
  /// Starts the communication thread and waits until it has initialised
  /// MPI. Throws CommError if that fails.
  explicit MpiCommunicator(const CommOptions &options);
  /// Meets the other ranks at a last barrier and lets queued and started
  /// collectives finish (each bounded by the timeout: MPI_Finalize itself
  /// has none), then finalises MPI and joins the thread.
  ~MpiCommunicator() override;

  int64_t rank() const override;
  int64_t size() const override;
  const char *backendName() const override { return "mpi"; }

  CommHandle allReduce(const at::Tensor &tensor, ReduceOp op) override;
  CommHandle reduceScatter(const at::Tensor &output, const at::Tensor &input,
                           ReduceOp op) override;
  CommHandle allGather(const at::Tensor &output,
                       const at::Tensor &input) override;
  CommHandle broadcast(const at::Tensor &tensor, int64_t root) override;
  CommHandle barrier() override;
  [[noreturn]] void abort(int exitCode) override;

private:
  /// Shared with the thread and with every handle, so that a handle may
  /// outlive the communicator object.
  std::shared_ptr<MpiCore> core_;
};

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_COMM_MPICOMMUNICATOR_H
