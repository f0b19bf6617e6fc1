//===- RunDevice.cpp - The device the running program is on ---------------===//

#include "RunDevice.h"

namespace ds::runtime::detail {

namespace {
thread_local c10::Device runDevice(c10::kCPU);
} // namespace

c10::Device currentRunDevice() { return runDevice; }

RunDeviceScope::RunDeviceScope(c10::Device device) : previous_(runDevice) {
  runDevice = device;
}

RunDeviceScope::~RunDeviceScope() { runDevice = previous_; }

} // namespace ds::runtime::detail
