//===- GradientReduction.cpp - Gradients across ranks at the boundary -----===//

#include "GradientReduction.h"

#include "ds/Runtime/RuntimeError.h"

#include <algorithm>

namespace ds::runtime::detail {

EngineReduction stage0Reduction(int64_t numel, int64_t bucketElements) {
  EngineReduction reduction;
  int64_t step = std::max<int64_t>(bucketElements, 1);
  for (int64_t offset = 0; offset < numel; offset += step)
    reduction.buckets.push_back({offset, std::min(step, numel - offset)});
  return reduction;
}

GradientReducer::GradientReducer(std::shared_ptr<Communicator> communicator,
                                 std::vector<EngineReduction> reductions)
    : communicator_(std::move(communicator)),
      reductions_(std::move(reductions)), pending_(reductions_.size()) {}

void GradientReducer::start(size_t engine, const at::Tensor &flat) {
  const EngineReduction &reduction = reductions_[engine];
  if (reduction.buckets.empty())
    return;
  if (!communicator_)
    throw RuntimeError("internal error: a gradient reduction without a "
                       "communicator");
  for (const GradientBucket &bucket : reduction.buckets)
    pending_[engine].push_back(communicator_->allReduce(
        flat.narrow(0, bucket.offset, bucket.numel), ReduceOp::Avg));
}

void GradientReducer::wait(size_t engine) {
  std::vector<CommHandle> handles;
  handles.swap(pending_[engine]);
  waitAll(handles);
}

} // namespace ds::runtime::detail
