//===- ZeroLayout.cpp - ZeRO flat-buffer layout policy --------------------===//

#include "ds/Dialect/DS/Analysis/ZeroLayout.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"

using namespace mlir;
using namespace mlir::ds;

std::pair<int64_t, StringRef>
mlir::ds::bucketCapacity(int64_t stage, int64_t reduceBucketSize,
                         int64_t allgatherBucketSize) {
  if (stage > 0 && allgatherBucketSize < reduceBucketSize)
    return {allgatherBucketSize, "zero_optimization.allgather_bucket_size"};
  return {reduceBucketSize, "zero_optimization.reduce_bucket_size"};
}

SmallVector<unsigned> mlir::ds::layoutOrder(ArrayRef<LayoutParam> params) {
  auto indices = llvm::seq<unsigned>(0, params.size());
  SmallVector<unsigned> order(indices.begin(), indices.end());
  llvm::stable_sort(order, [&](unsigned a, unsigned b) {
    const auto &ga = params[a].gradPosition, &gb = params[b].gradPosition;
    if (ga.has_value() != gb.has_value())
      return ga.has_value(); // Parameters without a gradient go last.
    return ga && *ga < *gb;
  });
  return order;
}

namespace {

/// Packs parameters, in order, into buckets of at most `capacity` elements
/// (a larger parameter gets a bucket of its own). Each dtype fills its own
/// open bucket; a bucket takes its place in the flat buffer, after those
/// already placed, when it closes: when the next parameter of its dtype
/// would overflow it, or at the end, in the order the open buckets were
/// started. With one dtype this is plain packing in order.
class BucketPlanner {
public:
  BucketPlanner(ArrayRef<LayoutParam> params, const ZeroLayoutPolicy &policy,
                ZeroLayout &layout)
      : params(params), policy(policy), layout(layout) {}

  void pack(ArrayRef<unsigned> indices, bool persistent) {
    struct Open {
      LayoutBucket bucket;
      int64_t used = 0;
    };
    SmallVector<Open> open;
    for (unsigned index : indices) {
      const LayoutParam &param = params[index];
      auto it = llvm::find_if(
          open, [&](const Open &o) { return o.bucket.dtype == param.dtype; });
      if (it != open.end() && it->used > 0 &&
          it->used + param.numel > policy.capacity) {
        close(std::move(it->bucket));
        open.erase(it);
        it = open.end();
      }
      if (it == open.end()) {
        open.emplace_back();
        it = std::prev(open.end());
        it->bucket.persistent = persistent;
        it->bucket.dtype = param.dtype;
      }
      it->bucket.params.push_back(index);
      it->used += param.numel;
    }
    for (Open &o : open)
      close(std::move(o.bucket));
  }

  /// A leaf module's subtree is one bucket: its dtype only when every
  /// parameter in it has it, else the wide dtype.
  void packLeaf(ArrayRef<unsigned> indices, int leaf) {
    if (indices.empty())
      return;
    LayoutBucket bucket;
    bucket.leaf = leaf;
    bucket.params.assign(indices.begin(), indices.end());
    bucket.dtype = params[indices.front()].dtype;
    for (unsigned index : indices)
      if (params[index].dtype != bucket.dtype) {
        bucket.dtype = policy.wideDtype;
        bucket.mixedLeaf = true;
      }
    close(std::move(bucket));
  }

private:
  /// Places `bucket` at the end of the flat buffer, padded.
  void close(LayoutBucket bucket) {
    bucket.offset = layout.numel;
    int64_t used = 0;
    for (unsigned index : bucket.params) {
      layout.offsets.push_back({index, bucket.offset + used});
      used += params[index].numel;
    }
    int64_t world = policy.worldSize;
    bucket.numel = (used + world - 1) / world * world;
    layout.padding += bucket.numel - used;
    layout.numel = bucket.offset + bucket.numel;
    layout.buckets.push_back(std::move(bucket));
  }

  ArrayRef<LayoutParam> params;
  const ZeroLayoutPolicy &policy;
  ZeroLayout &layout;
};

} // namespace

ZeroLayout mlir::ds::layOutParams(ArrayRef<LayoutParam> params,
                                  ArrayRef<unsigned> order,
                                  const ZeroLayoutPolicy &policy) {
  ZeroLayout layout;
  BucketPlanner planner(params, policy, layout);
  if (policy.stage != 3) {
    planner.pack(order, /*persistent=*/false);
    return layout;
  }
  // Sharded buckets first, then one bucket per leaf module (sharded
  // whatever its size), then the persistent ones (DeepSpeed keeps a
  // parameter whole when its numel is <= the threshold); each group in
  // layout order.
  SmallVector<unsigned> sharded, persistent;
  SmallVector<SmallVector<unsigned>> inLeaf(policy.numLeaves);
  for (unsigned index : order) {
    const LayoutParam &param = params[index];
    if (param.leaf >= 0)
      inLeaf[param.leaf].push_back(index);
    else
      (param.numel <= policy.persistenceThreshold ? persistent : sharded)
          .push_back(index);
  }
  planner.pack(sharded, /*persistent=*/false);
  for (auto [leaf, indices] : llvm::enumerate(inLeaf))
    planner.packLeaf(indices, leaf);
  planner.pack(persistent, /*persistent=*/true);
  return layout;
}
