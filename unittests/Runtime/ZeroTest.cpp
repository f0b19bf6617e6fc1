//===- ZeroTest.cpp - ZeRO stages 0-3 on hand-written version 2 plans -----===//
//
// The hand-written train plan (plans/linear_mse_train.json) partitioned by
// test::partitionEngine as -ds-zero-partition does (a padding element
// after every parameter, buckets of 6 elements rounded to a multiple of W),
// trained at every stage on W = 1 (LocalCommunicator), 2 and 4 ranks
// (ThreadCommunicator: W threads of this process). Every stage must give
// one rank's training over the whole batch (autograd + torch::optim on
// sum(loss[r][s]) / (W * GAS), the design's oracle) within 1e-6 relative,
// the ranks must agree bitwise, the collectives must be reduce-scatter and
// all-gather (never all-reduce) at stages 1-2, and the measured memory and
// traffic must be what plan::predictReport says. Stage 3 (sharded
// parameters) runs the same plan with a backward that reads fc.weight
// again, partitioned with whole parameters per bucket and the gathers and
// releases of the contract (test::partitionEngine), on asynchronous
// ThreadCommunicator ranks (a gather completes when every rank started it,
// while its caller goes on).
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "ThreadCommunicator.h"

#include "ds/Plan/PlanFormat.h"
#include "ds/Plan/Report.h"
#include "ds/Runtime/Communicator.h"
#include "ds/Runtime/Engine.h"
#include "ds/Runtime/Optimizer.h"
#include "ds/Runtime/StateStore.h"
#include "ds/Runtime/TimedCommunicator.h"
#include "ds/TensorIO/Safetensors.h"

#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <map>
#include <thread>

using namespace ds;
using ds::runtime::Engine;
using ds::runtime::StepReport;
using ds::test::TempDir;

namespace {

constexpr int64_t STEPS = 3, GAS = 2, ROWS = 4;
const std::vector<std::string> kParams = {"fc.weight", "fc.bias",
                                          "extra.scale"};

/// The hand-written train plan with GAS `gas` and `optimizer` (plan
/// fields) replacing the default AdamW(lr 0.01, wd 0.1, clip 1).
plan::ordered_json trainJson(const plan::ordered_json &optimizer, int64_t gas) {
  plan::ordered_json json = test::planJson("linear_mse_train.json");
  json["gradient_accumulation_steps"] = gas;
  json["engines"][0]["batch"]["gradient_accumulation_steps"] = gas;
  json["engines"][0]["optimizer"] = test::optimizerJson(optimizer);
  // The backward's seed is 1/GAS (the train program's constant %6).
  json["programs"]["train"]["body"][6]["value"] = 1.0 / double(gas);
  return json;
}

/// The plan for `worldSize` ranks at `stage`, GAS 2.
plan::Plan zeroPlan(int64_t worldSize, int64_t stage,
                    const plan::ordered_json &optimizer = {}) {
  return test::zeroPlan(trainJson(optimizer, GAS), worldSize, stage, 6,
                        /*gap=*/1);
}

/// Stage 3: the plan whose backward also computes dloss/dx = g_y fc.weight
/// (unused; it makes the backward read a sharded parameter), with whole
/// parameters per bucket (buckets of up to 6 elements, a padding element
/// after each parameter): bucket 0 holds fc.weight (12), bucket 1 fc.bias
/// and extra.scale (persistent with `options.persistentNumel` >= 3).
plan::Plan stage3Plan(int64_t worldSize, const test::Stage3Options &options,
                      int64_t gas = GAS,
                      const plan::ordered_json &optimizer = {}) {
  plan::ordered_json json =
      test::withBackwardWeightRead(trainJson(optimizer, gas));
  return test::zeroPlan(json, worldSize, 3, 6, /*gap=*/1, options);
}

struct Batch {
  at::Tensor x, t; // The whole batch of a micro-step: W * ROWS rows.
};

/// batches[step][micro] for `worldSize` ranks.
std::vector<std::vector<Batch>> makeData(int64_t worldSize, int64_t gas = GAS) {
  torch::manual_seed(11);
  std::vector<std::vector<Batch>> data(STEPS);
  for (auto &step : data)
    for (int64_t m = 0; m < gas; ++m)
      step.push_back({torch::randn({worldSize * ROWS, 4}),
                      torch::randn({worldSize * ROWS, 3})});
  return data;
}

std::string writeWeights(const TempDir &dir) {
  torch::manual_seed(42);
  std::string path = dir.file("w.safetensors");
  runtime::writeSafetensors(path, {{"fc.weight", torch::randn({3, 4})},
                                   {"fc.bias", torch::randn({3})},
                                   {"extra.scale", torch::randn({2})}});
  return path;
}

const at::Tensor &param(const Engine &engine, const std::string &name) {
  return engine.state().tensor(engine.state().indexOf(name));
}

struct TrainRun {
  /// Each rank's parameters at the end, in kParams order.
  std::vector<std::vector<at::Tensor>> params;
  /// Rank 0's reports.
  std::vector<StepReport> reports;
  /// Mean loss per step over ranks and micro-steps.
  std::vector<double> losses;
  /// Rank 0's collectives (ThreadCommunicator's log; empty for W = 1).
  std::vector<std::string> log;
  /// Rank 0's traffic from after loading to the end.
  plan::CommVolume volume;
  /// Rank 0's memory at the end.
  runtime::MemoryStats memory;
  /// Rank 0's collective timings.
  plan::OverlapReport overlap;
};

/// Called on each rank after each backward: (engine, rank, step, micro).
using Probe = std::function<void(Engine &, int64_t, int64_t, int64_t)>;

TrainRun train(const plan::Plan &plan, const std::string &weights,
               const std::vector<std::vector<Batch>> &data, Probe probe = {},
               bool async = false) {
  const int64_t W = plan.worldSize;
  const int64_t gas = plan.gradientAccumulationSteps;
  TrainRun run;
  run.params.resize(size_t(W));
  run.losses.assign(STEPS, 0.0);
  std::vector<std::vector<double>> losses(size_t(W),
                                          std::vector<double>(STEPS, 0.0));
  test::ThreadGroup group(W, async);
  auto body = [&](int64_t rank) {
    runtime::LoadOptions options;
    options.weightsPath = weights;
    options.communicator =
        W == 1 ? runtime::createLocalCommunicator() : group.member(rank);
    Engine engine = Engine::fromPlan(plan, "zero.json", ".", options);
    plan::CommVolume before = options.communicator->volume();
    for (int64_t step = 0; step < STEPS; ++step) {
      StepReport report;
      for (int64_t micro = 0; micro < gas; ++micro) {
        const Batch &b = data[size_t(step)][size_t(micro)];
        losses[size_t(rank)][size_t(step)] +=
            engine
                .forward({b.x.narrow(0, rank * ROWS, ROWS),
                          b.t.narrow(0, rank * ROWS, ROWS)})[0]
                .item<double>();
        engine.backward();
        if (probe)
          probe(engine, rank, step, micro);
        report = engine.step();
      }
      EXPECT_TRUE(report.updated);
      if (rank == 0)
        run.reports.push_back(report);
    }
    plan::CommVolume volume = options.communicator->volume() - before;
    runtime::MemoryStats memory = engine.trainMemory();
    // Whole parameters: at stage 3 a collective of every rank.
    runtime::NamedTensors whole = engine.gatherState();
    for (const std::string &name : kParams)
      for (const auto &[key, tensor] : whole)
        if (key == name)
          run.params[size_t(rank)].push_back(tensor.clone());
    if (rank == 0) {
      run.volume = volume;
      run.memory = memory;
      run.overlap = engine.overlap();
    }
  };
  if (W == 1)
    body(0);
  else
    group.run(body);
  for (int64_t step = 0; step < STEPS; ++step)
    for (int64_t rank = 0; rank < W; ++rank)
      run.losses[size_t(step)] +=
          losses[size_t(rank)][size_t(step)] / double(W * gas);
  run.log = group.log();
  return run;
}

/// One rank over the whole batch: autograd, DeepSpeed's rules (GAS
/// averaging, a zero gradient for the unused parameter, clipping), and the
/// torch::optim optimizer `make` builds.
struct Reference {
  std::vector<at::Tensor> params;
  std::vector<double> norms, losses;
};

using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(
    std::vector<at::Tensor>)>;

Reference reference(const std::string &weights,
                    const std::vector<std::vector<Batch>> &data,
                    const MakeOptimizer &make, double clip,
                    const std::function<double(int64_t)> &lr = {}) {
  const double gas = double(data[0].size());
  runtime::NamedTensors loaded = runtime::readSafetensors(weights);
  std::map<std::string, at::Tensor> byName(loaded.begin(), loaded.end());
  Reference ref;
  for (const std::string &name : kParams)
    ref.params.push_back(byName.at(name).clone().requires_grad_(true));
  std::unique_ptr<torch::optim::Optimizer> optimizer = make(ref.params);
  for (int64_t step = 0; step < STEPS; ++step) {
    double loss = 0.0;
    for (const Batch &b : data[size_t(step)]) {
      at::Tensor l = torch::mse_loss(
          torch::linear(b.x, ref.params[0], ref.params[1]), b.t);
      loss += l.item<double>();
      (l / gas).backward();
    }
    ref.params[2].mutable_grad() = torch::zeros_like(ref.params[2]);
    ref.norms.push_back(
        torch::nn::utils::clip_grad_norm_(ref.params, clip > 0 ? clip : 1e30));
    if (lr)
      for (auto &group : optimizer->param_groups())
        group.options().set_lr(lr(step));
    optimizer->step();
    optimizer->zero_grad();
    ref.losses.push_back(loss / gas);
  }
  return ref;
}

Reference adamwReference(const std::string &weights,
                         const std::vector<std::vector<Batch>> &data) {
  return reference(
      weights, data,
      [](std::vector<at::Tensor> params) {
        return std::make_unique<torch::optim::AdamW>(
            params, torch::optim::AdamWOptions(0.01).weight_decay(0.1));
      },
      1.0);
}

/// |ours - ref| <= 1e-6 |ref| + 1e-7, elementwise.
void expectClose(const at::Tensor &ours, const at::Tensor &ref,
                 const std::string &what) {
  at::Tensor expected = ref.detach();
  double worst =
      ((ours - expected).abs() - 1e-6 * expected.abs()).max().item<double>();
  if (std::getenv("DS_TEST_PRINT_ERRORS"))
    std::printf("%s: max |ours - ref| = %g (max |ref| %g)\n", what.c_str(),
                (ours - expected).abs().max().item<double>(),
                expected.abs().max().item<double>());
  EXPECT_LE(worst, 1e-7) << what << "\nours " << ours << "\nreference "
                         << expected;
}

void expectMatches(const TrainRun &run, const Reference &ref) {
  for (size_t step = 0; step < size_t(STEPS); ++step) {
    SCOPED_TRACE("step " + std::to_string(step + 1));
    EXPECT_NEAR(run.losses[step], ref.losses[step],
                1e-6 * std::abs(ref.losses[step]));
    EXPECT_NEAR(run.reports[step].gradNorm(), ref.norms[step],
                1e-6 * ref.norms[step]);
  }
  for (size_t rank = 0; rank < run.params.size(); ++rank)
    for (size_t k = 0; k < kParams.size(); ++k) {
      expectClose(run.params[rank][k], ref.params[k],
                  "rank " + std::to_string(rank) + " " + kParams[k]);
      // Same reduced gradients, same update (stage 0), or the same
      // gathered shards (stages 1-2): the ranks agree bitwise.
      EXPECT_TRUE(run.params[rank][k].equal(run.params[0][k]))
          << "rank " << rank << " " << kParams[k];
    }
}

size_t count(const std::vector<std::string> &log, const std::string &prefix) {
  return size_t(std::count_if(log.begin(), log.end(), [&](const auto &line) {
    return line.rfind(prefix, 0) == 0;
  }));
}

} // namespace

TEST(RuntimeZeroTest, EveryStageAndWorldSizeMatchesOneRankOverTheWholeBatch) {
  TempDir dir;
  std::string weights = writeWeights(dir);
  for (int64_t W : {1, 2, 4}) {
    std::vector<std::vector<Batch>> data = makeData(W);
    Reference ref = adamwReference(weights, data);
    std::vector<std::vector<at::Tensor>> byStage;
    for (int64_t stage : {0, 1, 2}) {
      SCOPED_TRACE("W = " + std::to_string(W) + ", stage " +
                   std::to_string(stage));
      plan::Plan plan = zeroPlan(W, stage);
      TrainRun run = train(plan, weights, data);
      expectMatches(run, ref);
      byStage.push_back(run.params[0]);
      // Runs of the same stage and W are bitwise equal.
      TrainRun again = train(plan, weights, data);
      for (size_t k = 0; k < kParams.size(); ++k)
        EXPECT_TRUE(again.params[0][k].equal(run.params[0][k])) << kParams[k];
    }
    // The stages agree with each other within the same bound.
    for (size_t stage = 1; stage < byStage.size(); ++stage)
      for (size_t k = 0; k < kParams.size(); ++k)
        expectClose(byStage[stage][k], byStage[0][k],
                    "stage " + std::to_string(stage) + " vs 0: " + kParams[k]);
  }
}

TEST(RuntimeZeroTest, OtherOptimizersAndSchedulesOnShards) {
  TempDir dir;
  std::string weights = writeWeights(dir);
  constexpr int64_t W = 2;
  std::vector<std::vector<Batch>> data = makeData(W);

  // torch.optim.Adam (L2 decay added to the gradient), clipping at 0.5.
  Reference adam = reference(
      weights, data,
      [](std::vector<at::Tensor> params) {
        return std::make_unique<torch::optim::Adam>(
            params, torch::optim::AdamOptions(0.02).weight_decay(0.05));
      },
      0.5);
  // SGD with momentum, no clipping, and a linear warmup of the LR.
  plan::ordered_json scheduler = {
      {"type", "WarmupLR"},      {"warmup_min_lr", 0.01},
      {"warmup_max_lr", 0.1},    {"warmup_num_steps", 3},
      {"warmup_type", "linear"}, {"total_num_steps", nullptr},
      {"warmup_min_ratio", 0.0}, {"cos_min_ratio", 0.0001}};
  std::vector<double> lrs = {0.01, 0.01, 0.01 + 0.09 / 3};
  Reference sgd = reference(
      weights, data,
      [](std::vector<at::Tensor> params) {
        return std::make_unique<torch::optim::SGD>(
            params, torch::optim::SGDOptions(0.1).momentum(0.9));
      },
      0.0, [&](int64_t step) { return lrs[size_t(step)]; });
  for (int64_t stage : {0, 1, 2}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    expectMatches(train(zeroPlan(W, stage,
                                 {{"type", "adam"},
                                  {"lr", 0.02},
                                  {"weight_decay", 0.05},
                                  {"gradient_clipping", 0.5}}),
                        weights, data),
                  adam);
    TrainRun run = train(zeroPlan(W, stage,
                                  {{"type", "sgd"},
                                   {"lr", 0.1},
                                   {"momentum", 0.9},
                                   {"weight_decay", 0.0},
                                   {"gradient_clipping", 0.0},
                                   {"scheduler", scheduler}}),
                         weights, data);
    expectMatches(run, sgd);
    for (size_t step = 0; step < size_t(STEPS); ++step)
      EXPECT_DOUBLE_EQ(run.reports[step].engines[0].lr, lrs[step]);
  }
}

TEST(RuntimeZeroTest, ShardedStagesReduceScatterAndAllGather) {
  TempDir dir;
  std::string weights = writeWeights(dir);
  constexpr int64_t W = 2;
  std::vector<std::vector<Batch>> data = makeData(W);
  // 17 elements, 3 of padding after the parameters: buckets [0, 6),
  // [6, 12), [12, 18), [18, 20).
  for (int64_t stage : {0, 1, 2}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    TrainRun run = train(zeroPlan(W, stage), weights, data);
    const std::vector<std::string> &log = run.log;
    EXPECT_EQ(count(log, "broadcast"), 3u); // At load.
    if (stage == 0) {
      EXPECT_EQ(count(log, "allReduce avg 6"), size_t(3 * STEPS));
      EXPECT_EQ(count(log, "allReduce avg 2"), size_t(STEPS));
      EXPECT_EQ(count(log, "reduceScatter") + count(log, "allGather"), 0u);
      continue;
    }
    // Stage 1 reduces at the boundary, stage 2 in every micro-step.
    size_t reductions = stage == 1 ? STEPS : STEPS * GAS;
    EXPECT_EQ(count(log, "reduceScatter avg 6"), 3 * reductions);
    EXPECT_EQ(count(log, "reduceScatter avg 2"), reductions);
    EXPECT_EQ(count(log, "allGather 3"), size_t(3 * STEPS)); // Blocks.
    EXPECT_EQ(count(log, "allGather 1"), size_t(STEPS));
    // The only all-reduce: the global norm's scalar, once per step.
    EXPECT_EQ(count(log, "allReduce"), size_t(STEPS));
    EXPECT_EQ(count(log, "allReduce sum 1"), size_t(STEPS));
  }
}

TEST(RuntimeZeroTest, MeasuredMemoryAndTrafficAreThePrediction) {
  TempDir dir;
  std::string weights = writeWeights(dir);
  for (int64_t W : {1, 2, 4}) {
    std::vector<std::vector<Batch>> data = makeData(W);
    for (int64_t stage : {0, 1, 2}) {
      SCOPED_TRACE("W = " + std::to_string(W) + ", stage " +
                   std::to_string(stage));
      plan::Plan plan = zeroPlan(W, stage);
      plan::Report report = plan::predictReport(plan);
      EXPECT_EQ(report.zeroStage, stage);
      const plan::RankReport &predicted = report.ranks[0];
      TrainRun run = train(plan, weights, data);
      const runtime::MemoryStats &memory = run.memory;
      EXPECT_EQ(memory.parameterBytes, predicted.paramBytes);
      EXPECT_EQ(memory.bufferBytes, predicted.bufferBytes);
      EXPECT_EQ(memory.gradientBytes, predicted.gradBytes);
      EXPECT_EQ(memory.optimizerBytes, predicted.optimizerStateBytes);
      EXPECT_EQ(memory.peakBytes, predicted.activationPeakBytes);
      EXPECT_EQ(memory.transientBytes, 0); // Between steps.
      EXPECT_EQ(memory.transientPeakBytes, predicted.transientBytes);
      int64_t measuredPeak = memory.jointPeakBytes + memory.parameterBytes +
                             memory.bufferBytes + memory.gradientBytes +
                             memory.optimizerBytes;
      EXPECT_LE(measuredPeak, predicted.peakBytes);
      // Stage 2's bound assumes its buffers exist at the activations' peak;
      // here they come later (the first grad op follows the peak at
      // mse_loss_backward). Stage 1's shard exists when no value does.
      if (stage < 2) {
        EXPECT_EQ(measuredPeak, predicted.peakBytes);
      }

      // The paper's numbers for this fp32 AdamW (Psi = 20 elements with
      // padding; the flat buffers' padding counts, and stage 0 keeps the
      // 17 parameters' own tensors).
      const int64_t Psi = 20;
      int64_t state =
          memory.parameterBytes + memory.gradientBytes + memory.optimizerBytes;
      if (stage == 0) {
        EXPECT_EQ(state, 4 * 17 + 12 * Psi);
      } else if (stage == 1) {
        EXPECT_EQ(state, 8 * Psi + 8 * Psi / W);
      } else {
        EXPECT_EQ(state, 4 * Psi + 12 * Psi / W);
      }

      // Traffic per optimizer step.
      plan::CommVolume perStep = run.volume;
      for (int64_t *counter : {&perStep.allReduce, &perStep.reduceScatter,
                               &perStep.allGather, &perStep.broadcast})
        *counter /= STEPS;
      EXPECT_EQ(perStep.allReduce, predicted.comm.allReduce);
      EXPECT_EQ(perStep.reduceScatter, predicted.comm.reduceScatter);
      EXPECT_EQ(perStep.allGather, predicted.comm.allGather);
      EXPECT_EQ(perStep.broadcast, 0);
      if (W == 1) {
        EXPECT_EQ(perStep.total(), 0);
      } else if (stage == 0) {
        EXPECT_EQ(perStep.total(), 2 * Psi);
      } else if (stage == 1) {
        EXPECT_EQ(perStep.total(), 2 * Psi + 2);
      } else { // GAS = 2: (g + 1) Psi.
        EXPECT_EQ(perStep.total(), 3 * Psi + 2);
      }
    }
  }
}

TEST(RuntimeZeroTest, ParametersLiveInOneFlatBufferWithZeroPadding) {
  TempDir dir;
  std::string weights = writeWeights(dir);
  constexpr int64_t W = 2;
  std::vector<std::vector<Batch>> data = makeData(W);
  for (int64_t stage : {1, 2}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    test::ThreadGroup group(W);
    group.run([&](int64_t rank) {
      runtime::LoadOptions options;
      options.weightsPath = weights;
      options.communicator = group.member(rank);
      Engine engine =
          Engine::fromPlan(zeroPlan(W, stage), "zero.json", ".", options);
      // One storage: weight at 0, bias at 13, extra at 17 (a padding
      // element after each), 20 elements.
      const at::Tensor &weight = param(engine, "fc.weight");
      for (const std::string &name : kParams)
        EXPECT_TRUE(param(engine, name).is_alias_of(weight)) << name;
      EXPECT_EQ(param(engine, "fc.bias").storage_offset(), 13);
      EXPECT_EQ(param(engine, "extra.scale").storage_offset(), 17);
      at::Tensor flat = at::empty({0}).set_(weight.storage(), 0, {20});
      // The eval program reads the same storage (a state op is a view).
      const Batch &b = data[0][0];
      at::Tensor x = b.x.narrow(0, rank * ROWS, ROWS);
      at::Tensor t = b.t.narrow(0, rank * ROWS, ROWS);
      for (int64_t step = 0; step < STEPS; ++step)
        for (int64_t micro = 0; micro < GAS; ++micro) {
          engine.forward({x, t});
          engine.backward();
          engine.step();
        }
      for (int64_t padding : {12, 16, 19})
        EXPECT_EQ(flat[padding].item<float>(), 0.0f) << padding;
      at::Tensor eval = engine.forwardEval({x, t})[0];
      EXPECT_TRUE(eval.equal(
          torch::mse_loss(torch::linear(x, flat.narrow(0, 0, 12).view({3, 4}),
                                        flat.narrow(0, 13, 3)),
                          t)));
      // Loading weights again copies into the flat buffer: every holder
      // sees them, the views stay.
      engine.state().loadSafetensors(weights);
      EXPECT_TRUE(param(engine, "fc.weight").is_alias_of(flat));
      runtime::NamedTensors loaded = runtime::readSafetensors(weights);
      std::map<std::string, at::Tensor> byName(loaded.begin(), loaded.end());
      EXPECT_TRUE(
          flat.narrow(0, 0, 12).view({3, 4}).equal(byName.at("fc.weight")));
      // What --save-params writes.
      runtime::NamedTensors named = engine.state().named();
      EXPECT_EQ(named[0].first, "fc.weight");
      EXPECT_TRUE(named[0].second.equal(byName.at("fc.weight")));
      // The optimizer's state is this rank's shard: half of each bucket.
      const runtime::Optimizer *optimizer = engine.optimizer("model");
      ASSERT_NE(optimizer, nullptr);
      EXPECT_EQ(optimizer->expAvg().numel(), 10);
      EXPECT_EQ(optimizer->expAvgSq().numel(), 10);
    });
  }
}

TEST(RuntimeZeroTest, GradientBuffersLiveAsTheStageSays) {
  TempDir dir;
  std::string weights = writeWeights(dir);
  constexpr int64_t W = 2;
  std::vector<std::vector<Batch>> data = makeData(W);
  for (int64_t stage : {0, 1, 2}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    train(zeroPlan(W, stage), weights, data,
          [&](Engine &engine, int64_t, int64_t, int64_t) {
            at::Tensor grad = engine.gradient("fc.weight");
            runtime::MemoryStats memory = engine.trainMemory();
            if (stage == 2) {
              // Released with the backward's last reduce-scatter; the
              // shard (10 elements) holds the reduced sum.
              EXPECT_FALSE(grad.defined());
              EXPECT_EQ(memory.transientBytes, 0);
              EXPECT_EQ(memory.gradientBytes, 10 * 4);
              // Full buffer + receive buffer during the backward.
              EXPECT_EQ(memory.transientPeakBytes, (20 + 10) * 4);
              return;
            }
            // Stages 0-1: this rank's own accumulation, before reduction.
            ASSERT_TRUE(grad.defined());
            EXPECT_GT(grad.abs().sum().item<double>(), 0.0);
            EXPECT_EQ(memory.gradientBytes, 20 * 4);
            EXPECT_EQ(memory.transientBytes, 0);
          });
  }
}

//===----------------------------------------------------------------------===//
// ZeRO stage 3: sharded parameters
//===----------------------------------------------------------------------===//

namespace {

test::Stage3Options stage3Options(int64_t persistentNumel, bool keep) {
  test::Stage3Options options;
  options.persistentNumel = persistentNumel;
  options.keepForBackward = keep;
  return options;
}

/// Elements of the partition's sharded and persistent buckets.
std::pair<int64_t, int64_t> shardedAndPersistent(const plan::Plan &plan) {
  const plan::PartitionDesc &partition = *plan.engines[0].partition;
  int64_t sharded = 0, persistent = 0;
  for (size_t b = 0; b < partition.buckets.size(); ++b)
    (partition.shardsParameters(b) ? sharded : persistent) +=
        partition.buckets[b].numel;
  return {sharded, persistent};
}

} // namespace

TEST(RuntimeZeroTest, StageThreeMatchesOneRankOverTheWholeBatch) {
  TempDir dir;
  std::string weights = writeWeights(dir);
  for (int64_t W : {1, 2, 4}) {
    std::vector<std::vector<Batch>> data = makeData(W);
    Reference ref = adamwReference(weights, data);
    TrainRun stage0 = train(zeroPlan(W, 0), weights, data);
    // Every bucket sharded, re-gathered in the backward; the small
    // parameters persistent; every bucket kept from forward to backward.
    for (const test::Stage3Options &options :
         {stage3Options(0, false), stage3Options(3, false),
          stage3Options(0, true)}) {
      SCOPED_TRACE("W = " + std::to_string(W) + ", persistent <= " +
                   std::to_string(options.persistentNumel) +
                   (options.keepForBackward ? ", kept for the backward" : ""));
      plan::Plan plan = stage3Plan(W, options);
      TrainRun run = train(plan, weights, data, {}, /*async=*/true);
      expectMatches(run, ref);
      for (size_t k = 0; k < kParams.size(); ++k)
        expectClose(run.params[0][k], stage0.params[0][k],
                    "stage 3 vs 0: " + kParams[k]);
      // Bitwise reproducible.
      TrainRun again = train(plan, weights, data, {}, /*async=*/true);
      for (size_t k = 0; k < kParams.size(); ++k)
        EXPECT_TRUE(again.params[0][k].equal(run.params[0][k])) << kParams[k];
    }
  }
  // Other optimizers on the blocks: SGD with momentum, Adam with clipping.
  constexpr int64_t W = 2;
  std::vector<std::vector<Batch>> data = makeData(W);
  Reference adam = reference(
      weights, data,
      [](std::vector<at::Tensor> params) {
        return std::make_unique<torch::optim::Adam>(
            params, torch::optim::AdamOptions(0.02).weight_decay(0.05));
      },
      0.5);
  expectMatches(train(stage3Plan(W, stage3Options(3, false), GAS,
                                 {{"type", "adam"},
                                  {"lr", 0.02},
                                  {"weight_decay", 0.05},
                                  {"gradient_clipping", 0.5}}),
                      weights, data, {}, true),
                adam);
  Reference sgd = reference(
      weights, data,
      [](std::vector<at::Tensor> params) {
        return std::make_unique<torch::optim::SGD>(
            params, torch::optim::SGDOptions(0.1).momentum(0.9));
      },
      0.0);
  expectMatches(train(stage3Plan(W, stage3Options(0, false), GAS,
                                 {{"type", "sgd"},
                                  {"lr", 0.1},
                                  {"momentum", 0.9},
                                  {"weight_decay", 0.0},
                                  {"gradient_clipping", 0.0}}),
                      weights, data, {}, true),
                sgd);
}

TEST(RuntimeZeroTest, StageThreeMeasuredMemoryAndTrafficAreThePrediction) {
  TempDir dir;
  std::string weights = writeWeights(dir);
  for (int64_t W : {1, 2, 4}) {
    for (int64_t gas : {int64_t(1), GAS}) {
      std::vector<std::vector<Batch>> data = makeData(W, gas);
      for (const test::Stage3Options &options :
           {stage3Options(0, false), stage3Options(3, false),
            stage3Options(0, true)}) {
        SCOPED_TRACE(
            "W = " + std::to_string(W) + ", GAS " + std::to_string(gas) +
            ", persistent <= " + std::to_string(options.persistentNumel) +
            (options.keepForBackward ? ", kept" : ""));
        plan::Plan plan = stage3Plan(W, options, gas);
        plan::Report report = plan::predictReport(plan);
        EXPECT_EQ(report.zeroStage, 3);
        const plan::RankReport &predicted = report.ranks[0];
        TrainRun run = train(plan, weights, data, {}, /*async=*/true);
        const runtime::MemoryStats &memory = run.memory;
        EXPECT_EQ(memory.parameterBytes, predicted.paramBytes);
        EXPECT_EQ(memory.bufferBytes, predicted.bufferBytes);
        EXPECT_EQ(memory.gradientBytes, predicted.gradBytes);
        EXPECT_EQ(memory.optimizerBytes, predicted.optimizerStateBytes);
        EXPECT_EQ(memory.peakBytes, predicted.activationPeakBytes);
        EXPECT_EQ(memory.transientBytes, 0); // Between steps.
        // The walk of gathers, releases and gradient buffers is exact.
        EXPECT_EQ(memory.transientPeakBytes, predicted.transientBytes);
        EXPECT_EQ(memory.jointPeakBytes + memory.parameterBytes +
                      memory.bufferBytes + memory.gradientBytes +
                      memory.optimizerBytes,
                  predicted.peakBytes);

        // ZeRO's numbers: Psi elements (padding included), fp32 AdamW.
        auto [sharded, persistent] = shardedAndPersistent(plan);
        const int64_t Psi = sharded + persistent;
        EXPECT_EQ(memory.parameterBytes, 4 * (sharded / W + persistent));
        EXPECT_EQ(memory.gradientBytes, 4 * Psi / W);
        EXPECT_EQ(memory.optimizerBytes, 8 * Psi / W);
        if (persistent == 0) {
          EXPECT_EQ(memory.parameterBytes + memory.gradientBytes +
                        memory.optimizerBytes,
                    16 * Psi / W);
        }

        // Traffic per optimizer step, measured = predicted.
        plan::CommVolume perStep = run.volume;
        for (int64_t *counter : {&perStep.allReduce, &perStep.reduceScatter,
                                 &perStep.allGather, &perStep.broadcast})
          *counter /= STEPS;
        EXPECT_EQ(perStep.allReduce, predicted.comm.allReduce);
        EXPECT_EQ(perStep.reduceScatter, predicted.comm.reduceScatter);
        EXPECT_EQ(perStep.allGather, predicted.comm.allGather);
        EXPECT_EQ(perStep.broadcast, 0);
        if (W == 1) {
          EXPECT_EQ(perStep.total(), 0);
          continue;
        }
        // The sharded buckets gathered in every micro-step's forward and
        // (reuse distance 0) again in its backward, the persistent ones once
        // per step; every bucket reduce-scattered per micro-step; the
        // norm's scalar. Without persistent buckets, at GAS 1: 3 Psi (+2).
        int64_t gathers = options.keepForBackward ? 1 : 2;
        EXPECT_EQ(perStep.allGather, gathers * gas * sharded + persistent);
        EXPECT_EQ(perStep.reduceScatter, gas * Psi);
        EXPECT_EQ(perStep.allReduce, 2);
        if (gas == 1 && persistent == 0 && !options.keepForBackward) {
          EXPECT_EQ(perStep.total(), 3 * Psi + 2);
        }

        // Every collective was timed: per micro-step the gathers and
        // reduce-scatters, per step the persistent gathers and the norm.
        const plan::OverlapReport &overlap = run.overlap;
        int64_t micro = STEPS * gas;
        int64_t shardedBuckets = 0, persistentBuckets = 0;
        for (size_t b = 0; b < plan.engines[0].partition->buckets.size(); ++b)
          ++(plan.engines[0].partition->shardsParameters(b)
                 ? shardedBuckets
                 : persistentBuckets);
        EXPECT_EQ(overlap.allGather.count,
                  micro * gathers * shardedBuckets + STEPS * persistentBuckets);
        EXPECT_EQ(overlap.reduceScatter.count,
                  micro * int64_t(plan.engines[0].partition->buckets.size()));
        EXPECT_EQ(overlap.allReduce.count, STEPS);
        EXPECT_GE(overlap.total().collectiveSeconds, 0.0);
        EXPECT_GE(overlap.total().waitSeconds, 0.0);
        EXPECT_GT(overlap.trainSeconds, 0.0);
      }
    }
  }
}

TEST(RuntimeZeroTest, StageThreeRanksHoldOnlyTheirBlocks) {
  TempDir dir;
  std::string weights = writeWeights(dir);
  runtime::NamedTensors loaded = runtime::readSafetensors(weights);
  std::map<std::string, at::Tensor> byName(loaded.begin(), loaded.end());
  constexpr int64_t W = 2;
  std::vector<std::vector<Batch>> data = makeData(W);
  // fc.weight sharded (bucket 0: 14 elements, 7 per rank); fc.bias and
  // extra.scale persistent (bucket 1: 8 elements).
  plan::Plan plan = stage3Plan(W, stage3Options(3, false));
  test::ThreadGroup group(W, /*async=*/true);
  group.run([&](int64_t rank) {
    runtime::LoadOptions options;
    options.weightsPath = weights;
    options.communicator = group.member(rank);
    Engine engine = Engine::fromPlan(plan, "zero.json", ".", options);
    runtime::StateStore &state = engine.state();
    const int64_t weight = state.indexOf("fc.weight");
    // Between programs a sharded parameter exists only as this rank's
    // block: reading it is an error that names it and its bucket.
    EXPECT_TRUE(state.sharded(weight));
    EXPECT_FALSE(state.tensor(weight).defined());
    EXPECT_THROW_WITH(state.read(weight), runtime::RuntimeError,
                      "parameter \"fc.weight\" is not gathered: it lies in "
                      "bucket 0 of engine \"model\", which ZeRO stage 3 "
                      "shards across the ranks");
    EXPECT_THROW_WITH(state.named(), runtime::RuntimeError,
                      "Engine::gatherState()");
    // Persistent parameters are whole, views of their bucket.
    const at::Tensor &bias = param(engine, "fc.bias");
    ASSERT_TRUE(bias.defined());
    EXPECT_TRUE(bias.equal(byName.at("fc.bias")));
    EXPECT_TRUE(param(engine, "extra.scale").is_alias_of(bias));
    // Held: 7 of the 14 sharded elements, the 8 persistent ones.
    EXPECT_EQ(engine.trainMemory().parameterBytes, 4 * (7 + 8));
    // gatherState() gathers whole parameters (a collective).
    runtime::NamedTensors whole = engine.gatherState();
    ASSERT_EQ(whole.size(), 3u);
    for (const auto &[name, tensor] : whole)
      EXPECT_TRUE(tensor.equal(byName.at(name))) << name;
    EXPECT_FALSE(state.tensor(weight).defined()); // Still sharded.

    const Batch &b = data[0][0];
    at::Tensor x = b.x.narrow(0, rank * ROWS, ROWS);
    at::Tensor t = b.t.narrow(0, rank * ROWS, ROWS);
    for (int64_t step = 0; step < STEPS; ++step)
      for (int64_t micro = 0; micro < GAS; ++micro) {
        engine.forward({x, t});
        // Released at the end of the forward's use.
        EXPECT_FALSE(state.tensor(weight).defined());
        engine.backward();
        EXPECT_EQ(engine.trainMemory().transientBytes, 0);
        engine.step();
      }
    // The eval program gathers what it reads (its own collectives).
    whole = engine.gatherState();
    std::map<std::string, at::Tensor> now(whole.begin(), whole.end());
    at::Tensor eval = engine.forwardEval({x, t})[0];
    EXPECT_TRUE(eval.equal(torch::mse_loss(
        torch::linear(x, now.at("fc.weight"), now.at("fc.bias")), t)));
    EXPECT_FALSE(state.tensor(weight).defined());
    // The optimizer's state is the shard: half of each bucket.
    EXPECT_EQ(engine.optimizer("model")->expAvg().numel(), 7 + 4);
    // Loading weights again keeps this rank's block of them.
    state.loadSafetensors(weights);
    whole = engine.gatherState();
    for (const auto &[name, tensor] : whole)
      EXPECT_TRUE(tensor.equal(byName.at(name))) << name;
  });
  // Rank 0's log: the load's broadcasts, then gatherState's all-gather of
  // bucket 0 (7 elements per rank), then the training's.
  std::vector<std::string> log = group.log();
  ASSERT_GE(log.size(), 4u);
  EXPECT_EQ(log[3], "allGather 7");
}

TEST(RuntimeZeroTest, CollectivesProgressWhileTheCallerComputes) {
  // Rank 0 starts an all-gather and computes; rank 1 starts it later.
  // The collective completes while rank 0 computes (the asynchronous
  // ThreadCommunicator completes it when the last rank arrives, as MPI's
  // communication thread would), so rank 0's wait() returns at once: the
  // timing shows the time in flight, not in wait().
  test::ThreadGroup group(2, /*async=*/true);
  std::vector<plan::OverlapReport> timings(2);
  std::vector<bool> completedWhileComputing(2, false);
  group.run([&](int64_t rank) {
    runtime::TimedCommunicator comm(group.member(rank));
    at::Tensor in = at::full({1 << 16}, double(rank), at::kFloat);
    at::Tensor out = at::empty({2 << 16}, at::kFloat);
    if (rank == 1)
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    runtime::CommHandle handle = comm.allGather(out, in);
    if (rank == 0) {
      at::Tensor a = at::randn({64, 64});
      auto start = std::chrono::steady_clock::now();
      while (!handle.isCompleted() && std::chrono::steady_clock::now() - start <
                                          std::chrono::seconds(30))
        a = at::mm(a, a).tanh(); // Compute.
      completedWhileComputing[0] = handle.isCompleted();
    }
    handle.wait();
    EXPECT_TRUE(out.narrow(0, 0, 1 << 16).eq(0).all().item<bool>());
    EXPECT_TRUE(out.narrow(0, 1 << 16, 1 << 16).eq(1).all().item<bool>());
    timings[size_t(rank)] = comm.timing();
  });
  EXPECT_TRUE(completedWhileComputing[0]);
  const plan::CollectiveTiming &gather = timings[0].allGather;
  EXPECT_EQ(gather.count, 1);
  // In flight until rank 1 arrived (about 30 ms); hardly any of it in
  // wait().
  EXPECT_GT(gather.collectiveSeconds, 0.01);
  EXPECT_LT(gather.waitSeconds, gather.collectiveSeconds / 2);
  EXPECT_EQ(timings[0].total().count, 1);
}

TEST(RuntimeZeroTest, StageThreeEvaluationPlanGathersToo) {
  // A plan without programs.train whose engine is partitioned at stage 3:
  // the ranks still hold only their blocks, and the eval program gathers.
  TempDir dir;
  std::string weights = writeWeights(dir);
  runtime::NamedTensors loaded = runtime::readSafetensors(weights);
  std::map<std::string, at::Tensor> byName(loaded.begin(), loaded.end());
  constexpr int64_t W = 2;
  plan::Plan plan = stage3Plan(W, stage3Options(0, false));
  plan.programs.erase("train");
  plan.programs.erase("step");
  plan.engines[0].optimizer.reset(); // Not needed to evaluate.
  std::vector<std::vector<Batch>> data = makeData(W);
  test::ThreadGroup group(W, /*async=*/true);
  group.run([&](int64_t rank) {
    runtime::LoadOptions options;
    options.weightsPath = weights;
    options.communicator = group.member(rank);
    Engine engine = Engine::fromPlan(plan, "eval.json", ".", options);
    EXPECT_FALSE(engine.canTrain());
    EXPECT_FALSE(param(engine, "fc.weight").defined());
    const Batch &b = data[0][0];
    at::Tensor x = b.x.narrow(0, rank * ROWS, ROWS);
    at::Tensor t = b.t.narrow(0, rank * ROWS, ROWS);
    at::Tensor loss = engine.forwardEval({x, t})[0];
    EXPECT_TRUE(loss.equal(torch::mse_loss(
        torch::linear(x, byName.at("fc.weight"), byName.at("fc.bias")), t)));
    // Both buckets sharded: 7 + 4 of 14 + 8 elements held.
    EXPECT_EQ(engine.memory().parameterBytes, 4 * (7 + 4));
    for (const auto &[name, tensor] : engine.gatherState())
      EXPECT_TRUE(tensor.equal(byName.at(name))) << name;
  });
}
