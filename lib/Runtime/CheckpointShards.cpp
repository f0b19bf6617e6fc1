//===- CheckpointShards.cpp - A checkpoint's ZeRO shards, made whole ------===//

#include "CheckpointShards.h"

#include "ds/TensorIO/RuntimeError.h"

#include <ATen/ATen.h>

namespace ds::runtime::detail {

SavedLayout readSavedLayout(const DictView &modelStates, int64_t worldSize) {
  DictView layout = modelStates.dict("ds_flat_layout");
  SavedLayout saved;
  saved.worldSize = worldSize;
  saved.numel = layout.integer("numel");
  int64_t covered = 0;
  for (const c10::IValue &bucket : layout.list("buckets")) {
    bool ok = bucket.isList() && bucket.toListRef().size() == 3 &&
              bucket.toListRef()[0].isInt() && bucket.toListRef()[1].isInt();
    int64_t offset = ok ? bucket.toListRef()[0].toInt() : -1;
    int64_t numel = ok ? bucket.toListRef()[1].toInt() : -1;
    if (offset != covered || numel < 0 || numel % worldSize != 0)
      layout.fail("buckets", "bucket " + std::to_string(saved.buckets.size()) +
                                 " is not [offset, numel, persistent] "
                                 "continuing at " +
                                 std::to_string(covered) +
                                 " with numel a multiple of " +
                                 std::to_string(worldSize));
    saved.buckets.emplace_back(offset, numel);
    covered += numel;
    saved.shardNumel += numel / worldSize;
  }
  if (covered != saved.numel)
    layout.fail("buckets", "cover " + std::to_string(covered) +
                               " elements, numel is " +
                               std::to_string(saved.numel));
  DictView offsets = layout.dict("offsets");
  for (const auto &[name, offset] : offsets.items()) {
    if (!offset.isInt() || offset.toInt() < 0)
      offsets.fail(name, "expected an offset");
    saved.offsets[name] = offset.toInt();
  }
  return saved;
}

std::vector<DictView> readAllOptimStates(const std::string &folder,
                                         int64_t stage, int64_t worldSize) {
  std::string missing;
  for (int64_t r = 0; r < worldSize; ++r)
    if (!isFile(folder + "/" + findOptimStatesFile(folder, r)))
      missing += (missing.empty() ? "" : ", ") + optimStatesFile(r);
  if (!missing.empty())
    throw RuntimeError(folder + ": missing optimizer shard(s) " + missing +
                       " (the checkpoint was saved by " +
                       std::to_string(worldSize) +
                       " ranks, dp_world_size; each rank writes one)");
  std::vector<DictView> states;
  for (int64_t r = 0; r < worldSize; ++r)
    states.push_back(
        readOptimStates(folder + "/" + findOptimStatesFile(folder, r), stage));
  return states;
}

std::vector<at::Tensor> readAllFrozenPartitions(const std::string &folder,
                                                int64_t worldSize,
                                                int64_t shardNumel) {
  std::vector<at::Tensor> partitions;
  for (int64_t r = 0; r < worldSize; ++r) {
    std::string path = folder + "/" + modelStatesFile(3, r);
    if (!isFile(path))
      throw RuntimeError(path + ": no such file (the frozen ZeRO-3 engine "
                                "was saved by " +
                         std::to_string(worldSize) +
                         " ranks, dp_world_size; each writes its block)");
    DictView model(readTorchFile(path), path);
    at::Tensor partition = model.tensor("ds_frozen_partition");
    if (partition.dim() != 1 || partition.numel() != shardNumel)
      model.fail("ds_frozen_partition",
                 "shape " + shapeText(partition.sizes().vec()) +
                     ", expected [" + std::to_string(shardNumel) +
                     "] (one block of each bucket at " +
                     std::to_string(worldSize) + " ranks)");
    partitions.push_back(partition);
  }
  return partitions;
}

at::Tensor unshard(const std::vector<at::Tensor> &shards,
                   const SavedLayout &layout) {
  std::vector<at::Tensor> pieces;
  int64_t shardOffset = 0;
  for (const auto &[offset, numel] : layout.buckets) {
    int64_t block = numel / layout.worldSize;
    for (const at::Tensor &shard : shards)
      pieces.push_back(shard.narrow(0, shardOffset, block));
    shardOffset += block;
  }
  if (pieces.empty())
    return at::empty({0}, shards.empty() ? at::TensorOptions()
                                         : shards[0].options());
  return at::cat(pieces);
}

} // namespace ds::runtime::detail
