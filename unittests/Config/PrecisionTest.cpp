//===- PrecisionTest.cpp - fp16, bf16, torch_autocast, data types ---------===//

#include "ConfigTestUtils.h"

using namespace ds::config;
using namespace ds::config::test;

namespace {

std::string withSections(const std::string &sections) {
  return R"({"train_micro_batch_size_per_gpu": 1, )" + sections + "}";
}

ParseContext cudaContext() {
  ParseContext context = makeContext();
  context.backend = Backend::CUDA;
  return context;
}

} // namespace

TEST(ConfigPrecisionTest, Fp16Defaults) {
  EngineConfig config = parse(withSections(R"("fp16": {"enabled": true})"));
  const Fp16Config &fp16 = config.fp16;
  EXPECT_TRUE(fp16.enabled);
  EXPECT_TRUE(fp16.dynamicLossScale());
  EXPECT_EQ(fp16.initialScalePower, 16);
  EXPECT_DOUBLE_EQ(fp16.initialLossScale(), 65536.0);
  EXPECT_EQ(fp16.lossScaleWindow, 1000);
  EXPECT_EQ(fp16.hysteresis, 2);
  EXPECT_FALSE(fp16.consecutiveHysteresis);
  EXPECT_DOUBLE_EQ(fp16.minLossScale, 1.0);
  // Gradients accumulate and travel in the model dtype unless told otherwise.
  EXPECT_EQ(config.modelDtype(), DType::Float16);
  EXPECT_EQ(config.gradAccumDtype, DType::Float16);
  EXPECT_EQ(config.communicationDataType, DType::Float16);
}

TEST(ConfigPrecisionTest, Fp16GivenValues) {
  Fp16Config fp16 = parse(withSections(R"("fp16": {"enabled": true,
      "loss_scale": 128, "initial_scale_power": 8, "loss_scale_window": 50,
      "hysteresis": 1, "consecutive_hysteresis": true, "min_loss_scale": 0.5})"))
                        .fp16;
  EXPECT_FALSE(fp16.dynamicLossScale());
  EXPECT_DOUBLE_EQ(fp16.initialLossScale(), 128.0);
  EXPECT_EQ(fp16.initialScalePower, 8);
  EXPECT_EQ(fp16.lossScaleWindow, 50);
  EXPECT_EQ(fp16.hysteresis, 1);
  EXPECT_TRUE(fp16.consecutiveHysteresis);
  EXPECT_DOUBLE_EQ(fp16.minLossScale, 0.5);
}

TEST(ConfigPrecisionTest, ImpossibleFp16ValuesNameTheKey) {
  EXPECT_EQ(
      parseError(withSections(R"("fp16": {"loss_scale_window": 0})")).keyPath(),
      "fp16.loss_scale_window");
  EXPECT_EQ(parseError(withSections(R"("fp16": {"hysteresis": 0})")).keyPath(),
            "fp16.hysteresis");
  EXPECT_EQ(parseError(withSections(R"("fp16": {"loss_scale": -1})")).keyPath(),
            "fp16.loss_scale");
  EXPECT_EQ(
      parseError(withSections(R"("fp16": {"min_loss_scale": 0})")).keyPath(),
      "fp16.min_loss_scale");
}

TEST(ConfigPrecisionTest, Fp16WithBf16IsAnError) {
  ConfigError error = parseError(
      withSections(R"("fp16": {"enabled": true}, "bf16": {"enabled": true})"));
  EXPECT_EQ(error.keyPath(), "bf16.enabled");
  expectMessageHas(error, {"fp16 and bf16"});
}

TEST(ConfigPrecisionTest, AutocastWithFp16OrBf16IsAnError) {
  for (const char *mode : {"fp16", "bf16"}) {
    ConfigError error = parseError(withSections(
        std::string("\"") + mode +
        R"(": {"enabled": true}, "torch_autocast": {"enabled": true})"));
    EXPECT_EQ(error.keyPath(), "torch_autocast.enabled") << mode;
    // Both keys are named: the path, and the other mode's key.
    expectMessageHas(
        error, {"torch_autocast.enabled", std::string(mode) + ".enabled"});
  }
}

TEST(ConfigPrecisionTest, Bf16AndItsOldName) {
  EngineConfig config = parse(withSections(R"("bf16": {"enabled": true})"));
  EXPECT_EQ(config.modelDtype(), DType::BFloat16);
  EXPECT_EQ(config.gradAccumDtype, DType::BFloat16);
  EXPECT_TRUE(
      parse(withSections(R"("bfloat16": {"enabled": true})")).bf16.enabled);
  EXPECT_EQ(
      parseError(
          withSections(
              R"("bf16": {"enabled": true}, "bfloat16": {"enabled": true})"))
          .keyPath(),
      "bfloat16");
  // "auto" follows --mixed-precision (AutoTest.cpp), which defaults to no.
  EXPECT_FALSE(
      parse(withSections(R"("bf16": {"enabled": "auto"})")).bf16.enabled);
}

TEST(ConfigPrecisionTest, AutocastDefaultsAndDtypeSpellings) {
  TorchAutocastConfig autocast =
      parse(withSections(R"("torch_autocast": {"enabled": true})"))
          .torchAutocast;
  EXPECT_TRUE(autocast.enabled);
  EXPECT_EQ(autocast.dtype, DType::BFloat16); // CPU autocast's default
  EXPECT_EQ(autocast.lowerPrecisionSafeModules,
            (std::vector<std::string>{"torch.nn.Linear", "torch.nn.Conv1d",
                                      "torch.nn.Conv2d", "torch.nn.Conv3d"}));
  for (const char *dtype : {"bfloat16", "bf16", "torch.bfloat16"})
    EXPECT_EQ(
        parse(withSections(
                  std::string(
                      R"("torch_autocast": {"enabled": true, "dtype": ")") +
                  dtype + "\"}"))
            .torchAutocast.dtype,
        DType::BFloat16)
        << dtype;
  TorchAutocastConfig custom = parse(withSections(R"("torch_autocast":
      {"enabled": true, "lower_precision_safe_modules": ["torch.nn.Linear"]})"))
                                   .torchAutocast;
  EXPECT_EQ(custom.lowerPrecisionSafeModules,
            (std::vector<std::string>{"torch.nn.Linear"}));
  // Parameters stay fp32 under autocast.
  EXPECT_EQ(parse(withSections(R"("torch_autocast": {"enabled": true})"))
                .modelDtype(),
            DType::Float32);
}

TEST(ConfigPrecisionTest, Fp16AutocastOnCpuAndCuda) {
  // LibTorch 2.x autocasts to float16 on CPU too: every spelling is read,
  // on either backend, and the parameters stay fp32.
  for (const char *dtype : {"float16", "fp16", "half", "torch.float16"}) {
    std::string text = withSections(
        std::string(R"("torch_autocast": {"enabled": true, "dtype": ")") +
        dtype + "\"}");
    EngineConfig config = parse(text);
    EXPECT_TRUE(config.torchAutocast.enabled) << dtype;
    EXPECT_EQ(config.torchAutocast.dtype, DType::Float16) << dtype;
    EXPECT_EQ(config.modelDtype(), DType::Float32) << dtype;
    EXPECT_EQ(config.gradAccumDtype, DType::Float32) << dtype;
    EXPECT_FALSE(config.fp16.enabled) << dtype;
    EXPECT_EQ(parse(text, cudaContext()).torchAutocast.dtype, DType::Float16);
  }
  // float32 is no autocast dtype; fp16 autocast still excludes fp16.enabled.
  EXPECT_EQ(parseError(withSections(R"("torch_autocast": {"enabled": true,
      "dtype": "float32"})"))
                .keyPath(),
            "torch_autocast.dtype");
  EXPECT_EQ(parseError(withSections(R"("fp16": {"enabled": true},
      "torch_autocast": {"enabled": true, "dtype": "float16"})"))
                .keyPath(),
            "torch_autocast.enabled");
  // The default stays the backend's: bf16 on CPU, fp16 on CUDA, as
  // torch.autocast's.
  EXPECT_EQ(parse(withSections(R"("torch_autocast": {"enabled": true})"))
                .torchAutocast.dtype,
            DType::BFloat16);
  EXPECT_EQ(parse(withSections(R"("torch_autocast": {"enabled": true})"),
                  cudaContext())
                .torchAutocast.dtype,
            DType::Float16);
}

TEST(ConfigPrecisionTest, LossScalerOfEachMode) {
  using Kind = LossScalerConfig::Kind;
  // fp16.enabled: DeepSpeed's own scaler, with the section's values.
  std::optional<LossScalerConfig> fp16 =
      parse(withSections(R"("fp16": {"enabled": true, "initial_scale_power":
          12, "loss_scale_window": 50, "hysteresis": 3,
          "consecutive_hysteresis": true, "min_loss_scale": 0.25})"))
          .lossScaler();
  ASSERT_TRUE(fp16);
  EXPECT_EQ(fp16->kind, Kind::Dynamic);
  EXPECT_EQ(fp16->initialScale, 4096.0);
  EXPECT_EQ(fp16->window, 50);
  EXPECT_EQ(fp16->hysteresis, 3);
  EXPECT_TRUE(fp16->consecutiveHysteresis);
  EXPECT_EQ(fp16->minScale, 0.25);
  std::optional<LossScalerConfig> fixed =
      parse(withSections(R"("fp16": {"enabled": true, "loss_scale": 128})"))
          .lossScaler();
  ASSERT_TRUE(fixed);
  EXPECT_EQ(fixed->kind, Kind::Static);
  EXPECT_EQ(fixed->initialScale, 128.0);

  // torch_autocast with float16 (on either backend): DeepSpeed's
  // torch.amp.GradScaler(device=...) with torch's defaults; the fp16
  // section's scaler keys do not apply to it.
  for (const ParseContext &context : {makeContext(), cudaContext()}) {
    std::optional<LossScalerConfig> amp =
        parse(withSections(R"("torch_autocast": {"enabled": true, "dtype":
            "float16"}, "fp16": {"enabled": false, "initial_scale_power": 4})"),
              context)
            .lossScaler();
    ASSERT_TRUE(amp);
    EXPECT_EQ(amp->kind, Kind::GradScaler);
    EXPECT_EQ(amp->initialScale, 65536.0);
    EXPECT_EQ(amp->window, 2000);
    EXPECT_EQ(amp->hysteresis, 1);
    EXPECT_FALSE(amp->consecutiveHysteresis);
    EXPECT_EQ(amp->minScale, 0.0);
  }
  // CUDA's default autocast dtype is float16: scaled as well.
  EXPECT_TRUE(parse(withSections(R"("torch_autocast": {"enabled": true})"),
                    cudaContext())
                  .lossScaler());

  // No loss scale: fp32, bf16, bf16 autocast (CPU's default dtype), and a
  // disabled autocast section that names float16.
  for (const char *sections :
       {R"("optimizer": {"type": "SGD", "params": {"lr": 0.1}})",
        R"("bf16": {"enabled": true})",
        R"("torch_autocast": {"enabled": true})",
        R"("torch_autocast": {"enabled": true, "dtype": "bfloat16"})",
        R"("torch_autocast": {"enabled": false, "dtype": "float16"})"})
    EXPECT_FALSE(parse(withSections(sections)).lossScaler()) << sections;
}

TEST(ConfigPrecisionTest, DataTypesAndCommunicationDtype) {
  EngineConfig config = parse(withSections(R"("bf16": {"enabled": true},
      "data_types": {"grad_accum_dtype": "fp32"},
      "communication_data_type": "FP32")"));
  EXPECT_EQ(config.gradAccumDtype, DType::Float32);
  EXPECT_EQ(config.communicationDataType, DType::Float32);

  EXPECT_EQ(parseError(withSections(R"("communication_data_type": "int8")"))
                .keyPath(),
            "communication_data_type");
  // fp32 engines reduce in fp32; "fp32" itself is fine.
  EXPECT_EQ(parseError(withSections(R"("communication_data_type": "bf16")"))
                .keyPath(),
            "communication_data_type");
  EXPECT_EQ(parse(withSections(R"("communication_data_type": "fp32")"))
                .communicationDataType,
            DType::Float32);
  EXPECT_EQ(
      parseError(withSections(R"("data_types": {"grad_accum_dtype": "x"})"))
          .keyPath(),
      "data_types.grad_accum_dtype");
  EXPECT_EQ(
      parseError(withSections(R"("data_types": {"params_dtype": "fp32"})"))
          .keyPath(),
      "data_types.params_dtype");
}

TEST(ConfigPrecisionTest, GradAccumDtypeMixesFollowDeepSpeedWithoutZero) {
  // fp32 model accumulating in bf16 without ZeRO: DeepSpeed raises
  // NotImplementedError; with ZeRO the ZeRO optimizer handles it.
  std::string text = R"("optimizer": {"type": "AdamW"},
      "data_types": {"grad_accum_dtype": "bf16"})";
  ConfigError error = parseError(withSections(text));
  EXPECT_EQ(error.keyPath(), "data_types.grad_accum_dtype");
  expectMessageHas(error, {"not supported"});
  EXPECT_NO_THROW(
      parse(withSections(text + R"(, "zero_optimization": {"stage": 2})")));
}
