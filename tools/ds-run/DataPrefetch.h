//===- DataPrefetch.h - Micro-step inputs on the device, one ahead -*- C++ -*-===//
//
// On a GPU, each micro-step's inputs go from the data file's host tensors
// into page-locked staging memory and on to the device on the device's copy
// stream while the previous micro-step computes; an event orders the copy
// before the compute stream's first use. On the CPU the inputs are the data
// file's own tensors (no copy).
//
//===----------------------------------------------------------------------===//

#ifndef DS_TOOLS_DS_RUN_DATAPREFETCH_H
#define DS_TOOLS_DS_RUN_DATAPREFETCH_H

#include "ds/Runtime/Device.h"

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace ds::run {

class DataPrefetcher {
public:
  /// `slice(index)`: micro-step `index`'s host inputs (this rank's rows).
  DataPrefetcher(std::shared_ptr<runtime::Device> device,
                 std::function<std::vector<at::Tensor>(int64_t)> slice);

  /// Micro-step `index`'s inputs on the device, usable on its compute
  /// stream; then starts copying micro-step `next` (when given).
  std::vector<at::Tensor> take(int64_t index, std::optional<int64_t> next);

private:
  struct Slot {
    int64_t index = -1;
    std::vector<at::Tensor> staging;
    std::vector<at::Tensor> onDevice;
    std::unique_ptr<runtime::Event> copied;
  };
  /// Starts micro-step `index`'s copy into slot `slot`.
  void start(Slot &slot, int64_t index);

  std::shared_ptr<runtime::Device> device_;
  std::function<std::vector<at::Tensor>(int64_t)> slice_;
  /// Two slots: one being used, one being filled. A slot's staging memory
  /// is reused only after its previous copy finished.
  std::array<Slot, 2> slots_;
};

} // namespace ds::run

#endif // DS_TOOLS_DS_RUN_DATAPREFETCH_H
