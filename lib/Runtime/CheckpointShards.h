//===- CheckpointShards.h - A checkpoint's ZeRO shards, made whole -*- C++ -*-//
//
// At ZeRO stages 1-3 every rank saves its block of each bucket of the flat
// layout (ds_flat_layout in the model states): its fp32 parameters and its
// optimizer state. Concatenating the ranks' blocks bucket by bucket gives
// the whole flat buffers back, laid out as the saving run laid them out.
// ds-zero-to-fp32 (ZeroToFp32.cpp) and loading on another world size
// (CheckpointLoad.cpp) start from there. Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_CHECKPOINTSHARDS_H
#define DS_LIB_RUNTIME_CHECKPOINTSHARDS_H

#include "CheckpointFiles.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ds::runtime::detail {

/// ds_flat_layout of a checkpoint saved by `worldSize` ranks, checked.
struct SavedLayout {
  int64_t worldSize = 1;
  int64_t numel = 0;
  /// (offset, numel) per bucket, in order, covering [0, numel).
  std::vector<std::pair<int64_t, int64_t>> buckets;
  /// Elements of one rank's shard.
  int64_t shardNumel = 0;
  /// Each trainable parameter's offset, by its name in the module.
  std::map<std::string, int64_t> offsets;
};

SavedLayout readSavedLayout(const DictView &modelStates, int64_t worldSize);

/// The optimizer_state_dict of every rank's optim states file in `folder`
/// (checked to be stage `stage`'s). Throws RuntimeError naming every
/// missing file.
std::vector<DictView> readAllOptimStates(const std::string &folder,
                                         int64_t stage, int64_t worldSize);

/// A frozen ZeRO-3 engine has no optimizer shards: each rank's model states
/// file carries its block of every bucket as "ds_frozen_partition". Every
/// rank's, in rank order, checked to hold `shardNumel` elements. Throws
/// RuntimeError naming a missing file or a bad tensor.
std::vector<at::Tensor> readAllFrozenPartitions(const std::string &folder,
                                                int64_t worldSize,
                                                int64_t shardNumel);

/// The whole flat buffer from the ranks' shards (one per rank, in rank
/// order, each shardNumel elements).
at::Tensor unshard(const std::vector<at::Tensor> &shards,
                   const SavedLayout &layout);

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_CHECKPOINTSHARDS_H
