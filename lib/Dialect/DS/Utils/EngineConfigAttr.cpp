//===- EngineConfigAttr.cpp - DeepSpeed config -> typed attributes --------===//

#include "ds/Dialect/DS/Utils/EngineConfigAttr.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::ds;
namespace config = ::ds::config;

Type mlir::ds::dtypeType(MLIRContext *context, config::DType dtype) {
  switch (dtype) {
  case config::DType::Float16:
    return Float16Type::get(context);
  case config::DType::BFloat16:
    return BFloat16Type::get(context);
  case config::DType::Float32:
    break;
  }
  return Float32Type::get(context);
}

static ArrayAttr stringArray(Builder &b, const std::vector<std::string> &list) {
  SmallVector<Attribute> elements;
  for (const std::string &s : list)
    elements.push_back(b.getStringAttr(s));
  return b.getArrayAttr(elements);
}

static std::vector<std::string> strings(ArrayAttr array) {
  std::vector<std::string> list;
  for (Attribute element : array)
    list.push_back(cast<StringAttr>(element).getValue().str());
  return list;
}

/// Whether the config gives `section.key` itself (not a default).
static bool given(const config::ordered_json &source, const char *section,
                  const char *key) {
  if (!source.is_object())
    return false;
  if (!section)
    return source.contains(key);
  auto it = source.find(section);
  return it != source.end() && it->is_object() && it->contains(key);
}

static OptimizerAttr buildOptimizer(MLIRContext *context,
                                    const config::OptimizerConfig &o) {
  OptimizerKind kind = o.type == config::OptimizerType::SGD ? OptimizerKind::SGD
                       : o.decoupledWeightDecay() ? OptimizerKind::AdamW
                                                  : OptimizerKind::Adam;
  return OptimizerAttr::get(context, kind, o.lr, o.betas[0], o.betas[1], o.eps,
                            o.weightDecay, o.momentum, o.dampening, o.nesterov);
}

static SchedulerAttr buildScheduler(MLIRContext *context,
                                    const config::SchedulerConfig &s) {
  SchedulerKind kind = s.type == config::SchedulerType::WarmupLR
                           ? SchedulerKind::WarmupLR
                       : s.type == config::SchedulerType::WarmupDecayLR
                           ? SchedulerKind::WarmupDecayLR
                           : SchedulerKind::WarmupCosineLR;
  std::optional<F64> maxLr;
  if (s.warmupMaxLr)
    maxLr = F64(*s.warmupMaxLr);
  return SchedulerAttr::get(
      context, kind, s.warmupMinLr, maxLr, s.warmupNumSteps,
      s.warmupType == config::WarmupType::Log ? WarmupType::Log
                                              : WarmupType::Linear,
      s.totalNumSteps, s.warmupMinRatio, s.cosMinRatio);
}

static ZeroAttr buildZero(MLIRContext *context, const config::ZeroConfig &z) {
  Builder b(context);
  const config::LeafModuleConfig &l = z.leafModule;
  LeafModulesAttr leaf;
  if (l.classesGiven || !l.names.empty() || !l.nameSuffixes.empty())
    leaf = LeafModulesAttr::get(
        context, l.classesGiven ? stringArray(b, l.classes) : ArrayAttr(),
        l.names.empty() ? ArrayAttr() : stringArray(b, l.names),
        l.nameSuffixes.empty() ? ArrayAttr() : stringArray(b, l.nameSuffixes));
  ZeroAttr zero = ZeroAttr::get(
      context, z.stage, z.overlapComm, z.reduceBucketSize,
      z.allgatherBucketSize, z.stage3PrefetchBucketSize,
      z.stage3ParamPersistenceThreshold, z.stage3MaxLiveParameters,
      z.stage3MaxReuseDistance, z.stage3Gather16BitWeightsOnModelSave, leaf,
      z.offloadOptimizer.has_value(),
      z.offloadOptimizer && z.offloadOptimizer->pinMemory);
  return zero == ZeroAttr::getDefault(context) ? ZeroAttr() : zero;
}

static PrecisionAttr buildPrecision(MLIRContext *context,
                                    const config::EngineConfig &c) {
  PrecisionMode mode = c.fp16.enabled            ? PrecisionMode::FP16
                       : c.bf16.enabled          ? PrecisionMode::BF16
                       : c.torchAutocast.enabled ? PrecisionMode::Autocast
                                                 : PrecisionMode::FP32;
  Type gradAccum, communication, autocast;
  if (given(c.source, "data_types", "grad_accum_dtype"))
    gradAccum = dtypeType(context, c.gradAccumDtype);
  if (given(c.source, nullptr, "communication_data_type"))
    communication = dtypeType(context, c.communicationDataType);
  ArrayAttr safeModules;
  if (mode == PrecisionMode::Autocast) {
    autocast = dtypeType(context, c.torchAutocast.dtype);
    if (c.torchAutocast.lowerPrecisionSafeModules !=
        config::defaultLowerPrecisionSafeModules()) {
      Builder b(context);
      safeModules = stringArray(b, c.torchAutocast.lowerPrecisionSafeModules);
    }
  }
  LossScalerAttr lossScaler;
  if (std::optional<config::LossScalerConfig> s = c.lossScaler()) {
    using Kind = config::LossScalerConfig::Kind;
    LossScalerKind kind = s->kind == Kind::Static ? LossScalerKind::Static
                          : s->kind == Kind::Dynamic
                              ? LossScalerKind::Dynamic
                              : LossScalerKind::GradScaler;
    lossScaler = LossScalerAttr::get(context, kind, s->initialScale, s->window,
                                     s->hysteresis, s->consecutiveHysteresis,
                                     s->minScale);
  }
  if (mode == PrecisionMode::FP32 && !gradAccum && !communication)
    return PrecisionAttr();
  return PrecisionAttr::get(context, mode, gradAccum, communication, autocast,
                            safeModules, lossScaler);
}

EngineConfigAttr
mlir::ds::buildEngineConfigAttr(MLIRContext *context,
                                const config::EngineConfig &c) {
  return EngineConfigAttr::get(
      context, c.trainBatchSize, c.trainMicroBatchSizePerGpu,
      c.gradientAccumulationSteps, c.seed, c.gradientClipping,
      c.optimizer ? buildOptimizer(context, *c.optimizer) : OptimizerAttr(),
      c.scheduler ? buildScheduler(context, *c.scheduler) : SchedulerAttr(),
      buildZero(context, c.zero), buildPrecision(context, c));
}

std::vector<std::string>
mlir::ds::lowerPrecisionSafeModules(PrecisionAttr precision) {
  if (precision && precision.getLowerPrecisionSafeModules())
    return strings(precision.getLowerPrecisionSafeModules());
  return config::defaultLowerPrecisionSafeModules();
}

config::LeafModuleConfig mlir::ds::leafModuleConfig(LeafModulesAttr leaf) {
  config::LeafModuleConfig result;
  result.classes = config::defaultLeafModuleClasses();
  if (!leaf)
    return result;
  if (leaf.getClasses()) {
    result.classes = strings(leaf.getClasses());
    result.classesGiven = true;
  }
  if (leaf.getNames())
    result.names = strings(leaf.getNames());
  if (leaf.getNameSuffixes())
    result.nameSuffixes = strings(leaf.getNameSuffixes());
  return result;
}
