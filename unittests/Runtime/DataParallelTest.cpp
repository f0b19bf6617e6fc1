//===- DataParallelTest.cpp - Engine training on several ranks ------------===//
//
// Two ranks as two threads (ThreadCommunicator) train the hand-written plan
// plans/linear_mse_train.json with data-parallel semantics (ZeRO stage 0):
// state broadcast from rank 0 at load, gradients accumulated locally over
// the GAS window and averaged over the ranks at the boundary (the plan's
// all_reduce of each bucket), before clipping. ZeroTest.cpp does stages 1-2.
// The reference is LibTorch autograd + torch::optim back-propagating
// sum(loss[r][s]) / (W * GAS), as the oracle does. mpirun-level checks of the
// same are in test/mpi.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "ThreadCommunicator.h"

#include "ds/Plan/PlanFormat.h"
#include "ds/Runtime/Communicator.h"
#include "ds/Runtime/Engine.h"
#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/RuntimeError.h"
#include "ds/TensorIO/Safetensors.h"

#include <torch/torch.h>

using namespace ds;
using ds::runtime::Engine;
using ds::runtime::RuntimeError;
using ds::runtime::StepReport;
using ds::test::TempDir;

namespace {

constexpr int64_t W = 2, GAS = 2, STEPS = 3;

/// W ranks, GAS 2; 17 gradient elements in buckets of 6 (18 with padding):
/// slices that split fc.weight.
plan::Plan dataParallelPlan(int64_t stage = 0) {
  plan::ordered_json json = test::planJson("linear_mse_train.json");
  json["gradient_accumulation_steps"] = GAS;
  json["engines"][0]["batch"]["gradient_accumulation_steps"] = GAS;
  // The backward's seed is 1/GAS (the train program's constant %6).
  json["programs"]["train"]["body"][6]["value"] = 1.0 / double(GAS);
  return test::zeroPlan(json, W, stage, 6);
}

struct Weights {
  at::Tensor weight, bias, extra;
};

Weights writeWeights(const std::string &path, int seed) {
  torch::manual_seed(seed);
  Weights w{torch::randn({3, 4}), torch::randn({3}), torch::randn({2})};
  runtime::writeSafetensors(
      path,
      {{"fc.weight", w.weight}, {"fc.bias", w.bias}, {"extra.scale", w.extra}});
  return w;
}

Engine load(const plan::Plan &plan, const TempDir &dir,
            const std::string &weights,
            std::shared_ptr<runtime::Communicator> comm) {
  runtime::LoadOptions options;
  options.weightsPath = weights;
  options.communicator = std::move(comm);
  return Engine::fromPlan(plan, "dp.json", dir.path(), options);
}

const at::Tensor &param(const Engine &engine, const std::string &name) {
  return engine.state().tensor(engine.state().indexOf(name));
}

struct Batch {
  at::Tensor x, t;
};

} // namespace

TEST(RuntimeDataParallelTest, TwoRanksMatchAutogradOverBothRanksRows) {
  TempDir dir;
  Weights w = writeWeights(dir.file("w.safetensors"), 42);
  // Rank 1 starts from other weights: the broadcast at load replaces them.
  writeWeights(dir.file("other.safetensors"), 7);
  torch::manual_seed(5);
  // batches[step][micro][rank]
  std::vector<std::vector<std::vector<Batch>>> batches(STEPS);
  for (auto &step : batches) {
    step.resize(GAS);
    for (auto &micro : step)
      for (int64_t r = 0; r < W; ++r)
        micro.push_back({torch::randn({4, 4}), torch::randn({4, 3})});
  }

  plan::Plan json = dataParallelPlan();
  test::ThreadGroup group(W);
  std::vector<std::vector<double>> losses(W, std::vector<double>(STEPS));
  std::vector<std::vector<StepReport>> reports(W);
  std::vector<std::unique_ptr<Engine>> engines(W);
  group.run([&](int64_t rank) {
    engines[rank] = std::make_unique<Engine>(load(
        json, dir, dir.file(rank == 0 ? "w.safetensors" : "other.safetensors"),
        group.member(rank)));
    Engine &engine = *engines[rank];
    EXPECT_EQ(engine.rank(), rank);
    EXPECT_EQ(engine.worldSize(), W);
    for (int64_t step = 0; step < STEPS; ++step) {
      StepReport report;
      for (int64_t micro = 0; micro < GAS; ++micro) {
        const Batch &b = batches[step][micro][rank];
        losses[rank][step] += engine.forward({b.x, b.t})[0].item<double>();
        engine.backward();
        report = engine.step();
      }
      reports[rank].push_back(report);
    }
  });

  // The reference: every (micro-step, rank) forward, backward of
  // loss / (W * GAS), DeepSpeed's clipping (1.0), torch's AdamW.
  at::Tensor weight = w.weight.clone().requires_grad_(true);
  at::Tensor bias = w.bias.clone().requires_grad_(true);
  at::Tensor extra = w.extra.clone().requires_grad_(true);
  torch::optim::AdamW optimizer(
      {weight, bias, extra},
      torch::optim::AdamWOptions(0.01).weight_decay(0.1));
  for (int64_t step = 0; step < STEPS; ++step) {
    SCOPED_TRACE("step " + std::to_string(step + 1));
    double loss = 0.0;
    for (const auto &micro : batches[step])
      for (const Batch &b : micro) {
        at::Tensor l = torch::mse_loss(torch::linear(b.x, weight, bias), b.t);
        loss += l.item<double>();
        (l / double(W * GAS)).backward();
      }
    extra.mutable_grad() = torch::zeros_like(extra);
    double norm = torch::nn::utils::clip_grad_norm_({weight, bias, extra}, 1.0);
    optimizer.step();
    optimizer.zero_grad();
    double ours = (losses[0][step] + losses[1][step]) / double(W * GAS);
    EXPECT_NEAR(ours, loss / double(W * GAS), 1e-6 * std::abs(loss));
    for (int64_t rank = 0; rank < W; ++rank) {
      ASSERT_TRUE(reports[rank][step].updated);
      // The global norm: of the averaged gradients, the same on each rank.
      EXPECT_NEAR(reports[rank][step].gradNorm(), norm, 1e-6 * norm);
    }
    EXPECT_EQ(reports[0][step].gradNorm(), reports[1][step].gradNorm());
  }
  for (const char *name : {"fc.weight", "fc.bias", "extra.scale"}) {
    const at::Tensor &reference = std::string(name) == "fc.weight" ? weight
                                  : std::string(name) == "fc.bias" ? bias
                                                                   : extra;
    EXPECT_TRUE(
        param(*engines[0], name).allclose(reference.detach(), 1e-5, 1e-6))
        << name;
    // Same averaged gradients, same update: the ranks stay bitwise equal.
    EXPECT_TRUE(param(*engines[0], name).equal(param(*engines[1], name)))
        << name;
  }

  // Load: one broadcast per state tensor; each boundary: the plan's
  // buckets (17 gradient elements and one of padding in buckets of 6).
  std::vector<std::string> expected = {
      "broadcast 12 from 0", "broadcast 3 from 0", "broadcast 2 from 0"};
  for (int64_t step = 0; step < STEPS; ++step)
    for (const char *bucket :
         {"allReduce avg 6", "allReduce avg 6", "allReduce avg 6"})
      expected.push_back(bucket);
  EXPECT_EQ(group.log(), expected);
}

TEST(RuntimeDataParallelTest, PlanWorldSizeMustMatchTheRanks) {
  TempDir dir;
  writeWeights(dir.file("w.safetensors"), 1);
  plan::ordered_json json = test::planJson("linear_mse_train.json");
  plan::Plan plan = test::zeroPlan(json, 1, 0, 6);
  test::ThreadGroup group(W);
  for (int64_t rank = 0; rank < W; ++rank)
    EXPECT_THROW_WITH(
        load(plan, dir, dir.file("w.safetensors"), group.member(rank)),
        RuntimeError,
        "dp.json: the plan was compiled for --world-size 1, but 2 ranks were "
        "launched");
}

TEST(RuntimeDataParallelTest, ShardedStagesNeedTheRanks) {
  // Stage 0 can emulate one rank of several without a communicator (its
  // all-reduce is then over one rank); stages 1-2 shard over the plan's
  // world size and cannot.
  TempDir dir;
  writeWeights(dir.file("w.safetensors"), 1);
  EXPECT_NO_THROW(
      load(dataParallelPlan(0), dir, dir.file("w.safetensors"), nullptr));
  for (int64_t stage : {1, 2})
    EXPECT_THROW_WITH(
        load(dataParallelPlan(stage), dir, dir.file("w.safetensors"), nullptr),
        RuntimeError,
        "dp.json: engine \"model\": ZeRO stage " + std::to_string(stage) +
            " shards over the plan's 2 ranks; load it with their "
            "communicator");
}
