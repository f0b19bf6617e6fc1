//===- Trainer.cpp - Per-engine training state and the update -------------===//

#include "Trainer.h"

#include "ds/Plan/PlanError.h"
#include "ds/Runtime/RuntimeError.h"
#include "ds/Runtime/StateStore.h"

#include <ATen/ATen.h>

namespace ds::runtime::detail {

namespace {

/// One engine's config as the runtime needs it. The plan's top-level batch
/// numbers are what the compiler resolved, so a config that names no batch
/// size (hand-written plans, or one that left them to the data) gets them
/// from the plan; one that names them must agree with the plan.
config::EngineConfig parseConfig(const plan::Plan &plan, size_t index,
                                 const std::string &origin) {
  const plan::EngineDesc &engine = plan.engines[index];
  std::string where = "engines[" + std::to_string(index) + "].config";
  config::ordered_json json = engine.config;
  if (!json.contains("train_batch_size") &&
      !json.contains("train_micro_batch_size_per_gpu")) {
    json["train_micro_batch_size_per_gpu"] = plan.microBatchPerRank;
    if (!json.contains("gradient_accumulation_steps"))
      json["gradient_accumulation_steps"] = plan.gradientAccumulationSteps;
  }
  config::ParseContext context;
  context.worldSize = plan.worldSize;
  context.dataMicroBatch = plan.microBatchPerRank * plan.worldSize;
  // Bucket sizes shape the compiled program, not the runtime's work; any
  // placeholder lets their "auto" resolve (the compiler resolved them).
  context.hiddenSize = 1;
  config::EngineConfig parsed;
  try {
    parsed = config::parseEngineConfig(json, context);
  } catch (const config::ConfigError &error) {
    throw plan::PlanError(
        origin, error.keyPath().empty() ? where : where + "." + error.keyPath(),
        error.detail());
  }
  if (parsed.gradientAccumulationSteps != plan.gradientAccumulationSteps)
    throw plan::PlanError(
        origin, where + ".gradient_accumulation_steps",
        "the engine's config gives " +
            std::to_string(parsed.gradientAccumulationSteps) +
            ", but the plan's gradient_accumulation_steps is " +
            std::to_string(plan.gradientAccumulationSteps));
  return parsed;
}

/// Elements per all-reduce bucket: zero_optimization.reduce_bucket_size.
/// The runtime parses configs with a placeholder hidden size, so an "auto"
/// left in a (hand-written) plan takes DeepSpeed's default instead; the
/// compiler resolves "auto" before it writes a plan.
int64_t reduceBucketElements(const config::EngineConfig &config) {
  const config::ordered_json &source = config.source;
  auto zero = source.find("zero_optimization");
  if (zero != source.end() && zero->is_object()) {
    auto size = zero->find("reduce_bucket_size");
    if (size != zero->end() && size->is_string())
      return config::ZeroConfig().reduceBucketSize;
  }
  return config.zero.reduceBucketSize;
}

} // namespace

Trainer::Trainer(const plan::Plan &plan, const std::string &origin,
                 std::optional<int64_t> seedOverride,
                 std::shared_ptr<Communicator> communicator)
    : plan_(plan), accumulation_(plan.gradientAccumulationSteps) {
  const int64_t worldSize = communicator ? communicator->size() : 1;
  std::optional<int64_t> configSeed;
  std::string seedEngine;
  for (size_t i = 0; i < plan.engines.size(); ++i) {
    EngineState engine;
    engine.name = plan.engines[i].name;
    engine.config = parseConfig(plan, i, origin);
    const config::EngineConfig &config = engine.config;
    if (!config.frozen() && (config.fp16.enabled || config.bf16.enabled))
      throw RuntimeError(origin + ": engine \"" + engine.name +
                         "\": " + (config.fp16.enabled ? "fp16" : "bf16") +
                         " training (fp32 master weights" +
                         (config.fp16.enabled ? ", loss scaling" : "") +
                         ") is not implemented by this runtime yet");
    // Stages 1-3 need the compiler's partition plan; running them as stage
    // 0 would give the same numbers without the memory savings asked for.
    if (!config.frozen() && config.zero.stage > 0 && worldSize > 1)
      throw RuntimeError(origin + ": engine \"" + engine.name +
                         "\": zero_optimization.stage " +
                         std::to_string(config.zero.stage) + " on " +
                         std::to_string(worldSize) +
                         " ranks is not implemented by this runtime yet "
                         "(it runs ZeRO stage 0: all-reduced gradients)");
    if (config.seed) {
      if (configSeed && *configSeed != *config.seed && !seedOverride)
        throw plan::PlanError(
            origin, "engines[" + std::to_string(i) + "].config.seed",
            "is " + std::to_string(*config.seed) + ", but engine \"" +
                seedEngine + "\" says " + std::to_string(*configSeed) +
                " (a run has one seed; --seed overrides both)");
      if (!configSeed) {
        configSeed = config.seed;
        seedEngine = engine.name;
      }
    }
    engines_.push_back(std::move(engine));
  }
  seed_ = uint64_t(seedOverride.value_or(configSeed.value_or(0)));

  std::vector<bool> trainable(plan.state.size(), false);
  for (size_t i = 0; i < plan.state.size(); ++i) {
    const plan::StateDesc &desc = plan.state[i];
    if (desc.kind != plan::StateKind::Param || !desc.requiresGrad)
      continue;
    for (const EngineState &engine : engines_) {
      if (engine.name != desc.engine || engine.config.frozen())
        continue;
      if (desc.dtype != plan::DType::Float32 &&
          desc.dtype != plan::DType::Float64)
        throw RuntimeError(origin + ": trainable parameter \"" + desc.name +
                           "\" is " + plan::dtypeName(desc.dtype) +
                           "; this runtime trains float32 and float64 "
                           "parameters (fp16/bf16 need the mixed-precision "
                           "support of a later issue)");
      trainable[i] = true;
    }
  }
  gradients_ = std::make_unique<GradientBuffers>(plan, trainable);
  std::vector<EngineReduction> reductions(engines_.size());
  for (size_t e = 0; e < engines_.size(); ++e) {
    if (const auto &optimizer = engines_[e].config.optimizer)
      engines_[e].optimizer =
          std::make_unique<Optimizer>(*optimizer, gradients_->layout(e));
    // One rank has nothing to reduce; frozen engines have no gradients.
    if (worldSize > 1 && engines_[e].optimizer)
      reductions[e] = stage0Reduction(gradients_->layout(e).numel,
                                      reduceBucketElements(engines_[e].config));
  }
  reducer_ = std::make_unique<GradientReducer>(std::move(communicator),
                                               std::move(reductions));
}

std::optional<double> Trainer::nextLr(size_t engine) const {
  const config::EngineConfig &config = engines_[engine].config;
  if (!config.optimizer)
    return std::nullopt;
  double baseLr = config.optimizer->lr;
  if (!config.scheduler)
    return baseLr;
  return config::schedulerLrForUpdate(*config.scheduler, baseLr,
                                      engines_[engine].appliedUpdates);
}

StepReport Trainer::update(StateStore &state) {
  StepReport report;
  report.updated = true;
  // All reductions in flight at once: engine e + 1's overlaps engine e's
  // update.
  for (size_t e = 0; e < engines_.size(); ++e)
    if (engines_[e].optimizer)
      reducer_->start(e, gradients_->flat(e));
  for (size_t e = 0; e < engines_.size(); ++e) {
    EngineState &engine = engines_[e];
    if (!engine.optimizer)
      continue; // Frozen: no gradients, never updated.
    reducer_->wait(e);
    const std::vector<at::Tensor> &grads = gradients_->views(e);
    double gradNorm =
        clipGradientsByGlobalNorm(grads, engine.config.gradientClipping);
    double lr = *nextLr(e);
    std::vector<at::Tensor> params;
    for (int64_t index : gradients_->layout(e).stateIndices)
      params.push_back(state.tensor(index));
    engine.optimizer->step(params, grads, lr);
    ++engine.appliedUpdates;
    gradients_->zero(e);
    report.engines.push_back({engine.name, lr, gradNorm});
  }
  return report;
}

int64_t Trainer::optimizerBytes() const {
  int64_t total = 0;
  for (const EngineState &engine : engines_)
    if (engine.optimizer)
      total += engine.optimizer->bytes();
  return total;
}

} // namespace ds::runtime::detail
