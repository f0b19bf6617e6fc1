//===- DeviceRegistryTest.cpp - Backends by name, errors by name ----------===//

#include "ds/Runtime/Device.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace ds::runtime;

namespace {

std::string errorOf(const std::string &spec) {
  try {
    createDevice(spec);
  } catch (const DeviceError &e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

TEST(DeviceRegistryTest, CpuIsAlwaysThere) {
  std::vector<std::string> names = registeredDeviceBackends();
  EXPECT_NE(std::find(names.begin(), names.end(), "cpu"), names.end());
  EXPECT_EQ(cpuDevice()->device(), c10::Device(c10::kCPU));
  EXPECT_EQ(createDevice("cpu:0")->device(), c10::Device(c10::kCPU));
  EXPECT_EQ(createRankDevice("cpu")->device(), c10::Device(c10::kCPU));
}

TEST(DeviceRegistryTest, UnknownAndMalformedNamesAreNamed) {
  std::string unknown = errorOf("tpu");
  EXPECT_TRUE(contains(unknown, "unknown device 'tpu'")) << unknown;
  EXPECT_TRUE(contains(unknown, "cpu")) << unknown;
  EXPECT_TRUE(contains(errorOf("cpu:x"), "NAME:INDEX")) << errorOf("cpu:x");
  EXPECT_TRUE(contains(errorOf("cpu:"), "NAME:INDEX"));
  EXPECT_TRUE(contains(errorOf(":0"), "no backend name"));
  std::string range = errorOf("cpu:1");
  EXPECT_TRUE(contains(range, "index 1 is out of range (1 cpu device visible)"))
      << range;
}

TEST(DeviceRegistryTest, RankDevicesTakeTheLocalRank) {
  // cpu has one device whatever the rank; a spec with an index is taken
  // as it is.
  setenv("LOCAL_RANK", "3", 1);
  EXPECT_EQ(createRankDevice("cpu")->device(), c10::Device(c10::kCPU));
  std::string error;
  try {
    createRankDevice("cpu:2");
  } catch (const DeviceError &e) {
    error = e.what();
  }
  unsetenv("LOCAL_RANK");
  EXPECT_TRUE(contains(error, "device 'cpu:2': index 2 is out of range"))
      << error;
}

#ifdef DS_HAVE_CUDA_BACKEND
// The CUDA backend library loads without a GPU; only a device needs one.
TEST(DeviceRegistryTest, CudaBackendLoadsWithoutAGpu) {
  loadDeviceBackend("cuda");
  std::vector<std::string> names = registeredDeviceBackends();
  EXPECT_NE(std::find(names.begin(), names.end(), "cuda"), names.end());
  std::string error = errorOf("cuda");
  if (error.empty())
    GTEST_SKIP() << "a CUDA device is visible: the no-GPU error cannot show";
  EXPECT_TRUE(contains(error, "device 'cuda': no CUDA device is visible ("))
      << error;
  EXPECT_TRUE(contains(error, "CUDA_VISIBLE_DEVICES")) << error;
  EXPECT_TRUE(contains(errorOf("cuda:3"), "no CUDA device is visible"));
}

TEST(DeviceRegistryTest, ABackendLibraryThatIsNotThereIsNamed) {
  setenv("DS_CUDA_BACKEND", "/nonexistent/libDSRuntimeCUDA.so", 1);
  // Registered already by the test above when it ran first: only a fresh
  // process sees the path. Check the message through a process of its own
  // instead when it is registered.
  std::vector<std::string> names = registeredDeviceBackends();
  bool registered =
      std::find(names.begin(), names.end(), "cuda") != names.end();
  std::string error = errorOf("cuda");
  unsetenv("DS_CUDA_BACKEND");
  if (registered)
    GTEST_SKIP() << "the cuda backend is loaded in this process already";
  EXPECT_TRUE(contains(error, "/nonexistent/libDSRuntimeCUDA.so: not found"))
      << error;
}
#else
TEST(DeviceRegistryTest, CudaIsNamedAsMissingFromTheBuild) {
  std::string error = errorOf("cuda");
  EXPECT_TRUE(contains(error, "this build has no CUDA backend")) << error;
}
#endif

} // namespace
