//===- DeviceBackends.h - Backends built into the runtime -------*- C++ -*-===//
//
// Private to lib/Runtime/Device: the CPU backend, registered by the registry
// itself, and the entry point a backend library exports.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_DEVICE_DEVICEBACKENDS_H
#define DS_LIB_RUNTIME_DEVICE_DEVICEBACKENDS_H

#include "ds/Runtime/Device.h"

namespace ds::runtime::detail {

DeviceBackend cpuBackend();

} // namespace ds::runtime::detail

/// Exported (extern "C") by a backend library under the name
/// "dsDeviceBackend_<name>": fills `*backend` and returns nullptr, or
/// returns a message saying why the backend cannot work in this process
/// (the pointer stays valid while the library is loaded).
using DsDeviceBackendEntry = const char *(*)(ds::runtime::DeviceBackend *);

#endif // DS_LIB_RUNTIME_DEVICE_DEVICEBACKENDS_H
