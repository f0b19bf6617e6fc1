//===- SchedulerTest.cpp - The "scheduler" section and its formulas -------===//
//
// Expected values are worked out by hand from DeepSpeed's lr_schedules.py;
// `step` is DeepSpeed's last_batch_iteration (-1 before the first step).
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
  // After warmup, the optimizer's lr.
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 5000), 0.5);
}

TEST(ConfigSchedulerTest, WarmupLRLogValues) {
  SchedulerConfig scheduler = schedulerOf(R"({"type": "WarmupLR", "params":
      {"warmup_min_lr": 0.01, "warmup_max_lr": 0.1, "warmup_num_steps": 10}})");
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, -1), 0.01);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 0), 0.01); // log(1) = 0
  // 0.01 + 0.09 * log(5) / log(10) = 0.01 + 0.09 * 0.69897000433...
  EXPECT_NEAR(schedulerLr(scheduler, 0.5, 4), 0.0729073003897, 1e-12);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 9), 0.1); // log(10) / log(10)
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 10), 0.1);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 100000), 0.1);
}

TEST(ConfigSchedulerTest, WarmupLRLinearValues) {
  SchedulerConfig scheduler = schedulerOf(R"({"type": "WarmupLR", "params":
      {"warmup_min_lr": 0.01, "warmup_max_lr": 0.1, "warmup_num_steps": 10,
       "warmup_type": "linear"}})");
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 0), 0.01);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 5), 0.055);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 9), 0.091);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 10), 0.1);
}

TEST(ConfigSchedulerTest, WarmupStepsAreClampedToTwo) {
  SchedulerConfig linear = schedulerOf(R"({"type": "WarmupLR", "params":
      {"warmup_max_lr": 0.1, "warmup_num_steps": 1, "warmup_type": "linear"}})");
  EXPECT_EQ(linear.warmupNumSteps, 1);
  EXPECT_DOUBLE_EQ(schedulerLr(linear, 0.5, 1), 0.05); // 1 / max(2, 1)
  EXPECT_DOUBLE_EQ(schedulerLr(linear, 0.5, 2), 0.1);
  SchedulerConfig log = schedulerOf(R"({"type": "WarmupLR", "params":
      {"warmup_max_lr": 0.1, "warmup_num_steps": 1}})");
  EXPECT_DOUBLE_EQ(schedulerLr(log, 0.5, 1), 0.1); // log(2) / log(2)
}

TEST(ConfigSchedulerTest, WarmupDecayLRValues) {
  SchedulerConfig scheduler = schedulerOf(R"({"type": "WarmupDecayLR",
      "params": {"warmup_max_lr": 0.1, "warmup_num_steps": 10,
                 "warmup_type": "linear", "total_num_steps": 110}})");
  EXPECT_EQ(scheduler.totalNumSteps, 110);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, -1), 0.0);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 5), 0.05);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 10), 0.1);  // (110-10)/100
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 60), 0.05); // (110-60)/100
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 109), 0.001);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 110), 0.0);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 200), 0.0); // max(0, ..)
}

TEST(ConfigSchedulerTest, WarmupDecayLRDefaultsAndRequiredTotal) {
  SchedulerConfig scheduler = schedulerOf(
      R"({"type": "WarmupDecayLR", "params": {"total_num_steps": 5000}})");
  EXPECT_EQ(scheduler.warmupMaxLr, 0.001);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 1000), 0.001);
  ConfigError error = schedulerError(R"({"type": "WarmupDecayLR"})");
  EXPECT_EQ(error.keyPath(), "scheduler.params.total_num_steps");
  expectMessageHas(error, {"missing", "WarmupDecayLR"});
}

TEST(ConfigSchedulerTest, WarmupCosineLRValues) {
  SchedulerConfig scheduler = schedulerOf(R"({"type": "WarmupCosineLR",
      "params": {"warmup_min_ratio": 0.1, "cos_min_ratio": 0.01,
                 "warmup_num_steps": 10, "warmup_type": "linear",
                 "total_num_steps": 110}})");
  const double base = 0.2;
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, base, -1), 0.0);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, base, 0), 0.02); // 0.2 * 0.1
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, base, 5), 0.11); // 0.2*(.1+.5*.9)
  // Step 10: progress 1/100; cos(0.01 pi) = 0.99950656036, so the ratio is
  // 0.01 + 0.99 * (1 + 0.99950656036) / 2 = 0.99975574738.
  EXPECT_NEAR(schedulerLr(scheduler, base, 10), 0.2 * 0.99975574738, 1e-11);
  // Step 59: progress 1/2; 0.01 + 0.99 * 0.5 = 0.505.
  EXPECT_NEAR(schedulerLr(scheduler, base, 59), 0.101, 1e-15);
  // Step 109: progress 1, the floor cos_min_ratio; it stays there.
  EXPECT_NEAR(schedulerLr(scheduler, base, 109), 0.002, 1e-15);
  EXPECT_NEAR(schedulerLr(scheduler, base, 1000), 0.002, 1e-15);
}

TEST(ConfigSchedulerTest, WarmupCosineLRDefaults) {
  SchedulerConfig scheduler = schedulerOf(
      R"({"type": "WarmupCosineLR", "params": {"total_num_steps": 2000}})");
  EXPECT_DOUBLE_EQ(scheduler.warmupMinRatio, 0.0);
  EXPECT_DOUBLE_EQ(scheduler.cosMinRatio, 0.0001);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 1.0, 0), 0.0);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 1.0, 999),
                   1.0); // log(1000)/log(1000)
  // Its own keys only: warmup_min_lr belongs to WarmupLR.
  ConfigError error = schedulerError(R"({"type": "WarmupCosineLR", "params":
      {"total_num_steps": 10, "warmup_min_lr": 0}})");
  EXPECT_EQ(error.keyPath(), "scheduler.params.warmup_min_lr");
  expectMessageHas(error, {"unknown key", "WarmupCosineLR"});
}

TEST(ConfigSchedulerTest, LrForUpdateLagsOneSchedulerStep) {
  SchedulerConfig scheduler = schedulerOf(R"({"type": "WarmupLR", "params":
      {"warmup_min_lr": 0.01, "warmup_max_lr": 0.1, "warmup_num_steps": 10,
       "warmup_type": "linear"}})");
  // The first update runs at the lr set at construction (iteration -1).
  EXPECT_DOUBLE_EQ(schedulerLrForUpdate(scheduler, 0.5, 0), 0.01);
  EXPECT_DOUBLE_EQ(schedulerLrForUpdate(scheduler, 0.5, 6), 0.055);
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
                {"warmup_num_steps": "auto"}})")
                .keyPath(),
            "scheduler.params.warmup_num_steps");
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
