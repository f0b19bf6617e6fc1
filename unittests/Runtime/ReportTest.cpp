//===- ReportTest.cpp - Predicted memory and traffic reports --------------===//

#include "TestUtil.h"

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

EngineDesc engine(std::string name, ordered_json config) {
  EngineDesc desc;
  desc.name = std::move(name);
  desc.config = std::move(config);
  return desc;
}

/// Engines: "adam" (AdamW: w 10x10, b 10, a requires_grad=false 5),
/// "sgdm" (SGD momentum 0.9: 20), "sgd" (plain SGD: 7), "frozen" (no
/// optimizer: 30); a buffer of 3 float32. A train program whose peak is
/// [4, 4] float32 input and its scalar sum (68 bytes).
Plan handWrittenPlan(int64_t worldSize) {
  Plan plan;
  plan.worldSize = worldSize;
  plan.engines.push_back(engine(
      "adam", ordered_json::parse(R"({"optimizer": {"type": "AdamW", "params":
               {"lr": 0.001}}, "zero_optimization": {"stage": 0}})")));
  plan.engines.push_back(
      engine("sgdm", ordered_json::parse(
                         R"({"optimizer": {"type": "sgd", "params": {"lr": 0.1,
                      "momentum": 0.9}}})")));
  plan.engines.push_back(engine(
      "sgd", ordered_json::parse(
                 R"({"optimizer": {"type": "SGD", "params": {"lr": 0.1}}})")));
  plan.engines.push_back(engine("frozen", ordered_json::object()));
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
  plan.programs["eval"] = b.program;
  plan.programs["train"] = b.program;
  return plan;
}

} // namespace

TEST(Report, PredictsStateGradientsOptimizerAndPeak) {
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

TEST(Report, StageZeroAllReducesTwiceTheTrainableElements) {
  Report report = predictReport(handWrittenPlan(4));
  ASSERT_EQ(report.ranks.size(), 4u);
  for (int64_t r = 0; r < 4; ++r) {
    const RankReport &rank = report.ranks[size_t(r)];
    EXPECT_EQ(rank.rank, r);
    EXPECT_EQ(rank.comm.allReduce, 2 * 137);
    EXPECT_EQ(rank.comm.reduceScatter, 0);
    EXPECT_EQ(rank.comm.allGather, 0);
    EXPECT_EQ(rank.comm.broadcast, 0);
    EXPECT_EQ(rank.comm.total(), 2 * 137);
    EXPECT_EQ(rank.gradBytes, 137 * 4);
  }
  EXPECT_EQ(report.loadBroadcastElements, 172 + 3);
}

TEST(Report, EvalOnlyPlanHasNoGradientsOrOptimizerState) {
  Plan plan = handWrittenPlan(2);
  plan.programs.erase("train");
  Report report = predictReport(plan);
  EXPECT_EQ(report.ranks[0].gradBytes, 0);
  EXPECT_EQ(report.ranks[0].optimizerStateBytes, 0);
  EXPECT_EQ(report.ranks[0].comm.total(), 0);
  EXPECT_EQ(report.ranks[0].peakBytes, 68 + 172 * 4 + 12);
}

TEST(Report, JsonRoundTripHasTheIssueShape) {
  Report report = predictReport(handWrittenPlan(2));
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

  json["ranks"][0]["comm_volume_elements"]["total"] = 1;
  EXPECT_THROW(reportFromJson(json), std::runtime_error);
}
