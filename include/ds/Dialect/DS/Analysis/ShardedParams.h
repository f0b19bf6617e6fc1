//===- ShardedParams.h - ZeRO-3 parameters and their buckets ----*- C++ -*-===//
//
// What the stage-3 passes (-ds-zero-partition, -ds-schedule-collectives,
// -ds-verify-collectives, -ds-print-schedule) share: which parameters are
// sharded (in a non-persistent bucket of a stage 3 engine), which bucket
// holds each, and which ops read them. A *read* of a sharded parameter is a
// `ds.get_param` of it or a use of that op's result, at any depth: both need
// the bucket's gathered buffer.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_ANALYSIS_SHARDEDPARAMS_H
#define DS_DIALECT_DS_ANALYSIS_SHARDEDPARAMS_H

#include "ds/Dialect/DS/IR/DSOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <string>

namespace mlir::ds {

/// One read of a sharded parameter: `op` is the ds.get_param or the op that
/// uses its result.
struct ParamRead {
  Operation *op = nullptr;
  ParamOp param;
  BucketOp bucket;
};

/// The sharded parameters of a module and their buckets, from the layout
/// -ds-zero-partition recorded (flat_offset, ds.bucket).
class ShardedParams {
public:
  explicit ShardedParams(ModuleOp module);

  /// Whether nothing is sharded.
  bool empty() const { return shardedBuckets.empty(); }

  /// The sharded bucket holding parameter `name`; null when the parameter is
  /// not sharded.
  BucketOp bucketOf(StringRef name) const {
    auto it = bucketOfParam.find(name);
    return it != bucketOfParam.end() && isSharded(it->second.second)
               ? it->second.second
               : BucketOp();
  }

  /// The bucket holding parameter `name` at any stage (null when its engine
  /// is not partitioned or it is not trainable).
  BucketOp bucketHolding(StringRef name) const {
    return bucketOfParam.lookup(name).second;
  }

  /// Whether `bucket` is a sharded bucket (stage 3, not persistent).
  bool isSharded(BucketOp bucket) const;

  /// Appends the reads of sharded parameters in `op` and the ops nested in
  /// it, in walk order (a get_param and the ops using its result inside
  /// `op` each count).
  void collectReads(Operation *op, SmallVectorImpl<ParamRead> &reads) const;

  /// The read of a sharded parameter by `op` itself (not nested), if any.
  std::optional<ParamRead> readBy(Operation *op) const;

private:
  /// Every parameter with a flat_offset, and its bucket.
  llvm::StringMap<std::pair<ParamOp, BucketOp>> bucketOfParam;
  llvm::DenseSet<Operation *> shardedBuckets;
};

/// The longest common dotted prefix of module paths ("moe.experts.0.fc1" and
/// "moe.experts.0.fc2" give "moe.experts.0"; "" for the root or when they
/// share nothing).
std::string commonModulePrefix(ArrayRef<StringRef> modules);

/// Whether the dotted name `name` (a state name or module path) lies under
/// module `prefix` on a `.` boundary; everything lies under the root "".
bool isUnderModule(StringRef name, StringRef prefix);

} // namespace mlir::ds

#endif // DS_DIALECT_DS_ANALYSIS_SHARDEDPARAMS_H
