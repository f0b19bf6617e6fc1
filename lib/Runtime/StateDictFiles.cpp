//===- StateDictFiles.cpp - pytorch_model.bin, model.safetensors, shards --===//

#include "ds/Runtime/Checkpoint.h"

#include "CheckpointFiles.h"
#include "ds/TensorIO/TorchSave.h"

#include "ds/Plan/AtomicFile.h"
#include "ds/Plan/Plan.h"
#include "ds/TensorIO/RuntimeError.h"

#include <ATen/core/Dict.h>

#include <cstdio>

namespace ds::runtime {

void writeTorchStateDict(const std::string &path, const NamedTensors &tensors) {
  c10::Dict<std::string, at::Tensor> dict;
  // Own storage per tensor: a view would drag its whole flat buffer along.
  for (const auto &[name, tensor] : tensors)
    dict.insert(name, tensor.detach().clone());
  std::vector<char> bytes = detail::writeTorchSave(dict);
  try {
    plan::writeFileAtomic(path, std::string_view(bytes.data(), bytes.size()));
  } catch (const std::runtime_error &error) {
    throw RuntimeError(error.what());
  }
}

namespace {

/// "pytorch_model-00002-of-00003.bin", "model-00002-of-00003.safetensors".
std::string shardName(bool safetensors, size_t index, size_t count) {
  char numbers[32];
  std::snprintf(numbers, sizeof(numbers), "-%05zu-of-%05zu", index + 1, count);
  return safetensors ? std::string("model") + numbers + ".safetensors"
                     : std::string("pytorch_model") + numbers + ".bin";
}

void writeOne(const std::string &path, const NamedTensors &tensors,
              bool safetensors) {
  if (safetensors)
    writeSafetensors(path, tensors);
  else
    writeTorchStateDict(path, tensors);
}

} // namespace

std::vector<std::string> writeStateDict(const std::string &outDir,
                                        const NamedTensors &tensors,
                                        bool safetensors,
                                        int64_t maxShardBytes) {
  detail::makeDirectories(outDir);
  const std::string single =
      safetensors ? "model.safetensors" : "pytorch_model.bin";
  int64_t total = 0;
  for (const auto &[name, tensor] : tensors)
    total += int64_t(tensor.nbytes());
  if (maxShardBytes <= 0 || total <= maxShardBytes) {
    writeOne(outDir + "/" + single, tensors, safetensors);
    return {single};
  }

  // In order: a shard takes tensors while they fit; a tensor larger than
  // the limit gets a shard of its own.
  std::vector<NamedTensors> shards(1);
  int64_t bytes = 0;
  for (const auto &entry : tensors) {
    int64_t size = int64_t(entry.second.nbytes());
    if (!shards.back().empty() && bytes + size > maxShardBytes) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().push_back(entry);
    bytes += size;
  }
  std::vector<std::string> written;
  plan::ordered_json weightMap = plan::ordered_json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    std::string name = shardName(safetensors, s, shards.size());
    writeOne(outDir + "/" + name, shards[s], safetensors);
    for (const auto &entry : shards[s])
      weightMap[entry.first] = name;
    written.push_back(name);
  }
  plan::ordered_json index = {{"metadata", {{"total_size", total}}},
                              {"weight_map", weightMap}};
  // The index last: a reader that finds it finds every shard.
  std::string indexName = single + ".index.json";
  try {
    plan::writeFileAtomic(outDir + "/" + indexName, index.dump(2) + "\n");
  } catch (const std::runtime_error &error) {
    throw RuntimeError(error.what());
  }
  written.push_back(indexName);
  return written;
}

} // namespace ds::runtime
