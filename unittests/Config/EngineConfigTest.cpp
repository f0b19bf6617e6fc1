//===- EngineConfigTest.cpp - Defaults and generic errors -----------------===//

#include "ConfigTestUtils.h"

using namespace ds::config;
using namespace ds::config::test;

TEST(ConfigEngineTest, DefaultsOfAMinimalConfig) {
  EngineConfig config = parse(kMinimal);
  EXPECT_EQ(config.trainBatchSize, 2);
  EXPECT_EQ(config.gradientAccumulationSteps, 1);
  EXPECT_DOUBLE_EQ(config.gradientClipping, 1.0);
  EXPECT_EQ(config.stepsPerPrint, 10);
  EXPECT_FALSE(config.seed.has_value());
  EXPECT_TRUE(config.frozen());
  EXPECT_FALSE(config.scheduler.has_value());
  EXPECT_EQ(config.zero.stage, 0);
  EXPECT_FALSE(config.fp16.enabled);
  EXPECT_FALSE(config.bf16.enabled);
  EXPECT_FALSE(config.torchAutocast.enabled);
  EXPECT_EQ(config.modelDtype(), DType::Float32);
  EXPECT_EQ(config.gradAccumDtype, DType::Float32);
  EXPECT_EQ(config.communicationDataType, DType::Float32);
  EXPECT_FALSE(config.wallClockBreakdown);
  EXPECT_FALSE(config.prescaleGradients);
  EXPECT_DOUBLE_EQ(config.gradientPredivideFactor, 1.0);
  EXPECT_EQ(config.zero.leafModule.classes, defaultLeafModuleClasses());
  EXPECT_EQ(config.source, ordered_json::parse(kMinimal));
}

TEST(ConfigEngineTest, TopLevelScalars) {
  EngineConfig config = parse(R"({"train_micro_batch_size_per_gpu": 1,
      "gradient_clipping": 0.5, "steps_per_print": 1, "seed": 1234,
      "wall_clock_breakdown": true, "prescale_gradients": true,
      "gradient_predivide_factor": 2})");
  EXPECT_DOUBLE_EQ(config.gradientClipping, 0.5);
  EXPECT_EQ(config.stepsPerPrint, 1);
  EXPECT_EQ(config.seed, 1234);
  EXPECT_TRUE(config.wallClockBreakdown);
  EXPECT_TRUE(config.prescaleGradients);
  EXPECT_DOUBLE_EQ(config.gradientPredivideFactor, 2.0);
}

TEST(ConfigEngineTest, NullMeansUnset) {
  EngineConfig config = parse(R"({"train_micro_batch_size_per_gpu": 1,
      "train_batch_size": null, "gradient_clipping": null})");
  EXPECT_DOUBLE_EQ(config.gradientClipping, 1.0);
}

TEST(ConfigEngineTest, UnknownKeysAreErrorsNamingTheirPath) {
  ConfigError top = parseError(R"({"train_micro_batch_size_per_gpu": 1,
                                   "gradient_clip": 1.0})");
  EXPECT_EQ(top.keyPath(), "gradient_clip");
  expectMessageHas(top, {"unknown key"});

  ConfigError nested = parseError(R"({"train_micro_batch_size_per_gpu": 1,
      "zero_optimization": {"stage": 3, "stage3_prefetch_bucket": 1}})");
  EXPECT_EQ(nested.keyPath(), "zero_optimization.stage3_prefetch_bucket");

  ConfigError deep = parseError(R"({"train_micro_batch_size_per_gpu": 1,
      "optimizer": {"type": "AdamW", "params": {"lr": 0.1, "beta": 0.9}}})");
  EXPECT_EQ(deep.keyPath(), "optimizer.params.beta");
}

TEST(ConfigEngineTest, TypeErrorsNameKeyAndExpectedType) {
  ConfigError number = parseError(R"({"train_micro_batch_size_per_gpu": 1,
                                      "gradient_clipping": "1.0"})");
  EXPECT_EQ(number.keyPath(), "gradient_clipping");
  expectMessageHas(number, {"expected a number", "string"});

  ConfigError boolean = parseError(R"({"train_micro_batch_size_per_gpu": 1,
      "zero_optimization": {"overlap_comm": 1}})");
  EXPECT_EQ(boolean.keyPath(), "zero_optimization.overlap_comm");
  expectMessageHas(boolean, {"expected a boolean"});

  ConfigError object = parseError(R"({"train_micro_batch_size_per_gpu": 1,
                                      "zero_optimization": true})");
  EXPECT_EQ(object.keyPath(), "zero_optimization");
  expectMessageHas(object, {"expected an object"});
}

TEST(ConfigEngineTest, ImpossibleTopLevelValuesNameTheKey) {
  EXPECT_EQ(parseError(R"({"train_micro_batch_size_per_gpu": 1,
                           "gradient_clipping": -1})")
                .keyPath(),
            "gradient_clipping");
  EXPECT_EQ(parseError(R"({"train_micro_batch_size_per_gpu": 1,
                           "steps_per_print": 0})")
                .keyPath(),
            "steps_per_print");
  EXPECT_EQ(parseError(R"({"train_micro_batch_size_per_gpu": 1,
                           "gradient_predivide_factor": 0})")
                .keyPath(),
            "gradient_predivide_factor");
}

TEST(ConfigEngineTest, AutoWhereNothingResolvesItIsAnError) {
  ConfigError error = parseError(R"({"train_micro_batch_size_per_gpu": 1,
                                     "steps_per_print": "auto"})");
  EXPECT_EQ(error.keyPath(), "steps_per_print");
  expectMessageHas(error, {"\"auto\" cannot be resolved"});
}

TEST(ConfigEngineTest, DocumentMustBeAnObject) {
  ConfigError error = configErrorOf(
      [] { parseEngineConfig(ordered_json::array(), makeContext()); });
  expectMessageHas(error, {"expected an object"});
}

TEST(ConfigEngineTest, ContextIsValidated) {
  ConfigError error = parseError(kMinimal, makeContext(0));
  expectMessageHas(error, {"world size must be >= 1"});
}
