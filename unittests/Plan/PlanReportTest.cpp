//===- PlanReportTest.cpp - Predicted memory and traffic reports ----------===//

#include "TestUtil.h"

#include "ds/Plan/PlanFormat.h"
#include "ds/Plan/Report.h"

#include <gtest/gtest.h>

using namespace ds::plan;

namespace {

StateDesc param(std::string name, std::vector<int64_t> shape,
                std::string engine, bool requiresGrad = true,
                DType dtype = DType::Float32) {
  StateDesc state;
  state.name = std::move(name);
  state.kind = StateKind::Param;
  state.dtype = dtype;
  state.shape = std::move(shape);
  state.requiresGrad = requiresGrad;
  state.engine = std::move(engine);
  return state;
}

OptimizerDesc adamw() {
  OptimizerDesc optimizer;
  optimizer.type = OptimizerType::AdamW;
  return optimizer;
}

OptimizerDesc sgd(double momentum) {
  OptimizerDesc optimizer;
  optimizer.type = OptimizerType::SGD;
  optimizer.momentum = momentum;
  return optimizer;
}

/// A trainable engine with `optimizer`, or a frozen one.
EngineDesc engine(std::string name, std::optional<OptimizerDesc> optimizer) {
  EngineDesc desc;
  desc.name = std::move(name);
  desc.trainable = optimizer.has_value();
  desc.optimizer = optimizer;
  return desc;
}

/// Engines: "adam" (AdamW: w 10x10, b 10, a requires_grad=false 5),
/// "sgdm" (SGD momentum 0.9: 20), "sgd" (plain SGD: 7), "frozen" (no
/// optimizer: 30); a buffer of 3 float32. A train program whose peak is
/// [4, 4] float32 input and its scalar sum (68 bytes). Every trainable
/// engine at ZeRO `stage` in one bucket (padded to a multiple of W).
Plan handWrittenPlan(int64_t worldSize, int64_t stage = 0) {
  Plan plan;
  plan.worldSize = worldSize;
  plan.engines.push_back(engine("adam", adamw()));
  plan.engines.push_back(engine("sgdm", sgd(0.9)));
  plan.engines.push_back(engine("sgd", sgd(0.0)));
  plan.engines.push_back(engine("frozen", std::nullopt));
  plan.state.push_back(param("w", {10, 10}, "adam"));
  plan.state.push_back(param("b", {10}, "adam"));
  plan.state.push_back(param("a", {5}, "adam", /*requiresGrad=*/false));
  plan.state.push_back(param("m", {20}, "sgdm"));
  plan.state.push_back(param("s", {7}, "sgd"));
  plan.state.push_back(param("t", {30}, "frozen"));
  StateDesc buffer = param("running_mean", {3}, "adam", false);
  buffer.kind = StateKind::Buffer;
  plan.state.push_back(buffer);

  ds::test::ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {4, 4});
  ValueId y = b.tensor(DType::Float32, {});
  b.add(Op::input(0, x));
  b.call("aten::sum", {x}, {y}, {x});
  b.program.results = {y};
  b.program.backwardStart = 2;
  plan.inputs.push_back({"x", DType::Float32, {4, 4}, true});
  plan.microBatchPerRank = 4;
  plan.outputs.push_back({"loss", "loss"});
  plan.programs["eval"] = b.program;
  plan.programs["train"] = b.program;
  for (const char *name : {"adam", "sgdm", "sgd"})
    ds::test::partitionEngine(plan, name, stage, 1000);
  validatePlan(plan, "report.json");
  return plan;
}

} // namespace

TEST(PlanReportTest, PredictsStateGradientsOptimizerAndPeak) {
  Report report = predictReport(handWrittenPlan(1));
  EXPECT_EQ(report.kind, "predicted");
  ASSERT_EQ(report.ranks.size(), 1u);
  const RankReport &rank = report.ranks[0];
  // Params: 100 + 10 + 5 + 20 + 7 + 30 = 172 elements.
  EXPECT_EQ(rank.paramBytes, 172 * 4);
  EXPECT_EQ(rank.bufferBytes, 3 * 4);
  // Trainable: w, b (adam), m (sgdm), s (sgd) = 137 elements.
  EXPECT_EQ(rank.gradBytes, 137 * 4);
  // Adam 8 bytes x 110, SGD momentum 4 x 20, plain SGD 0.
  EXPECT_EQ(rank.optimizerStateBytes, 110 * 8 + 20 * 4);
  EXPECT_EQ(rank.activationPeakBytes, 68);
  EXPECT_EQ(rank.peakBytes, 68 + 172 * 4 + 12 + 137 * 4 + 960);
  // One rank: no traffic, no load broadcast.
  EXPECT_EQ(rank.comm.total(), 0);
  EXPECT_EQ(report.loadBroadcastElements, 0);
}

TEST(PlanReportTest, StageZeroAllReducesTwiceTheTrainableElements) {
  Report report = predictReport(handWrittenPlan(4));
  ASSERT_EQ(report.ranks.size(), 4u);
  // Buckets are multiples of W = 4: adam 110 -> 112, sgdm 20, sgd 7 -> 8
  // elements, padding included (140).
  for (int64_t r = 0; r < 4; ++r) {
    const RankReport &rank = report.ranks[size_t(r)];
    EXPECT_EQ(rank.rank, r);
    EXPECT_EQ(rank.comm.allReduce, 2 * 140);
    EXPECT_EQ(rank.comm.reduceScatter, 0);
    EXPECT_EQ(rank.comm.allGather, 0);
    EXPECT_EQ(rank.comm.broadcast, 0);
    EXPECT_EQ(rank.comm.total(), 2 * 140);
    EXPECT_EQ(rank.gradBytes, 140 * 4);
    EXPECT_EQ(rank.optimizerStateBytes, 112 * 8 + 20 * 4);
  }
  EXPECT_EQ(report.zeroStage, 0);
  EXPECT_EQ(report.loadBroadcastElements, 172 + 3);
}

TEST(PlanReportTest, EvalOnlyPlanHasNoGradientsOrOptimizerState) {
  Plan plan = handWrittenPlan(2);
  plan.programs.erase("train");
  plan.programs.erase("step");
  Report report = predictReport(plan);
  EXPECT_EQ(report.ranks[0].gradBytes, 0);
  EXPECT_EQ(report.ranks[0].optimizerStateBytes, 0);
  EXPECT_EQ(report.ranks[0].comm.total(), 0);
  EXPECT_EQ(report.ranks[0].peakBytes, 68 + 172 * 4 + 12);
}

TEST(PlanReportTest, JsonRoundTripHasTheIssueShape) {
  Report report = predictReport(handWrittenPlan(1));
  report.worldSize = 2;
  report.ranks.push_back(report.ranks[0]);
  report.ranks[1].rank = 1;
  for (RankReport &rank : report.ranks)
    rank.comm.allReduce = 274;
  ordered_json json = reportToJson(report);
  const ordered_json &rank = json.at("ranks").at(1);
  EXPECT_EQ(rank.at("rank"), 1);
  EXPECT_EQ(rank.at("param_bytes"), 172 * 4);
  EXPECT_EQ(rank.at("grad_bytes"), 137 * 4);
  EXPECT_EQ(rank.at("optimizer_state_bytes"), 960);
  EXPECT_EQ(rank.at("peak_bytes"), report.ranks[1].peakBytes);
  const ordered_json &comm = rank.at("comm_volume_elements");
  EXPECT_EQ(comm.at("all_reduce"), 274);
  EXPECT_EQ(comm.at("reduce_scatter"), 0);
  EXPECT_EQ(comm.at("all_gather"), 0);
  EXPECT_EQ(comm.at("broadcast"), 0);
  EXPECT_EQ(comm.at("total"), 274);

  Report back = reportFromJson(ordered_json::parse(json.dump()));
  EXPECT_EQ(reportToJson(back), json);
  EXPECT_FALSE(rank.contains("overlap")); // Measured reports only.

  // Measured reports carry the collectives' timing.
  OverlapReport overlap;
  overlap.allGather = {4, 0.5, 0.125};
  overlap.reduceScatter = {2, 0.25, 0.125};
  overlap.trainSeconds = 2.0;
  report.ranks[1].overlap = overlap;
  json = reportToJson(report);
  const ordered_json &timing = json.at("ranks").at(1).at("overlap");
  EXPECT_EQ(timing.at("all_gather").at("count"), 4);
  EXPECT_EQ(timing.at("all_gather").at("collective_seconds"), 0.5);
  EXPECT_EQ(timing.at("all_gather").at("wait_seconds"), 0.125);
  EXPECT_EQ(timing.at("total").at("count"), 6);
  EXPECT_EQ(timing.at("total").at("collective_seconds"), 0.75);
  EXPECT_EQ(timing.at("hidden_fraction"), 1.0 - 0.25 / 0.75);
  EXPECT_EQ(timing.at("train_seconds"), 2.0);
  back = reportFromJson(ordered_json::parse(json.dump()));
  ASSERT_TRUE(back.ranks[1].overlap.has_value());
  EXPECT_EQ(back.ranks[1].overlap->allGather.count, 4);
  EXPECT_EQ(reportToJson(back), json);

  json["ranks"][0]["comm_volume_elements"]["total"] = 1;
  EXPECT_THROW(reportFromJson(json), std::runtime_error);
}

namespace {

/// One AdamW engine of Psi = 1024 float32 elements (w 32x32) in buckets of
/// 256, at ZeRO `stage` on `worldSize` ranks, GAS `gas`; no padding.
Plan zeroPlan(int64_t worldSize, int64_t stage, int64_t gas = 1) {
  Plan plan = handWrittenPlan(worldSize);
  plan.gradientAccumulationSteps = gas;
  plan.engines = {engine("adam", adamw())};
  plan.engines[0].batch.gradientAccumulationSteps = gas;
  plan.state = {param("w", {32, 32}, "adam")};
  ds::test::partitionEngine(plan, "adam", stage, 256);
  validatePlan(plan, "zero.json");
  return plan;
}

} // namespace

TEST(PlanReportTest, ZeroStagesMatchThePapersFormulas) {
  constexpr int64_t Psi = 1024, W = 4;
  struct Expected {
    int64_t stage;
    int64_t params, grads, optimizer; // bytes
  };
  // fp32 AdamW: 4 bytes per parameter, gradient element and moment.
  for (const Expected &e :
       {Expected{0, 4 * Psi, 4 * Psi, 8 * Psi},
        Expected{1, 4 * Psi, 4 * Psi, 8 * Psi / W},
        Expected{2, 4 * Psi, 4 * Psi / W, 8 * Psi / W},
        Expected{3, 4 * Psi / W, 4 * Psi / W, 8 * Psi / W}}) {
    SCOPED_TRACE("stage " + std::to_string(e.stage));
    Report report = predictReport(zeroPlan(W, e.stage));
    EXPECT_EQ(report.zeroStage, e.stage);
    ASSERT_EQ(report.ranks.size(), size_t(W));
    const RankReport &rank = report.ranks[3];
    EXPECT_EQ(rank.paramBytes, e.params);
    EXPECT_EQ(rank.gradBytes, e.grads);
    EXPECT_EQ(rank.optimizerStateBytes, e.optimizer);
    int64_t state = rank.paramBytes + rank.gradBytes + rank.optimizerStateBytes;
    if (e.stage == 0) {
      EXPECT_EQ(state, 16 * Psi);
    } else if (e.stage == 1) {
      EXPECT_EQ(state, 8 * Psi + 8 * Psi / W);
    } else if (e.stage == 2) {
      EXPECT_EQ(state, 4 * Psi + 12 * Psi / W);
    } else {
      EXPECT_EQ(state, 16 * Psi / W);
    }

    // Transient buffers: stage 1's shard gradient at the boundary (no
    // value is live then), stage 2's full gradient and receive buffers
    // during backward.
    int64_t persistent = state + rank.bufferBytes;
    if (e.stage == 0) {
      EXPECT_EQ(rank.transientBytes, 0);
      EXPECT_EQ(rank.peakBytes, persistent + rank.activationPeakBytes);
    } else if (e.stage == 1) {
      EXPECT_EQ(rank.transientBytes, 4 * Psi / W);
      EXPECT_EQ(rank.peakBytes,
                persistent + std::max(rank.activationPeakBytes, 4 * Psi / W));
    } else if (e.stage == 2) {
      EXPECT_EQ(rank.transientBytes, 4 * Psi + 4 * Psi / W);
      EXPECT_EQ(rank.peakBytes,
                persistent + rank.activationPeakBytes + 4 * Psi + 4 * Psi / W);
    } else {
      // Stage 3 walks the program: the whole bucket (4 Psi) while a
      // gather holds it, then the full gradient and receive buffers at the
      // reduce-scatter, while the loss (4 bytes, the program's result) is
      // live; the gathered bucket is released before that.
      EXPECT_EQ(rank.transientBytes, 4 * Psi + 4 * Psi / W);
      EXPECT_EQ(rank.peakBytes, persistent + 4 + 4 * Psi + 4 * Psi / W);
    }

    // Traffic per step: 2 Psi for every stage (one all-reduce, or a
    // reduce-scatter and an all-gather), plus the scalar all-reduce of the
    // global gradient norm when the gradients are sharded.
    // Stage 3 gathers in the forward and again in the backward: 3 Psi.
    if (e.stage == 0) {
      EXPECT_EQ(rank.comm.allReduce, 2 * Psi);
      EXPECT_EQ(rank.comm.total(), 2 * Psi);
    } else if (e.stage <= 2) {
      EXPECT_EQ(rank.comm.reduceScatter, Psi);
      EXPECT_EQ(rank.comm.allGather, Psi);
      EXPECT_EQ(rank.comm.allReduce, 2);
      EXPECT_EQ(rank.comm.total(), 2 * Psi + 2);
    } else {
      EXPECT_EQ(rank.comm.reduceScatter, Psi);
      EXPECT_EQ(rank.comm.allGather, 2 * Psi);
      EXPECT_EQ(rank.comm.allReduce, 2);
      EXPECT_EQ(rank.comm.total(), 3 * Psi + 2);
    }

    // One rank moves nothing, whatever the stage.
    Report alone = predictReport(zeroPlan(1, e.stage));
    EXPECT_EQ(alone.ranks[0].comm.total(), 0);
    EXPECT_EQ(alone.loadBroadcastElements, 0);
  }
}

TEST(PlanReportTest, StageTwoReduceScattersEveryMicroStep) {
  constexpr int64_t Psi = 1024, W = 4, GAS = 3;
  // Stage 2 reduce-scatters in every micro-step's backward: (g + 1) Psi.
  const RankReport two = predictReport(zeroPlan(W, 2, GAS)).ranks[0];
  EXPECT_EQ(two.comm.reduceScatter, GAS * Psi);
  EXPECT_EQ(two.comm.allGather, Psi);
  EXPECT_EQ(two.comm.total(), (GAS + 1) * Psi + 2);
  // Stages 0 and 1 reduce once per step, whatever the accumulation.
  EXPECT_EQ(predictReport(zeroPlan(W, 0, GAS)).ranks[0].comm.total(), 2 * Psi);
  EXPECT_EQ(predictReport(zeroPlan(W, 1, GAS)).ranks[0].comm.total(),
            2 * Psi + 2);
  // Stage 3 gathers twice and reduce-scatters once per micro-step:
  // 3 g Psi.
  const RankReport three = predictReport(zeroPlan(W, 3, GAS)).ranks[0];
  EXPECT_EQ(three.comm.allGather, 2 * GAS * Psi);
  EXPECT_EQ(three.comm.reduceScatter, GAS * Psi);
  EXPECT_EQ(three.comm.total(), 3 * GAS * Psi + 2);
}

TEST(PlanReportTest, StageThreePersistentBucketsStayWhole) {
  constexpr int64_t W = 4;
  // w (1024) sharded, b (16) persistent: 4 x (1024 / 4 + 16) bytes of
  // parameters; gradients and optimizer state are shards of both.
  Plan plan = handWrittenPlan(W);
  plan.engines = {engine("adam", adamw())};
  plan.state = {param("w", {32, 32}, "adam"), param("b", {16}, "adam")};
  ds::test::Stage3Options options;
  options.persistentNumel = 16;
  ds::test::partitionEngine(plan, "adam", 3, 2048, 0, options);
  validatePlan(plan, "zero.json");
  const PartitionDesc &partition = *plan.engines[0].partition;
  ASSERT_EQ(partition.buckets.size(), 2u);
  EXPECT_FALSE(partition.buckets[0].persistent);
  EXPECT_TRUE(partition.buckets[1].persistent);
  const RankReport rank = predictReport(plan).ranks[0];
  EXPECT_EQ(rank.paramBytes, 4 * (1024 / W + 16));
  EXPECT_EQ(rank.gradBytes, 4 * (1024 + 16) / W);
  EXPECT_EQ(rank.optimizerStateBytes, 8 * (1024 + 16) / W);
  // The sharded bucket twice per micro-step, the persistent one once per
  // step (after the update); both reduce-scattered.
  EXPECT_EQ(rank.comm.allGather, 2 * 1024 + 16);
  EXPECT_EQ(rank.comm.reduceScatter, 1024 + 16);
}

TEST(PlanReportTest, ActivationPeakOnBoundsIsMarked) {
  ds::test::ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {4, 8});
  ValueId rows = b.tensor(DType::Float32, {-1, 8});
  ValueId s = b.tensor(DType::Float32, {});
  b.program.values[rows].bound = std::vector<int64_t>{4, 8};
  b.add(Op::input(0, x));
  b.call("aten::relu", {x}, {rows}, {x});
  b.call("aten::sum", {rows}, {s}, {rows});
  b.program.results = {s};
  Plan plan =
      ds::test::makePlan({{"x", DType::Float32, {4, 8}, true}}, b.program);

  // x and its rows at their bound: 128 + 128 bytes, an upper bound.
  Report report = predictReport(plan);
  const RankReport &rank = report.ranks[0];
  EXPECT_EQ(rank.activationPeakBytes, 256);
  EXPECT_TRUE(rank.activationPeakIsBound);
  EXPECT_EQ(rank.unboundedValues, 0);
  ordered_json json = reportToJson(report);
  EXPECT_EQ(json["ranks"][0]["activation_peak_is_bound"], true);
  EXPECT_EQ(json["ranks"][0]["unbounded_values"], 0);
  EXPECT_TRUE(reportFromJson(json).ranks[0].activationPeakIsBound);
  std::string text = reportToText(report);
  EXPECT_NE(text.find("activation peak <= 256 B"), std::string::npos) << text;
  EXPECT_NE(text.find("peak <= 256 B"), std::string::npos) << text;

  // Without a bound the dynamic tensor counts 0: not an upper bound.
  plan.programs["eval"].values[rows].bound.reset();
  report = predictReport(plan);
  EXPECT_EQ(report.ranks[0].activationPeakBytes, 128);
  EXPECT_FALSE(report.ranks[0].activationPeakIsBound);
  EXPECT_EQ(report.ranks[0].unboundedValues, 1);
  text = reportToText(report);
  EXPECT_NE(text.find("activation peak 128 B (not a bound: 1 dynamic tensors "
                      "without a bound count 0)"),
            std::string::npos)
      << text;

  // Measured reports are exact: no such fields.
  report.kind = "measured";
  json = reportToJson(report);
  EXPECT_FALSE(json["ranks"][0].contains("activation_peak_is_bound"));
  json["ranks"][0]["activation_peak_is_bound"] = "yes";
  EXPECT_THROW(reportFromJson(json), std::runtime_error);
}

TEST(PlanReportTest, OffloadMovesStateAndMasterToHostBytes) {
  constexpr int64_t Psi = 1024, W = 4;
  for (int64_t stage : {1, 2, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    Plan plan = zeroPlan(W, stage);
    const RankReport plain = predictReport(plan).ranks[0];
    EXPECT_FALSE(plain.hostBytes.has_value());
    plan.engines[0].offloadOptimizer = OffloadDesc{};
    const RankReport offload = predictReport(plan).ranks[0];
    // fp32 AdamW: m, v and the fp32 master of the shard, on the host.
    EXPECT_EQ(offload.optimizerStateBytes, 0);
    EXPECT_EQ(offload.hostBytes, 12 * Psi / W);
    ASSERT_EQ(offload.engines.size(), 1u);
    EXPECT_EQ(offload.engines[0].hostBytes, 12 * Psi / W);
    // The device's figures lose the optimizer state; the rest is unchanged.
    EXPECT_EQ(offload.paramBytes, plain.paramBytes);
    EXPECT_EQ(offload.gradBytes, plain.gradBytes);
    EXPECT_EQ(offload.peakBytes, plain.peakBytes - 8 * Psi / W);
    ordered_json json = reportToJson(predictReport(plan));
    EXPECT_EQ(json["ranks"][0]["host_bytes"], 12 * Psi / W);
    EXPECT_EQ(reportFromJson(json).ranks[0].hostBytes, 12 * Psi / W);
  }
}
