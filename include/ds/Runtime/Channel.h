//===- Channel.h - Collectives of a device backend, and the rendezvous -*- C++ -*-===//
//
// The device seam's collectives, after IREE's HAL channel: a Channel joins
// the ranks of a job, one device each, and queues collectives on a stream of
// that device (NCCL for cuda, lib/Runtime/CUDA/NcclChannel.cpp). It checks
// nothing and counts nothing: the runtime's ChannelCommunicator
// (Communicator.h, createChannelCommunicator) wraps it with the argument
// checks, the volume counts, the event ordering and the watchdog, the same
// for every backend.
//
// A Rendezvous is how the ranks of a job first find each other: under
// mpirun through MPI, under torchrun (or any launcher that sets RANK,
// WORLD_SIZE, MASTER_ADDR and MASTER_PORT) through a c10d::TCPStore. A
// channel is created from one (NCCL: rank 0's unique id, broadcast).
//
// Both classes are defined in this header (inline virtual destructors), so
// that a backend library implements Channel and calls a Rendezvous without
// linking the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_CHANNEL_H
#define DS_RUNTIME_CHANNEL_H

#include <ATen/core/Tensor.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ds::runtime {

/// How the ranks of a job found each other.
class Rendezvous {
public:
  virtual ~Rendezvous() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  /// This rank's index among the ranks of its node, and their number.
  virtual int64_t localRank() const = 0;
  virtual int64_t localSize() const = 0;
  /// "torchrun (store 127.0.0.1:29500)", "mpirun (MPI)": for messages.
  virtual std::string describe() const = 0;
  /// Rank 0's `bytes` on every rank (the others' argument is ignored).
  /// Every rank calls it with the same `key`, once per key. Blocks until
  /// rank 0's bytes have arrived; throws on timeout.
  virtual std::vector<uint8_t> broadcast(const std::string &key,
                                         const std::vector<uint8_t> &bytes) = 0;
};

/// The reductions of a channel. Avg: the sum divided by size().
enum class ChannelOp { Sum, Avg, Max };

/// One rank's end of a collective channel. Every call queues its collective
/// on `stream` (a stream of the channel's device) and returns; an Event
/// recorded on `stream` after the call completes with it. The buffers are
/// contiguous, on the channel's device, of one dtype (checked by the
/// caller). Every rank makes the same calls in the same order.
class Channel {
public:
  virtual ~Channel() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  /// "nccl 2.28.9", "store": for reports.
  virtual std::string describe() const = 0;

  virtual void allReduce(const at::Tensor &tensor, ChannelOp op,
                         const c10::Stream &stream) = 0;
  /// `input` has size() blocks of output.numel(); rank r gets block r.
  virtual void reduceScatter(const at::Tensor &output, const at::Tensor &input,
                             ChannelOp op, const c10::Stream &stream) = 0;
  /// `output` has size() blocks of input.numel(); `input` may be this rank's
  /// block of `output`.
  virtual void allGather(const at::Tensor &output, const at::Tensor &input,
                         const c10::Stream &stream) = 0;
  virtual void broadcast(const at::Tensor &tensor, int64_t root,
                         const c10::Stream &stream) = 0;

  /// The collectives called between groupStart() and groupEnd() are
  /// launched together (ncclGroupStart / ncclGroupEnd: one kernel for
  /// several buckets). By default nothing is grouped.
  virtual void groupStart() {}
  virtual void groupEnd() {}

  /// An error met in the background (a peer gone, a network failure), or
  /// empty. Non-blocking: the watchdog polls it.
  virtual std::string asyncError() = 0;
  /// Ends the pending collectives without waiting for the peers
  /// (ncclCommAbort): the watchdog's way out after a timeout. The channel
  /// is unusable afterwards.
  virtual void abort() = 0;
};

} // namespace ds::runtime

#endif // DS_RUNTIME_CHANNEL_H
