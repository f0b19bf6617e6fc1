//===- AutoTest.cpp - "auto" values, overrides, offload, frozen engines ---===//

#include "ConfigTestUtils.h"

using namespace ds::config;
using namespace ds::config::test;

namespace {

/// The messages of `notes`, to compare as text.
std::vector<std::string> messages(const std::vector<ConfigNote> &notes) {
  std::vector<std::string> result;
  for (const ConfigNote &note : notes)
    result.push_back(note.message());
  return result;
}

bool hasNote(const std::vector<ConfigNote> &notes, const std::string &key,
             const std::string &part) {
  for (const ConfigNote &note : notes)
    if (note.keyPath == key && note.detail.find(part) != std::string::npos)
      return true;
  return false;
}

ParseContext withOverrides(std::vector<std::string> texts,
                           ParseContext context = makeContext()) {
  for (const std::string &text : texts)
    context.overrides.push_back(parseConfigOverride(text));
  return context;
}

SessionConfig sessionOf(const std::string &text, const ParseContext &context) {
  return parseSessionConfig(ordered_json::parse(text), context, "");
}

constexpr const char *kAutoTrainer = R"({
  "train_micro_batch_size_per_gpu": 2,
  "bf16": {"enabled": "auto"},
  "gradient_clipping": "auto",
  "optimizer": {"type": "AdamW", "params": {"lr": "auto",
      "weight_decay": "auto", "betas": "auto", "eps": "auto"}},
  "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto",
      "warmup_max_lr": "auto", "warmup_num_steps": "auto"}},
  "zero_optimization": {"stage": 3, "stage3_max_live_parameters": "auto",
      "stage3_max_reuse_distance": "auto"}})";

} // namespace

TEST(ConfigAutoTest, TrainerDefaultsWithAWarningEach) {
  EngineConfig config = parse(kAutoTrainer);
  EXPECT_FALSE(config.bf16.enabled);
  EXPECT_DOUBLE_EQ(config.gradientClipping, 1.0);
  EXPECT_DOUBLE_EQ(config.optimizer->lr, 5e-5);
  EXPECT_DOUBLE_EQ(config.optimizer->weightDecay, 0.0);
  EXPECT_DOUBLE_EQ(config.optimizer->eps, 1e-8);
  EXPECT_DOUBLE_EQ(config.scheduler->warmupMinLr, 0.0);
  EXPECT_DOUBLE_EQ(*config.scheduler->warmupMaxLr, 5e-5);
  EXPECT_EQ(config.scheduler->warmupNumSteps, 1);
  EXPECT_EQ(config.zero.stage3MaxLiveParameters, 1000000000);
  EXPECT_EQ(config.zero.stage3MaxReuseDistance, 1000000000);
  // Every default warned about; warmup_max_lr follows the optimizer's lr.
  EXPECT_EQ(config.notes.warnings.size(), 10u)
      << ::testing::PrintToString(messages(config.notes.warnings));
  EXPECT_TRUE(hasNote(config.notes.warnings, "optimizer.params.lr",
                      "\"auto\" = 5e-05 (the HF Trainer's default "
                      "learning_rate; give another with --set "
                      "optimizer.params.lr=VALUE)"));
  EXPECT_TRUE(hasNote(config.notes.remarks, "scheduler.params.warmup_max_lr",
                      "optimizer.params.lr"));
  // The recorded config holds the values, not "auto".
  EXPECT_EQ(config.source["optimizer"]["params"]["lr"], 5e-5);
  EXPECT_EQ(config.source["bf16"]["enabled"], false);
  EXPECT_EQ(config.source["zero_optimization"]["stage3_max_live_parameters"],
            1000000000);
  EXPECT_EQ(config.source.dump().find("auto"), std::string::npos);
}

TEST(ConfigAutoTest, MixedPrecisionResolvesEnabledWithoutAWarning) {
  ParseContext context = makeContext();
  context.mixedPrecision = DType::BFloat16;
  EngineConfig config = parse(
      R"({"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": "auto"},
          "fp16": {"enabled": "auto"}})",
      context);
  EXPECT_TRUE(config.bf16.enabled);
  EXPECT_FALSE(config.fp16.enabled);
  EXPECT_TRUE(config.notes.warnings.empty());
  EXPECT_TRUE(hasNote(config.notes.remarks, "bf16.enabled",
                      "\"auto\" = true (--mixed-precision bf16)"));
}

TEST(ConfigAutoTest, BucketSizesFromTheHiddenSizeWithItsOrigin) {
  ParseContext context = makeContext(1, {}, 64);
  context.hiddenSizeOrigin = "found somehow";
  EngineConfig config = parse(
      R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {
          "stage": 3, "reduce_bucket_size": "auto"}})",
      context);
  EXPECT_EQ(config.zero.reduceBucketSize, 4096);
  EXPECT_TRUE(hasNote(config.notes.remarks,
                      "zero_optimization.reduce_bucket_size",
                      "h*h with the hidden size h = 64, found somehow"));
}

TEST(ConfigAutoTest, TotalNumStepsNeedsAnOverride) {
  ConfigError error = parseError(
      R"({"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "AdamW"},
          "scheduler": {"type": "WarmupDecayLR",
                        "params": {"total_num_steps": "auto"}}})");
  EXPECT_EQ(error.keyPath(), "scheduler.params.total_num_steps");
  expectMessageHas(error, {"--set scheduler.params.total_num_steps=N"});
}

TEST(ConfigAutoTest, CpuOffloadOfTheOptimizerIsKeptParamOffloadIsARemark) {
  EngineConfig config = parse(
      R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {
          "stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": true},
          "offload_param": {"device": "cpu"}}})");
  ASSERT_TRUE(config.zero.offloadOptimizer.has_value());
  EXPECT_TRUE(config.zero.offloadOptimizer->pinMemory);
  ASSERT_EQ(config.notes.remarks.size(), 1u);
  EXPECT_EQ(config.notes.remarks[0].keyPath, "zero_optimization.offload_param");
  expectMessageHas(ConfigError("", config.notes.remarks[0].message()),
                   {"not implemented"});
  // pin_memory defaults to false; "none" offloads nothing.
  EXPECT_FALSE(parse(R"({"train_micro_batch_size_per_gpu": 2,
      "zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}}})")
                   .zero.offloadOptimizer->pinMemory);
  EXPECT_FALSE(parse(R"({"train_micro_batch_size_per_gpu": 2,
      "zero_optimization": {"offload_optimizer": {"device": "none"}}})")
                   .zero.offloadOptimizer.has_value());

  ConfigError nvme = parseError(
      R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {
          "offload_param": {"device": "nvme", "nvme_path": "/x"}}})");
  EXPECT_EQ(nvme.keyPath(), "zero_optimization.offload_param.device");
  expectMessageHas(nvme, {"\"nvme\" is not supported"});
  ConfigError optimizerNvme = parseError(
      R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {
          "stage": 2, "offload_optimizer": {"device": "nvme"}}})");
  EXPECT_EQ(optimizerNvme.keyPath(),
            "zero_optimization.offload_optimizer.device");
  // Stage 0 has no ZeRO optimizer to offload (DeepSpeed offloads only those).
  ConfigError stage0 = parseError(
      R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {
          "offload_optimizer": {"device": "cpu"}}})");
  EXPECT_EQ(stage0.keyPath(), "zero_optimization.offload_optimizer");
  expectMessageHas(stage0, {"needs ZeRO stage 1, 2 or 3"});
}

/// A trainable student and a frozen teacher with its own micro-batch, on
/// 2 ranks and data of global micro-batch 8.
static SessionConfig distillation(int64_t teacherMicroBatch) {
  return sessionOf(R"({"engines": {
        "student": {"train_micro_batch_size_per_gpu": "auto",
                    "optimizer": {"type": "AdamW"}},
        "teacher": {"train_micro_batch_size_per_gpu": )" +
                       std::to_string(teacherMicroBatch) + "}}}",
                   makeContext(2, 8));
}

TEST(ConfigAutoTest, FrozenEngineMicroBatchIsIgnoredWithARemark) {
  SessionConfig session = distillation(1);
  EXPECT_EQ(session.find("teacher")->config.trainMicroBatchSizePerGpu, 4);
  EXPECT_EQ(
      session.find("teacher")->config.source["train_micro_batch_size_per_gpu"],
      4);
  EXPECT_TRUE(hasNote(session.notes.remarks,
                      "engines.teacher.train_micro_batch_size_per_gpu",
                      "1 ignored: the engine is frozen"));
  // One that agrees with the data is nothing to ignore.
  EXPECT_TRUE(distillation(4).notes.remarks.empty());
}

TEST(ConfigAutoTest, OverridesSetKeysAndNameThemInErrors) {
  const char *text = R"({"engines": {
      "student": {"train_micro_batch_size_per_gpu": 2,
                  "optimizer": {"type": "AdamW", "params": {"lr": "auto"}}},
      "teacher": {"train_micro_batch_size_per_gpu": 2}}})";
  SessionConfig session =
      sessionOf(text, withOverrides({"optimizer.params.lr=1e-3",
                                     "engines.teacher.gradient_clipping=0.5"}));
  EXPECT_DOUBLE_EQ(session.find("student")->config.optimizer->lr, 1e-3);
  EXPECT_DOUBLE_EQ(session.find("student")->config.gradientClipping, 1.0);
  EXPECT_DOUBLE_EQ(session.find("teacher")->config.gradientClipping, 0.5);
  EXPECT_TRUE(session.notes.warnings.empty())
      << ::testing::PrintToString(messages(session.notes.warnings));

  ConfigError badValue = configErrorOf(
      [&] { sessionOf(text, withOverrides({"optimizer.params.lr=fast"})); });
  EXPECT_EQ(badValue.keyPath(), "engines.student.optimizer.params.lr");
  expectMessageHas(badValue, {"(set by --set optimizer.params.lr=fast)"});

  ConfigError unknown = configErrorOf(
      [&] { sessionOf(text, withOverrides({"optimizer.parms.lr=1"})); });
  expectMessageHas(unknown, {"--set optimizer.parms.lr=1: no engine's config "
                             "has a section \"optimizer.parms\""});
  ConfigError noEngine = configErrorOf(
      [&] { sessionOf(text, withOverrides({"engines.critic.seed=1"})); });
  expectMessageHas(noEngine, {"\"critic\" is not an engine of the config "
                              "(engines: \"student\", \"teacher\")"});
  ConfigError noSection = configErrorOf([&] {
    sessionOf(text, withOverrides({"engines.teacher.optimizer.params.lr=1"}));
  });
  expectMessageHas(noSection, {"engine \"teacher\" has no section "
                               "\"optimizer.params\""});
  ConfigError single = configErrorOf(
      [&] { sessionOf(kMinimal, withOverrides({"engines.student.seed=1"})); });
  expectMessageHas(single, {"single engine"});
}
