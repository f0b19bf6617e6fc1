//===- LrScheduleTest.cpp - DeepSpeed's learning rate schedules -----------===//
//
// Expected values are worked out by hand from DeepSpeed's lr_schedules.py;
// `step` is DeepSpeed's last_batch_iteration (-1 before the first step).
// The schedules are the plan's, with the values the config parser gives the
// same "scheduler" sections (unittests/Config/SchedulerTest.cpp).
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/LrSchedule.h"

#include <gtest/gtest.h>

using namespace ds;
using ds::plan::SchedulerDesc;
using ds::plan::SchedulerType;
using ds::plan::WarmupType;
using ds::runtime::schedulerLr;
using ds::runtime::schedulerLrForUpdate;

namespace {

/// {"type": "WarmupLR", "params": {"warmup_min_lr": 0.01, "warmup_max_lr":
/// 0.1, "warmup_num_steps": 10, "warmup_type": <warmupType>}}.
SchedulerDesc warmupLr(WarmupType warmupType) {
  SchedulerDesc scheduler;
  scheduler.warmupMinLr = 0.01;
  scheduler.warmupMaxLr = 0.1;
  scheduler.warmupNumSteps = 10;
  scheduler.warmupType = warmupType;
  return scheduler;
}

} // namespace

TEST(RuntimeLrScheduleTest, WarmupLRDefaults) {
  // {"type": "WarmupLR"}: no warmup_max_lr, so after warmup the optimizer's
  // lr.
  SchedulerDesc scheduler;
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 5000), 0.5);
}

TEST(RuntimeLrScheduleTest, WarmupLRLogValues) {
  SchedulerDesc scheduler = warmupLr(WarmupType::Log);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, -1), 0.01);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 0), 0.01); // log(1) = 0
  // 0.01 + 0.09 * log(5) / log(10) = 0.01 + 0.09 * 0.69897000433...
  EXPECT_NEAR(schedulerLr(scheduler, 0.5, 4), 0.0729073003897, 1e-12);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 9), 0.1); // log(10) / log(10)
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 10), 0.1);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 100000), 0.1);
}

TEST(RuntimeLrScheduleTest, WarmupLRLinearValues) {
  SchedulerDesc scheduler = warmupLr(WarmupType::Linear);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 0), 0.01);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 5), 0.055);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 9), 0.091);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 10), 0.1);
}

TEST(RuntimeLrScheduleTest, WarmupStepsAreClampedToTwo) {
  SchedulerDesc linear;
  linear.warmupMaxLr = 0.1;
  linear.warmupNumSteps = 1;
  linear.warmupType = WarmupType::Linear;
  EXPECT_DOUBLE_EQ(schedulerLr(linear, 0.5, 1), 0.05); // 1 / max(2, 1)
  EXPECT_DOUBLE_EQ(schedulerLr(linear, 0.5, 2), 0.1);
  SchedulerDesc log;
  log.warmupMaxLr = 0.1;
  log.warmupNumSteps = 1;
  EXPECT_DOUBLE_EQ(schedulerLr(log, 0.5, 1), 0.1); // log(2) / log(2)
}

TEST(RuntimeLrScheduleTest, WarmupDecayLRValues) {
  SchedulerDesc scheduler;
  scheduler.type = SchedulerType::WarmupDecayLR;
  scheduler.warmupMaxLr = 0.1;
  scheduler.warmupNumSteps = 10;
  scheduler.warmupType = WarmupType::Linear;
  scheduler.totalNumSteps = 110;
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, -1), 0.0);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 5), 0.05);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 10), 0.1);  // (110-10)/100
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 60), 0.05); // (110-60)/100
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 109), 0.001);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 110), 0.0);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 200), 0.0); // max(0, ..)
}

TEST(RuntimeLrScheduleTest, WarmupDecayLRDefaults) {
  // {"type": "WarmupDecayLR", "params": {"total_num_steps": 5000}}: the
  // parser sets warmup_max_lr to 0.001.
  SchedulerDesc scheduler;
  scheduler.type = SchedulerType::WarmupDecayLR;
  scheduler.warmupMaxLr = 0.001;
  scheduler.totalNumSteps = 5000;
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 0.5, 1000), 0.001);
}

TEST(RuntimeLrScheduleTest, WarmupCosineLRValues) {
  SchedulerDesc scheduler;
  scheduler.type = SchedulerType::WarmupCosineLR;
  scheduler.warmupMinRatio = 0.1;
  scheduler.cosMinRatio = 0.01;
  scheduler.warmupNumSteps = 10;
  scheduler.warmupType = WarmupType::Linear;
  scheduler.totalNumSteps = 110;
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

TEST(RuntimeLrScheduleTest, WarmupCosineLRDefaults) {
  // {"type": "WarmupCosineLR", "params": {"total_num_steps": 2000}}.
  SchedulerDesc scheduler;
  scheduler.type = SchedulerType::WarmupCosineLR;
  scheduler.totalNumSteps = 2000;
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 1.0, 0), 0.0);
  EXPECT_DOUBLE_EQ(schedulerLr(scheduler, 1.0, 999),
                   1.0); // log(1000)/log(1000)
}

TEST(RuntimeLrScheduleTest, LrForUpdateLagsOneSchedulerStep) {
  SchedulerDesc scheduler = warmupLr(WarmupType::Linear);
  // The first update runs at the lr set at construction (iteration -1).
  EXPECT_DOUBLE_EQ(schedulerLrForUpdate(scheduler, 0.5, 0), 0.01);
  EXPECT_DOUBLE_EQ(schedulerLrForUpdate(scheduler, 0.5, 6), 0.055);
}
