//===- GradientBuffers.h - Flat per-engine gradient storage -----*- C++ -*-===//
//
// Gradients of the trainable parameters live in one flat fp32 buffer per
// engine, each parameter's gradient being a view of its slice (plan state
// order, no padding). Flat buffers are what DeepSpeed keeps and what ZeRO
// later shards: a rank then owns a contiguous range of each buffer, and
// clipping, reduction and the optimizer work on whole buffers or slices.
// The optimizer's state (Adam's m and v, SGD's momentum) uses the same
// layout (FlatLayout), so that a slice of one is the slice of the others.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_GRADIENTBUFFERS_H
#define DS_RUNTIME_GRADIENTBUFFERS_H

#include "ds/Plan/Plan.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ds::runtime {

/// Where each parameter of one engine sits in a flat buffer.
struct FlatLayout {
  /// Plan state indices, in plan order.
  std::vector<int64_t> stateIndices;
  /// Element offset of each parameter (parallel to stateIndices).
  std::vector<int64_t> offsets;
  std::vector<std::vector<int64_t>> shapes;
  /// Elements of the whole buffer.
  int64_t numel = 0;
  /// dtype of the buffer: the parameters' (one dtype per engine; float32,
  /// or float64 for tight gradient checks).
  at::ScalarType dtype = at::kFloat;

  void add(int64_t stateIndex, std::vector<int64_t> shape);
  /// A zero-filled buffer of numel elements of `dtype`.
  at::Tensor allocate() const;
  /// One view of `flat` per parameter, shaped like the parameter.
  std::vector<at::Tensor> views(const at::Tensor &flat) const;
};

class GradientBuffers {
public:
  /// `trainable[i]` says whether state entry i has a gradient (a parameter
  /// with requires_grad whose engine is not frozen). Engines with no
  /// trainable parameter get no buffer. Buffers start at zero.
  GradientBuffers(const plan::Plan &plan, const std::vector<bool> &trainable);

  /// Whether state entry `stateIndex` has a gradient buffer.
  bool has(int64_t stateIndex) const;
  /// Adds `value` into the gradient of state entry `stateIndex` (a `grad`
  /// op). Throws RuntimeError if its shape differs from the parameter's or
  /// it is not a floating-point tensor.
  void accumulate(int64_t stateIndex, const at::Tensor &value);
  /// The gradient of state entry `stateIndex` (a view into its engine's
  /// flat buffer); undefined for entries without one.
  at::Tensor grad(int64_t stateIndex) const;

  /// Engines by position in Plan::engines.
  size_t numEngines() const { return engines_.size(); }
  /// Empty layout (and undefined flat buffer) for engines without
  /// trainable parameters.
  const FlatLayout &layout(size_t engine) const {
    return engines_[engine].layout;
  }
  const at::Tensor &flat(size_t engine) const { return engines_[engine].flat; }
  const std::vector<at::Tensor> &views(size_t engine) const {
    return engines_[engine].views;
  }
  /// Zeroes one engine's gradients (after its optimizer step).
  void zero(size_t engine);

  /// Bytes of all flat buffers.
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
