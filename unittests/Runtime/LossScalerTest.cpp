//===- LossScalerTest.cpp - DeepSpeed's fp16 loss scaler ------------------===//
//
// Sequences traced by hand through DeepSpeed's DynamicLossScaler.update_scale
// (deepspeed/runtime/fp16/loss_scaler.py): O an overflowing step, N a clean
// one; after each, the scale and the hysteresis left.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "ds/Runtime/LossScaler.h"
#include "ds/TensorIO/RuntimeError.h"

#include <cmath>
#include <string>
#include <vector>

using namespace ds;
using namespace ds::runtime;

namespace {

/// fp16's dynamic scaler from 2^initial_scale_power.
plan::LossScalerDesc dynamicFp16(int64_t power, int64_t window,
                                 int64_t hysteresis, bool consecutive) {
  plan::LossScalerDesc desc;
  desc.type = plan::LossScalerType::Dynamic;
  desc.scale = std::ldexp(1.0, int(power));
  desc.scaleWindow = window;
  desc.hysteresis = hysteresis;
  desc.consecutiveHysteresis = consecutive;
  return desc;
}

/// fp16.loss_scale > 0.
plan::LossScalerDesc staticScale(double scale) {
  plan::LossScalerDesc desc;
  desc.type = plan::LossScalerType::Static;
  desc.scale = scale;
  return desc;
}

struct Trace {
  std::vector<double> scales;
  std::vector<int64_t> hysteresis;
  std::vector<bool> applied;
};

Trace run(LossScaler &scaler, const std::string &pattern) {
  Trace trace;
  for (char c : pattern) {
    trace.applied.push_back(scaler.update(c == 'O'));
    trace.scales.push_back(scaler.scale());
    trace.hysteresis.push_back(scaler.state().hysteresisLeft);
  }
  return trace;
}

} // namespace

TEST(RuntimeLossScalerTest, DynamicWithHysteresis) {
  LossScaler scaler(dynamicFp16(4, 2, 2, false));
  EXPECT_EQ(scaler.scale(), 16.0);
  Trace trace = run(scaler, "OONNNONN");
  EXPECT_EQ(trace.scales, (std::vector<double>{16, 8, 8, 8, 16, 16, 16, 16}));
  // Refilled only when the window doubles the scale.
  EXPECT_EQ(trace.hysteresis, (std::vector<int64_t>{1, 1, 1, 1, 2, 1, 1, 1}));
  EXPECT_EQ(trace.applied, (std::vector<bool>{false, false, true, true, true,
                                              false, true, true}));
  EXPECT_EQ(scaler.state().iteration, 8);
  EXPECT_EQ(scaler.state().lastOverflow, 5);
}

TEST(RuntimeLossScalerTest, ConsecutiveHysteresisRefillsAfterEveryCleanStep) {
  LossScaler scaler(dynamicFp16(4, 2, 2, true));
  Trace trace = run(scaler, "OONNNONN");
  EXPECT_EQ(trace.scales, (std::vector<double>{16, 8, 8, 8, 16, 16, 16, 16}));
  EXPECT_EQ(trace.hysteresis, (std::vector<int64_t>{1, 1, 2, 2, 2, 1, 2, 2}));
}

TEST(RuntimeLossScalerTest, WindowDoublesAfterEveryWindowOfCleanSteps) {
  LossScaler scaler(dynamicFp16(3, 3, 1, false));
  Trace trace = run(scaler, "ONNNNNNN");
  // Halved at once (hysteresis 1); doubled at the 4th and 7th clean step:
  // DeepSpeed's stable_interval (cur_iter - last_overflow_iter - 1) does not
  // count the first step after the overflow.
  EXPECT_EQ(trace.scales, (std::vector<double>{4, 4, 4, 4, 8, 8, 8, 16}));
}

TEST(RuntimeLossScalerTest, OverflowAtTheMinimumIsAnError) {
  plan::LossScalerDesc desc = dynamicFp16(1, 1000, 1, false);
  desc.minScale = 1.0;
  LossScaler scaler(desc);
  EXPECT_FALSE(scaler.update(true));
  EXPECT_EQ(scaler.scale(), 1.0);
  EXPECT_THROW_WITH(scaler.update(true), RuntimeError,
                    "with the loss scale already at min_loss_scale");
}

TEST(RuntimeLossScalerTest, StaticScaleSkipsButNeverChanges) {
  LossScaler scaler(staticScale(128.0));
  EXPECT_FALSE(scaler.dynamic());
  Trace trace = run(scaler, "ONO");
  EXPECT_EQ(trace.scales, (std::vector<double>{128, 128, 128}));
  EXPECT_EQ(trace.applied, (std::vector<bool>{false, true, false}));
}

TEST(RuntimeLossScalerTest, StaticScaleOfOneLeavesTheLossAlone) {
  LossScaler scaler(staticScale(1.0));
  EXPECT_EQ(scaler.scale(), 1.0);
  EXPECT_TRUE(scaler.update(false));
  EXPECT_EQ(scaler.scale(), 1.0);
}

TEST(RuntimeLossScalerTest, StateRoundTrips) {
  LossScaler scaler(dynamicFp16(4, 2, 2, false));
  run(scaler, "OON");
  LossScaler restored(dynamicFp16(4, 2, 2, false));
  restored.restore(scaler.state());
  EXPECT_EQ(run(restored, "NNONN").scales, run(scaler, "NNONN").scales);
}

namespace {

/// torch.amp.GradScaler: hysteresis 1 and no floor, as the compiler writes
/// it into the plan.
plan::LossScalerDesc gradScaler(double scale, int64_t window) {
  plan::LossScalerDesc desc;
  desc.type = plan::LossScalerType::GradScaler;
  desc.scale = scale;
  desc.scaleWindow = window;
  desc.hysteresis = 1;
  desc.minScale = 0.0;
  return desc;
}

} // namespace

// fp16 autocast's torch.amp.GradScaler: the sequence torch 2.15's
// torch._amp_update_scale_(scale, tracker, found_inf, 2.0, 0.5, 3) gives
// from 16: every overflow halves (no hysteresis), the 3rd consecutive clean
// step doubles, counting from the start, the last overflow or the last
// doubling (DeepSpeed's own rule would double only at the 4th).
TEST(RuntimeLossScalerTest,
     GradScalerHalvesOnEveryOverflowAndGrowsEveryWindow) {
  LossScaler scaler(gradScaler(16, 3));
  EXPECT_TRUE(scaler.dynamic());
  EXPECT_TRUE(scaler.gradScaler());
  EXPECT_EQ(scaler.scale(), 16.0);
  Trace trace = run(scaler, "NNNONNNNNNOO");
  EXPECT_EQ(trace.scales, (std::vector<double>{16, 16, 32, 16, 16, 16, 32, 32,
                                               32, 64, 32, 16}));
  EXPECT_EQ(trace.applied,
            (std::vector<bool>{true, true, true, false, true, true, true, true,
                               true, true, false, false}));
}

TEST(RuntimeLossScalerTest, GradScalerHasNoFloorAndStopsGrowingAtFloatMax) {
  // Overflows halve below 1 without an error (GradScaler has no minimum).
  LossScaler low(gradScaler(1, 2000));
  Trace trace = run(low, "OOO");
  EXPECT_EQ(trace.scales, (std::vector<double>{0.5, 0.25, 0.125}));
  // torch keeps the scale a float32: 2^126 grows to 2^127, not to 2^128.
  LossScaler high(gradScaler(std::ldexp(1.0, 126), 1));
  trace = run(high, "NN");
  EXPECT_EQ(trace.scales,
            (std::vector<double>{std::ldexp(1.0, 127), std::ldexp(1.0, 127)}));
}

// The defaults DeepSpeed's GradScaler(device=...) takes: init_scale 2^16,
// growth_interval 2000.
TEST(RuntimeLossScalerTest, GradScalerDefaults) {
  LossScaler scaler(gradScaler(65536.0, 2000));
  EXPECT_EQ(scaler.scale(), 65536.0);
  std::string pattern(1999, 'N');
  Trace trace = run(scaler, pattern);
  EXPECT_EQ(trace.scales.back(), 65536.0);
  EXPECT_EQ(run(scaler, "N").scales.back(), 131072.0);
}
