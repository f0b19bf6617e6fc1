//===- CpuDevice.cpp - The CPU backend of the device seam ------------------===//
//
// ATen's CPU kernels run synchronously on the calling thread: work is done
// when the call that queued it returns, so an event completes when it is
// recorded, one stream serves every role, and host memory needs no staging.
// An event notes the time it was recorded, for secondsUntil().
//
//===----------------------------------------------------------------------===//

#include "DeviceBackends.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <chrono>
#include <optional>

namespace ds::runtime::detail {

namespace {

class CpuEvent final : public Event {
public:
  explicit CpuEvent(bool timing) : timing_(timing) {}

  void record(const c10::Stream &stream) override {
    if (stream.device_type() != c10::DeviceType::CPU)
      throw DeviceError("cpu event: cannot record on a " +
                        c10::DeviceTypeName(stream.device_type()) +
                        " stream");
    recordedAt_ = std::chrono::steady_clock::now();
  }
  void block(const c10::Stream &) override {}
  bool query() override { return true; }
  void synchronize() override {}
  double secondsUntil(Event &later) override {
    auto *other = dynamic_cast<CpuEvent *>(&later);
    if (!other)
      throw DeviceError("cpu event: secondsUntil needs another cpu event");
    if (!timing_ || !other->timing_)
      throw DeviceError("cpu event: secondsUntil needs two events created "
                        "with timing");
    if (!recordedAt_ || !other->recordedAt_)
      throw DeviceError("cpu event: secondsUntil needs two recorded events");
    return std::chrono::duration<double>(*other->recordedAt_ - *recordedAt_)
        .count();
  }

private:
  bool timing_;
  std::optional<std::chrono::steady_clock::time_point> recordedAt_;
};

class CpuDevice final : public Device {
public:
  std::string backendName() const override { return "cpu"; }
  c10::Device device() const override { return c10::Device(c10::kCPU); }
  std::string describe() const override {
    return "cpu (" + std::to_string(at::get_num_threads()) + " threads)";
  }
  at::Tensor hostStaging(at::IntArrayRef shape,
                         at::ScalarType dtype) override {
    return at::empty(shape, at::TensorOptions().dtype(dtype));
  }
  at::Tensor copyFromHost(const at::Tensor &host,
                          const c10::Stream &) override {
    if (!host.device().is_cpu())
      throw DeviceError("cpu device: copyFromHost takes a host tensor, got "
                        "one on " +
                        host.device().str());
    return host;
  }
  c10::Stream stream(StreamRole) override {
    return c10::Stream(c10::Stream::DEFAULT, device());
  }
  at::Generator generator() override {
    return at::detail::getDefaultCPUGenerator();
  }
  std::unique_ptr<Event> createEvent(bool timing) override {
    return std::make_unique<CpuEvent>(timing);
  }
  void synchronize() override {}
};

} // namespace

DeviceBackend cpuBackend() {
  DeviceBackend backend;
  backend.name = "cpu";
  backend.deviceCount = [] { return int64_t(1); };
  backend.unavailableReason = [] { return std::string(); };
  backend.create = [](int64_t) -> std::shared_ptr<Device> {
    static std::shared_ptr<Device> device = std::make_shared<CpuDevice>();
    return device;
  };
  return backend;
}

} // namespace ds::runtime::detail
