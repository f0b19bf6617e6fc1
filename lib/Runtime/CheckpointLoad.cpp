//===- CheckpointLoad.cpp - One plan engine's checkpoint, read and checked
//-===//
//
// Everything is checked against the plan (world size, stage, layout, names,
// shapes, dtypes) before anything changes: readEngineCheckpoint() collects
// the copies, applyEngineCheckpoint() makes them.
//
//===----------------------------------------------------------------------===//

#include "CheckpointEngine.h"

#include "CheckpointFiles.h"
#include "CheckpointShards.h"
#include "Trainer.h"

#include "ds/Runtime/Optimizer.h"
#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/RuntimeError.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <map>

namespace ds::runtime::detail {

namespace {

/// `value` as the destination's replacement: same shape and dtype, else an
/// error naming `where`.
at::Tensor matching(const at::Tensor &value, const at::Tensor &destination,
                    const std::string &where) {
  if (value.sizes() != destination.sizes())
    throw RuntimeError(where + ": shape " + plan::formatShape(value.sizes().vec()) +
                       " in the checkpoint, " +
                       plan::formatShape(destination.sizes().vec()) +
                       " in this run's plan");
  if (value.scalar_type() != destination.scalar_type())
    throw RuntimeError(
        where + ": dtype " + std::string(c10::toString(value.scalar_type())) +
        " in the checkpoint, " + c10::toString(destination.scalar_type()) +
        " in this run's plan");
  return value;
}

/// Stage 0: the flat master and per-parameter state lie as the plan lays
/// them out.
void checkLayout(const EngineContext &context, const DictView &model) {
  const plan::PartitionDesc &partition = *context.desc().partition;
  DictView layout = model.dict("ds_flat_layout");
  std::string differs;
  if (layout.integer("numel") != partition.numel)
    differs = "numel " + std::to_string(layout.integer("numel")) + " vs " +
              std::to_string(partition.numel);
  std::vector<c10::IValue> buckets = layout.list("buckets");
  if (differs.empty() && buckets.size() != partition.buckets.size())
    differs = std::to_string(buckets.size()) + " buckets vs " +
              std::to_string(partition.buckets.size());
  for (size_t b = 0; differs.empty() && b < buckets.size(); ++b) {
    if (!buckets[b].isList() || buckets[b].toListRef().size() != 3)
      layout.fail("buckets", "expected [offset, numel, persistent] entries");
    const auto &entry = buckets[b].toListRef();
    const plan::BucketDesc &ours = partition.buckets[b];
    if (entry[0].toInt() != ours.offset || entry[1].toInt() != ours.numel ||
        entry[2].toBool() != ours.persistent)
      differs = "bucket " + std::to_string(b) + " is [" +
                std::to_string(entry[0].toInt()) + ", " +
                std::to_string(entry[1].toInt()) + "] vs [" +
                std::to_string(ours.offset) + ", " +
                std::to_string(ours.numel) + "]";
  }
  DictView offsets = layout.dict("offsets");
  for (const plan::FlatParamDesc &param : partition.params) {
    std::string name = context.localName(param.name);
    if (differs.empty() && offsets.has(name) &&
        offsets.integer(name) != param.offset)
      differs = "parameter " + name + " at offset " +
                std::to_string(offsets.integer(name)) + " vs " +
                std::to_string(param.offset);
  }
  if (!differs.empty())
    layout.fail("", "the checkpoint's flat layout differs from the plan's (" +
                        differs +
                        "; checkpoint vs plan): compile with the same "
                        "zero_optimization bucket sizes as the saved run");
}

/// The names, kinds and shapes the checkpoint saved against the plan's.
void checkShapes(const EngineContext &context, const DictView &model) {
  std::map<std::string, std::vector<int64_t>> saved;
  std::vector<c10::IValue> groups = model.list("param_shapes");
  for (const c10::IValue &group : groups)
    for (const auto &[name, shape] :
         DictView(group, model.file(), "param_shapes").items())
      saved[name] = intList(shape, model.where("param_shapes." + name));
  for (const auto &[name, shape] : frozenParamShapes(model))
    saved[name] = intList(shape, model.where("frozen_param_shapes." + name));
  for (int64_t index : context.stateIndices()) {
    const plan::StateDesc &state = context.plan.state[size_t(index)];
    if (state.kind == plan::StateKind::Buffer)
      continue;
    std::string name = context.localName(state.name);
    auto it = saved.find(name);
    if (it == saved.end())
      model.fail("param_shapes", "parameter '" + name +
                                     "' of the plan is not in the checkpoint");
    if (it->second != state.shape)
      model.fail("param_shapes." + name,
                 "shape " + plan::formatShape(it->second) + " in the checkpoint, " +
                     plan::formatShape(state.shape) + " in this run's plan");
    saved.erase(it);
  }
  if (!saved.empty())
    model.fail("param_shapes", "parameter '" + saved.begin()->first +
                                   "' of the checkpoint is not in the plan");
}

/// torch.optim's state of parameter `id` in a base optimizer state dict.
DictView stateEntry(const DictView &base, int64_t id) {
  c10::IValue stateValue = base.get("state");
  if (!stateValue.isGenericDict())
    base.fail("state", "expected a dict of parameter states");
  c10::impl::GenericDict state = stateValue.toGenericDict();
  auto it = state.find(c10::IValue(id));
  if (it == state.end())
    base.fail("state." + std::to_string(id), "missing");
  return DictView(it->value(), base.file(), "state." + std::to_string(id));
}

/// The base optimizer state's key at stage `stage`.
const char *baseStateKey(int64_t stage) {
  return stage == 3 ? "optimizer_state_dict" : "base_optimizer_state";
}

/// The base optimizer state's buffers into the optimizer (stage 0: per
/// parameter; stages 1-3: one flat shard).
void readOptimizer(const EngineContext &context, const DictView &base,
                   LoadedEngine &loaded) {
  Optimizer &optimizer = *context.zeroState().optimizer();
  auto buffers = optimizerBuffers(optimizer);
  auto entryAt = [&](int64_t id) { return stateEntry(base, id); };
  bool first = true;
  auto readStep = [&](const DictView &entry) {
    int64_t steps = int64_t(entry.number("step"));
    if (!first && steps != loaded.optimizerSteps)
      entry.fail("step", "differs between parameters");
    loaded.optimizerSteps = steps;
    first = false;
  };
  if (context.stage() == 0) {
    size_t count = context.desc().partition->params.size();
    for (auto &[key, buffer] : buffers) {
      std::vector<at::Tensor> views = parameterViews(context, *buffer);
      for (size_t k = 0; k < count; ++k) {
        DictView entry = entryAt(int64_t(k));
        loaded.copies.emplace_back(
            views[k], matching(entry.tensor(key), views[k], entry.where(key)));
      }
    }
    for (size_t k = 0; k < count; ++k)
      readStep(entryAt(int64_t(k)));
    return;
  }
  DictView entry = entryAt(0);
  readStep(entry);
  for (auto &[key, buffer] : buffers)
    loaded.copies.emplace_back(
        *buffer, matching(entry.tensor(key), *buffer, entry.where(key)));
}

/// The loss scaler: an fp16 engine takes the saved state; any other engine
/// needs the static 1.0 that fp32 / bf16 / autocast training saves. fp16
/// autocast's torch.amp.GradScaler is not in the checkpoint (DeepSpeed does
/// not save it either): it starts again from its initial scale.
void checkScaler(const EngineContext &context, const DictView &dict,
                 LoadedEngine &loaded) {
  DictView scaler = dict.dict("loss_scaler");
  c10::IValue dynamic = dict.get("dynamic_loss_scale");
  const LossScaler *own = context.lossScaler();
  if (own && own->gradScaler())
    own = nullptr;
  if (own) {
    if (!dynamic.isBool() || dynamic.toBool() != own->dynamic())
      dict.fail(
          "dynamic_loss_scale",
          std::string("the checkpoint's loss scale is ") +
              (dynamic.isBool() && dynamic.toBool() ? "dynamic" : "static") +
              ", the plan's " + (own->dynamic() ? "dynamic" : "static"));
    LossScaler::State state;
    state.scale = scaler.number("cur_scale");
    state.iteration = scaler.integer("cur_iter");
    state.lastOverflow = scaler.integer("last_overflow_iter");
    state.hysteresisLeft = scaler.integer("cur_hysteresis");
    if (!(state.scale > 0.0))
      scaler.fail("cur_scale", "must be positive");
    loaded.scaler = state;
    return;
  }
  if (scaler.number("cur_scale") != 1.0 || !dynamic.isBool() ||
      dynamic.toBool())
    scaler.fail("cur_scale",
                "a loss scale other than a static 1.0 needs an fp16 engine "
                "with a loss scaler, and engine \"" +
                    context.desc().name + "\" has none");
}

/// A flat buffer in the saved layout -> this plan's: each parameter's
/// slice moves to its offset here (buckets padded for this world size).
at::Tensor relaidFlat(const EngineContext &context, const DictView &model,
                      const SavedLayout &layout, const at::Tensor &saved) {
  const plan::PartitionDesc &partition = *context.desc().partition;
  at::Tensor full = at::zeros({partition.numel}, saved.options());
  for (const plan::FlatParamDesc &param : partition.params) {
    std::string name = context.localName(param.name);
    auto found = layout.offsets.find(name);
    if (found == layout.offsets.end())
      model.fail("ds_flat_layout.offsets",
                 "parameter '" + name + "' has no offset");
    int64_t numel = plan::staticNumel(context.plan.findState(param.name)->shape)
                        .value_or(0);
    if (found->second + numel > saved.numel())
      model.fail("ds_flat_layout.offsets." + name,
                 "lies outside the flat buffer");
    full.narrow(0, param.offset, numel)
        .copy_(saved.narrow(0, found->second, numel));
  }
  return full;
}

/// This rank's block of each bucket of a buffer in this plan's layout.
std::vector<at::Tensor> myBlocksOf(const EngineContext &context,
                                   const at::Tensor &full) {
  std::vector<at::Tensor> blocks;
  for (const plan::BucketDesc &bucket : context.desc().partition->buckets) {
    int64_t block = bucket.numel / context.worldSize;
    blocks.push_back(
        full.narrow(0, bucket.offset + context.rank * block, block));
  }
  return blocks;
}

/// A frozen ZeRO-3 engine: this rank's parameter blocks from every saved
/// rank's "ds_frozen_partition", re-laid for this world size.
void readFrozenPartition(const EngineContext &context,
                         const std::string &folder, const DictView &model,
                         int64_t savedWorld, LoadedEngine &loaded) {
  const SavedLayout layout = readSavedLayout(model, savedWorld);
  std::vector<at::Tensor> parameters = myBlocksOf(
      context, relaidFlat(context, model, layout,
                          unshard(readAllFrozenPartitions(folder, savedWorld,
                                                          layout.shardNumel),
                                  layout)));
  const std::vector<at::Tensor> &blocks = context.zeroState().parameterBlocks();
  for (size_t b = 0; b < blocks.size(); ++b)
    loaded.copies.emplace_back(
        blocks[b],
        matching(parameters[b], blocks[b], folder + ": ds_frozen_partition"));
}

/// Whether state entry `index` is a trainable parameter of the engine's
/// flat buffer.
bool inPartition(const EngineContext &context, int64_t index) {
  const std::string &name = context.plan.state[size_t(index)].name;
  for (const plan::FlatParamDesc &param : context.desc().partition->params)
    if (param.name == name)
      return true;
  return false;
}

/// The base optimizer state's per-group entries: torch.optim's
/// {"state": {i: {...}}} or DeepSpeed's elastic list of states.
std::vector<DictView> optimizerEntries(const DictView &base,
                                       const c10::IValue &value) {
  std::vector<DictView> entries;
  if (value.isList()) {
    for (const c10::IValue &entry : value.toListRef())
      entries.emplace_back(entry, base.file(), "base_optimizer_state");
    return entries;
  }
  DictView dict(value, base.file(), "");
  c10::IValue state = dict.get("state");
  if (!state.isGenericDict())
    dict.fail("state", "expected a dict of parameter states");
  for (const auto &entry : state.toGenericDict())
    entries.emplace_back(entry.value(), base.file(),
                         "state." + (entry.key().isInt()
                                         ? std::to_string(entry.key().toInt())
                                         : std::string("?")));
  return entries;
}

/// Stages 1-3 of a trainable engine, saved by any number of ranks in
/// DeepSpeed's partitions (ours or DeepSpeed's own): every rank reads every
/// saved rank's optim states, rebuilds each parameter's fp32 weights and
/// optimizer state whole (by name, so the saved order and bucket sizes do
/// not matter), lays them into this plan's flat buffers and keeps its
/// shard. Pure data movement: the state is the saved one, bit for bit.
void readPartitions(const EngineContext &context, const std::string &folder,
                    const DictView &model, int64_t savedWorld,
                    LoadedEngine &loaded) {
  const int64_t stage = context.stage();
  const std::vector<DictView> states =
      readAllOptimStates(folder, stage, savedWorld);
  const std::vector<ParamGroupLayout> groups =
      savedGroups(model, states[0], stage);
  const char *fp32Key =
      stage == 3 ? "fp32_flat_groups" : "single_partition_of_fp32_groups";
  // [rank][group]
  std::vector<std::vector<at::Tensor>> fp32;
  std::vector<std::vector<DictView>> entries;
  for (const DictView &state : states) {
    checkScaler(context, state, loaded);
    fp32.push_back(groupTensors(state, fp32Key, state.list(fp32Key), stage));
    if (fp32.back().size() != groups.size())
      state.fail(fp32Key, std::to_string(fp32.back().size()) +
                              " partitions for " +
                              std::to_string(groups.size()) +
                              " param groups of param_shapes");
    entries.push_back(optimizerEntries(state, state.get(baseStateKey(stage))));
  }
  // Whole tensors by name: "" the fp32 weights, else an optimizer key.
  std::map<std::string, std::map<std::string, at::Tensor>> whole;
  auto rebuild = [&](const std::string &kind, size_t g,
                     const std::vector<at::Tensor> &partitions,
                     const std::vector<int64_t> &contents) {
    std::vector<at::Tensor> params =
        paramsOf(groups[g], partitions, contents, stage,
                 folder + ": " + (kind.empty() ? fp32Key : kind) +
                     " of param group " + std::to_string(g));
    for (size_t k = 0; k < params.size(); ++k)
      whole[kind][groups[g].names[k]] = params[k];
  };
  Optimizer &optimizer = *context.zeroState().optimizer();
  auto buffers = optimizerBuffers(optimizer);
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<at::Tensor> partitions;
    std::vector<int64_t> contents;
    for (int64_t r = 0; r < savedWorld; ++r) {
      partitions.push_back(fp32[size_t(r)][g]);
      contents.push_back(fp32[size_t(r)][g].numel());
    }
    rebuild("", g, partitions, contents);
    for (auto &[key, buffer] : buffers) {
      std::vector<at::Tensor> shards;
      for (int64_t r = 0; r < savedWorld; ++r) {
        const std::vector<DictView> &mine = entries[size_t(r)];
        std::vector<c10::IValue> pieces;
        // Stage 3: the sub-groups' states joined; stages 1-2: group g's.
        for (size_t e = stage == 3 ? 0 : g;
             e < (stage == 3 ? mine.size() : std::min(g + 1, mine.size())); ++e)
          pieces.push_back(mine[e].tensor(key));
        if (pieces.empty())
          states[size_t(r)].fail(baseStateKey(stage),
                                 "no optimizer state for param group " +
                                     std::to_string(g));
        shards.push_back(
            groupTensors(states[size_t(r)], key, pieces, 3).front());
      }
      rebuild(key, g, shards, contents);
    }
  }
  const ParamGroupLayout own = engineGroup(context);
  auto ownParams = [&](const std::string &kind) {
    std::vector<at::Tensor> params;
    for (size_t k = 0; k < own.names.size(); ++k) {
      auto found = whole[kind].find(own.names[k]);
      if (found == whole[kind].end())
        model.fail("param_shapes", "parameter '" + own.names[k] +
                                       "' of the plan is not in the "
                                       "checkpoint's param groups");
      params.push_back(found->second);
    }
    return params;
  };
  // Whole parameters (stage 3: the persistent ones) in their own dtype;
  // a 16-bit engine's are its master rounded, as when it saved them.
  for (int64_t index : context.stateIndices()) {
    if (context.state.sharded(index) || !inPartition(context, index))
      continue;
    const plan::StateDesc &desc = context.plan.state[size_t(index)];
    const at::Tensor &destination = context.state.tensor(index);
    loaded.copies.emplace_back(destination,
                               whole[""][context.localName(desc.name)]
                                   .view(desc.shape)
                                   .to(destination.scalar_type()));
  }
  at::Tensor parameters =
      shardOfParams(context, own, ownParams(""), fp32[0][0].options());
  int64_t offset = 0;
  for (const at::Tensor &block : context.zeroState().fp32Blocks()) {
    loaded.copies.emplace_back(
        block, matching(parameters.narrow(0, offset, block.numel()), block,
                        folder + ": fp32 partitions"));
    offset += block.numel();
  }
  for (auto &[key, buffer] : buffers)
    loaded.copies.emplace_back(
        *buffer,
        matching(shardOfParams(context, own, ownParams(key), buffer->options()),
                 *buffer, folder + ": " + key));
  const DictView &first = entries[0].empty() ? states[0] : entries[0][0];
  if (first.has("step"))
    loaded.optimizerSteps = int64_t(first.number("step"));
  else
    loaded.optimizerSteps =
        int64_t(states[0].number("base_optimizer_state_step"));
}

} // namespace

LoadedEngine readEngineCheckpoint(const EngineContext &context,
                                  const std::string &folder) {
  const int64_t stage = context.stage();
  std::string modelPath = folder + "/" + modelStatesFile(stage, context.rank);
  // Stage 3 on more ranks than saved: the new ranks take rank 0's module
  // (its buffers; persistent parameters are the same on every rank).
  const std::string ownPath = modelPath;
  if (stage == 3 && !isFile(modelPath))
    modelPath = folder + "/" + modelStatesFile(stage, 0);
  // Stage 3 saves per-rank model states, stages 0-2 one file: a checkpoint
  // of the other kind says so by its files; name both stages.
  if (!isFile(modelPath)) {
    std::string other = folder + "/" + modelStatesFile(stage == 3 ? 0 : 3, 0);
    if (isFile(other)) {
      DictView saved(readTorchFile(other), other);
      saved.fail("ds_zero_stage",
                 "the checkpoint is ZeRO stage " +
                     std::to_string(savedZeroStage(saved, 3 - stage)) +
                     ", this run's plan stage " + std::to_string(stage) +
                     " (changing the stage on resume is not supported)");
    }
  }
  DictView model(readTorchFile(modelPath), modelPath);
  LoadedEngine loaded;

  const int64_t savedWorld = model.integer("dp_world_size");
  if (savedWorld < 1)
    model.fail("dp_world_size", "must be at least 1");
  if (modelPath != ownPath && context.rank < savedWorld)
    throw RuntimeError("cannot read " + ownPath +
                       ": no such file (the "
                       "checkpoint was saved by " +
                       std::to_string(savedWorld) +
                       " ranks; each writes its own)");
  // Any world size: stage 0 and frozen engines below stage 3 hold whole
  // tensors; stages 1-3 are rebuilt from every saved rank's partition
  // (readPartitions, readFrozenPartition).
  // Before the layout and dtypes, which a change of precision also
  // changes. Checkpoints older than the key are fp32.
  const std::string precision = savedPrecision(model);
  if (precision != precisionMode(context.desc()))
    model.fail("ds_precision",
               "the checkpoint trained engine \"" + context.desc().name +
                   "\" in " + precision + ", this run's plan in " +
                   precisionMode(context.desc()) +
                   " (the config's fp16 / bf16 / torch_autocast sections "
                   "differ; to change precision, rebuild the weights with "
                   "ds-zero-to-fp32 and start from them with ds-run "
                   "--weights)");
  // DeepSpeed's files without a ds_config section for it: the optimizer
  // shards' zero_stage is checked against the plan's.
  const int64_t savedStage = savedZeroStage(model, stage);
  if (savedStage != stage)
    model.fail("ds_zero_stage",
               "the checkpoint is ZeRO stage " + std::to_string(savedStage) +
                   ", this run's plan stage " + std::to_string(stage));
  if (savedTrainable(model) != context.trains())
    model.fail("ds_trainable", "engine \"" + context.desc().name +
                                   "\" trains in one of the checkpoint and "
                                   "the plan and is frozen in the other");
  checkShapes(context, model);
  if (context.trains() && stage == 0)
    checkLayout(context, model);

  // Parameters and buffers the module holds whole. At stages 1-3 the
  // trainable parameters come from the fp32 partitions (readPartitions):
  // DeepSpeed's stage 3 module holds empty placeholders for them.
  DictView module = model.dict("module");
  const bool partitioned = context.trains() && stage >= 1;
  for (int64_t index : context.stateIndices()) {
    if (context.state.sharded(index) ||
        (partitioned && inPartition(context, index)))
      continue;
    std::string name =
        context.localName(context.plan.state[size_t(index)].name);
    const at::Tensor &destination = context.state.tensor(index);
    loaded.copies.emplace_back(
        destination,
        matching(module.tensor(name), destination, module.where(name)));
  }

  loaded.counters.globalSteps = model.integer("global_steps");
  loaded.skippedSteps = model.integer("skipped_steps");
  if (model.has("ds_last_grad_norm"))
    loaded.lastGradNorm = model.number("ds_last_grad_norm");
  // DeepSpeed's files: GAS micro-steps per step; the run keeps its seed.
  loaded.counters.microSteps = model.has("ds_micro_steps")
                                   ? model.integer("ds_micro_steps")
                                   : loaded.counters.globalSteps *
                                         context.plan.gradientAccumulationSteps;
  loaded.seedSaved = model.has("ds_seed");
  if (loaded.seedSaved)
    loaded.counters.seed = uint64_t(model.integer("ds_seed"));
  // The data position is steps x GAS micro-steps: GAS must not change.
  const int64_t accumulation = context.plan.gradientAccumulationSteps;
  if (loaded.counters.microSteps != loaded.counters.globalSteps * accumulation)
    model.fail("ds_micro_steps",
               std::to_string(loaded.counters.microSteps) + " micro-steps in " +
                   std::to_string(loaded.counters.globalSteps) +
                   " optimizer steps: the checkpoint was saved with another "
                   "gradient_accumulation_steps than this plan's " +
                   std::to_string(accumulation) +
                   " (changing it on resume is not supported)");
  if (!context.trains()) {
    if (context.desc().partition && context.trainer)
      readFrozenPartition(context, folder, model, savedWorld, loaded);
    return loaded;
  }

  if (stage == 0) {
    DictView optimizer = model.dict("optimizer");
    checkScaler(context, optimizer, loaded);
    readOptimizer(context, optimizer.dict("optimizer_state_dict"), loaded);
    const at::Tensor &master = context.zeroState().master();
    if (master.defined())
      loaded.copies.emplace_back(
          master, matching(optimizer.tensor("ds_fp32_master"), master,
                           optimizer.where("ds_fp32_master")));
  } else {
    readPartitions(context, folder, model, savedWorld, loaded);
  }
  if (context.desc().optimizer->scheduler) {
    c10::IValue scheduler = model.get("lr_scheduler");
    if (scheduler.isNone())
      model.fail("lr_scheduler", "missing, and the plan has a scheduler");
    loaded.appliedUpdates = DictView(scheduler, modelPath, "lr_scheduler")
                                .integer("last_batch_iteration") +
                            1;
  } else {
    loaded.appliedUpdates = loaded.optimizerSteps;
  }
  return loaded;
}

void applyEngineCheckpoint(const EngineContext &context,
                           const LoadedEngine &loaded) {
  at::NoGradGuard noGrad;
  for (const auto &[destination, value] : loaded.copies)
    destination.copy_(value);
  if (!context.trains())
    return;
  ZeroEngineState &engine = context.zeroState();
  engine.optimizer()->setSteps(loaded.optimizerSteps);
  UpdateProgress &progress = context.progress();
  progress.setAppliedUpdates(loaded.appliedUpdates);
  progress.setSkippedSteps(loaded.skippedSteps);
  progress.setLastGradNorm(loaded.lastGradNorm);
  if (loaded.scaler)
    progress.lossScaler()->restore(*loaded.scaler);
  // Native bf16 / fp16: the parameters are the loaded master rounded.
  engine.parametersFromMaster();
}

} // namespace ds::runtime::detail
