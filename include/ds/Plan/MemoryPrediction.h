//===- MemoryPrediction.h - Live-value bytes predicted from a plan -*- C++ -*-//
//
// The plan's `free` lists fix every value's lifetime, so the peak of the
// bytes held by live tensor values can be computed without running it. The
// runtime measures the same quantity; for static-shape plans the two agree
// exactly (docs/runtime.md, "Memory accounting"). A dynamic tensor counts
// its "bound" (the compiler's upper bound of its sizes), so with dynamic
// shapes the prediction is an upper bound; one without a bound counts 0.
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

/// Bytes of a tensor value with known dtype and a static shape, or a dynamic
/// one with a bound (its bound's bytes); nullopt otherwise.
std::optional<int64_t> valueBytesBound(const ValueDesc &value);

/// What the predicted bytes of a program's values rest on.
struct SizeBasis {
  /// Some dynamic tensor counts its bound: the figures are upper bounds a
  /// run may stay below.
  bool usesBounds = false;
  /// Tensor values counted as 0: dynamic without a bound, or without dtype
  /// or shape. When nonzero the figures are not upper bounds.
  int64_t unboundedValues = 0;
};
/// The basis of `program`'s values (`state` results excluded, as the walks
/// exclude them).
SizeBasis sizeBasis(const Program &program);

/// Peak of the bytes of live tensor values while `program` runs: walking the
/// ops in order, each op adds its results' bytes, then subtracts the bytes of
/// the values it frees. Results of `state` ops are state, not counted;
/// dynamic tensors count their bound (valueBytesBound), unbounded or
/// unknown ones 0. An `if` counts its larger branch
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
