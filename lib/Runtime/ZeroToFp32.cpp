//===- ZeroToFp32.cpp - Whole fp32 weights from a checkpoint's shards -----===//
//
// DeepSpeed's zero_to_fp32.py for our checkpoints, every stage: stage 0 (and
// frozen engines below stage 3) hold the whole module; stages 1-3 hold one
// fp32 partition per rank in DeepSpeed's layout (CheckpointShards.h), from
// which each parameter of param_shapes is rebuilt; a frozen ZeRO-3 engine's
// ranks hold their block of every bucket of the plan's flat layout
// (ds_flat_layout).
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/Checkpoint.h"

#include "CheckpointFiles.h"
#include "CheckpointManifest.h"
#include "CheckpointShards.h"

#include "ds/TensorIO/RuntimeError.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <dirent.h>
#include <map>

namespace ds::runtime {

using detail::DictView;
using detail::SavedLayout;

namespace {

/// Subfolders of `dir` holding a `latest` file: the engines of a
/// multi-engine checkpoint.
std::vector<std::string> engineFolders(const std::string &dir) {
  std::vector<std::string> folders;
  if (DIR *listing = ::opendir(dir.c_str())) {
    while (struct dirent *entry = ::readdir(listing)) {
      std::string name = entry->d_name;
      if (name != "." && name != ".." &&
          detail::isFile(dir + "/" + name + "/latest"))
        folders.push_back(dir + "/" + name);
    }
    ::closedir(listing);
  }
  // readdir's order is the file system's: name them the same way each time.
  std::sort(folders.begin(), folders.end());
  return folders;
}

/// "; this is a multi-engine checkpoint: run on each engine's folder (...)"
/// when `dir` holds engine folders, else "".
std::string multiEngineHint(const std::string &dir) {
  std::string folders;
  for (const std::string &engine : engineFolders(dir))
    folders += (folders.empty() ? "" : ", ") + engine;
  if (folders.empty())
    return "";
  return "; this is a multi-engine checkpoint: run on each engine's folder (" +
         folders + ")";
}

/// The model states file of rank 0 (either stage's name).
std::string findModelStates(const std::string &dir, const std::string &folder) {
  for (int64_t stage : {0, 3}) {
    std::string path = folder + "/" + detail::modelStatesFile(stage, 0);
    if (detail::isFile(path))
      return path;
  }
  throw RuntimeError(folder + ": no " + detail::modelStatesFile(0, 0) + " or " +
                     detail::modelStatesFile(3, 0) +
                     " (not a checkpoint folder)" + multiEngineHint(dir));
}

/// Every trainable parameter's fp32 weights, whole (1-D), from every rank's
/// fp32 partition in DeepSpeed's layout.
std::map<std::string, at::Tensor> rebuildPartitioned(const std::string &folder,
                                                     const DictView &model,
                                                     int64_t stage,
                                                     int64_t worldSize) {
  const std::vector<DictView> states =
      detail::readAllOptimStates(folder, stage, worldSize);
  const std::vector<detail::ParamGroupLayout> groups =
      detail::savedGroups(model, states[0], stage);
  const char *key =
      stage == 3 ? "fp32_flat_groups" : "single_partition_of_fp32_groups";
  std::vector<std::vector<at::Tensor>> fp32;
  for (const DictView &state : states) {
    fp32.push_back(detail::groupTensors(state, key, state.list(key), stage));
    if (fp32.back().size() != groups.size())
      state.fail(key, std::to_string(fp32.back().size()) + " partitions for " +
                          std::to_string(groups.size()) +
                          " param groups of param_shapes");
  }
  std::map<std::string, at::Tensor> params;
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<at::Tensor> partitions;
    std::vector<int64_t> contents;
    for (const std::vector<at::Tensor> &rank : fp32) {
      partitions.push_back(rank[g]);
      contents.push_back(rank[g].numel());
    }
    std::vector<at::Tensor> whole = detail::paramsOf(
        groups[g], partitions, contents, stage,
        folder + ": " + key + " of param group " + std::to_string(g));
    for (size_t k = 0; k < whole.size(); ++k)
      params[groups[g].names[k]] = whole[k];
  }
  return params;
}

} // namespace

std::string verifyCheckpointFolder(const std::string &folder) {
  return detail::verifyFolder(folder);
}

ConsolidatedCheckpoint consolidateCheckpoint(const std::string &dir,
                                             const std::string &tagArg) {
  std::string tag = tagArg;
  if (tag.empty() && !detail::isFile(dir + "/latest") &&
      !multiEngineHint(dir).empty())
    throw RuntimeError(dir + ": no `latest` file" + multiEngineHint(dir));
  // As a load: the tag names a folder inside DIR (readLatest checks its
  // own), so `latest` or --tag cannot lead out of it ("../other").
  if (tag.empty())
    tag = detail::readLatest(dir);
  else
    detail::checkTag(tag);
  ConsolidatedCheckpoint result;
  result.path = dir + "/" + tag;
  if (!detail::isDirectory(result.path))
    throw RuntimeError(result.path + ": no such checkpoint folder" +
                       multiEngineHint(dir));
  // Every file against the manifest before any is read.
  std::string remark = verifyCheckpointFolder(result.path);
  if (!remark.empty())
    result.remarks.push_back(remark);
  std::string modelPath = findModelStates(dir, result.path);
  DictView model(detail::readTorchFile(modelPath), modelPath);
  result.stage = detail::savedZeroStage(
      model, detail::isFile(result.path + "/" + detail::modelStatesFile(3, 0))
                 ? 3
                 : 1);
  result.worldSize = model.integer("dp_world_size");
  if (result.worldSize < 1)
    model.fail("dp_world_size", "must be at least 1");
  const bool trainable = detail::savedTrainable(model);
  DictView module = model.dict("module");

  // Names and shapes: trainable parameters in flat order, then frozen ones.
  std::vector<std::pair<std::string, std::vector<int64_t>>> params;
  for (const c10::IValue &group : model.list("param_shapes"))
    for (const auto &[name, shape] :
         DictView(group, modelPath, "param_shapes").items())
      params.emplace_back(
          name, detail::intList(shape, model.where("param_shapes." + name)));
  const size_t flatCount = params.size();
  for (const auto &[name, shape] : detail::frozenParamShapes(model))
    params.emplace_back(
        name,
        detail::intList(shape, model.where("frozen_param_shapes." + name)));

  at::Tensor flat;
  SavedLayout layout;
  std::map<std::string, at::Tensor> partitioned;
  if (trainable && result.stage >= 1) {
    partitioned =
        rebuildPartitioned(result.path, model, result.stage, result.worldSize);
  } else if (trainable && result.stage == 0 &&
             model.get("optimizer").isGenericDict() &&
             DictView(model.get("optimizer"), modelPath, "optimizer")
                 .has("ds_fp32_master")) {
    // A native bf16 / fp16 engine at stage 0: its float32 master, not the
    // 16-bit module.
    layout = detail::readSavedLayout(model, result.worldSize);
    flat = DictView(model.get("optimizer"), modelPath, "optimizer")
               .tensor("ds_fp32_master");
  } else if (!trainable && result.stage == 3 &&
             !model.get("ds_flat_layout").isNone()) {
    // A frozen ZeRO-3 engine: the blocks are in the model states.
    layout = detail::readSavedLayout(model, result.worldSize);
    flat =
        detail::unshard(detail::readAllFrozenPartitions(
                            result.path, result.worldSize, layout.shardNumel),
                        layout);
  }
  for (size_t k = 0; k < params.size(); ++k) {
    const auto &[name, shape] = params[k];
    at::Tensor tensor;
    if (auto found = partitioned.find(name);
        k < flatCount && found != partitioned.end()) {
      tensor = found->second.view(shape).clone();
    } else if (flat.defined() && k < flatCount) {
      auto found = layout.offsets.find(name);
      if (found == layout.offsets.end())
        model.fail("ds_flat_layout.offsets",
                   "parameter '" + name +
                       "' of param_shapes has no offset in the flat layout");
      int64_t offset = found->second;
      int64_t numel = 1;
      for (int64_t size : shape)
        numel *= size;
      if (offset + numel > flat.numel())
        model.fail("ds_flat_layout.offsets." + name,
                   "parameter '" + name + "' of shape " +
                       plan::formatShape(shape) + " at offset " +
                       std::to_string(offset) +
                       " lies outside the flat buffer of " +
                       std::to_string(flat.numel()) + " elements");
      tensor = flat.narrow(0, offset, numel).view(shape).clone();
    } else {
      if (!module.has(name))
        module.fail(
            name, "parameter '" + name + "' of " +
                      (k < flatCount ? "param_shapes" : "frozen_param_shapes") +
                      " is missing from the module");
      tensor = module.tensor(name);
      if (tensor.sizes().vec() != shape)
        module.fail(name, "shape " + plan::formatShape(tensor.sizes().vec()) +
                              ", but param_shapes says " +
                              plan::formatShape(shape));
    }
    result.tensors.emplace_back(name, tensor);
  }
  for (const c10::IValue &name : model.list("buffer_names")) {
    if (!name.isString())
      model.fail("buffer_names", "expected strings");
    result.tensors.emplace_back(name.toStringRef(),
                                module.tensor(name.toStringRef()));
  }
  return result;
}

} // namespace ds::runtime
