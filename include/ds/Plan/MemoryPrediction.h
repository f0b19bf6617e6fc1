//===- MemoryPrediction.h - Live-value bytes predicted from a plan -*- C++ -*-//
//
// The plan's `free` lists fix every value's lifetime, so the peak of the
// bytes held by live tensor values can be computed without running it. The
// runtime measures the same quantity; for static-shape plans the two agree
// exactly (docs/runtime.md, "Memory accounting").
//
//===----------------------------------------------------------------------===//

#ifndef DS_PLAN_MEMORYPREDICTION_H
#define DS_PLAN_MEMORYPREDICTION_H

#include "ds/Plan/Plan.h"

#include <cstdint>
#include <optional>

namespace ds::plan {

/// Bytes of a tensor value with known dtype and a fully static shape;
/// nullopt for dynamic or unknown tensors and for non-tensor values.
std::optional<int64_t> staticValueBytes(const ValueDesc &value);

/// Peak of the bytes of live tensor values while `program` runs: walking the
/// ops in order, each op adds its results' bytes, then subtracts the bytes of
/// the values it frees. Results of `state` ops are state, not counted;
/// dynamic or unknown tensors count 0. An `if` counts its larger branch
/// (values defined in a branch die at its end) and then adds its results.
/// `grad` ops produce nothing (gradient buffers are not values). For
/// programs.train the walk spans forward and backward: value slots persist
/// between the two parts.
int64_t predictPeakBytes(const Program &program);

/// The same walk over a program of `plan` with the training buffers that
/// ZeRO stage 3 engines allocate and drop while it runs, as the runtime
/// does: an `all_gather` of a sharded bucket allocates the bucket's whole
/// parameters (numel x element size) and its `release` frees them; the
/// engine's first `grad` op (or `reduce_scatter`) of a micro-step allocates
/// its full gradient buffer and the receive buffer of its shard (numel +
/// shardNumel elements), and the `wait` of its last reduce-scatter frees
/// them. A `grad` op inside an `if` counts as taken (an upper bound).
struct BufferPeaks {
  /// The highest sum of live values and those buffers.
  int64_t joint = 0;
  /// The most of those buffers held at once.
  int64_t buffers = 0;
};
BufferPeaks predictStage3Peaks(const Plan &plan, const Program &program);

} // namespace ds::plan

#endif // DS_PLAN_MEMORYPREDICTION_H
