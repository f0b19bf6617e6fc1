//===- CheckpointShards.cpp - A checkpoint's ZeRO shards, made whole ------===//

#include "CheckpointShards.h"

#include "CheckpointEngine.h"
#include "ZeroEngineState.h"

#include "ds/Runtime/Communicator.h"

#include "ds/TensorIO/RuntimeError.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>

namespace ds::runtime::detail {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Each trainable parameter's offset in the plan's flat buffer, by its
/// name in the engine's module.
std::map<std::string, int64_t> planOffsets(const EngineContext &context) {
  std::map<std::string, int64_t> offsets;
  for (const plan::FlatParamDesc &param : context.desc().partition->params)
    offsets[context.localName(param.name)] = param.offset;
  return offsets;
}

int64_t planOffset(const std::map<std::string, int64_t> &offsets,
                   const std::string &name) {
  auto found = offsets.find(name);
  if (found == offsets.end())
    throw RuntimeError("parameter '" + name +
                       "' is not in the engine's flat buffer");
  return found->second;
}

} // namespace

int64_t ParamGroupLayout::numel(size_t param) const {
  int64_t count = 1;
  for (int64_t size : shapes[param])
    count *= size;
  return count;
}

int64_t ParamGroupLayout::paddedNumel() const {
  int64_t total = 0;
  for (size_t k = 0; k < names.size(); ++k)
    total += numel(k) + paddings[k];
  return total;
}

ParamGroupLayout engineGroup(const EngineContext &context) {
  std::map<std::string, int64_t> offsets = planOffsets(context);
  ParamGroupLayout group;
  for (int64_t index : context.stateIndices()) {
    const plan::StateDesc &state = context.plan.state[size_t(index)];
    std::string name = context.localName(state.name);
    if (state.kind == plan::StateKind::Buffer || !offsets.count(name))
      continue;
    group.names.push_back(name);
    group.shapes.push_back(state.shape);
    group.paddings.push_back(0);
  }
  return group;
}

int64_t zero2PartitionNumel(const ParamGroupLayout &group, int64_t worldSize) {
  const int64_t alignment = 2 * worldSize;
  return ceilDiv(group.paddedNumel(), alignment) * alignment / worldSize;
}

int64_t zero2ContentNumel(const ParamGroupLayout &group, int64_t worldSize,
                          int64_t rank) {
  const int64_t size = zero2PartitionNumel(group, worldSize);
  return std::clamp<int64_t>(group.paddedNumel() - rank * size, 0, size);
}

int64_t zero3PartitionNumel(const ParamGroupLayout &group, int64_t worldSize) {
  int64_t total = 0;
  for (size_t k = 0; k < group.names.size(); ++k)
    total += ceilDiv(group.numel(k), worldSize);
  return total;
}

at::Tensor partitionOf(const ParamGroupLayout &group,
                       const std::vector<at::Tensor> &params, int64_t stage,
                       int64_t worldSize, int64_t rank) {
  const at::TensorOptions options = params.empty()
                                        ? at::TensorOptions().dtype(at::kFloat)
                                        : params[0].options();
  if (stage == 3) {
    at::Tensor partition =
        at::zeros({zero3PartitionNumel(group, worldSize)}, options);
    int64_t offset = 0;
    for (size_t k = 0; k < params.size(); ++k) {
      const int64_t numel = group.numel(k);
      const int64_t chunk = ceilDiv(numel, worldSize);
      const int64_t begin = std::min(rank * chunk, numel);
      const int64_t count = std::min(chunk, numel - begin);
      partition.narrow(0, offset, count)
          .copy_(params[k].reshape({-1}).narrow(0, begin, count));
      offset += chunk;
    }
    return partition;
  }
  const int64_t size = zero2PartitionNumel(group, worldSize);
  at::Tensor flat = at::zeros({size * worldSize}, options);
  int64_t offset = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    flat.narrow(0, offset, group.numel(k)).copy_(params[k].reshape({-1}));
    offset += group.numel(k) + group.paddings[k];
  }
  return flat.narrow(0, rank * size, size).clone();
}

std::vector<at::Tensor> paramsOf(const ParamGroupLayout &group,
                                 const std::vector<at::Tensor> &partitions,
                                 const std::vector<int64_t> &contents,
                                 int64_t stage, const std::string &what) {
  const int64_t worldSize = int64_t(partitions.size());
  std::vector<at::Tensor> params;
  if (stage == 3) {
    const int64_t expected = zero3PartitionNumel(group, worldSize);
    for (int64_t r = 0; r < worldSize; ++r)
      if (partitions[size_t(r)].numel() != expected)
        throw RuntimeError(
            what + ": rank " + std::to_string(r) + "'s partition holds " +
            std::to_string(partitions[size_t(r)].numel()) +
            " elements, the parameters' chunks at " +
            std::to_string(worldSize) + " ranks " + std::to_string(expected));
    int64_t offset = 0;
    for (size_t k = 0; k < group.names.size(); ++k) {
      const int64_t chunk = ceilDiv(group.numel(k), worldSize);
      std::vector<at::Tensor> chunks;
      for (const at::Tensor &partition : partitions)
        chunks.push_back(partition.narrow(0, offset, chunk));
      params.push_back(at::cat(chunks).narrow(0, 0, group.numel(k)));
      offset += chunk;
    }
    return params;
  }
  std::vector<at::Tensor> pieces;
  int64_t available = 0;
  for (int64_t r = 0; r < worldSize; ++r) {
    const at::Tensor &partition = partitions[size_t(r)];
    const int64_t content = contents[size_t(r)];
    if (partition.numel() < content)
      throw RuntimeError(
          what + ": rank " + std::to_string(r) + "'s partition holds " +
          std::to_string(partition.numel()) + " elements, its fp32 partition " +
          std::to_string(content));
    pieces.push_back(partition.narrow(0, 0, content));
    available += content;
  }
  const int64_t needed = group.paddedNumel();
  if (available < needed || available - needed >= 2 * worldSize)
    throw RuntimeError(what + ": the partitions hold " +
                       std::to_string(available) + " elements, the " +
                       std::to_string(group.names.size()) +
                       " parameters of param_shapes " + std::to_string(needed));
  at::Tensor flat = pieces.empty() ? at::empty({0}) : at::cat(pieces);
  int64_t offset = 0;
  for (size_t k = 0; k < group.names.size(); ++k) {
    params.push_back(flat.narrow(0, offset, group.numel(k)));
    offset += group.numel(k) + group.paddings[k];
  }
  return params;
}

/// The param groups of a checkpoint's param_shapes (stage 3: one, as
/// DeepSpeed's zero_to_fp32 joins them), with the alignment paddings the
/// optimizer shard records (absent: none).
std::vector<ParamGroupLayout>
savedGroups(const DictView &model, const DictView &optimStates, int64_t stage) {
  std::vector<ParamGroupLayout> groups;
  for (const c10::IValue &shapes : model.list("param_shapes")) {
    if (groups.empty() || stage != 3)
      groups.emplace_back();
    for (const auto &[name, shape] :
         DictView(shapes, model.file(), "param_shapes").items()) {
      groups.back().names.push_back(name);
      groups.back().shapes.push_back(
          intList(shape, model.where("param_shapes." + name)));
      groups.back().paddings.push_back(0);
    }
  }
  if (stage != 3 && optimStates.has("param_alignment_paddings") &&
      !optimStates.get("param_alignment_paddings").isNone()) {
    std::vector<c10::IValue> paddings =
        optimStates.list("param_alignment_paddings");
    for (size_t g = 0; g < groups.size(); ++g) {
      std::vector<int64_t> own =
          g < paddings.size()
              ? intList(paddings[g],
                        optimStates.where("param_alignment_paddings"))
              : std::vector<int64_t>();
      if (own.size() != groups[g].names.size())
        optimStates.fail("param_alignment_paddings",
                         "group " + std::to_string(g) + " has " +
                             std::to_string(own.size()) + " paddings for " +
                             std::to_string(groups[g].names.size()) +
                             " parameters");
      groups[g].paddings = own;
    }
  }
  return groups;
}

/// A rank's tensors of one kind, one per param group: stages 1-2 the list
/// under `key`, stage 3 the list's sub-groups joined into one.
std::vector<at::Tensor> groupTensors(const DictView &dict,
                                     const std::string &key,
                                     const std::vector<c10::IValue> &items,
                                     int64_t stage) {
  std::vector<at::Tensor> tensors;
  for (const c10::IValue &item : items) {
    if (!item.isTensor())
      dict.fail(key, std::string("expected tensors, found ") + item.tagKind());
    tensors.push_back(item.toTensor().reshape({-1}));
  }
  if (stage == 3)
    return {tensors.empty() ? at::empty({0}) : at::cat(tensors)};
  return tensors;
}

at::Tensor gatherFlat(const EngineContext &context,
                      const at::Tensor &hostOrDevice) {
  const plan::PartitionDesc &partition = *context.desc().partition;
  // ZeRO-Offload keeps the fp32 shard and the optimizer state on the host;
  // the collectives move the run device's tensors, as without offload.
  const at::Tensor shard =
      context.trainer && context.communicator && context.worldSize > 1
          ? hostOrDevice.to(context.zeroState().device())
          : hostOrDevice;
  at::Tensor flat = at::zeros({partition.numel}, shard.options());
  int64_t shardOffset = 0;
  for (const plan::BucketDesc &bucket : partition.buckets) {
    const int64_t block = bucket.numel / context.worldSize;
    at::Tensor whole = flat.narrow(0, bucket.offset, bucket.numel);
    at::Tensor mine = shard.narrow(0, shardOffset, block).contiguous();
    if (context.worldSize == 1 || !context.communicator)
      whole.narrow(0, context.rank * block, block).copy_(mine);
    else
      context.communicator->allGather(whole, mine).wait();
    shardOffset += block;
  }
  return flat;
}

std::vector<at::Tensor> groupParams(const EngineContext &context,
                                    const ParamGroupLayout &group,
                                    const at::Tensor &flat) {
  std::map<std::string, int64_t> offsets = planOffsets(context);
  std::vector<at::Tensor> params;
  for (size_t k = 0; k < group.names.size(); ++k)
    params.push_back(
        flat.narrow(0, planOffset(offsets, group.names[k]), group.numel(k)));
  return params;
}

at::Tensor shardOfParams(const EngineContext &context,
                         const ParamGroupLayout &group,
                         const std::vector<at::Tensor> &params,
                         const at::TensorOptions &options) {
  const plan::PartitionDesc &partition = *context.desc().partition;
  std::map<std::string, int64_t> offsets = planOffsets(context);
  at::Tensor flat = at::zeros({partition.numel}, options);
  for (size_t k = 0; k < group.names.size(); ++k)
    flat.narrow(0, planOffset(offsets, group.names[k]), group.numel(k))
        .copy_(params[k].reshape({-1}));
  std::vector<at::Tensor> blocks;
  for (const plan::BucketDesc &bucket : partition.buckets) {
    const int64_t block = bucket.numel / context.worldSize;
    blocks.push_back(
        flat.narrow(0, bucket.offset + context.rank * block, block));
  }
  return blocks.empty() ? at::empty({0}, options) : at::cat(blocks);
}

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
                       ": no such file (the checkpoint was saved by " +
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
      throw RuntimeError(path +
                         ": no such file (the frozen ZeRO-3 engine "
                         "was saved by " +
                         std::to_string(worldSize) +
                         " ranks, dp_world_size; each writes its block)");
    DictView model(readTorchFile(path), path);
    at::Tensor partition = model.tensor("ds_frozen_partition");
    if (partition.dim() != 1 || partition.numel() != shardNumel)
      model.fail("ds_frozen_partition",
                 "shape " + plan::formatShape(partition.sizes().vec()) +
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
