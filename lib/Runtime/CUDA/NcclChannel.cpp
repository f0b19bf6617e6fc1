//===- NcclChannel.cpp - A Channel over one NCCL communicator -------------===//
//
// One rank's end of an NCCL communicator (blocking mode), one device per
// rank. Every collective is queued on the caller's stream with the channel's
// device current and returns; the buffers are recorded on that stream with
// LibTorch's caching allocator, so that a block freed meanwhile is not
// handed out again before the collective is done with it. The reductions
// take float32, float64, bfloat16, float16, int32, int64, uint8, int8 and
// bool (NcclTypes.h); all-gather and broadcast move bytes, so they take any
// dtype. NCCL's errors become std::runtime_error naming the collective,
// with ncclGetErrorString's and ncclGetLastError's text.
//
// abort() is the watchdog's: it may come from another thread while a
// collective waits for its peers (ncclCommAbort is made for that). After it
// the channel refuses every collective and the destructor does not destroy
// the (already freed) communicator.
//
//===----------------------------------------------------------------------===//

#include "NcclChannel.h"

#include "NcclTypes.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace ds::runtime {
namespace {

/// "; <ncclGetLastError(comm)>", or "" when NCCL has no text.
std::string lastErrorOf(ncclComm_t comm) {
  const char *text = ncclGetLastError(comm);
  return text && *text ? std::string("; ") + text : std::string();
}

class NcclChannel final : public Channel {
public:
  NcclChannel(ncclComm_t comm, c10::DeviceIndex index, int64_t rank,
              int64_t size)
      : comm_(comm), index_(index), rank_(rank), size_(size) {
    int code = 0;
    if (ncclGetVersion(&code) == ncclSuccess)
      version_ = nccl::versionString(code);
    else
      version_ = "?";
  }
  ~NcclChannel() override {
    if (aborted_.load())
      return;
    try {
      c10::cuda::CUDAGuard guard(index_);
      ncclResult_t result = ncclCommDestroy(comm_);
      if (result != ncclSuccess)
        std::fprintf(stderr, "warning: %s: ncclCommDestroy: %s\n",
                     describe().c_str(), ncclGetErrorString(result));
    } catch (const std::exception &e) {
      std::fprintf(stderr, "warning: %s: ncclCommDestroy: %s\n",
                   describe().c_str(), e.what());
    }
  }

  int64_t rank() const override { return rank_; }
  int64_t size() const override { return size_; }
  std::string describe() const override {
    return "nccl " + version_ + " (rank " + std::to_string(rank_) + " of " +
           std::to_string(size_) + ", cuda:" + std::to_string(int(index_)) +
           ")";
  }

  void allReduce(const at::Tensor &tensor, ChannelOp op,
                 const c10::Stream &stream) override {
    const char *what = "all-reduce";
    nccl::Reduction r = nccl::reductionFor(what, tensor.scalar_type(), op);
    checkTensor(what, "tensor", tensor);
    cudaStream_t cuda = streamOf(what, stream);
    if (tensor.numel() == 0)
      return;
    c10::cuda::CUDAGuard guard(index_);
    record(tensor, stream);
    check(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(),
                        size_t(tensor.numel()), r.type, r.op, comm_, cuda),
          what, "ncclAllReduce");
  }

  void reduceScatter(const at::Tensor &output, const at::Tensor &input,
                     ChannelOp op, const c10::Stream &stream) override {
    const char *what = "reduce-scatter";
    nccl::Reduction r = nccl::reductionFor(what, input.scalar_type(), op);
    checkTensor(what, "output", output);
    checkTensor(what, "input", input);
    checkSameType(what, output, input);
    nccl::checkBlocks(what, input.numel(), output.numel(), size_);
    cudaStream_t cuda = streamOf(what, stream);
    if (output.numel() == 0)
      return;
    c10::cuda::CUDAGuard guard(index_);
    record(input, stream);
    record(output, stream);
    check(ncclReduceScatter(input.data_ptr(), output.data_ptr(),
                            size_t(output.numel()), r.type, r.op, comm_, cuda),
          what, "ncclReduceScatter");
  }

  void allGather(const at::Tensor &output, const at::Tensor &input,
                 const c10::Stream &stream) override {
    const char *what = "all-gather";
    checkTensor(what, "output", output);
    checkTensor(what, "input", input);
    checkSameType(what, output, input);
    nccl::checkBlocks(what, output.numel(), input.numel(), size_);
    cudaStream_t cuda = streamOf(what, stream);
    if (input.numel() == 0)
      return;
    c10::cuda::CUDAGuard guard(index_);
    record(input, stream);
    record(output, stream);
    // In place when `input` is this rank's block of `output` (NCCL's own
    // in-place form: same offset in bytes).
    check(ncclAllGather(input.data_ptr(), output.data_ptr(),
                        nccl::byteCount(input.numel(), input.scalar_type()),
                        ncclUint8, comm_, cuda),
          what, "ncclAllGather");
  }

  void broadcast(const at::Tensor &tensor, int64_t root,
                 const c10::Stream &stream) override {
    const char *what = "broadcast";
    checkTensor(what, "tensor", tensor);
    nccl::checkRoot(what, root, size_);
    cudaStream_t cuda = streamOf(what, stream);
    if (tensor.numel() == 0)
      return;
    c10::cuda::CUDAGuard guard(index_);
    record(tensor, stream);
    check(ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(),
                        nccl::byteCount(tensor.numel(), tensor.scalar_type()),
                        ncclUint8, int(root), comm_, cuda),
          what, "ncclBroadcast");
  }

  void groupStart() override {
    check(ncclGroupStart(), "group", "ncclGroupStart");
  }
  void groupEnd() override {
    c10::cuda::CUDAGuard guard(index_);
    check(ncclGroupEnd(), "group", "ncclGroupEnd");
  }

  std::string asyncError() override {
    if (aborted_.load())
      return describe() + ": the communicator was aborted (ncclCommAbort)";
    ncclResult_t state = ncclSuccess;
    ncclResult_t result = ncclCommGetAsyncError(comm_, &state);
    if (result != ncclSuccess)
      return describe() +
             ": ncclCommGetAsyncError: " + ncclGetErrorString(result);
    if (state == ncclSuccess || state == ncclInProgress)
      return "";
    return describe() + ": " + ncclGetErrorString(state) + lastError();
  }

  void abort() override {
    bool expected = false;
    if (!aborted_.compare_exchange_strong(expected, true))
      return;
    // No CUDAGuard: setting the device may itself hang or fail on a broken
    // GPU, and ncclCommAbort sets what it needs.
    ncclResult_t result = ncclCommAbort(comm_);
    if (result != ncclSuccess)
      std::fprintf(stderr, "warning: %s: ncclCommAbort: %s\n",
                   describe().c_str(), ncclGetErrorString(result));
  }

private:
  std::string lastError() const { return lastErrorOf(comm_); }

  void check(ncclResult_t result, const char *collective,
             const char *call) const {
    if (result == ncclSuccess)
      return;
    throw std::runtime_error(describe() + ": " + collective + ": " + call +
                             ": " + ncclGetErrorString(result) + lastError());
  }

  void checkTensor(const char *collective, const char *role,
                   const at::Tensor &tensor) const {
    auto fail = [&](const std::string &why) {
      throw std::runtime_error(describe() + ": " + collective + ": the " +
                               role + " " + why);
    };
    if (aborted_.load())
      throw std::runtime_error(describe() + ": " + collective +
                               ": the channel was aborted");
    if (!tensor.defined())
      fail("is undefined");
    if (tensor.device() != c10::Device(c10::kCUDA, index_))
      fail("is on " + tensor.device().str() +
           ", not the channel's cuda:" + std::to_string(int(index_)));
    if (!tensor.is_contiguous())
      fail("is not contiguous");
  }

  void checkSameType(const char *collective, const at::Tensor &output,
                     const at::Tensor &input) const {
    if (output.scalar_type() != input.scalar_type())
      throw std::runtime_error(describe() + ": " + collective + ": output " +
                               c10::toString(output.scalar_type()) +
                               " and input " +
                               c10::toString(input.scalar_type()) + " differ");
  }

  cudaStream_t streamOf(const char *collective,
                        const c10::Stream &stream) const {
    if (stream.device_type() != c10::DeviceType::CUDA ||
        stream.device_index() != index_)
      throw std::runtime_error(
          describe() + ": " + collective +
          ": a stream "
          "of " +
          stream.device().str() +
          ", not of the channel's cuda:" + std::to_string(int(index_)));
    return c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, stream)
        .stream();
  }

  /// The caching allocator keeps `tensor`'s block for the work of `stream`.
  static void record(const at::Tensor &tensor, const c10::Stream &stream) {
    c10::cuda::CUDACachingAllocator::recordStream(
        tensor.storage().data_ptr(),
        c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, stream));
  }

  ncclComm_t comm_;
  c10::DeviceIndex index_;
  int64_t rank_;
  int64_t size_;
  std::string version_;
  std::atomic<bool> aborted_{false};
};

} // namespace

std::unique_ptr<Channel> createNcclChannel(Device &device,
                                           Rendezvous &rendezvous,
                                           const std::string &key) {
  c10::Device where = device.device();
  std::string what = "nccl channel '" + key + "' on " + where.str() + " (" +
                     rendezvous.describe() + ")";
  if (!where.is_cuda() || !where.has_index())
    throw std::runtime_error(what + ": NCCL needs a cuda device with an index");
  int64_t size = rendezvous.size();
  int64_t rank = rendezvous.rank();
  if (size < 1 || size > INT_MAX || rank < 0 || rank >= size)
    throw std::runtime_error(what + ": rank " + std::to_string(rank) + " of " +
                             std::to_string(size) +
                             " is not a rank NCCL can join");
  c10::cuda::CUDAGuard guard(where.index());
  ncclUniqueId id = nccl::exchangeUniqueId(rendezvous, key, [&] {
    ncclUniqueId made;
    ncclResult_t result = ncclGetUniqueId(&made);
    if (result != ncclSuccess)
      throw std::runtime_error(
          what + ": ncclGetUniqueId: " + ncclGetErrorString(result) +
          lastErrorOf(nullptr));
    return made;
  });
  ncclComm_t comm = nullptr;
  ncclResult_t result = ncclCommInitRank(&comm, int(size), id, int(rank));
  if (result != ncclSuccess)
    throw std::runtime_error(
        what + ": ncclCommInitRank (rank " + std::to_string(rank) + " of " +
        std::to_string(size) + "): " + ncclGetErrorString(result) +
        lastErrorOf(comm));
  return std::make_unique<NcclChannel>(comm, where.index(), rank, size);
}

} // namespace ds::runtime
