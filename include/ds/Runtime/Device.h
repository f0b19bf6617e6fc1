//===- Device.h - The runtime's device seam ---------------------*- C++ -*-===//
//
// Where tensors live and how work on them is ordered, after IREE's HAL
// (device, events, backends registered by name): the runtime allocates
// every tensor through a Device, orders work with Events on its streams,
// and never names a backend. Backends:
//   cpu   always present (lib/Runtime/Device/CpuDevice.cpp): one stream,
//         work done when the call returns, pageable host memory;
//   cuda  its own shared library (libDSRuntimeCUDA.so, lib/Runtime/CUDA),
//         loaded on first use of "cuda", so that CPU processes never load
//         libtorch_cuda, cuBLAS or NCCL.
//
// Kernels themselves need no seam: ATen's dispatcher runs each operator on
// its inputs' device. Streams are c10::Stream (device-generic): ATen's
// kernels go to the current stream of their device, which a
// c10::StreamGuard sets.
//
// Every class here is defined in this header (inline virtual destructors):
// a backend library implements them without linking the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_DEVICE_H
#define DS_RUNTIME_DEVICE_H

#include "ds/Runtime/Channel.h"
#include "ds/TensorIO/RuntimeError.h"

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <c10/core/TensorOptions.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ds::runtime {

/// A device that cannot be created (unknown backend, no GPU visible, a
/// backend library that does not load) or that failed.
class DeviceError : public RuntimeError {
public:
  using RuntimeError::RuntimeError;
};

/// A marker in a stream's queue of work. After record(stream), query() and
/// synchronize() concern the work queued on that stream before the call,
/// and block(other) makes `other` wait for it without blocking the host.
/// An event never recorded is complete.
class Event {
public:
  virtual ~Event() = default;
  virtual void record(const c10::Stream &stream) = 0;
  /// Work queued on `stream` after this call starts once the recorded work
  /// has finished. The host does not wait.
  virtual void block(const c10::Stream &stream) = 0;
  /// Non-blocking: whether the recorded work has finished.
  virtual bool query() = 0;
  /// Blocks the calling thread until the recorded work has finished.
  virtual void synchronize() = 0;
  /// Seconds from this event's recorded work to `later`'s; both recorded
  /// and finished, on the same device, created with timing. Throws
  /// DeviceError otherwise.
  virtual double secondsUntil(Event &later) = 0;
};

/// What a stream is for. A backend may map several roles to one stream
/// (the CPU has one).
enum class StreamRole {
  /// Kernels of the plan's programs and the optimizer.
  Compute,
  /// Host-device copies (the next micro-step's data).
  Copy,
  /// Collectives: the reductions (all-reduce, reduce-scatter), and all of
  /// them when a communicator has one channel.
  Communication,
  /// All-gathers and broadcasts (ZeRO-3's parameter gathers), apart from
  /// the reductions so that a prefetch does not wait behind a gradient
  /// reduction.
  Gather,
};

/// "compute", "copy", "communication", "gather".
const char *streamRoleName(StreamRole role);

/// One device of a backend.
class Device {
public:
  virtual ~Device() = default;

  /// The backend's registered name: "cpu", "cuda".
  virtual std::string backendName() const = 0;
  /// Where tensors allocated through this device live (cpu, cuda:0, ...).
  virtual c10::Device device() const = 0;
  /// "cpu (2 threads)", "cuda:0 (NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB,
  /// CUDA 13.0, driver 580.65)": for logs and GPU-run records.
  virtual std::string describe() const = 0;

  /// Options for a tensor of `dtype` on this device.
  at::TensorOptions options(at::ScalarType dtype) const {
    return at::TensorOptions().dtype(dtype).device(device());
  }
  /// Whether `tensor` lives on this device.
  bool holds(const at::Tensor &tensor) const {
    return tensor.defined() && tensor.device() == device();
  }

  /// Host memory this device copies from without blocking the host (CUDA:
  /// page-locked; CPU: ordinary memory).
  virtual at::Tensor hostStaging(at::IntArrayRef shape,
                                 at::ScalarType dtype) = 0;
  /// `host` (a CPU tensor) on this device; queued on `stream` without
  /// blocking the host when `host` is staging memory. The copy may be used
  /// on `stream` at once, on other streams after an Event. On the CPU:
  /// `host` itself.
  virtual at::Tensor copyFromHost(const at::Tensor &host,
                                  const c10::Stream &stream) = 0;

  /// The stream for `role`. The compute stream is the device's current
  /// stream, the one ATen's kernels use (a c10::StreamGuard changes it).
  virtual c10::Stream stream(StreamRole role) = 0;
  /// The device's default random generator: the one its random operators
  /// (dropout, rand) draw from and the runtime seeds per micro-step.
  virtual at::Generator generator() = 0;
  /// A new event; `timing`: secondsUntil() works (a little slower on CUDA).
  virtual std::unique_ptr<Event> createEvent(bool timing = false) = 0;
  /// Blocks until all work queued on this device has finished.
  virtual void synchronize() = 0;
};

/// One registered backend.
struct DeviceBackend {
  /// "cpu", "cuda".
  std::string name;
  /// How many devices are visible now (0: none; createDevice fails).
  std::function<int64_t()> deviceCount;
  /// Why no device is visible, when deviceCount() is 0 ("no CUDA device is
  /// visible (CUDA_VISIBLE_DEVICES='')"); called only then.
  std::function<std::string()> unavailableReason;
  /// Device `index` (0 <= index < deviceCount()).
  std::function<std::shared_ptr<Device>(int64_t index)> create;
  /// This rank's end of a collective channel on `device` (one of this
  /// backend's) among the ranks of `rendezvous`; blocks until every rank
  /// has joined. Rank 0 makes the channel's id and shares it with
  /// rendezvous.broadcast(key, ...). Empty: the backend has no channel of
  /// its own (the CPU's collectives are MPI's or the runtime's store
  /// channel).
  std::function<std::unique_ptr<Channel>(Device &device, Rendezvous &rendezvous,
                                         const std::string &key)>
      createChannel;
};

/// Adds `backend` (a later registration of the same name replaces it).
void registerDeviceBackend(DeviceBackend backend);

/// The names of the backends registered so far, sorted ("cpu" always).
std::vector<std::string> registeredDeviceBackends();

/// Backend names a build knows of, registered or loadable: "cpu", and
/// "cuda" when the build made the CUDA backend library.
std::vector<std::string> knownDeviceBackends();

/// Loads the library of backend `name` when it is not registered yet
/// ("cuda": libDSRuntimeCUDA.so, found through DS_CUDA_BACKEND (a path),
/// then beside the running binary's lib/ folder, then the build tree).
/// Throws DeviceError naming the library and the loader's message. The
/// library does not need a GPU to load.
void loadDeviceBackend(const std::string &name);

/// A device from "cpu", "cuda" (= "cuda:0") or "cuda:N". Loads the
/// backend's library if needed. Throws DeviceError: an unknown backend
/// (naming the known ones), a library that does not load, no device
/// visible (the backend's reason), an index out of range.
std::shared_ptr<Device> createDevice(const std::string &spec);

/// The CPU device (one per process).
std::shared_ptr<Device> cpuDevice();

/// The device of a data-parallel rank: "cuda" means cuda:LOCAL_RANK (the
/// launcher's local rank, LaunchInfo::localRank: LOCAL_RANK, Open MPI's,
/// MPICH's or Slurm's, a RANK/WORLD_SIZE launch's RANK, else 0), or
/// cuda:0 when the process sees exactly one device of the kind (a launcher
/// that gives each rank its own CUDA_VISIBLE_DEVICES); anything else as
/// createDevice.
std::shared_ptr<Device> createRankDevice(const std::string &spec);
/// Whether `device`'s backend has channels of its own (cuda: NCCL).
bool deviceHasChannel(const Device &device);
/// `device`'s backend's channel among the ranks of `rendezvous` (see
/// DeviceBackend::createChannel). Throws DeviceError when the backend has
/// none, or the backend's error when joining fails.
std::unique_ptr<Channel> createDeviceChannel(Device &device,
                                             Rendezvous &rendezvous,
                                             const std::string &key);

} // namespace ds::runtime

#endif // DS_RUNTIME_DEVICE_H
