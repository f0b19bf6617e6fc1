//===- SchedulerTest.cpp - The "scheduler" section ------------------------===//
//
// What the parser keeps of each schedule, with DeepSpeed's defaults. The
// learning rates these schedules give are the runtime's
// (unittests/Runtime/LrScheduleTest.cpp).
//
//===----------------------------------------------------------------------===//

#include "ConfigTestUtils.h"

using namespace ds::config;
using namespace ds::config::test;

namespace {

std::string withScheduler(const std::string &scheduler) {
  return R"({"train_micro_batch_size_per_gpu": 1,
             "optimizer": {"type": "AdamW", "params": {"lr": 0.5}},
             "scheduler": )" +
         scheduler + "}";
}

SchedulerConfig schedulerOf(const std::string &scheduler) {
  return *parse(withScheduler(scheduler)).scheduler;
}

ConfigError schedulerError(const std::string &scheduler) {
  return parseError(withScheduler(scheduler));
}

} // namespace

TEST(ConfigSchedulerTest, WarmupLRDefaults) {
  SchedulerConfig scheduler = schedulerOf(R"({"type": "WarmupLR"})");
  EXPECT_EQ(scheduler.type, SchedulerType::WarmupLR);
  EXPECT_DOUBLE_EQ(scheduler.warmupMinLr, 0.0);
  // Unset: DeepSpeed 0.19 then takes the optimizer's lr.
  EXPECT_FALSE(scheduler.warmupMaxLr.has_value());
  EXPECT_EQ(scheduler.warmupNumSteps, 1000);
  EXPECT_EQ(scheduler.warmupType, WarmupType::Log);
  EXPECT_FALSE(scheduler.totalNumSteps.has_value());
}

TEST(ConfigSchedulerTest, WarmupLRParams) {
  SchedulerConfig log = schedulerOf(R"({"type": "WarmupLR", "params":
      {"warmup_min_lr": 0.01, "warmup_max_lr": 0.1, "warmup_num_steps": 10}})");
  EXPECT_EQ(log.warmupMinLr, 0.01);
  EXPECT_EQ(log.warmupMaxLr, 0.1);
  EXPECT_EQ(log.warmupNumSteps, 10);
  EXPECT_EQ(log.warmupType, WarmupType::Log);
  SchedulerConfig linear = schedulerOf(R"({"type": "WarmupLR", "params":
      {"warmup_min_lr": 0.01, "warmup_max_lr": 0.1, "warmup_num_steps": 10,
       "warmup_type": "linear"}})");
  EXPECT_EQ(linear.warmupType, WarmupType::Linear);
}

TEST(ConfigSchedulerTest, WarmupStepsAreKeptAsWritten) {
  // The formulas clamp them to at least 2; the config keeps the 1.
  SchedulerConfig linear = schedulerOf(R"({"type": "WarmupLR", "params":
      {"warmup_max_lr": 0.1, "warmup_num_steps": 1, "warmup_type": "linear"}})");
  EXPECT_EQ(linear.warmupNumSteps, 1);
}

TEST(ConfigSchedulerTest, WarmupDecayLRParams) {
  SchedulerConfig scheduler = schedulerOf(R"({"type": "WarmupDecayLR",
      "params": {"warmup_max_lr": 0.1, "warmup_num_steps": 10,
                 "warmup_type": "linear", "total_num_steps": 110}})");
  EXPECT_EQ(scheduler.type, SchedulerType::WarmupDecayLR);
  EXPECT_EQ(scheduler.totalNumSteps, 110);
  EXPECT_EQ(scheduler.warmupMinLr, 0.0);
  EXPECT_EQ(scheduler.warmupMaxLr, 0.1);
}

TEST(ConfigSchedulerTest, WarmupDecayLRDefaultsAndRequiredTotal) {
  SchedulerConfig scheduler = schedulerOf(
      R"({"type": "WarmupDecayLR", "params": {"total_num_steps": 5000}})");
  EXPECT_EQ(scheduler.warmupMaxLr, 0.001);
  ConfigError error = schedulerError(R"({"type": "WarmupDecayLR"})");
  EXPECT_EQ(error.keyPath(), "scheduler.params.total_num_steps");
  expectMessageHas(error, {"missing", "WarmupDecayLR"});
}

TEST(ConfigSchedulerTest, WarmupCosineLRParams) {
  SchedulerConfig scheduler = schedulerOf(R"({"type": "WarmupCosineLR",
      "params": {"warmup_min_ratio": 0.1, "cos_min_ratio": 0.01,
                 "warmup_num_steps": 10, "warmup_type": "linear",
                 "total_num_steps": 110}})");
  EXPECT_EQ(scheduler.type, SchedulerType::WarmupCosineLR);
  EXPECT_EQ(scheduler.warmupMinRatio, 0.1);
  EXPECT_EQ(scheduler.cosMinRatio, 0.01);
  EXPECT_EQ(scheduler.warmupNumSteps, 10);
  EXPECT_EQ(scheduler.warmupType, WarmupType::Linear);
  EXPECT_EQ(scheduler.totalNumSteps, 110);
}

TEST(ConfigSchedulerTest, WarmupCosineLRDefaults) {
  SchedulerConfig scheduler = schedulerOf(
      R"({"type": "WarmupCosineLR", "params": {"total_num_steps": 2000}})");
  EXPECT_DOUBLE_EQ(scheduler.warmupMinRatio, 0.0);
  EXPECT_DOUBLE_EQ(scheduler.cosMinRatio, 0.0001);
  EXPECT_EQ(scheduler.warmupNumSteps, 1000);
  EXPECT_EQ(scheduler.warmupType, WarmupType::Log);
  // Its own keys only: warmup_min_lr belongs to WarmupLR.
  ConfigError error = schedulerError(R"({"type": "WarmupCosineLR", "params":
      {"total_num_steps": 10, "warmup_min_lr": 0}})");
  EXPECT_EQ(error.keyPath(), "scheduler.params.warmup_min_lr");
  expectMessageHas(error, {"unknown key", "WarmupCosineLR"});
}

TEST(ConfigSchedulerTest, InvalidSchedulersAreErrors) {
  ConfigError oneCycle = schedulerError(R"({"type": "OneCycle"})");
  EXPECT_EQ(oneCycle.keyPath(), "scheduler.type");
  expectMessageHas(oneCycle, {"not supported"});
  EXPECT_EQ(schedulerError(R"({"type": "WarmupLR", "params":
                {"warmup_type": "cosine"}})")
                .keyPath(),
            "scheduler.params.warmup_type");
  EXPECT_EQ(schedulerError(R"({"type": "WarmupLR", "params":
                {"warmup_num_steps": 0}})")
                .keyPath(),
            "scheduler.params.warmup_num_steps");
  EXPECT_EQ(schedulerError(R"({"type": "WarmupLR", "params":
                {"warmup_max_lr": -1}})")
                .keyPath(),
            "scheduler.params.warmup_max_lr");
  EXPECT_EQ(schedulerError(R"({"type": "WarmupLR", "params":
                {"warmup_type": "auto"}})")
                .keyPath(),
            "scheduler.params.warmup_type");
  EXPECT_EQ(schedulerError(R"({"type": "WarmupCosineLR", "params":
                {"total_num_steps": 10, "cos_min_ratio": 1.5}})")
                .keyPath(),
            "scheduler.params.cos_min_ratio");
}

TEST(ConfigSchedulerTest, SchedulerNeedsAnOptimizer) {
  ConfigError error = parseError(R"({"train_micro_batch_size_per_gpu": 1,
                                     "scheduler": {"type": "WarmupLR"}})");
  expectMessageHas(error, {"scheduler", "needs an \"optimizer\""});
}
