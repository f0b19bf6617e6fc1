//===- GradientBuffers.h - Flat per-engine gradient storage -----*- C++ -*-===//
//
// Gradients of the trainable parameters live in one flat buffer per engine
// (the engine's full gradient buffer), laid out as the plan's
// `partition.params` says: each parameter's gradient is a view of its
// slice, and the gaps between parameters are padding that stays zero. ZeRO
// shards these buffers by bucket (docs/plan-format.md, "The accumulation
// boundary"). The optimizer's state uses a FlatLayout too: the same one at
// stage 0, the rank's shard (one block per bucket) at stages 1-2.
//
// A buffer is allocated for the whole run (stages 0-1) or on demand: stage
// 2 allocates an engine's buffer when a micro-step's backward first writes
// into it and releases it when all of its buckets were reduce-scattered.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_GRADIENTBUFFERS_H
#define DS_RUNTIME_GRADIENTBUFFERS_H

#include "ds/Plan/Plan.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ds::runtime {

/// Where each tensor of one engine sits in a flat buffer.
struct FlatLayout {
  /// Plan state indices (-1 for entries that are not state, e.g. a bucket's
  /// block of a shard).
  std::vector<int64_t> stateIndices;
  /// Element offset of each entry (parallel to stateIndices).
  std::vector<int64_t> offsets;
  std::vector<std::vector<int64_t>> shapes;
  /// Elements of the whole buffer, padding included.
  int64_t numel = 0;
  /// dtype of the buffer: the parameters' (one dtype per engine; float32,
  /// or float64 for tight gradient checks).
  at::ScalarType dtype = at::kFloat;
  /// Where the buffer lives (the run's device).
  c10::Device device = c10::Device(c10::kCPU);

  /// Appends an entry at the end of the buffer (no padding).
  void add(int64_t stateIndex, std::vector<int64_t> shape);
  /// Places an entry at `offset`; the buffer grows to cover it.
  void place(int64_t stateIndex, std::vector<int64_t> shape, int64_t offset);
  /// A zero-filled buffer of numel elements of `dtype`.
  at::Tensor allocate() const;
  /// One view of `flat` per entry, shaped like the entry.
  std::vector<at::Tensor> views(const at::Tensor &flat) const;
};

class GradientBuffers {
public:
  /// `layouts[e]` is plan engine e's gradient layout (empty: the engine
  /// has no gradients); `allocateNow[e]` says whether its buffer exists
  /// from the start (stages 0-1) or is allocated by allocate() (stage 2).
  GradientBuffers(const plan::Plan &plan, std::vector<FlatLayout> layouts,
                  const std::vector<bool> &allocateNow);

  /// Whether state entry `stateIndex` has a gradient (a trainable
  /// parameter of a trainable engine).
  bool has(int64_t stateIndex) const;
  /// The plan engine whose buffer holds `stateIndex`'s gradient; -1 if none.
  int64_t engineOf(int64_t stateIndex) const;
  /// Adds `value` into the gradient of state entry `stateIndex` (a `grad`
  /// op); the engine's buffer must be allocated. Throws RuntimeError if its
  /// shape differs from the parameter's or it is not a floating-point
  /// tensor.
  void accumulate(int64_t stateIndex, const at::Tensor &value);
  /// The gradient of state entry `stateIndex` (a view into its engine's
  /// flat buffer); undefined for entries without one and while the buffer
  /// is not allocated.
  at::Tensor grad(int64_t stateIndex) const;

  /// Engines by position in Plan::engines.
  size_t numEngines() const { return engines_.size(); }
  /// Empty layout for engines without trainable parameters.
  const FlatLayout &layout(size_t engine) const {
    return engines_[engine].layout;
  }
  /// Undefined while not allocated.
  const at::Tensor &flat(size_t engine) const { return engines_[engine].flat; }
  const std::vector<at::Tensor> &views(size_t engine) const {
    return engines_[engine].views;
  }
  bool allocated(size_t engine) const {
    return engines_[engine].flat.defined();
  }
  /// A zero-filled buffer for the engine (no-op when allocated).
  void allocate(size_t engine);
  /// Drops the engine's buffer.
  void release(size_t engine);
  /// Zeroes one engine's gradients (after its optimizer step).
  void zero(size_t engine);

  /// Bytes of one engine's buffer when allocated (its layout's size).
  int64_t bytes(size_t engine) const;
  /// Bytes of the buffers allocated now.
  int64_t bytes() const;

private:
  struct EngineBuffers {
    FlatLayout layout;
    at::Tensor flat;
    std::vector<at::Tensor> views;
  };
  std::vector<EngineBuffers> engines_;
  /// Per state entry: (engine, position in its layout), or (-1, -1).
  std::vector<std::pair<int64_t, int64_t>> where_;
};

} // namespace ds::runtime

#endif // DS_RUNTIME_GRADIENTBUFFERS_H
