//===- Precision.cpp - fp16, bf16, torch_autocast and data types ----------===//
//
// DeepSpeed's mixed-precision modes exclude each other: fp16 with bf16, and
// either with torch_autocast. torch_autocast takes bfloat16 or float16 on
// every backend (LibTorch 2.x's CPU autocast runs both with one table).
//
//===----------------------------------------------------------------------===//

#include "Sections.h"
#include "Unsupported.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace ds::config {

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::Float32:
    return "fp32";
  case DType::Float16:
    return "fp16";
  case DType::BFloat16:
    return "bf16";
  }
  return "?";
}

double Fp16Config::initialLossScale() const {
  return dynamicLossScale() ? std::ldexp(1.0, int(initialScalePower))
                            : lossScale;
}

const std::vector<std::string> &defaultLowerPrecisionSafeModules() {
  static const std::vector<std::string> modules = {
      "torch.nn.Linear", "torch.nn.Conv1d", "torch.nn.Conv2d",
      "torch.nn.Conv3d"};
  return modules;
}

namespace detail {

namespace {

/// The spellings of DeepSpeed's DtypeEnum.
std::optional<DType> dtypeFromName(const std::string &name) {
  if (name == "fp32" || name == "float32" || name == "float" ||
      name == "torch.float32")
    return DType::Float32;
  if (name == "fp16" || name == "float16" || name == "half" ||
      name == "torch.float16")
    return DType::Float16;
  if (name == "bf16" || name == "bfloat16" || name == "torch.bfloat16")
    return DType::BFloat16;
  return std::nullopt;
}

DType readDtype(ObjectReader &section, const char *key) {
  std::string name = *section.string(key);
  std::optional<DType> dtype = dtypeFromName(name);
  if (!dtype)
    section.fail(key, "unknown dtype \"" + name +
                          "\" (expected fp32, fp16 or bf16, or their "
                          "float32/float16/bfloat16/torch.* spellings)");
  return *dtype;
}

Fp16Config parseFp16(ObjectReader &fp16) {
  using F = UnsupportedFeature;
  rejectUnsupportedFeatures(
      fp16, {F{"auto_cast", DisabledForm::DefaultValue, "false"},
             F{"fp16_master_weights_and_grads", DisabledForm::DefaultValue,
               "false"}});
  Fp16Config config;
  config.enabled = fp16.boolean("enabled").value_or(false);
  if (auto scale = fp16.number("loss_scale")) {
    requireMin(*scale, 0.0, fp16.keyPath("loss_scale"));
    config.lossScale = *scale;
  }
  if (auto power = fp16.integer("initial_scale_power")) {
    // 2^power must stay a finite float scale.
    requireRange(*power, 0, 64, fp16.keyPath("initial_scale_power"));
    config.initialScalePower = *power;
  }
  if (auto window = fp16.integer("loss_scale_window")) {
    requireMin(*window, 1, fp16.keyPath("loss_scale_window"));
    config.lossScaleWindow = *window;
  }
  if (auto hysteresis = fp16.integer("hysteresis")) {
    requireMin(*hysteresis, 1, fp16.keyPath("hysteresis"));
    config.hysteresis = *hysteresis;
  }
  config.consecutiveHysteresis =
      fp16.boolean("consecutive_hysteresis").value_or(false);
  if (auto minScale = fp16.number("min_loss_scale")) {
    requirePositive(*minScale, fp16.keyPath("min_loss_scale"));
    config.minLossScale = *minScale;
  }
  fp16.rejectUnknownKeys();
  return config;
}

Bf16Config parseBf16(ObjectReader &bf16) {
  using F = UnsupportedFeature;
  rejectUnsupportedFeatures(
      bf16,
      {F{"immediate_grad_update", DisabledForm::DefaultValue, "false"},
       F{"check_grad_overflow", DisabledForm::DefaultValue, "false"},
       F{"bf16_master_weights_and_grads", DisabledForm::DefaultValue, "false"},
       F{"bf16_optimizer_states", DisabledForm::DefaultValue, "false"}});
  Bf16Config config;
  config.enabled = bf16.boolean("enabled").value_or(false);
  bf16.rejectUnknownKeys();
  return config;
}

TorchAutocastConfig parseTorchAutocast(std::optional<ObjectReader> section,
                                       const ParseContext &context) {
  TorchAutocastConfig config;
  // torch.autocast's default dtype for the device.
  config.dtype =
      context.backend == Backend::CPU ? DType::BFloat16 : DType::Float16;
  config.lowerPrecisionSafeModules = defaultLowerPrecisionSafeModules();
  if (!section)
    return config;
  config.enabled = section->boolean("enabled").value_or(false);
  if (section->has("dtype")) {
    config.dtype = readDtype(*section, "dtype");
    if (config.dtype == DType::Float32)
      section->fail("dtype", "autocast needs a lower-precision dtype "
                             "(bfloat16 or float16), got float32");
  }
  if (auto modules = section->stringList("lower_precision_safe_modules"))
    config.lowerPrecisionSafeModules = *modules;
  section->rejectUnknownKeys();
  return config;
}

} // namespace

void parsePrecision(ObjectReader &root, const ParseContext &context,
                    EngineConfig &config) {
  if (auto fp16 = root.object("fp16"))
    config.fp16 = parseFp16(*fp16);

  if (root.has("bf16") && root.has("bfloat16"))
    root.fail("bfloat16", "give either \"bf16\" or its old name "
                          "\"bfloat16\", not both");
  for (const char *key : {"bf16", "bfloat16"})
    if (auto bf16 = root.object(key))
      config.bf16 = parseBf16(*bf16);

  config.torchAutocast =
      parseTorchAutocast(root.object("torch_autocast"), context);

  if (config.fp16.enabled && config.bf16.enabled)
    throw ConfigError(root.keyPath(root.has("bf16") ? "bf16" : "bfloat16") +
                          ".enabled",
                      "fp16 and bf16 cannot both be enabled");
  if (config.torchAutocast.enabled &&
      (config.fp16.enabled || config.bf16.enabled))
    throw ConfigError(
        root.keyPath("torch_autocast.enabled"),
        std::string("torch_autocast.enabled cannot be true "
                    "together with ") +
            (config.fp16.enabled ? "fp16.enabled" : "bf16.enabled") +
            " (DeepSpeed's mixed-precision modes exclude each "
            "other)");

  DType modelDtype = config.modelDtype();
  config.gradAccumDtype = modelDtype;
  if (auto dataTypes = root.object("data_types")) {
    if (dataTypes->has("grad_accum_dtype"))
      config.gradAccumDtype = readDtype(*dataTypes, "grad_accum_dtype");
    dataTypes->rejectUnknownKeys();
  }

  config.communicationDataType = modelDtype;
  if (auto name = root.string("communication_data_type")) {
    // DeepSpeed lower-cases it and accepts exactly these three.
    std::string lower = *name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (lower == "fp32")
      config.communicationDataType = DType::Float32;
    else if (lower == "fp16")
      config.communicationDataType = DType::Float16;
    else if (lower == "bf16")
      config.communicationDataType = DType::BFloat16;
    else
      root.fail("communication_data_type",
                "must be \"fp32\", \"fp16\" or \"bf16\", got \"" + *name +
                    "\"");
    // torch_autocast picks each parameter's communication dtype itself (as
    // DeepSpeed's autocast path does); fp32 engines reduce in float32.
    if (!config.fp16.enabled && !config.bf16.enabled &&
        !config.torchAutocast.enabled &&
        config.communicationDataType != DType::Float32)
      root.fail("communication_data_type",
                "\"" + *name +
                    "\" needs fp16 or bf16 training: an fp32 engine reduces "
                    "its gradients in fp32 here (reducing fp32 gradients in "
                    "16 bits is not supported)");
  }
}

} // namespace detail
} // namespace ds::config
