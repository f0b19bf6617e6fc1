//===- EngineConfig.cpp - One engine's DeepSpeed config -------------------===//
//
// Orchestrates the section parsers and the checks that span sections. Order
// matters only for which error a config with several mistakes reports
// first: features we lack, then values, then unknown keys.
//
//===----------------------------------------------------------------------===//

#include "Sections.h"
#include "Unsupported.h"

namespace ds::config {

DType EngineConfig::modelDtype() const {
  if (fp16.enabled)
    return DType::Float16;
  if (bf16.enabled)
    return DType::BFloat16;
  return DType::Float32;
}

namespace {

/// torch.amp.GradScaler's defaults (torch/amp/grad_scaler.py): init_scale
/// 2^16, growth_factor 2, backoff_factor 0.5, growth_interval 2000.
LossScalerConfig gradScalerDefaults() {
  LossScalerConfig scaler;
  scaler.kind = LossScalerConfig::Kind::GradScaler;
  scaler.initialScale = 65536.0;
  scaler.window = 2000;
  scaler.hysteresis = 1;
  scaler.consecutiveHysteresis = false;
  scaler.minScale = 0.0;
  return scaler;
}

/// An enabled fp16 section's DeepSpeed scaler: static when loss_scale > 0,
/// else dynamic from 2^initial_scale_power.
LossScalerConfig fp16LossScaler(const Fp16Config &fp16) {
  LossScalerConfig scaler;
  scaler.kind = fp16.dynamicLossScale() ? LossScalerConfig::Kind::Dynamic
                                        : LossScalerConfig::Kind::Static;
  scaler.initialScale = fp16.initialLossScale();
  scaler.window = fp16.lossScaleWindow;
  scaler.hysteresis = fp16.hysteresis;
  scaler.consecutiveHysteresis = fp16.consecutiveHysteresis;
  scaler.minScale = fp16.minLossScale;
  return scaler;
}

} // namespace

std::optional<LossScalerConfig> EngineConfig::lossScaler() const {
  if (torchAutocast.enabled && torchAutocast.dtype == DType::Float16)
    return gradScalerDefaults();
  if (!fp16.enabled)
    return std::nullopt;
  return fp16LossScaler(fp16);
}

namespace detail {
namespace {

void checkContext(const ParseContext &context) {
  if (context.worldSize < 1)
    throw ConfigError("", "the world size must be >= 1, got " +
                              std::to_string(context.worldSize));
  if (context.dataMicroBatch && *context.dataMicroBatch < 1)
    throw ConfigError("", "the data's global micro-batch must be >= 1, got " +
                              std::to_string(*context.dataMicroBatch));
  if (context.hiddenSize && *context.hiddenSize < 1)
    throw ConfigError("", "the hidden size must be >= 1, got " +
                              std::to_string(*context.hiddenSize));
}

/// DeepSpeed's _do_optimizer_sanity_check without ZeRO: the gradient
/// accumulation dtype is the model dtype, or fp32 under bf16.
void checkGradAccumDtype(const EngineConfig &config) {
  if (config.zero.stage != 0 || config.frozen())
    return;
  DType model = config.modelDtype();
  DType accum = config.gradAccumDtype;
  if (accum == model || (model == DType::BFloat16 && accum == DType::Float32))
    return;
  throw ConfigError("data_types.grad_accum_dtype",
                    std::string("gradient accumulation in ") +
                        dtypeName(accum) + " with a " + dtypeName(model) +
                        " model is not supported without ZeRO (as in "
                        "DeepSpeed)");
}

/// The batch sizes resolved from "auto", and those of a frozen engine that
/// the data overrode (BatchSize.cpp), into the config the plan records.
void writeBackBatchSizes(EngineConfig &config) {
  const std::pair<const char *, int64_t> sizes[] = {
      {"train_batch_size", config.trainBatchSize},
      {"train_micro_batch_size_per_gpu", config.trainMicroBatchSizePerGpu},
      {"gradient_accumulation_steps", config.gradientAccumulationSteps},
  };
  for (const auto &[key, value] : sizes) {
    auto it = config.source.find(key);
    if (it != config.source.end() &&
        (isAutoValue(*it) ||
         (config.frozen() && it->is_number() && *it != value)))
      *it = value;
  }
}

} // namespace
} // namespace detail

EngineConfig parseEngineConfig(const ordered_json &json,
                               const ParseContext &context) {
  using namespace detail;
  checkContext(context);
  EngineConfig config;
  config.source = json;
  resolveAutoValues(config.source, context, config.notes);
  ObjectReader root(config.source, "");
  if (root.has("engines"))
    root.fail("engines", "\"engines\" is allowed only as the single key of "
                         "a session config, not inside an engine's config");
  rejectUnsupportedFeatures(root, unsupportedTopLevelFeatures());

  resolveBatchSizes(root, context, config);

  if (auto clipping = root.number("gradient_clipping")) {
    requireMin(*clipping, 0.0, "gradient_clipping");
    config.gradientClipping = *clipping;
  }
  if (auto steps = root.integer("steps_per_print")) {
    requireMin(*steps, 1, "steps_per_print");
    config.stepsPerPrint = *steps;
  }
  if (auto seed = root.integer("seed")) {
    requireMin(*seed, 0, "seed");
    config.seed = *seed;
  }

  if (auto optimizer = root.object("optimizer"))
    config.optimizer = parseOptimizer(*optimizer);
  if (auto scheduler = root.object("scheduler"))
    config.scheduler = parseScheduler(*scheduler, config.optimizer);
  if (auto zero = root.object("zero_optimization"))
    config.zero = parseZero(*zero, config.notes);
  else
    config.zero.leafModule.classes = defaultLeafModuleClasses();
  if (auto checkpointing = root.object("activation_checkpointing"))
    config.activationCheckpointing =
        parseActivationCheckpointing(*checkpointing, config.notes);
  parsePrecision(root, context, config);
  checkGradAccumDtype(config);

  config.wallClockBreakdown =
      root.boolean("wall_clock_breakdown").value_or(false);
  config.monitor = parseMonitors(root, config.notes);
  config.prescaleGradients = root.boolean("prescale_gradients").value_or(false);
  if (auto factor = root.number("gradient_predivide_factor")) {
    requirePositive(*factor, "gradient_predivide_factor");
    config.gradientPredivideFactor = *factor;
  }

  root.rejectUnknownKeys();
  writeBackBatchSizes(config);
  return config;
}

} // namespace ds::config
