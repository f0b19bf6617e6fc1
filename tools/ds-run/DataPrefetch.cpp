//===- DataPrefetch.cpp - Micro-step inputs on the device, one ahead ------===//

#include "DataPrefetch.h"

namespace ds::run {

DataPrefetcher::DataPrefetcher(
    std::shared_ptr<runtime::Device> device,
    std::function<std::vector<at::Tensor>(int64_t)> slice)
    : device_(std::move(device)), slice_(std::move(slice)) {}

void DataPrefetcher::start(Slot &slot, int64_t index) {
  // The staging memory may still feed this slot's previous copy.
  if (slot.copied)
    slot.copied->synchronize();
  else
    slot.copied = device_->createEvent();
  std::vector<at::Tensor> host = slice_(index);
  if (slot.staging.size() != host.size())
    slot.staging.assign(host.size(), at::Tensor());
  c10::Stream copy = device_->stream(runtime::StreamRole::Copy);
  slot.onDevice.clear();
  for (size_t i = 0; i < host.size(); ++i) {
    at::Tensor &staging = slot.staging[i];
    if (!staging.defined() || staging.sizes() != host[i].sizes() ||
        staging.scalar_type() != host[i].scalar_type())
      staging = device_->hostStaging(host[i].sizes(), host[i].scalar_type());
    staging.copy_(host[i]);
    slot.onDevice.push_back(device_->copyFromHost(staging, copy));
  }
  slot.copied->record(copy);
  slot.index = index;
}

std::vector<at::Tensor> DataPrefetcher::take(int64_t index,
                                             std::optional<int64_t> next) {
  if (device_->device().is_cpu())
    return slice_(index);
  Slot *ready = nullptr;
  for (Slot &slot : slots_)
    if (slot.index == index)
      ready = &slot;
  if (!ready) { // Not prefetched (the first micro-step): copy it now.
    ready = slots_[0].index == -1 ? &slots_[0] : &slots_[1];
    start(*ready, index);
  }
  ready->copied->block(device_->stream(runtime::StreamRole::Compute));
  std::vector<at::Tensor> inputs = ready->onDevice;
  ready->index = -1; // Taken: the slot may be refilled.
  if (next)
    start(ready == &slots_[0] ? slots_[1] : slots_[0], *next);
  return inputs;
}

} // namespace ds::run
