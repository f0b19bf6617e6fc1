//===- OffloadCopies.cpp - ZeRO-Offload's copies between device and host --===//

#include "OffloadCopies.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/StreamGuard.h>

namespace ds::runtime::detail {

namespace {

/// Whether `device` queues work on streams of its own (CUDA). The CPU runs
/// every call to completion; a stand-in with the CPU's streams copies as
/// the CPU does.
bool hasOwnStreams(Device &device) {
  return !device.device().is_cpu() &&
         device.stream(StreamRole::Copy).device_type() ==
             device.device().type();
}

} // namespace

void copyToHost(Device &device, const at::Tensor &from, const at::Tensor &to) {
  at::NoGradGuard noGrad;
  if (from.is_meta())
    return; // Shapes only: no data to copy.
  if (!hasOwnStreams(device)) {
    to.copy_(from);
    return;
  }
  // The gradient is final once the compute stream's work so far is done.
  std::unique_ptr<Event> ready = device.createEvent();
  ready->record(device.stream(StreamRole::Compute));
  c10::Stream copy = device.stream(StreamRole::Copy);
  ready->block(copy);
  std::unique_ptr<Event> done = device.createEvent();
  {
    c10::StreamGuard guard(copy);
    to.copy_(from, /*non_blocking=*/to.is_pinned());
    done->record(copy);
  }
  done->synchronize(); // The host reads `to` next.
}

std::unique_ptr<Event> copyToDevice(Device &device, const at::Tensor &from,
                                    const at::Tensor &to) {
  at::NoGradGuard noGrad;
  if (!hasOwnStreams(device)) {
    to.copy_(from);
    return nullptr;
  }
  c10::Stream compute = device.stream(StreamRole::Compute);
  c10::Stream copy = device.stream(StreamRole::Copy);
  // `to` may still be read by queued compute work (the last forward).
  std::unique_ptr<Event> idle = device.createEvent();
  idle->record(compute);
  idle->block(copy);
  std::unique_ptr<Event> done = device.createEvent();
  {
    c10::StreamGuard guard(copy);
    to.copy_(from, /*non_blocking=*/from.is_pinned());
    done->record(copy);
  }
  done->block(compute);
  return done;
}

} // namespace ds::runtime::detail
