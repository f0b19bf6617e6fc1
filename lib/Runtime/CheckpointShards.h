//===- CheckpointShards.h - A checkpoint's ZeRO shards, made whole -*- C++ -*-//
//
// How DeepSpeed 0.19 lays a param group's fp32 weights and optimizer state
// into its ranks' partitions, which its zero_to_fp32 reads back:
//
//   stages 1-2  the group's parameters flattened in order (each followed by
//               its alignment padding, none by default), padded at the end
//               to a multiple of 2 x W, cut into W contiguous partitions;
//               the fp32 partition is saved without the end padding
//               (group_paddings), the optimizer state with it.
//   stage 3     every parameter cut on its own into W chunks of
//               ceil(numel / W) (the last padded); a rank's partition is its
//               chunk of every parameter, in order.
//
// The plan's flat buffer is another layout (backward order, buckets each
// sharded across the ranks): these functions go between the two through
// whole parameters.
//
// A frozen ZeRO-3 engine (no optimizer, no DeepSpeed counterpart) saves each
// rank's block of every bucket of the plan's flat layout (ds_flat_layout in
// the model states); concatenating the ranks' blocks bucket by bucket gives
// its flat buffer back. ds-zero-to-fp32 (ZeroToFp32.cpp) and loading
// (CheckpointLoad.cpp) start from there. Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_CHECKPOINTSHARDS_H
#define DS_LIB_RUNTIME_CHECKPOINTSHARDS_H

#include "CheckpointFiles.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ds::runtime::detail {

struct EngineContext;

/// One DeepSpeed param group: its parameters in order.
struct ParamGroupLayout {
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  /// Elements after each parameter (param_alignment_paddings); zeros.
  std::vector<int64_t> paddings;

  int64_t numel(size_t param) const;
  /// Sum of numel and paddings.
  int64_t paddedNumel() const;
};

/// The trainable parameters of a plan engine as DeepSpeed groups them: one
/// group in model.parameters() order (the plan's state order), names
/// relative to the engine's module.
ParamGroupLayout engineGroup(const EngineContext &context);

/// Stages 1-2: elements of each rank's partition, padding included.
int64_t zero2PartitionNumel(const ParamGroupLayout &group, int64_t worldSize);
/// Stages 1-2: of rank `rank`'s partition, the elements that are not end
/// padding (what DeepSpeed saves of the fp32 partition).
int64_t zero2ContentNumel(const ParamGroupLayout &group, int64_t worldSize,
                          int64_t rank);
/// Stage 3: elements of each rank's partition.
int64_t zero3PartitionNumel(const ParamGroupLayout &group, int64_t worldSize);

/// Rank `rank`'s partition of the whole parameters `params` (flat or not,
/// in group order), padding zero: stages 1-2 the full partition
/// (zero2PartitionNumel), stage 3 its chunks.
at::Tensor partitionOf(const ParamGroupLayout &group,
                       const std::vector<at::Tensor> &params, int64_t stage,
                       int64_t worldSize, int64_t rank);

/// The whole parameters (1-D, in group order) from every rank's partition
/// (rank order): stages 1-2 each partition's first `contents[r]` elements
/// (its fp32 partition's length) joined; stage 3 the chunks zipped. Throws
/// RuntimeError naming `what` when the partitions do not fit the shapes.
std::vector<at::Tensor> paramsOf(const ParamGroupLayout &group,
                                 const std::vector<at::Tensor> &partitions,
                                 const std::vector<int64_t> &contents,
                                 int64_t stage, const std::string &what);

/// The param groups of a checkpoint's param_shapes (model states) with the
/// alignment paddings its optim states record (absent: none). Stage 3: one
/// group, as DeepSpeed's zero_to_fp32 joins them.
std::vector<ParamGroupLayout>
savedGroups(const DictView &model, const DictView &optimStates, int64_t stage);
/// A rank's tensors of one kind, 1-D, one per param group: stages 1-2 the
/// `items` (the list under `key`), stage 3 the items (sub-groups) joined.
std::vector<at::Tensor> groupTensors(const DictView &dict,
                                     const std::string &key,
                                     const std::vector<c10::IValue> &items,
                                     int64_t stage);

/// A buffer of the plan's flat layout, whole: every bucket gathered from
/// the ranks' blocks in `shard` (this rank's, sum of its blocks).
at::Tensor gatherFlat(const EngineContext &context, const at::Tensor &shard);
/// The trainable parameters' slices of a whole flat buffer, in group order.
std::vector<at::Tensor> groupParams(const EngineContext &context,
                                    const ParamGroupLayout &group,
                                    const at::Tensor &flat);
/// This rank's shard (its block of every bucket) of the plan's flat buffer
/// holding `params` (group order, whole), padding zero.
at::Tensor shardOfParams(const EngineContext &context,
                         const ParamGroupLayout &group,
                         const std::vector<at::Tensor> &params,
                         const at::TensorOptions &options);

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
