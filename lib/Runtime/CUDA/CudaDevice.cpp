//===- CudaDevice.cpp - The CUDA backend of the device seam ----------------===//
//
// Built as its own shared library (libDSRuntimeCUDA.so), loaded by the
// device registry on first use of "cuda": it links libtorch_cuda (ATen's
// CUDA kernels register with the dispatcher when it loads), the CUDA
// runtime and, through LibTorch, cuBLAS and cuDNN; NCCL for its channel
// (NcclChannel.cpp) when the build found the wheel's. It does not link the
// runtime: it implements the classes of ds/Runtime/Device.h, which are
// defined in that header, and hands them over through one C entry point.
//
// Streams: the compute stream is the device's current stream, the one
// ATen's kernels use (the default stream unless a guard or Python's
// torch.cuda.stream says otherwise); copies and collectives get their own
// streams from LibTorch's pool. Events are the CUDA runtime's
// own (cudaEvent_t), so that the library builds against any LibTorch 2.x.
// Memory comes from LibTorch's caching allocator; a tensor copied on the
// copy stream is recorded on the compute stream, where it is used, so that
// the allocator does not hand its block out again before that use is done.
//
//===----------------------------------------------------------------------===//

#include "../Device/DeviceBackends.h"
#ifdef DS_HAVE_NCCL
#include "NcclChannel.h"
#endif

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace {

/// Throws std::runtime_error naming the call when `status` is an error (the
/// registry reports it as a DeviceError).
void check(cudaError_t status, const char *call) {
  if (status != cudaSuccess) {
    (void)cudaGetLastError(); // Not left for ATen's next launch check.
    throw std::runtime_error(std::string(call) + ": " +
                             cudaGetErrorString(status));
  }
}

c10::cuda::CUDAStream cudaStreamOf(const c10::Stream &stream) {
  if (stream.device_type() != c10::DeviceType::CUDA)
    throw std::runtime_error("cuda device: a " +
                             c10::DeviceTypeName(stream.device_type()) +
                             " stream is not a CUDA stream");
  return c10::cuda::CUDAStream(stream);
}

class CudaEvent final : public ds::runtime::Event {
public:
  CudaEvent(c10::DeviceIndex index, bool timing)
      : index_(index), timing_(timing) {
    c10::cuda::CUDAGuard guard(index_);
    check(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault
                                                   : cudaEventDisableTiming),
          "cudaEventCreateWithFlags");
  }
  ~CudaEvent() override {
    c10::cuda::CUDAGuard guard(index_);
    cudaEventDestroy(event_);
  }

  void record(const c10::Stream &stream) override {
    c10::cuda::CUDAStream cuda = cudaStreamOf(stream);
    c10::cuda::CUDAGuard guard(cuda.device_index());
    check(cudaEventRecord(event_, cuda.stream()), "cudaEventRecord");
    recorded_ = true;
  }
  void block(const c10::Stream &stream) override {
    if (!recorded_)
      return;
    c10::cuda::CUDAStream cuda = cudaStreamOf(stream);
    c10::cuda::CUDAGuard guard(cuda.device_index());
    check(cudaStreamWaitEvent(cuda.stream(), event_, 0),
          "cudaStreamWaitEvent");
  }
  bool query() override {
    if (!recorded_)
      return true;
    cudaError_t status = cudaEventQuery(event_);
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError(); // Not an error: clear it.
      return false;
    }
    check(status, "cudaEventQuery");
    return true;
  }
  void synchronize() override {
    if (recorded_)
      check(cudaEventSynchronize(event_), "cudaEventSynchronize");
  }
  double secondsUntil(ds::runtime::Event &later) override {
    auto *other = dynamic_cast<CudaEvent *>(&later);
    if (!other)
      throw std::runtime_error("cuda event: secondsUntil needs another cuda "
                               "event");
    if (!timing_ || !other->timing_)
      throw std::runtime_error("cuda event: secondsUntil needs two events "
                               "created with timing");
    if (!recorded_ || !other->recorded_)
      throw std::runtime_error("cuda event: secondsUntil needs two recorded "
                               "events");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, event_, other->event_),
          "cudaEventElapsedTime");
    return double(ms) / 1000.0;
  }

private:
  c10::DeviceIndex index_;
  bool timing_;
  bool recorded_ = false;
  cudaEvent_t event_ = nullptr;
};

class CudaDevice final : public ds::runtime::Device {
public:
  explicit CudaDevice(c10::DeviceIndex index)
      : index_(index), copy_(c10::cuda::getStreamFromPool(false, index)),
        communication_(c10::cuda::getStreamFromPool(true, index)),
        gather_(c10::cuda::getStreamFromPool(true, index)) {}

  std::string backendName() const override { return "cuda"; }
  c10::Device device() const override {
    return c10::Device(c10::kCUDA, index_);
  }
  std::string describe() const override {
    const cudaDeviceProp *props = at::cuda::getDeviceProperties(index_);
    int driver = 0;
    cudaDriverGetVersion(&driver);
    char memory[32];
    std::snprintf(memory, sizeof memory, "%.1f GiB",
                  double(props->totalGlobalMem) / double(1ull << 30));
    return device().str() + " (" + props->name + ", sm_" +
           std::to_string(props->major) + std::to_string(props->minor) + ", " +
           memory + ", CUDA runtime " + version(CUDART_VERSION) +
           ", driver supports CUDA " + version(driver) + ")";
  }
  at::Tensor hostStaging(at::IntArrayRef shape,
                         at::ScalarType dtype) override {
    return at::empty(shape,
                     at::TensorOptions().dtype(dtype).pinned_memory(true));
  }
  at::Tensor copyFromHost(const at::Tensor &host,
                          const c10::Stream &stream) override {
    if (!host.device().is_cpu())
      throw std::runtime_error("cuda device: copyFromHost takes a host "
                               "tensor, got one on " +
                               host.device().str());
    c10::cuda::CUDAStream target = cudaStreamOf(stream);
    // Where the copy will be used: the current stream, before the guard.
    c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(index_);
    c10::cuda::CUDAStreamGuard guard(target);
    at::Tensor copy = host.to(device(), /*non_blocking=*/host.is_pinned());
    if (target != compute && copy.numel() > 0)
      c10::cuda::CUDACachingAllocator::recordStream(
          copy.storage().data_ptr(), compute);
    return copy;
  }
  c10::Stream stream(ds::runtime::StreamRole role) override {
    switch (role) {
    case ds::runtime::StreamRole::Compute:
      return c10::cuda::getCurrentCUDAStream(index_);
    case ds::runtime::StreamRole::Copy:
      return copy_;
    case ds::runtime::StreamRole::Communication:
      return communication_;
    case ds::runtime::StreamRole::Gather:
      return gather_;
    }
    return c10::cuda::getCurrentCUDAStream(index_);
  }
  at::Generator generator() override {
    return at::cuda::detail::getDefaultCUDAGenerator(index_);
  }
  std::unique_ptr<ds::runtime::Event> createEvent(bool timing) override {
    return std::make_unique<CudaEvent>(index_, timing);
  }
  void synchronize() override {
    c10::cuda::CUDAGuard guard(index_);
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }

private:
  /// 13000 -> "13.0".
  static std::string version(int v) {
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  }

  c10::DeviceIndex index_;
  c10::cuda::CUDAStream copy_;
  c10::cuda::CUDAStream communication_;
  c10::cuda::CUDAStream gather_;
};

int64_t visibleDevices(std::string *reason) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    if (reason)
      *reason = std::string("cudaGetDeviceCount: ") +
                cudaGetErrorString(status);
    return 0;
  }
  if (count == 0 && reason)
    *reason = "cudaGetDeviceCount found none";
  return count;
}

} // namespace

extern "C" __attribute__((visibility("default"))) const char *
dsDeviceBackend_cuda(ds::runtime::DeviceBackend *backend) {
  backend->name = "cuda";
  backend->deviceCount = [] { return visibleDevices(nullptr); };
  backend->unavailableReason = [] {
    std::string reason;
    visibleDevices(&reason);
    const char *visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return "no CUDA device is visible (" + reason + "; CUDA_VISIBLE_DEVICES " +
           (visible ? "='" + std::string(visible) + "'" : "unset") + ")";
  };
  backend->create = [](int64_t index) -> std::shared_ptr<ds::runtime::Device> {
    // ATen decides once per process whether it has CUDA (its CUDA hooks); a
    // process that asked before this library loaded cannot use it.
    if (!at::detail::getCUDAHooks().hasCUDA())
      throw std::runtime_error(
          "ATen's CUDA hooks were fixed before libtorch_cuda loaded (or "
          "report no CUDA): this process cannot use the GPU");
    // The device this process works on (cuBLAS handles, later NCCL).
    c10::cuda::set_device(c10::DeviceIndex(index));
    return std::make_shared<CudaDevice>(c10::DeviceIndex(index));
  };
#ifdef DS_HAVE_NCCL
  // Collectives: NCCL (the PyTorch wheel's; cmake/DSCuda.cmake). Without it
  // createChannel stays empty and deviceHasChannel says so.
  backend->createChannel = ds::runtime::createNcclChannel;
#endif
  return nullptr;
}
