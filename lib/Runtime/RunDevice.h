//===- RunDevice.h - The device the running program is on -------*- C++ -*-===//
//
// The `ds` RNG operators (RngStateOps.cpp) take no tensor, so the dispatcher
// cannot tell them the device; the executor says it for the duration of each
// run, per thread, so that engines on different devices in one process
// (dsopt) each save and restore their own device's generator. Private to
// lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_RUNDEVICE_H
#define DS_LIB_RUNTIME_RUNDEVICE_H

#include <c10/core/Device.h>

namespace ds::runtime::detail {

/// The device of the program running on this thread (the CPU outside runs).
c10::Device currentRunDevice();

/// Sets currentRunDevice() for its lifetime (nestable).
class RunDeviceScope {
public:
  explicit RunDeviceScope(c10::Device device);
  ~RunDeviceScope();
  RunDeviceScope(const RunDeviceScope &) = delete;
  RunDeviceScope &operator=(const RunDeviceScope &) = delete;

private:
  c10::Device previous_;
};

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_RUNDEVICE_H
