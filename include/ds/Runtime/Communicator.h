//===- Communicator.h - Collectives between data-parallel ranks -*- C++ -*-===//
//
// The runtime's only view of the other ranks. Backends: LocalCommunicator
// (one rank, no library), MpiCommunicator (Open MPI, CPU tensors) and later
// NCCL (CUDA). No backend type appears here, so the runtime and the engine
// compile without MPI or NCCL headers.
//
// Collectives are non-blocking: each call checks its arguments, queues the
// operation and returns a CommHandle at once; the operation advances while
// the caller computes (the MPI backend has a communication thread for this,
// since Open MPI here makes no progress in the background) and
// CommHandle::wait() blocks until it is done. Every rank must start the
// same collectives in the same order (as with MPI and NCCL). The tensors
// belong to the collective until it completes: do not read or write them
// before wait() (or isCompleted()) says so; the handle keeps them alive.
//
// Reduce-scatter and all-gather are real collectives of the backend, never
// all-reduce in disguise: ZeRO's traffic bounds depend on it.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_COMMUNICATOR_H
#define DS_RUNTIME_COMMUNICATOR_H

#include "ds/Plan/Report.h"
#include "ds/Runtime/Device.h"
#include "ds/TensorIO/RuntimeError.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Stream.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ds::runtime {

enum class ReduceOp {
  Sum,
  /// Sum, then divided by the number of ranks (DeepSpeed's gradient
  /// averaging: all-reduce the sum, then scale by 1/W).
  Avg,
  Max,
};

/// "sum", "avg", "max".
const char *reduceOpName(ReduceOp op);

/// A collective that cannot be started (bad arguments) or that failed.
class CommError : public RuntimeError {
public:
  using RuntimeError::RuntimeError;
};

/// A collective that did not finish within the timeout, with
/// CommOptions::OnTimeout::Throw (by default the job is aborted instead).
class CommTimeoutError : public CommError {
public:
  using CommError::CommError;
};

/// The state of one started collective; backends implement it.
class CommWork {
public:
  virtual ~CommWork();
  /// Non-blocking: whether the collective has finished (successfully or
  /// not).
  virtual bool isCompleted() = 0;
  /// Blocks until the collective has finished. Throws CommError if it
  /// failed; on timeout, see CommOptions::onTimeout.
  virtual void wait() = 0;
  /// Orders the collective before the work queued on `stream` after this
  /// call returns, and lets the tensors go back to the caller's use on that
  /// stream. A backend whose collectives run on a device stream (NCCL, the
  /// next part of the CUDA back end) makes `stream` wait for the
  /// collective's event without blocking the host; the default, right for
  /// backends that move host memory (MPI, local), is wait().
  virtual void waitOn(const c10::Stream &stream) { wait(); }
  /// "allReduce #12 (avg, 1048576 x float32)", for messages.
  virtual std::string describe() const = 0;
  /// When the collective completed, if it has and the backend knows (the
  /// MPI backend notes it on its communication thread); nullopt otherwise.
  /// For measuring how long collectives were in flight.
  virtual std::optional<std::chrono::steady_clock::time_point>
  completedAt() const {
    return std::nullopt;
  }
};

/// A started collective. A default-constructed handle is complete.
/// Dropping a handle does not cancel its collective.
class CommHandle {
public:
  CommHandle() = default;
  explicit CommHandle(std::shared_ptr<CommWork> work)
      : work_(std::move(work)) {}

  bool isCompleted() const { return !work_ || work_->isCompleted(); }
  void wait() const {
    if (work_)
      work_->wait();
  }
  /// See CommWork::waitOn.
  void waitOn(const c10::Stream &stream) const {
    if (work_)
      work_->waitOn(stream);
  }
  std::string describe() const {
    return work_ ? work_->describe() : "completed collective";
  }
  /// See CommWork::completedAt; nullopt for a default (complete) handle.
  std::optional<std::chrono::steady_clock::time_point> completedAt() const {
    return work_ ? work_->completedAt() : std::nullopt;
  }
  /// Whether the handle has a collective behind it (false: it completed
  /// before the call that started it returned).
  bool hasWork() const { return work_ != nullptr; }

private:
  std::shared_ptr<CommWork> work_;
};

/// Waits for every handle, in order.
void waitAll(const std::vector<CommHandle> &handles);

struct CommOptions {
  /// How long one wait() may block before the rank gives up: a peer that
  /// died or hangs must not hang the others forever. 0 waits forever.
  double timeoutSeconds = 60.0;
  enum class OnTimeout {
    /// Print "<messagePrefix>rank R: collective X timed out after N s (a
    /// peer rank may have died)" to stderr and abort the whole job
    /// (MPI_Abort): after a timeout the collective can neither finish nor
    /// be cancelled, so the communicator is unusable.
    Abort,
    /// Throw CommTimeoutError with that message (tests).
    Throw,
  };
  OnTimeout onTimeout = OnTimeout::Abort;
  /// Put before the timeout message ("ds-run: error: ").
  std::string messagePrefix;

  /// The defaults, with timeoutSeconds from DS_COMM_TIMEOUT_SECONDS when
  /// set (a number >= 0). Throws CommError on a malformed value.
  static CommOptions fromEnvironment();
};

/// Elements moved by the collectives started so far (ZeRO counting, see
/// plan::CommVolume and docs/runtime.md, "Reports"). n is a reduce-scatter's
/// input and an all-gather's output. One rank moves nothing: a communicator
/// of size 1 counts 0.
using CommVolume = plan::CommVolume;

class Communicator {
public:
  virtual ~Communicator();

  /// The volume of every collective started on this communicator (counted
  /// when started, whether or not it has completed). Callers take
  /// snapshots and subtract (ds-run excludes the load-time broadcast and
  /// its own loss averaging this way). Thread-safe.
  CommVolume volume() const;

  /// This process's rank, 0 <= rank() < size().
  virtual int64_t rank() const = 0;
  /// The number of ranks.
  virtual int64_t size() const = 0;
  /// "local", "mpi", ...
  virtual const char *backendName() const = 0;

  /// Every rank's `tensor` is replaced, in place, by the element-wise
  /// reduction over the ranks. Reductions take float32, float64, bfloat16,
  /// float16, int32 and int64; 16-bit floats are combined pairwise in
  /// float32 and each partial result rounded back (MPI has no 16-bit float
  /// type: user-defined MPI ops do it). The tensor must be contiguous, on a
  /// device the backend takes (MPI: the CPU; local: any), the buffers of one
  /// collective on one device. Throws CommError on bad arguments.
  virtual CommHandle allReduce(const at::Tensor &tensor, ReduceOp op) = 0;
  /// Block reduce-scatter: `input` (numel = size() * n) is reduced over the
  /// ranks and rank r receives elements [r*n, (r+1)*n) of the result in
  /// `output` (numel n, same dtype). The two must not overlap.
  virtual CommHandle reduceScatter(const at::Tensor &output,
                                   const at::Tensor &input, ReduceOp op) = 0;
  /// All-gather: `output` (numel = size() * n) receives every rank's `input`
  /// (numel n, same dtype) in rank order. Any dtype. `input` may be rank
  /// r's own block of `output` (elements [r*n, (r+1)*n)): the in-place form
  /// ZeRO uses to gather updated shards into a flat buffer.
  virtual CommHandle allGather(const at::Tensor &output,
                               const at::Tensor &input) = 0;
  /// Every rank's `tensor` receives rank `root`'s. Any dtype.
  virtual CommHandle broadcast(const at::Tensor &tensor, int64_t root) = 0;
  virtual CommHandle barrier() = 0;

  /// Ends the whole job now with `exitCode` (MPI_Abort): for errors after
  /// which the ranks cannot meet again. The local backend exits.
  [[noreturn]] virtual void abort(int exitCode) = 0;

protected:
  /// Backends call these when a collective starts, with the element count
  /// of the full buffer (all-reduce: the tensor; reduce-scatter: the
  /// input; all-gather: the output; broadcast: the tensor). They apply the
  /// ZeRO factors and count nothing when size() == 1.
  void countAllReduce(int64_t numel);
  void countReduceScatter(int64_t numel);
  void countAllGather(int64_t numel);
  void countBroadcast(int64_t numel);

private:
  void count(std::atomic<int64_t> &counter, int64_t elements);

  std::atomic<int64_t> allReduceElements_{0};
  std::atomic<int64_t> reduceScatterElements_{0};
  std::atomic<int64_t> allGatherElements_{0};
  std::atomic<int64_t> broadcastElements_{0};
};

/// The training step this process is in (1-based; 0: none yet), named by
/// timeout messages. ds-run notes each step as it begins. Thread-safe.
void noteTrainingStep(int64_t step);
int64_t currentTrainingStep();

/// A Communicator over a device backend's Channel (Channel.h: NCCL) or the
/// runtime's store channel, named `name` ("nccl", "store"). Each collective
/// is checked and counted on the calling thread, then issued by a
/// communication thread on the device's communication stream (reductions)
/// or, when `gatherChannel` is given, the gathers (all-gather, broadcast)
/// over that channel on the device's gather stream, after an event
/// recorded on the caller's compute stream (the work that produced its
/// input); CommHandle::waitOn(stream) makes `stream` wait for it without
/// blocking the host. CPU tensors given to a device channel are staged
/// through the device and copied back by wait(). A watchdog thread keeps
/// every collective's tensors alive until it has completed, notes when each
/// completed (from the device's timing events), and after
/// options.timeoutSeconds aborts the channel and ends the job (or, with
/// OnTimeout::Throw, fails the collective) with a message that names the
/// collective and the training step.
std::shared_ptr<Communicator>
createChannelCommunicator(std::unique_ptr<Channel> channel,
                          std::unique_ptr<Channel> gatherChannel,
                          std::shared_ptr<Device> device, std::string name,
                          const CommOptions &options = CommOptions());

/// One rank, no library: collectives complete at once (a reduction over
/// one rank is the identity, Avg included).
std::shared_ptr<Communicator> createLocalCommunicator();

/// Whether this build has the MPI backend.
bool mpiCommunicatorAvailable();
/// Initialises MPI (MPI_THREAD_MULTIPLE) on a communication thread that
/// then owns every MPI call, and returns the communicator of all launched
/// ranks (a duplicate of MPI_COMM_WORLD). At most one per process: MPI
/// cannot be initialised twice. MPI is finalised when the last reference
/// goes. Throws CommError when MPI is unavailable or fails to start.
std::shared_ptr<Communicator>
createMpiCommunicator(const CommOptions &options = CommOptions());

} // namespace ds::runtime

#endif // DS_RUNTIME_COMMUNICATOR_H
