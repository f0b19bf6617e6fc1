//===- GradientReduction.h - Gradients across ranks at the boundary -*- C++
//-*-===//
//
// What happens to each engine's flat gradient buffer between the last
// backward of an accumulation window and the engine's clipping. ZeRO stage 0
// (DeepSpeed's data parallelism without partitioning): every rank all-reduces
// the whole buffer and averages it by the world size, in buckets of
// zero_optimization.reduce_bucket_size elements, so that every rank then
// clips and steps the same averaged gradients.
//
// A reduction is described per engine as a list of collectives over slices
// of the flat buffer (EngineReduction). The partition pass of ZeRO stages
// 1-3 will describe reduce-scatters into a rank's shard the same way; the
// Trainer only calls start() for every engine, then wait() before each
// engine's clipping. Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_GRADIENTREDUCTION_H
#define DS_LIB_RUNTIME_GRADIENTREDUCTION_H

#include "ds/Runtime/Communicator.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace ds::runtime::detail {

/// A contiguous slice of an engine's flat gradient buffer.
struct GradientBucket {
  int64_t offset = 0;
  int64_t numel = 0;
};

/// How one engine's flat buffer is reduced at the boundary: stage 0
/// all-reduces (averages) each bucket in place. Empty: nothing to reduce
/// (one rank, or a frozen engine).
struct EngineReduction {
  std::vector<GradientBucket> buckets;
};

/// Stage 0's buckets: [0, b), [b, 2b), ... covering `numel` elements, b =
/// `bucketElements` (DeepSpeed's reduce_bucket_size counts elements). A
/// bucket may split a parameter: the reduction is element-wise.
EngineReduction stage0Reduction(int64_t numel, int64_t bucketElements);

class GradientReducer {
public:
  /// `reductions[e]` for each plan engine (by position); `communicator` may
  /// be null only when every reduction is empty.
  GradientReducer(std::shared_ptr<Communicator> communicator,
                  std::vector<EngineReduction> reductions);

  /// Starts engine `engine`'s collectives on its flat buffer `flat`
  /// (non-blocking; all of its buckets are in flight at once).
  void start(size_t engine, const at::Tensor &flat);
  /// Waits for them: `flat` then holds the average over the ranks.
  void wait(size_t engine);

  const EngineReduction &reduction(size_t engine) const {
    return reductions_[engine];
  }

private:
  std::shared_ptr<Communicator> communicator_;
  std::vector<EngineReduction> reductions_;
  std::vector<std::vector<CommHandle>> pending_;
};

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_GRADIENTREDUCTION_H
