//===- CheckpointSave.cpp - One plan engine's checkpoint dicts
//-------------===//
//
// Key names, nesting and the ZeRO partitions follow DeepSpeed 0.19's
// engine.py and stage_1_and_2.py / stage3.py state_dict() (CheckpointShards.h):
// param_shapes is a list of OrderedDicts of torch.Size, so DeepSpeed's
// zero_to_fp32 reads the files. The loss scaler, a Python object in
// DeepSpeed's files, is a dict of its attributes here. Keys of our own start
// with "ds_": the stage, precision, micro-step counter and seed, and a frozen
// ZeRO-3 engine's blocks with their flat layout.
//
//===----------------------------------------------------------------------===//

#include "CheckpointEngine.h"

#include "CheckpointFiles.h"
#include "CheckpointShards.h"
#include "Trainer.h"

#include "ds/Runtime/Optimizer.h"
#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/RuntimeError.h"
#include "ds/TensorIO/TorchSave.h"

#include <ATen/ATen.h>

namespace ds::runtime::detail {

namespace {

constexpr const char *kVersion = "ds 0.1 (DeepSpeed 0.19 checkpoint layout)";

/// This rank's shard of the plan's flat fp32 parameters: its block of
/// every bucket (native bf16 / fp16 engines: of the float32 master).
at::Tensor fp32Shard(const EngineContext &context) {
  const std::vector<at::Tensor> &blocks = context.zeroState().fp32Blocks();
  if (blocks.empty())
    return at::empty({0}, at::TensorOptions().dtype(at::kFloat));
  return at::cat(blocks);
}

/// This rank's DeepSpeed partition of a flat buffer of which it holds
/// `shard` (stages 1-2: padding included). A collective: every rank
/// gathers the whole buffer first.
at::Tensor deepSpeedPartition(const EngineContext &context,
                              const ParamGroupLayout &group,
                              const at::Tensor &shard) {
  return partitionOf(group,
                     groupParams(context, group, gatherFlat(context, shard)),
                     context.stage(), context.worldSize, context.rank);
}

c10::IValue paramGroup(const EngineContext &context, c10::IValue params) {
  const plan::OptimizerDesc &desc = *context.desc().optimizer;
  c10::impl::GenericDict group = newDict();
  group.insert("lr", context.progress().nextLr());
  if (desc.type == plan::OptimizerType::SGD) {
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
/// stage 0 per parameter, stages 1-3 the rank's DeepSpeed partition.
c10::IValue baseOptimizerState(const EngineContext &context) {
  Optimizer &optimizer = *context.zeroState().optimizer();
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
    const ParamGroupLayout group = engineGroup(context);
    c10::impl::GenericDict entry = newDict();
    entry.insert("step", step);
    for (auto &[key, buffer] : buffers)
      entry.insert(key, deepSpeedPartition(context, group, *buffer));
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

/// The scaler a checkpoint records: an fp16 engine's. fp16 autocast's
/// torch.amp.GradScaler is not saved, as in DeepSpeed (the ZeRO optimizers'
/// state_dict holds their own static scaler of 1, the engine's checkpoint
/// no GradScaler state): a resumed run starts again from 2^16.
const LossScaler *savedScaler(const EngineContext &context) {
  const LossScaler *scaler = context.lossScaler();
  return scaler && !scaler->gradScaler() ? scaler : nullptr;
}

/// DeepSpeed's loss scaler state: an fp16 engine's scaler; fp32, bf16 and
/// autocast training have a static scale of 1.
c10::IValue lossScaler(const EngineContext &context,
                       const RunCounters &counters) {
  const LossScaler *engineScaler = savedScaler(context);
  const plan::PrecisionDesc *precision =
      context.desc().precision ? &*context.desc().precision : nullptr;
  c10::impl::GenericDict scaler = newDict();
  if (engineScaler && precision && precision->lossScaler) {
    const LossScaler::State &state = engineScaler->state();
    const plan::LossScalerDesc &desc = *precision->lossScaler;
    scaler.insert("cur_scale", state.scale);
    scaler.insert("cur_iter", state.iteration);
    scaler.insert("last_overflow_iter", state.lastOverflow);
    scaler.insert("scale_factor", 2.0);
    scaler.insert("scale_window", desc.scaleWindow);
    scaler.insert("min_scale", desc.minScale);
    scaler.insert("delayed_shift", desc.hysteresis);
    scaler.insert("cur_hysteresis", state.hysteresisLeft);
    scaler.insert("consecutive_hysteresis", desc.consecutiveHysteresis);
    scaler.insert("dynamic", engineScaler->dynamic());
    return scaler;
  }
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
  const LossScaler *engineScaler = savedScaler(context);
  dict.insert("loss_scaler", lossScaler(context, counters));
  dict.insert("dynamic_loss_scale", engineScaler && engineScaler->dynamic());
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

/// A frozen parameter as DeepSpeed saves it: whole at stages 1-2, the
/// rank's chunk of ceil(numel / W) elements (padded with zeros) at stage 3.
at::Tensor frozenFragment(const EngineContext &context,
                          const at::Tensor &value) {
  if (context.stage() != 3)
    return value.clone();
  ParamGroupLayout one;
  one.names.push_back("");
  one.shapes.push_back(value.sizes().vec());
  one.paddings.push_back(0);
  return partitionOf(one, {value}, 3, context.worldSize, context.rank);
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

c10::IValue buildModelStates(const EngineContext &context,
                             const RunCounters &counters) {
  const plan::EngineDesc &desc = context.desc();
  c10::impl::GenericDict module = newDict();
  c10::impl::GenericList bufferNames = newList();
  c10::impl::GenericDict paramShapes = newDict();
  c10::impl::GenericDict frozenShapes = newDict();
  c10::impl::GenericDict frozenFragments = newDict();
  for (int64_t index : context.stateIndices()) {
    const plan::StateDesc &state = context.plan.state[size_t(index)];
    std::string name = context.localName(state.name);
    // Stage 3: a sharded parameter is in the optim states only (DeepSpeed
    // leaves an empty placeholder; a missing key says the same).
    if (!context.state.sharded(index))
      module.insert(name, context.state.tensor(index).clone());
    if (state.kind == plan::StateKind::Buffer) {
      bufferNames.push_back(name);
    } else if (!inPartition(desc, state.name)) {
      frozenShapes.insert(name, torchSize(state.shape));
      if (context.trains() && context.stage() >= 1 &&
          !context.state.sharded(index))
        frozenFragments.insert(
            name, frozenFragment(context, context.state.tensor(index)));
    }
  }
  // DeepSpeed: one ordered dict of torch.Size per param group, in the
  // group's order (model.parameters()).
  if (desc.partition) {
    const ParamGroupLayout group = engineGroup(context);
    for (size_t k = 0; k < group.names.size(); ++k)
      paramShapes.insert(group.names[k], torchSize(group.shapes[k]));
  }
  c10::impl::GenericList paramShapeGroups = newList();
  paramShapeGroups.push_back(orderedDict(paramShapes));

  c10::impl::GenericDict dict = newDict();
  dict.insert("module", module);
  dict.insert("buffer_names", bufferNames);
  c10::IValue optimizer;
  if (context.trains() && context.stage() == 0) {
    c10::impl::GenericDict fp16Optimizer = newDict();
    addScalerKeys(fp16Optimizer, context, counters);
    fp16Optimizer.insert("optimizer_state_dict", baseOptimizerState(context));
    // Native bf16 / fp16: the float32 master of the whole flat layout
    // (DeepSpeed keeps it in its bf16 / fp16 optimizer's fp32 groups).
    const at::Tensor &master = context.zeroState().master();
    if (master.defined())
      fp16Optimizer.insert("ds_fp32_master", master.clone());
    optimizer = fp16Optimizer;
  }
  dict.insert("optimizer", optimizer);
  dict.insert("param_shapes", paramShapeGroups);
  dict.insert("frozen_param_shapes", orderedDict(frozenShapes));
  dict.insert("shared_params", newDict());
  // Trainable engines: DeepSpeed's script takes the frozen parameters from
  // here (stage 3: every rank's chunk).
  dict.insert("frozen_param_fragments", context.trains() && context.stage() >= 1
                                            ? orderedDict(frozenFragments)
                                            : c10::IValue());
  // A frozen ZeRO-3 engine: this rank's block of every bucket (what the
  // optimizer shards carry for a trainable one).
  if (!context.trains() && desc.partition && context.trainer) {
    const std::vector<at::Tensor> &blocks =
        context.zeroState().parameterBlocks();
    dict.insert("ds_frozen_partition",
                blocks.empty() ? at::empty({0}) : at::cat(blocks));
  }
  c10::IValue scheduler;
  if (context.trains() && desc.optimizer->scheduler) {
    c10::impl::GenericDict state = newDict();
    state.insert("last_batch_iteration",
                 context.progress().appliedUpdates() - 1);
    scheduler = state;
  }
  dict.insert("lr_scheduler", scheduler);
  c10::impl::GenericDict sampler = newDict();
  sampler.insert("micro_steps", counters.microSteps);
  dict.insert("data_sampler", sampler);
  dict.insert("random_ltd", c10::IValue());
  dict.insert("sparse_tensor_module_names", newList());
  dict.insert("skipped_steps", context.trains()
                                   ? context.progress().skippedSteps()
                                   : int64_t(0));
  dict.insert("global_steps", counters.globalSteps);
  dict.insert("global_samples",
              counters.globalSteps * context.plan.microBatchPerRank *
                  context.plan.gradientAccumulationSteps * context.worldSize);
  dict.insert("dp_world_size", context.worldSize);
  dict.insert("mp_world_size", int64_t(1));
  dict.insert("ds_config", jsonToIValue(desc.dsConfig));
  dict.insert("ds_version", kVersion);
  dict.insert("ds_engine", desc.name);
  dict.insert("ds_zero_stage", context.stage());
  dict.insert("ds_precision", precisionMode(desc));
  dict.insert("ds_trainable", context.trains());
  // Where a stage 0 engine's flat master and a frozen ZeRO-3 engine's
  // blocks (ds_frozen_partition) lie; the optimizer shards of stages 1-3
  // hold DeepSpeed's partitions.
  dict.insert("ds_flat_layout",
              desc.partition && (!context.trains() || context.stage() == 0)
                  ? flatLayout(*desc.partition, context)
                  : c10::IValue());
  dict.insert("ds_micro_steps", counters.microSteps);
  // The last applied update's gradient norm: what an fp16 step skipped
  // after resuming reports, as the uninterrupted run would.
  if (context.trains())
    dict.insert("ds_last_grad_norm", context.progress().lastGradNorm());
  dict.insert("ds_seed", int64_t(counters.seed));
  return dict;
}

c10::IValue buildOptimStates(const EngineContext &context,
                             const RunCounters &counters) {
  const int64_t stage = context.stage();
  c10::impl::GenericDict inner = newDict();
  inner.insert("zero_stage", stage);
  addScalerKeys(inner, context, counters);
  const ParamGroupLayout group = engineGroup(context);
  at::Tensor partition = deepSpeedPartition(context, group, fp32Shard(context));
  c10::impl::GenericList partitions = newList();
  if (stage == 3) {
    partitions.push_back(partition);
    inner.insert("partition_count", context.worldSize);
    inner.insert("optimizer_state_dict", baseOptimizerState(context));
    inner.insert("fp32_flat_groups", partitions);
  } else {
    c10::impl::GenericList counts = newList();
    counts.push_back(context.worldSize);
    inner.insert("partition_count", counts);
    inner.insert("base_optimizer_state", baseOptimizerState(context));
    // Without the end padding, which group_paddings counts.
    const int64_t content =
        zero2ContentNumel(group, context.worldSize, context.rank);
    partitions.push_back(partition.narrow(0, 0, content));
    inner.insert("single_partition_of_fp32_groups", partitions);
    c10::impl::GenericList paddings = newList();
    paddings.push_back(partition.numel() - content);
    inner.insert("group_paddings", paddings);
    c10::List<int64_t> alignment(std::vector<int64_t>(group.names.size(), 0));
    c10::impl::GenericList alignments = newList();
    alignments.push_back(alignment);
    inner.insert("param_alignment_paddings", alignments);
  }
  inner.insert("ds_version", kVersion);
  c10::impl::GenericDict dict = newDict();
  dict.insert("optimizer_state_dict", inner);
  dict.insert("ds_config", jsonToIValue(context.desc().dsConfig));
  dict.insert("ds_version", kVersion);
  return dict;
}

} // namespace ds::runtime::detail
