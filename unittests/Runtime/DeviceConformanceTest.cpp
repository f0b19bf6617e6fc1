//===- DeviceConformanceTest.cpp - Every device backend, one suite --------===//
//
// The contract of ds/Runtime/Device.h, run against each backend named by
// DS_CONFORMANCE_BACKENDS (comma separated, default "cpu"), after IREE's
// HAL conformance suite: ctest runs it for "cpu" always and for "cuda" under
// the label `gpu`. A backend with no visible device makes the run exit
// with code 77 after printing the reason (ctest's SKIP_RETURN_CODE): a
// skip, never a pass.
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/Device.h"

#include <ATen/ATen.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <sstream>

using namespace ds::runtime;

namespace {

std::vector<std::string> backendsUnderTest() {
  const char *env = std::getenv("DS_CONFORMANCE_BACKENDS");
  std::string list = env && *env ? env : "cpu";
  std::vector<std::string> names;
  std::stringstream stream(list);
  for (std::string name; std::getline(stream, name, ',');)
    if (!name.empty())
      names.push_back(name);
  return names;
}

class DeviceConformance : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override { device = createDevice(GetParam()); }

  /// A host tensor's values, for comparisons.
  static at::Tensor host(const at::Tensor &tensor) {
    return tensor.to(at::kCPU);
  }

  std::shared_ptr<Device> device;
};

TEST_P(DeviceConformance, NamesItself) {
  EXPECT_EQ(device->backendName(), GetParam());
  EXPECT_EQ(c10::DeviceTypeName(device->device().type(), /*lower_case=*/true),
            GetParam());
  std::string text = device->describe();
  EXPECT_EQ(text.rfind(GetParam(), 0), 0u) << text;
}

TEST_P(DeviceConformance, AllocatesOnItself) {
  for (at::ScalarType dtype :
       {at::kFloat, at::kBFloat16, at::kHalf, at::kLong, at::kBool}) {
    at::Tensor t = at::zeros({3, 5}, device->options(dtype));
    EXPECT_EQ(t.device(), device->device());
    EXPECT_EQ(t.scalar_type(), dtype);
    EXPECT_TRUE(device->holds(t));
  }
  EXPECT_FALSE(device->holds(at::Tensor()));
  if (!device->device().is_cpu())
    EXPECT_FALSE(device->holds(at::zeros({1})));
}

TEST_P(DeviceConformance, CopiesFromStagingOnTheCopyStream) {
  at::Tensor staging = device->hostStaging({4, 6}, at::kFloat);
  EXPECT_TRUE(staging.device().is_cpu());
  EXPECT_EQ(staging.sizes(), at::IntArrayRef({4, 6}));
  if (!device->device().is_cpu())
    EXPECT_TRUE(staging.is_pinned());
  staging.copy_(at::arange(24, at::kFloat).view({4, 6}));

  c10::Stream copy = device->stream(StreamRole::Copy);
  c10::Stream compute = device->stream(StreamRole::Compute);
  EXPECT_EQ(copy.device(), device->device());
  EXPECT_EQ(compute.device(), device->device());
  at::Tensor onDevice = device->copyFromHost(staging, copy);
  std::unique_ptr<Event> copied = device->createEvent();
  copied->record(copy);
  copied->block(compute);
  at::Tensor doubled = onDevice * 2; // On the compute stream.
  EXPECT_EQ(doubled.device(), device->device());
  EXPECT_TRUE(at::equal(host(doubled), at::arange(24, at::kFloat).view({4, 6}) * 2));
}

TEST_P(DeviceConformance, CopyFromHostRefusesDeviceTensors) {
  if (device->device().is_cpu())
    GTEST_SKIP() << "the cpu backend's host tensors are its own";
  at::Tensor onDevice = at::zeros({2}, device->options(at::kFloat));
  EXPECT_ANY_THROW(
      device->copyFromHost(onDevice, device->stream(StreamRole::Copy)));
}

TEST_P(DeviceConformance, ComputeStreamIsTheCurrentOne) {
  const c10::impl::DeviceGuardImplInterface *guard =
      c10::impl::getDeviceGuardImpl(device->device().type());
  EXPECT_EQ(guard->getStream(device->device()),
            device->stream(StreamRole::Compute));
  // Under a guard ATen's kernels go to the guard's stream, and back after.
  c10::Stream other = device->stream(StreamRole::Communication);
  {
    c10::StreamGuard streamGuard(other);
    EXPECT_EQ(guard->getStream(device->device()), other);
  }
  EXPECT_EQ(guard->getStream(device->device()),
            device->stream(StreamRole::Compute));
}

TEST_P(DeviceConformance, EventOrdersWorkAndMeasuresTime) {
  std::unique_ptr<Event> never = device->createEvent();
  EXPECT_TRUE(never->query()); // Never recorded: complete.
  never->synchronize();

  c10::Stream compute = device->stream(StreamRole::Compute);
  std::unique_ptr<Event> start = device->createEvent(/*timing=*/true);
  std::unique_ptr<Event> end = device->createEvent(/*timing=*/true);
  start->record(compute);
  at::Tensor a = at::rand({256, 256}, device->options(at::kFloat));
  at::Tensor b = a.matmul(a);
  end->record(compute);
  end->synchronize();
  EXPECT_TRUE(end->query());
  double seconds = start->secondsUntil(*end);
  EXPECT_GE(seconds, 0.0);
  EXPECT_LT(seconds, 60.0);

  // Untimed events and unrecorded ones cannot be measured.
  std::unique_ptr<Event> untimed = device->createEvent();
  untimed->record(compute);
  EXPECT_ANY_THROW(start->secondsUntil(*untimed));
  std::unique_ptr<Event> unrecorded = device->createEvent(true);
  EXPECT_ANY_THROW(start->secondsUntil(*unrecorded));
}

TEST_P(DeviceConformance, EventOrdersTwoStreams) {
  // Work on the communication stream after an event of the compute stream
  // sees the compute stream's result.
  c10::Stream compute = device->stream(StreamRole::Compute);
  c10::Stream comm = device->stream(StreamRole::Communication);
  at::Tensor x = at::full({1 << 16}, 3.0f, device->options(at::kFloat));
  at::Tensor y = x * 7; // Compute stream.
  std::unique_ptr<Event> ready = device->createEvent();
  ready->record(compute);
  at::Tensor z;
  {
    c10::StreamGuard guard(comm);
    ready->block(comm);
    z = y + 1;
  }
  std::unique_ptr<Event> done = device->createEvent();
  done->record(comm);
  done->synchronize();
  EXPECT_TRUE(at::equal(host(z), at::full({1 << 16}, 22.0f)));
}

TEST_P(DeviceConformance, GeneratorReplaysDraws) {
  at::Generator generator = device->generator();
  EXPECT_EQ(generator.device().type(), device->device().type());
  at::Tensor state;
  at::Tensor first, second;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_current_seed(1234);
    state = generator.get_state();
  }
  EXPECT_EQ(state.scalar_type(), at::kByte);
  first = at::rand({64}, device->options(at::kFloat));
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state);
  }
  second = at::rand({64}, device->options(at::kFloat));
  EXPECT_TRUE(at::equal(host(first), host(second)));
  at::Tensor third = at::rand({64}, device->options(at::kFloat));
  EXPECT_FALSE(at::equal(host(first), host(third)));
}

TEST_P(DeviceConformance, SynchronizeWaitsForEverything) {
  at::Tensor a = at::rand({512, 512}, device->options(at::kFloat));
  at::Tensor b = a.matmul(a);
  device->synchronize();
  EXPECT_TRUE(at::isfinite(host(b)).all().item<bool>());
}

TEST_P(DeviceConformance, RegistryCreatesTheSameKind) {
  std::shared_ptr<Device> again = createDevice(GetParam());
  EXPECT_EQ(again->device(), device->device());
  std::vector<std::string> names = registeredDeviceBackends();
  EXPECT_NE(std::find(names.begin(), names.end(), GetParam()), names.end());
}

INSTANTIATE_TEST_SUITE_P(Backends, DeviceConformance,
                         ::testing::ValuesIn(backendsUnderTest()),
                         [](const auto &info) { return info.param; });

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // A backend without a device skips the whole run, with the reason.
  for (const std::string &name : backendsUnderTest()) {
    try {
      createDevice(name);
    } catch (const DeviceError &e) {
      std::string what = e.what();
      bool noDevice = what.find("no CUDA device is visible") != std::string::npos;
      std::cout << (noDevice ? "SKIPPED: " : "error: ") << what << "\n";
      return noDevice ? 77 : 1;
    }
  }
  return RUN_ALL_TESTS();
}
