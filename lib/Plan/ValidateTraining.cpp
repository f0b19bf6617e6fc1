//===- ValidateTraining.cpp - Engine settings, optimizers and partitions --===//
//
// docs/plan-format.md, "ENGINE" and "The accumulation boundary": which
// engines carry an optimizer and a partition, their typed settings, the
// optimizer's and scheduler's ranges, and the flat layout of parameters and
// buckets.
//
//===----------------------------------------------------------------------===//

#include "PlanValidator.h"

#include <algorithm>
#include <cmath>

namespace ds::plan::detail {

void PlanValidator::checkTraining() const {
  const bool training = plan_.findProgram("train") != nullptr;
  for (size_t i = 0; i < plan_.engines.size(); ++i) {
    const EngineDesc &engine = plan_.engines[i];
    std::string where = joinIndex("engines", i);
    if (training) {
      if (engine.trainable && (!engine.optimizer || !engine.partition))
        fail(where,
             std::string("a trainable engine needs \"optimizer\" and "
                         "\"partition\" (missing ") +
                 (!engine.optimizer ? "\"optimizer\"" : "") +
                 (!engine.optimizer && !engine.partition ? " and " : "") +
                 (!engine.partition ? "\"partition\"" : "") + ")");
      if (!engine.trainable && engine.optimizer)
        fail(where + ".optimizer",
             "a frozen engine (\"trainable\": false) has no "
             "\"optimizer\"");
      if (!engine.trainable && engine.partition && engine.partition->stage != 3)
        fail(where + ".partition",
             "a frozen engine (\"trainable\": false) has a partition only "
             "at ZeRO stage 3 (its parameters sharded), found stage " +
                 std::to_string(engine.partition->stage));
    }
    if (engine.optimizer)
      checkOptimizer(*engine.optimizer, where + ".optimizer");
    if (engine.partition)
      checkPartition(engine, *engine.partition, where + ".partition");
    if (engine.precision)
      checkPrecision(engine, *engine.precision, where + ".precision");
    checkEngineSettings(engine, where);
  }
}

void PlanValidator::checkEngineSettings(const EngineDesc &engine,
                                        const std::string &where) const {
  if (engine.zeroStage < 0 || engine.zeroStage > 3)
    fail(where + ".zero_stage",
         "must be 0, 1, 2 or 3, found " + std::to_string(engine.zeroStage));
  if (engine.partition && engine.partition->stage != engine.zeroStage)
    fail(where + ".partition.stage",
         "is " + std::to_string(engine.partition->stage) +
             ", but the engine's zero_stage is " +
             std::to_string(engine.zeroStage));
  if (engine.offloadOptimizer && engine.zeroStage == 0)
    fail(where + ".offload_optimizer",
         "needs ZeRO stage 1, 2 or 3 (the engine's zero_stage is 0)");
  const BatchDesc &batch = engine.batch;
  const std::string at = where + ".batch";
  for (auto [value, key] :
       {std::pair{batch.trainBatchSize, "train_batch_size"},
        std::pair{batch.microBatchPerGpu, "micro_batch_per_gpu"},
        std::pair{batch.gradientAccumulationSteps,
                  "gradient_accumulation_steps"}})
    if (value < 1)
      fail(at + "." + key, "must be >= 1, found " + std::to_string(value));
  if (batch.gradientAccumulationSteps != plan_.gradientAccumulationSteps)
    fail(at + ".gradient_accumulation_steps",
         "is " + std::to_string(batch.gradientAccumulationSteps) +
             ", but the plan's gradient_accumulation_steps is " +
             std::to_string(plan_.gradientAccumulationSteps));
}

void PlanValidator::checkFinite(double value, const std::string &where) const {
  if (!std::isfinite(value))
    fail(where, "must be a finite number");
}

void PlanValidator::checkAtLeast(double value, double low,
                                 const std::string &where) const {
  checkFinite(value, where);
  if (value < low)
    fail(where,
         "must be >= " + formatNumber(low) + ", found " + formatNumber(value));
}

void PlanValidator::checkUnit(double value, const std::string &where,
                              bool closed) const {
  checkFinite(value, where);
  if (value < 0 || value > 1 || (!closed && value == 1))
    fail(where, std::string("must be in [0, 1") + (closed ? "]" : ")") +
                    ", found " + formatNumber(value));
}

std::string PlanValidator::formatNumber(double value) {
  return ordered_json(value).dump();
}

void PlanValidator::checkOptimizer(const OptimizerDesc &optimizer,
                                   const std::string &where) const {
  checkAtLeast(optimizer.lr, 0.0, where + ".lr");
  checkUnit(optimizer.betas[0], where + ".betas[0]", false);
  checkUnit(optimizer.betas[1], where + ".betas[1]", false);
  checkAtLeast(optimizer.eps, 0.0, where + ".eps");
  checkAtLeast(optimizer.weightDecay, 0.0, where + ".weight_decay");
  checkAtLeast(optimizer.momentum, 0.0, where + ".momentum");
  checkFinite(optimizer.dampening, where + ".dampening");
  if (optimizer.type == OptimizerType::SGD && optimizer.nesterov &&
      (optimizer.momentum <= 0 || optimizer.dampening != 0))
    fail(where + ".nesterov",
         "nesterov needs a momentum > 0 and zero dampening (as "
         "torch.optim.SGD), found momentum " +
             formatNumber(optimizer.momentum) + ", dampening " +
             formatNumber(optimizer.dampening));
  checkAtLeast(optimizer.gradientClipping, 0.0, where + ".gradient_clipping");
  if (!optimizer.scheduler)
    return;
  const SchedulerDesc &scheduler = *optimizer.scheduler;
  std::string at = where + ".scheduler";
  checkFinite(scheduler.warmupMinLr, at + ".warmup_min_lr");
  if (scheduler.warmupMaxLr)
    checkFinite(*scheduler.warmupMaxLr, at + ".warmup_max_lr");
  if (scheduler.warmupNumSteps < 0)
    fail(at + ".warmup_num_steps",
         "must be >= 0, found " + std::to_string(scheduler.warmupNumSteps));
  if (scheduler.type != SchedulerType::WarmupLR &&
      (!scheduler.totalNumSteps || *scheduler.totalNumSteps < 1))
    fail(at + ".total_num_steps",
         std::string(schedulerTypeName(scheduler.type)) +
             " needs total_num_steps >= 1, found " +
             (scheduler.totalNumSteps ? std::to_string(*scheduler.totalNumSteps)
                                      : std::string("null")));
  checkUnit(scheduler.warmupMinRatio, at + ".warmup_min_ratio", true);
  checkUnit(scheduler.cosMinRatio, at + ".cos_min_ratio", true);
}

void PlanValidator::checkPartition(const EngineDesc &engine,
                                   const PartitionDesc &partition,
                                   const std::string &where) const {
  if (partition.stage < 0 || partition.stage > 3)
    fail(where + ".stage",
         "expected 0, 1, 2 or 3, found " + std::to_string(partition.stage));
  if (partition.numel < 0)
    fail(where + ".numel",
         "must be >= 0, found " + std::to_string(partition.numel));

  struct Placed {
    int64_t begin, end;
    size_t index;
  };
  std::vector<Placed> placed;
  std::map<std::string, size_t> seen;
  std::optional<DType> dtype;
  for (size_t k = 0; k < partition.params.size(); ++k) {
    const FlatParamDesc &param = partition.params[k];
    std::string at = where + joinIndex(".params", k);
    const StateDesc *state = plan_.findState(param.name);
    if (!state)
      fail(at + ".name", "the plan has no state named " + quoted(param.name));
    // A frozen stage 3 engine shards all its parameters; a trainable
    // engine those that require grad.
    if (state->kind != StateKind::Param ||
        (!state->requiresGrad && engine.optimizer) ||
        state->engine != engine.name)
      fail(at + ".name",
           quoted(param.name) + " is not a trainable parameter of engine " +
               quoted(engine.name) +
               (state->kind != StateKind::Param ? " (it is a buffer)"
                : !state->requiresGrad
                    ? " (\"requires_grad\": false)"
                    : " (it belongs to engine " + quoted(state->engine) + ")"));
    if (auto it = seen.find(param.name); it != seen.end())
      fail(at + ".name", quoted(param.name) + " is placed twice (first by " +
                             where + joinIndex(".params", it->second) + ")");
    seen[param.name] = k;
    if (dtype && *dtype != state->dtype)
      fail(at + ".name", quoted(param.name) + " is " + dtypeName(state->dtype) +
                             ", but the engine's other parameters are " +
                             dtypeName(*dtype) +
                             " (one flat buffer holds one dtype)");
    dtype = state->dtype;
    int64_t numel = stateNumel(*state);
    if (param.offset < 0 || param.offset + numel > partition.numel)
      fail(at + ".offset", quoted(param.name) + " (" + std::to_string(numel) +
                               " elements at offset " +
                               std::to_string(param.offset) +
                               ") does not lie inside [0, " +
                               std::to_string(partition.numel) + ")");
    placed.push_back({param.offset, param.offset + numel, k});
  }
  std::sort(placed.begin(), placed.end(), [](const Placed &a, const Placed &b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t k = 1; k < placed.size(); ++k)
    if (placed[k].begin < placed[k - 1].end) {
      const FlatParamDesc &a = partition.params[placed[k - 1].index];
      const FlatParamDesc &b = partition.params[placed[k].index];
      fail(where + joinIndex(".params", placed[k].index),
           quoted(b.name) + " [" + std::to_string(placed[k].begin) + ", " +
               std::to_string(placed[k].end) + ") overlaps " + quoted(a.name) +
               " [" + std::to_string(placed[k - 1].begin) + ", " +
               std::to_string(placed[k - 1].end) + ")");
    }
  for (const StateDesc &state : plan_.state)
    if (state.kind == StateKind::Param &&
        (state.requiresGrad || !engine.optimizer) &&
        state.engine == engine.name && !seen.count(state.name))
      fail(where + ".params", "parameter " + quoted(state.name) +
                                  " of engine " + quoted(engine.name) +
                                  " has no place in the flat buffers");

  int64_t next = 0;
  for (size_t b = 0; b < partition.buckets.size(); ++b) {
    const BucketDesc &bucket = partition.buckets[b];
    std::string at = where + joinIndex(".buckets", b);
    if (bucket.offset != next)
      fail(at + ".offset",
           "expected " + std::to_string(next) +
               " (buckets are sorted, disjoint and cover [0, numel) "
               "without gaps), found " +
               std::to_string(bucket.offset));
    if (bucket.numel <= 0)
      fail(at + ".numel",
           "must be positive, found " + std::to_string(bucket.numel));
    if (bucket.numel % plan_.worldSize != 0)
      fail(at + ".numel", std::to_string(bucket.numel) +
                              " is not a multiple of world_size " +
                              std::to_string(plan_.worldSize) +
                              " (each rank owns numel / world_size of it)");
    if (bucket.dtype && !isFloat(*bucket.dtype))
      fail(at + ".dtype", std::string("a bucket communicates in a float "
                                      "dtype, found ") +
                              dtypeName(*bucket.dtype));
    if (bucket.persistent && partition.stage != 3)
      fail(at + ".persistent",
           "only ZeRO stage 3 buckets may be persistent (stage 3 keeps "
           "their parameters whole); this engine is at stage " +
               std::to_string(partition.stage));
    next = bucket.offset + bucket.numel;
  }
  if (next != partition.numel)
    fail(where + ".buckets", "the buckets cover [0, " + std::to_string(next) +
                                 "), but numel is " +
                                 std::to_string(partition.numel));
  if (partition.stage != 3)
    return;
  // Stage 3 gathers a bucket's parameters whole into one buffer: a
  // parameter split between two buckets could never be read whole.
  for (size_t k = 0; k < partition.params.size(); ++k) {
    const FlatParamDesc &param = partition.params[k];
    int64_t numel = stateNumel(*plan_.findState(param.name));
    if (numel == 0)
      continue;
    int64_t b = partition.bucketAt(param.offset);
    const BucketDesc &bucket = partition.buckets[size_t(b)];
    if (param.offset + numel > bucket.offset + bucket.numel)
      fail(where + joinIndex(".params", k) + ".offset",
           quoted(param.name) + " [" + std::to_string(param.offset) + ", " +
               std::to_string(param.offset + numel) + ") does not lie inside " +
               joinIndex("buckets", size_t(b)) + " [" +
               std::to_string(bucket.offset) + ", " +
               std::to_string(bucket.offset + bucket.numel) +
               ") (at ZeRO stage 3 each parameter lies inside one bucket: a "
               "gathered bucket holds its parameters whole)");
  }
}

} // namespace ds::plan::detail
