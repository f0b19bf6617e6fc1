//===- DSAttrs.cpp - ds dialect attributes --------------------------------===//

#include "ds/Dialect/DS/IR/DSAttrs.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cstdio>
#include <cstdlib>

using namespace mlir;
using namespace mlir::ds;

#include "ds/Dialect/DS/IR/DSEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ds/Dialect/DS/IR/DSAttrs.cpp.inc"

void DSDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ds/Dialect/DS/IR/DSAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

FailureOr<F64> mlir::ds::parseF64(AsmParser &parser) {
  double value;
  if (parser.parseFloat(value))
    return failure();
  return F64(value);
}

FailureOr<std::optional<F64>> mlir::ds::parseOptionalF64(AsmParser &parser) {
  FailureOr<F64> value = parseF64(parser);
  if (failed(value))
    return failure();
  return std::optional<F64>(*value);
}

FailureOr<bool> mlir::ds::parseBool(AsmParser &parser) {
  if (succeeded(parser.parseOptionalKeyword("true")))
    return true;
  if (succeeded(parser.parseOptionalKeyword("false")))
    return false;
  return parser.emitError(parser.getCurrentLocation(),
                          "expected 'true' or 'false'");
}

void mlir::ds::printF64(AsmPrinter &printer, double value) {
  char text[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof(text), "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value)
      break;
  }
  std::string out(text);
  size_t exponent = out.find_first_of("eE");
  bool isFinite = out.find_first_of("ni") == std::string::npos;
  if (isFinite && out.find('.') == std::string::npos)
    out.insert(exponent == std::string::npos ? out.size() : exponent, ".0");
  printer << out;
}

//===----------------------------------------------------------------------===//
// Verifiers and helpers
//===----------------------------------------------------------------------===//

static bool isTrainingFloat(Type type) {
  return type && (type.isF32() || type.isF16() || type.isBF16());
}

/// Checks that `array`, when set, holds strings only.
static LogicalResult verifyStrings(function_ref<InFlightDiagnostic()> emitError,
                                   ArrayAttr array, StringRef name) {
  if (array)
    for (Attribute element : array)
      if (!isa<StringAttr>(element))
        return emitError() << "'" << name << "' must hold strings, got "
                           << element;
  return success();
}

LogicalResult
LeafModulesAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        ArrayAttr classes, ArrayAttr names,
                        ArrayAttr nameSuffixes) {
  if (failed(verifyStrings(emitError, classes, "classes")) ||
      failed(verifyStrings(emitError, names, "names")) ||
      failed(verifyStrings(emitError, nameSuffixes, "name_suffixes")))
    return failure();
  return success();
}

LogicalResult ZeroAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t stage, bool, int64_t reduceBucketSize,
                               int64_t allgatherBucketSize, int64_t prefetch,
                               int64_t persistence, int64_t maxLive,
                               int64_t maxReuse, bool, LeafModulesAttr,
                               bool offloadOptimizer, bool) {
  if (stage < 0 || stage > 3)
    return emitError() << "ZeRO stage must be 0, 1, 2 or 3, got " << stage;
  if (offloadOptimizer && stage == 0)
    return emitError() << "'offload_optimizer' needs ZeRO stage 1, 2 or 3";
  std::pair<StringRef, int64_t> sizes[] = {
      {"reduce_bucket_size", reduceBucketSize},
      {"allgather_bucket_size", allgatherBucketSize},
      {"stage3_prefetch_bucket_size", prefetch},
      {"stage3_param_persistence_threshold", persistence},
      {"stage3_max_live_parameters", maxLive},
      {"stage3_max_reuse_distance", maxReuse}};
  for (auto [name, size] : sizes)
    if (size < 0)
      return emitError() << "'" << name << "' must be >= 0, got " << size;
  return success();
}

ZeroAttr ZeroAttr::getDefault(MLIRContext *context) {
  return cast<ZeroAttr>(parseAttribute("#ds.zero<>", context));
}

LogicalResult
LossScalerAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       LossScalerKind, F64 scale, int64_t scaleWindow,
                       int64_t hysteresis, bool, F64 minScale) {
  if (!(scale.value > 0.0))
    return emitError() << "loss scaler 'scale' must be > 0, got "
                       << scale.value;
  if (scaleWindow < 1)
    return emitError() << "loss scaler 'scale_window' must be >= 1, got "
                       << scaleWindow;
  if (hysteresis < 1)
    return emitError() << "loss scaler 'hysteresis' must be >= 1, got "
                       << hysteresis;
  if (minScale.value < 0.0)
    return emitError() << "loss scaler 'min_scale' must be >= 0, got "
                       << minScale.value;
  return success();
}

LogicalResult
PrecisionAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      PrecisionMode mode, Type gradAccumDtype,
                      Type communicationDataType, Type autocastDtype,
                      ArrayAttr safeModules, LossScalerAttr lossScaler) {
  for (auto [name, type] :
       {std::pair<StringRef, Type>{"grad_accum_dtype", gradAccumDtype},
        {"communication_data_type", communicationDataType}})
    if (type && !isTrainingFloat(type))
      return emitError() << "'" << name << "' must be f32, f16 or bf16, got "
                         << type;
  bool autocast = mode == PrecisionMode::Autocast;
  if (autocast != bool(autocastDtype))
    return emitError() << (autocast ? "precision autocast needs an "
                                      "'autocast_dtype'"
                                    : "'autocast_dtype' is only for precision "
                                      "autocast, but the mode is ")
                       << (autocast ? "" : stringifyPrecisionMode(mode));
  if (autocast && !autocastDtype.isF16() && !autocastDtype.isBF16())
    return emitError() << "'autocast_dtype' must be bf16 or f16, got "
                       << autocastDtype;
  if (safeModules && !autocast)
    return emitError() << "'lower_precision_safe_modules' is only for "
                          "precision autocast, but the mode is "
                       << stringifyPrecisionMode(mode);
  if (failed(verifyStrings(emitError, safeModules,
                           "lower_precision_safe_modules")))
    return failure();
  bool fp16Autocast = autocast && autocastDtype.isF16();
  bool scaled = mode == PrecisionMode::FP16 || fp16Autocast;
  if (scaled != bool(lossScaler))
    return emitError()
           << (scaled ? "an fp16 or fp16 autocast engine needs a "
                        "'loss_scaler'"
                      : "'loss_scaler' is only for precision fp16 and f16 "
                        "autocast (bf16 needs no loss scaling), but the mode "
                        "is ")
           << (scaled ? "" : stringifyPrecisionMode(mode));
  if (lossScaler &&
      (lossScaler.getKind() == LossScalerKind::GradScaler) != fp16Autocast)
    return emitError() << (fp16Autocast
                               ? "an f16 autocast engine's loss scaler must "
                                 "have kind grad_scaler (DeepSpeed scales "
                                 "fp16 autocast with a torch.amp.GradScaler)"
                               : "an fp16 engine's loss scaler must have kind "
                                 "static or dynamic (grad_scaler is for f16 "
                                 "autocast)");
  return success();
}

Type PrecisionAttr::getModelDtype() const {
  MLIRContext *context = getContext();
  switch (getMode()) {
  case PrecisionMode::BF16:
    return BFloat16Type::get(context);
  case PrecisionMode::FP16:
    return Float16Type::get(context);
  case PrecisionMode::FP32:
  case PrecisionMode::Autocast:
    break;
  }
  return Float32Type::get(context);
}

Type PrecisionAttr::getResolvedGradAccumDtype() const {
  return getGradAccumDtype() ? getGradAccumDtype() : getModelDtype();
}

Type PrecisionAttr::getResolvedCommunicationDtype() const {
  return getCommunicationDataType() ? getCommunicationDataType()
                                    : getModelDtype();
}

LogicalResult
OptimizerAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      OptimizerKind, F64 lr, F64 beta1, F64 beta2, F64 eps,
                      F64 weightDecay, F64 momentum, F64 dampening, bool) {
  std::pair<StringRef, F64> nonNegative[] = {{"lr", lr},
                                             {"eps", eps},
                                             {"weight_decay", weightDecay},
                                             {"momentum", momentum},
                                             {"dampening", dampening}};
  for (auto [name, value] : nonNegative)
    if (!(value.value >= 0.0))
      return emitError() << "optimizer '" << name << "' must be >= 0, got "
                         << value.value;
  for (auto [name, value] :
       {std::pair<StringRef, F64>{"beta1", beta1}, {"beta2", beta2}})
    if (!(value.value >= 0.0 && value.value < 1.0))
      return emitError() << "optimizer '" << name << "' must be in [0, 1), got "
                         << value.value;
  return success();
}

LogicalResult
SchedulerAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      SchedulerKind kind, F64, std::optional<F64>,
                      int64_t warmupNumSteps, WarmupType,
                      std::optional<int64_t> totalNumSteps, F64, F64) {
  if (warmupNumSteps < 0)
    return emitError() << "scheduler 'warmup_num_steps' must be >= 0, got "
                       << warmupNumSteps;
  if (kind != SchedulerKind::WarmupLR && !totalNumSteps)
    return emitError() << "scheduler " << stringifySchedulerKind(kind)
                       << " needs 'total_num_steps'";
  return success();
}

LogicalResult
EngineConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                         int64_t trainBatchSize, int64_t microBatch,
                         int64_t accumulation, std::optional<int64_t>,
                         F64 gradientClipping, OptimizerAttr,
                         SchedulerAttr scheduler, ZeroAttr, PrecisionAttr) {
  std::pair<StringRef, int64_t> sizes[] = {
      {"train_batch_size", trainBatchSize},
      {"train_micro_batch_size_per_gpu", microBatch},
      {"gradient_accumulation_steps", accumulation}};
  for (auto [name, size] : sizes)
    if (size < 1)
      return emitError() << "'" << name << "' must be >= 1, got " << size;
  if (trainBatchSize % (microBatch * accumulation) != 0)
    return emitError() << "train_batch_size " << trainBatchSize
                       << " is not train_micro_batch_size_per_gpu ("
                       << microBatch << ") x gradient_accumulation_steps ("
                       << accumulation << ") x the world size";
  if (gradientClipping.value < 0.0)
    return emitError() << "'gradient_clipping' must be >= 0 (0: off), got "
                       << gradientClipping.value;
  return success();
}

ZeroAttr EngineConfigAttr::getZeroOrDefault() const {
  return getZero() ? getZero() : ZeroAttr::getDefault(getContext());
}

PrecisionAttr EngineConfigAttr::getPrecisionOrDefault() const {
  return getPrecision() ? getPrecision()
                        : PrecisionAttr::get(getContext(), PrecisionMode::FP32,
                                             Type(), Type(), Type(),
                                             ArrayAttr(), LossScalerAttr());
}
