//===- OffloadCopies.h - ZeRO-Offload's device-host copies-------*- C++ -*-===//
//
// The two copies of ZeRO-Offload's optimizer step (docs/zero.md,
// "ZeRO-Offload"): the reduced gradient shard down to the host, the updated
// parameter shard back up. On a device with its own streams they run on its
// copy stream, ordered with Events against the compute stream; on the CPU
// (and on a stand-in whose streams are the CPU's) they are plain copies.
// Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_OFFLOADCOPIES_H
#define DS_LIB_RUNTIME_OFFLOADCOPIES_H

#include "ds/Runtime/Device.h"

#include <memory>

namespace ds::runtime::detail {

/// Copies `from` (on `device`) into the host tensor `to` (cast to its
/// dtype) after the work queued on the compute stream so far, and returns
/// once `to` holds it. A source without data (meta tensors) copies nothing.
void copyToHost(Device &device, const at::Tensor &from, const at::Tensor &to);

/// Copies the host tensor `from` into `to` (on `device`, same dtype). The
/// compute stream's later work waits for it; the host does not. Returns the
/// copy's event (null when the copy was done at once): `from` must stay
/// unchanged until it has completed.
std::unique_ptr<Event> copyToDevice(Device &device, const at::Tensor &from,
                                    const at::Tensor &to);

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_OFFLOADCOPIES_H
