//===- CheckpointEngine.cpp - One plan engine's checkpoint files ----------===//
//
// Key names and nesting follow DeepSpeed 0.19's engine.py and
// stage_1_and_2.py / stage3.py state_dict(); values DeepSpeed keeps as Python
// objects (torch.Size, the LossScaler) are plain lists and dicts here, which
// LibTorch's pickler can write. Keys of our own start with "ds_": the flat
// layout (which DeepSpeed keeps implicit in its param groups), the micro-step
// counter and the seed.
//
//===----------------------------------------------------------------------===//

#include "CheckpointEngine.h"

#include "CheckpointFiles.h"
#include "Trainer.h"

#include "ds/Runtime/DTypes.h"
#include "ds/Runtime/Optimizer.h"
#include "ds/Runtime/RuntimeError.h"
#include "ds/Runtime/StateStore.h"

#include <ATen/ATen.h>

#include <map>

namespace ds::runtime::detail {

namespace {

constexpr const char *kVersion = "ds 0.1 (DeepSpeed 0.19 checkpoint layout)";

/// The optimizer's state buffers by torch.optim's key names.
std::vector<std::pair<const char *, at::Tensor *>>
optimizerBuffers(Optimizer &optimizer) {
  std::vector<std::pair<const char *, at::Tensor *>> buffers;
  if (optimizer.config().type == config::OptimizerType::SGD) {
    if (optimizer.mutableExpAvg().defined())
      buffers.emplace_back("momentum_buffer", &optimizer.mutableExpAvg());
    return buffers;
  }
  buffers.emplace_back("exp_avg", &optimizer.mutableExpAvg());
  buffers.emplace_back("exp_avg_sq", &optimizer.mutableExpAvgSq());
  return buffers;
}

/// Stage 0: one view of `flat` per trainable parameter, as the partition
/// places them.
std::vector<at::Tensor> parameterViews(const EngineContext &context,
                                       const at::Tensor &flat) {
  std::vector<at::Tensor> views;
  for (const plan::FlatParamDesc &param : context.desc().partition->params) {
    const plan::StateDesc *state = context.plan.findState(param.name);
    int64_t numel = plan::staticNumel(state->shape).value_or(0);
    views.push_back(flat.narrow(0, param.offset, numel).view(state->shape));
  }
  return views;
}

/// This rank's fp32 partition: its block of every bucket, in bucket order.
at::Tensor fp32Partition(const EngineContext &context) {
  const std::vector<at::Tensor> &blocks =
      context.trainer->parameterBlocks(context.engine);
  if (blocks.empty())
    return at::empty({0}, at::TensorOptions().dtype(at::kFloat));
  return at::cat(blocks);
}

c10::IValue paramGroup(const EngineContext &context, c10::IValue params) {
  const plan::OptimizerDesc &desc = *context.desc().optimizer;
  c10::impl::GenericDict group = newDict();
  group.insert("lr", *context.trainer->nextLr(context.engine));
  if (desc.type == "sgd") {
    group.insert("momentum", desc.momentum);
    group.insert("dampening", desc.dampening);
    group.insert("nesterov", desc.nesterov);
  } else {
    c10::impl::GenericList betas = newList();
    betas.push_back(desc.betas[0]);
    betas.push_back(desc.betas[1]);
    group.insert("betas", betas);
    group.insert("eps", desc.eps);
    group.insert("amsgrad", false);
  }
  group.insert("weight_decay", desc.weightDecay);
  group.insert("params", std::move(params));
  return group;
}

/// torch.optim's state_dict(): {"state": {i: {...}}, "param_groups": [..]};
/// stage 0 per parameter, stages 1-3 one flat shard.
c10::IValue baseOptimizerState(const EngineContext &context) {
  Optimizer &optimizer = *context.trainer->mutableOptimizer(context.engine);
  auto buffers = optimizerBuffers(optimizer);
  at::Tensor step = at::scalar_tensor(double(optimizer.steps()), at::kFloat);
  c10::impl::GenericDict state(c10::IntType::get(), c10::AnyType::get());
  c10::impl::GenericList ids = newList();
  if (context.stage() == 0) {
    std::vector<std::vector<at::Tensor>> views;
    for (auto &[key, buffer] : buffers)
      views.push_back(parameterViews(context, *buffer));
    size_t count = context.desc().partition->params.size();
    for (size_t k = 0; k < count; ++k) {
      c10::impl::GenericDict entry = newDict();
      entry.insert("step", step.clone());
      for (size_t b = 0; b < buffers.size(); ++b)
        entry.insert(buffers[b].first, views[b][k].clone());
      state.insert(int64_t(k), entry);
      ids.push_back(int64_t(k));
    }
  } else {
    c10::impl::GenericDict entry = newDict();
    entry.insert("step", step);
    for (auto &[key, buffer] : buffers)
      entry.insert(key, buffer->clone());
    state.insert(0, entry);
    ids.push_back(int64_t(0));
  }
  c10::impl::GenericDict dict = newDict();
  dict.insert("state", state);
  c10::impl::GenericList groups = newList();
  groups.push_back(paramGroup(context, ids));
  dict.insert("param_groups", groups);
  return dict;
}

/// DeepSpeed's loss scaler state: fp32 training has a static scale of 1.
c10::IValue lossScaler(const RunCounters &counters) {
  c10::impl::GenericDict scaler = newDict();
  scaler.insert("cur_scale", 1.0);
  scaler.insert("cur_iter", counters.globalSteps);
  scaler.insert("last_overflow_iter", int64_t(-1));
  scaler.insert("scale_factor", 2.0);
  scaler.insert("scale_window", int64_t(1000));
  scaler.insert("min_scale", 1.0);
  scaler.insert("delayed_shift", int64_t(1));
  scaler.insert("cur_hysteresis", int64_t(1));
  scaler.insert("consecutive_hysteresis", false);
  scaler.insert("dynamic", false);
  return scaler;
}

/// The keys FP16_Optimizer / the ZeRO optimizers put next to the base
/// optimizer's state.
void addScalerKeys(c10::impl::GenericDict &dict, const EngineContext &context,
                   const RunCounters &counters) {
  dict.insert("loss_scaler", lossScaler(counters));
  dict.insert("dynamic_loss_scale", false);
  dict.insert("overflow", false);
  dict.insert("clip_grad", context.desc().optimizer->gradientClipping);
}

c10::IValue flatLayout(const plan::PartitionDesc &partition,
                       const EngineContext &context) {
  c10::impl::GenericDict layout = newDict();
  layout.insert("numel", partition.numel);
  c10::impl::GenericDict offsets = newDict();
  for (const plan::FlatParamDesc &param : partition.params)
    offsets.insert(context.localName(param.name), param.offset);
  layout.insert("offsets", offsets);
  c10::impl::GenericList buckets = newList();
  for (const plan::BucketDesc &bucket : partition.buckets) {
    c10::impl::GenericList entry = newList();
    entry.push_back(bucket.offset);
    entry.push_back(bucket.numel);
    entry.push_back(bucket.persistent);
    buckets.push_back(entry);
  }
  layout.insert("buckets", buckets);
  return layout;
}

bool inPartition(const plan::EngineDesc &desc, const std::string &name) {
  if (!desc.partition)
    return false;
  for (const plan::FlatParamDesc &param : desc.partition->params)
    if (param.name == name)
      return true;
  return false;
}

} // namespace

//===----------------------------------------------------------------------===//
// EngineContext
//===----------------------------------------------------------------------===//

bool EngineContext::trains() const {
  return trainer && desc().optimizer && desc().partition &&
         trainer->optimizer(engine);
}

int64_t EngineContext::stage() const {
  return desc().partition ? desc().partition->stage : 0;
}

std::vector<int64_t> EngineContext::stateIndices() const {
  std::vector<int64_t> indices;
  const bool single = plan.engines.size() == 1;
  for (size_t i = 0; i < plan.state.size(); ++i)
    if (single || plan.state[i].engine == desc().name)
      indices.push_back(int64_t(i));
  return indices;
}

std::string EngineContext::localName(const std::string &qualified) const {
  const std::string &module = desc().module;
  if (!module.empty() && qualified.size() > module.size() &&
      qualified.compare(0, module.size(), module) == 0 &&
      qualified[module.size()] == '.')
    return qualified.substr(module.size() + 1);
  return qualified;
}

//===----------------------------------------------------------------------===//
// Saving
//===----------------------------------------------------------------------===//

c10::IValue buildModelStates(const EngineContext &context,
                             const RunCounters &counters) {
  const plan::EngineDesc &desc = context.desc();
  c10::impl::GenericDict module = newDict();
  c10::impl::GenericList bufferNames = newList();
  c10::impl::GenericDict paramShapes = newDict();
  c10::impl::GenericDict frozenShapes = newDict();
  for (int64_t index : context.stateIndices()) {
    const plan::StateDesc &state = context.plan.state[size_t(index)];
    std::string name = context.localName(state.name);
    // Stage 3: a sharded parameter is in the optim states only (DeepSpeed
    // leaves an empty placeholder; a missing key says the same).
    if (!context.state.sharded(index))
      module.insert(name, context.state.tensor(index).clone());
    if (state.kind == plan::StateKind::Buffer)
      bufferNames.push_back(name);
    else if (!inPartition(desc, state.name))
      frozenShapes.insert(name, shapeValue(state.shape));
  }
  // DeepSpeed: one ordered dict of shapes per param group, in flat order.
  if (desc.partition)
    for (const plan::FlatParamDesc &param : desc.partition->params)
      paramShapes.insert(context.localName(param.name),
                         shapeValue(context.plan.findState(param.name)->shape));
  c10::impl::GenericList paramShapeGroups = newList();
  paramShapeGroups.push_back(paramShapes);

  c10::impl::GenericDict dict = newDict();
  dict.insert("module", module);
  dict.insert("buffer_names", bufferNames);
  c10::IValue optimizer;
  if (context.trains() && context.stage() == 0) {
    c10::impl::GenericDict fp16Optimizer = newDict();
    addScalerKeys(fp16Optimizer, context, counters);
    fp16Optimizer.insert("optimizer_state_dict", baseOptimizerState(context));
    optimizer = fp16Optimizer;
  }
  dict.insert("optimizer", optimizer);
  dict.insert("param_shapes", paramShapeGroups);
  dict.insert("frozen_param_shapes", frozenShapes);
  dict.insert("shared_params", newDict());
  dict.insert("frozen_param_fragments", c10::IValue());
  c10::IValue scheduler;
  if (context.trains() && desc.optimizer->scheduler) {
    c10::impl::GenericDict state = newDict();
    state.insert("last_batch_iteration",
                 context.trainer->appliedUpdates(context.engine) - 1);
    scheduler = state;
  }
  dict.insert("lr_scheduler", scheduler);
  c10::impl::GenericDict sampler = newDict();
  sampler.insert("micro_steps", counters.microSteps);
  dict.insert("data_sampler", sampler);
  dict.insert("random_ltd", c10::IValue());
  dict.insert("sparse_tensor_module_names", newList());
  dict.insert("skipped_steps", int64_t(0));
  dict.insert("global_steps", counters.globalSteps);
  dict.insert("global_samples",
              counters.globalSteps * context.plan.microBatchPerRank *
                  context.plan.gradientAccumulationSteps * context.worldSize);
  dict.insert("dp_world_size", context.worldSize);
  dict.insert("mp_world_size", int64_t(1));
  dict.insert("ds_config", jsonToIValue(desc.config));
  dict.insert("ds_version", kVersion);
  dict.insert("ds_engine", desc.name);
  dict.insert("ds_zero_stage", context.stage());
  dict.insert("ds_trainable", context.trains());
  dict.insert("ds_flat_layout", desc.partition
                                    ? flatLayout(*desc.partition, context)
                                    : c10::IValue());
  dict.insert("ds_micro_steps", counters.microSteps);
  dict.insert("ds_seed", int64_t(counters.seed));
  return dict;
}

c10::IValue buildOptimStates(const EngineContext &context,
                             const RunCounters &counters) {
  const int64_t stage = context.stage();
  c10::impl::GenericDict inner = newDict();
  inner.insert("zero_stage", stage);
  addScalerKeys(inner, context, counters);
  c10::impl::GenericList partitions = newList();
  partitions.push_back(fp32Partition(context));
  if (stage == 3) {
    inner.insert("partition_count", context.worldSize);
    inner.insert("optimizer_state_dict", baseOptimizerState(context));
    inner.insert("fp32_flat_groups", partitions);
  } else {
    c10::impl::GenericList counts = newList();
    counts.push_back(context.worldSize);
    inner.insert("partition_count", counts);
    inner.insert("base_optimizer_state", baseOptimizerState(context));
    inner.insert("single_partition_of_fp32_groups", partitions);
    c10::impl::GenericList paddings = newList();
    const plan::PartitionDesc &partition = *context.desc().partition;
    int64_t used = 0;
    for (const plan::FlatParamDesc &param : partition.params)
      used += plan::staticNumel(context.plan.findState(param.name)->shape)
                  .value_or(0);
    paddings.push_back(partition.numel - used);
    inner.insert("group_paddings", paddings);
  }
  inner.insert("ds_version", kVersion);
  c10::impl::GenericDict dict = newDict();
  dict.insert("optimizer_state_dict", inner);
  dict.insert("ds_config", jsonToIValue(context.desc().config));
  dict.insert("ds_version", kVersion);
  return dict;
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

namespace {

/// `value` as the destination's replacement: same shape and dtype, else an
/// error naming `where`.
at::Tensor matching(const at::Tensor &value, const at::Tensor &destination,
                    const std::string &where) {
  if (value.sizes() != destination.sizes())
    throw RuntimeError(where + ": shape " + shapeText(value.sizes().vec()) +
                       " in the checkpoint, " +
                       shapeText(destination.sizes().vec()) +
                       " in this run's plan");
  if (value.scalar_type() != destination.scalar_type())
    throw RuntimeError(
        where + ": dtype " + std::string(c10::toString(value.scalar_type())) +
        " in the checkpoint, " + c10::toString(destination.scalar_type()) +
        " in this run's plan");
  return value;
}

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
  for (const auto &[name, shape] : model.dict("frozen_param_shapes").items())
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
                 "shape " + shapeText(it->second) + " in the checkpoint, " +
                     shapeText(state.shape) + " in this run's plan");
    saved.erase(it);
  }
  if (!saved.empty())
    model.fail("param_shapes", "parameter '" + saved.begin()->first +
                                   "' of the checkpoint is not in the plan");
}

/// The base optimizer state's buffers into the optimizer (stage 0: per
/// parameter; stages 1-3: one flat shard).
void readOptimizer(const EngineContext &context, const DictView &base,
                   LoadedEngine &loaded) {
  Optimizer &optimizer = *context.trainer->mutableOptimizer(context.engine);
  auto buffers = optimizerBuffers(optimizer);
  c10::IValue stateValue = base.get("state");
  if (!stateValue.isGenericDict())
    base.fail("state", "expected a dict of parameter states");
  c10::impl::GenericDict state = stateValue.toGenericDict();
  auto entryAt = [&](int64_t id) {
    auto it = state.find(c10::IValue(id));
    if (it == state.end())
      base.fail("state." + std::to_string(id), "missing");
    return DictView(it->value(), base.file(), "state." + std::to_string(id));
  };
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

void checkScaler(const DictView &dict) {
  DictView scaler = dict.dict("loss_scaler");
  c10::IValue dynamic = dict.get("dynamic_loss_scale");
  if (scaler.number("cur_scale") != 1.0 || !dynamic.isBool() ||
      dynamic.toBool())
    scaler.fail("cur_scale",
                "a loss scale other than a static 1.0 needs fp16 training, "
                "which this runtime does not implement yet");
}

} // namespace

LoadedEngine readEngineCheckpoint(const EngineContext &context,
                                  const std::string &folder) {
  const int64_t stage = context.stage();
  std::string modelPath = folder + "/" + modelStatesFile(stage, context.rank);
  DictView model(readTorchFile(modelPath), modelPath);
  LoadedEngine loaded;

  const int64_t savedWorld = model.integer("dp_world_size");
  if (savedWorld != context.worldSize)
    model.fail("dp_world_size",
               "the checkpoint was saved by " + std::to_string(savedWorld) +
                   " data-parallel rank(s), this run has " +
                   std::to_string(context.worldSize) +
                   " (resuming on another world size is not supported: its "
                   "optimizer shards are laid out for " +
                   std::to_string(savedWorld) +
                   " ranks; ds-zero-to-fp32 rebuilds the weights of any)");
  const int64_t savedStage = model.integer("ds_zero_stage");
  if (savedStage != stage)
    model.fail("ds_zero_stage",
               "the checkpoint is ZeRO stage " + std::to_string(savedStage) +
                   ", this run's plan stage " + std::to_string(stage));
  if (model.get("ds_trainable").toBool() != context.trains())
    model.fail("ds_trainable", "engine \"" + context.desc().name +
                                   "\" trains in one of the checkpoint and "
                                   "the plan and is frozen in the other");
  checkShapes(context, model);
  if (context.trains())
    checkLayout(context, model);

  // Parameters and buffers the module holds whole.
  DictView module = model.dict("module");
  for (int64_t index : context.stateIndices()) {
    if (context.state.sharded(index))
      continue;
    std::string name =
        context.localName(context.plan.state[size_t(index)].name);
    const at::Tensor &destination = context.state.tensor(index);
    loaded.copies.emplace_back(
        destination,
        matching(module.tensor(name), destination, module.where(name)));
  }

  loaded.counters.globalSteps = model.integer("global_steps");
  loaded.counters.microSteps = model.integer("ds_micro_steps");
  loaded.counters.seed = uint64_t(model.integer("ds_seed"));
  if (!context.trains())
    return loaded;

  if (stage == 0) {
    DictView optimizer = model.dict("optimizer");
    checkScaler(optimizer);
    readOptimizer(context, optimizer.dict("optimizer_state_dict"), loaded);
  } else {
    std::string optimPath = folder + "/" + optimStatesFile(context.rank);
    DictView inner = DictView(readTorchFile(optimPath), optimPath)
                         .dict("optimizer_state_dict");
    checkScaler(inner);
    if (inner.integer("zero_stage") != stage)
      inner.fail("zero_stage", "stage " +
                                   std::to_string(inner.integer("zero_stage")) +
                                   " in the optimizer shard, " +
                                   std::to_string(stage) + " in the plan");
    readOptimizer(context,
                  inner.dict(stage == 3 ? "optimizer_state_dict"
                                        : "base_optimizer_state"),
                  loaded);
    const char *key =
        stage == 3 ? "fp32_flat_groups" : "single_partition_of_fp32_groups";
    std::vector<c10::IValue> groups = inner.list(key);
    if (groups.size() != 1 || !groups[0].isTensor())
      inner.fail(key, "expected one tensor (one param group)");
    at::Tensor partition = groups[0].toTensor();
    const std::vector<at::Tensor> &blocks =
        context.trainer->parameterBlocks(context.engine);
    int64_t numel = 0;
    for (const at::Tensor &block : blocks)
      numel += block.numel();
    if (partition.dim() != 1 || partition.numel() != numel)
      inner.fail(key, "shape " + shapeText(partition.sizes().vec()) +
                          ", expected [" + std::to_string(numel) +
                          "] (this rank's shard)");
    int64_t offset = 0;
    for (const at::Tensor &block : blocks) {
      loaded.copies.emplace_back(
          block, matching(partition.narrow(0, offset, block.numel()), block,
                          inner.where(key)));
      offset += block.numel();
    }
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
  context.trainer->mutableOptimizer(context.engine)
      ->setSteps(loaded.optimizerSteps);
  context.trainer->setAppliedUpdates(context.engine, loaded.appliedUpdates);
}

} // namespace ds::runtime::detail
