//===- ZeroLayout.h - ZeRO flat-buffer layout policy ------------*- C++ -*-===//
//
// Where each parameter of an engine goes in its flat buffer and which bucket
// holds it (docs/zero.md): parameters in the order their gradients are
// complete, packed in order into buckets of at most `capacity` elements
// (never split; each communication dtype fills buckets of its own), each
// bucket padded to a multiple of the world size; at stage 3 the sharded
// buckets first, then one bucket per leaf module, then the persistent ones.
// -ds-zero-partition records the result and places the collectives around
// it; this is the policy alone, on sizes and dtypes.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_ANALYSIS_ZEROLAYOUT_H
#define DS_DIALECT_DS_ANALYSIS_ZEROLAYOUT_H

#include "mlir/IR/Types.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <utility>

namespace mlir::ds {

/// A parameter to lay out.
struct LayoutParam {
  int64_t numel = 0;
  /// The dtype its collectives move (null: the gradient buffer's).
  Type dtype;
  /// Stage 3: the leaf module whose subtree holds it; -1 for none.
  int leaf = -1;
  /// (top-level op, walk position) of its last gradient in the backward;
  /// unset when it has none.
  std::optional<std::pair<int64_t, int64_t>> gradPosition;
};

/// One bucket: a slice of the flat buffer.
struct LayoutBucket {
  int64_t offset = 0;
  /// Elements, padding included.
  int64_t numel = 0;
  /// Indices into the LayoutParam list, in buffer order.
  llvm::SmallVector<unsigned> params;
  /// Stage 3: the parameters stay whole on every rank.
  bool persistent = false;
  /// Stage 3: the leaf module the bucket holds; -1 for none.
  int leaf = -1;
  Type dtype;
  /// A leaf bucket whose parameters have different dtypes: it moves
  /// ZeroLayoutPolicy::wideDtype.
  bool mixedLeaf = false;
};

struct ZeroLayout {
  /// (parameter index, flat offset), in buffer order.
  llvm::SmallVector<std::pair<unsigned, int64_t>> offsets;
  /// Sorted by offset, covering [0, numel).
  llvm::SmallVector<LayoutBucket> buckets;
  int64_t numel = 0;
  /// Zero elements added to fill buckets to a multiple of the world size.
  int64_t padding = 0;
};

struct ZeroLayoutPolicy {
  int64_t stage = 0;
  int64_t worldSize = 1;
  /// Parameter elements per bucket (bucketCapacity).
  int64_t capacity = 1;
  /// Stage 3: stage3_param_persistence_threshold.
  int64_t persistenceThreshold = 0;
  /// The number of leaf modules (LayoutParam::leaf < numLeaves).
  unsigned numLeaves = 0;
  /// What a leaf bucket mixing dtypes moves (f32).
  Type wideDtype;
};

/// The bucket capacity of `stage` and the config key it comes from:
/// reduce_bucket_size, or at stages 1-3 allgather_bucket_size when smaller.
std::pair<int64_t, llvm::StringRef> bucketCapacity(int64_t stage,
                                                   int64_t reduceBucketSize,
                                                   int64_t allgatherBucketSize);

/// The layout order of `params`: by the position of their last gradient,
/// those without one last, ties in the given (declaration) order.
llvm::SmallVector<unsigned> layoutOrder(llvm::ArrayRef<LayoutParam> params);

/// Lays out `params` (indices into it in `order`) under `policy`.
ZeroLayout layOutParams(llvm::ArrayRef<LayoutParam> params,
                        llvm::ArrayRef<unsigned> order,
                        const ZeroLayoutPolicy &policy);

} // namespace mlir::ds

#endif // DS_DIALECT_DS_ANALYSIS_ZEROLAYOUT_H
