//===- PrecisionTest.cpp - bf16 / fp16 training with an fp32 master -------===//
//
// Native mixed precision (docs/runtime.md, "Mixed precision") on the
// hand-written train plan (plans/linear_mse_train.json), partitioned by
// test::partitionEngine at ZeRO stages 0-3 and then turned bf16 / fp16 the
// way the compiler writes an engine whose ops compute in float32 (ops
// without a CPU kernel in the low dtype: none in LibTorch 2.15, or named by
// -ds-assign-precision's no-kernel-ops): every parameter stored in the low
// dtype, each `state` op followed by an aten::to.dtype to float32, each
// gradient cast to the low dtype before its `grad` op, and for fp16 a
// `loss_scale` op whose value multiplies the backward seed. (Plans that
// compute in the low dtype, as the compiler writes them for LibTorch 2.15,
// are held to LibTorch by test/mpi/precision_check.py.) The runtime must
// keep a float32 master of the rank's shard, update it, and round it into
// the parameters; fp16 overflows skip the step on every rank.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "ThreadCommunicator.h"

#include "ds/Plan/PlanFormat.h"
#include "ds/Plan/Report.h"
#include "ds/Runtime/Checkpoint.h"
#include "ds/Runtime/Communicator.h"
#include "ds/Runtime/Engine.h"
#include "ds/Runtime/LossScaler.h"
#include "ds/Runtime/Optimizer.h"
#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/RuntimeError.h"
#include "ds/TensorIO/Safetensors.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <tuple>

using namespace ds;
using ds::plan::ordered_json;
using ds::runtime::Engine;
using ds::runtime::RuntimeError;
using ds::runtime::StepReport;
using ds::test::TempDir;

namespace {

constexpr int64_t GAS = 2, ROWS = 4;
const std::vector<std::string> kParams = {"fc.weight", "fc.bias",
                                          "extra.scale"};

/// The hand-written train plan with GAS 2 and `optimizer` changes; with
/// `withZ`, a third (batched, float32 [4, 2]) input z whose column sums are
/// extra.scale's gradient (so that a test controls one parameter's
/// gradient per rank).
ordered_json trainJson(const ordered_json &optimizer = {}, bool withZ = false) {
  ordered_json json = test::planJson("linear_mse_train.json");
  json["gradient_accumulation_steps"] = GAS;
  json["engines"][0]["batch"]["gradient_accumulation_steps"] = GAS;
  json["engines"][0]["optimizer"] = test::optimizerJson(optimizer);
  ordered_json &train = json["programs"]["train"];
  train["body"][6]["value"] = 1.0 / double(GAS);
  if (!withZ)
    return json;
  json["inputs"].push_back({{"name", "z"},
                            {"dtype", "float32"},
                            {"shape", {4, 2}},
                            {"batched", true}});
  ordered_json &values = train["values"];
  const int64_t z = int64_t(values.size());
  values.push_back(
      {{"id", z}, {"type", "tensor"}, {"dtype", "float32"}, {"shape", {4, 2}}});
  values.push_back({{"id", z + 1}, {"type", "int"}});
  values.push_back({{"id", z + 2}, {"type", "list"}, {"elem", "int"}});
  values.push_back({{"id", z + 3},
                    {"type", "tensor"},
                    {"dtype", "float32"},
                    {"shape", {2}}});
  ordered_json &body = train["body"];
  ordered_json input = {{"kind", "input"}, {"index", 2}, {"result", z}};
  body.insert(body.begin(), input);
  train["backward_start"] = train["backward_start"].get<int64_t>() + 1;
  body.push_back({{"kind", "constant"}, {"result", z + 1}, {"value", 0}});
  body.push_back({{"kind", "list"},
                  {"args", {z + 1}},
                  {"result", z + 2},
                  {"free", {z + 1}}});
  body.push_back({{"kind", "call"},
                  {"op", "aten::sum.dim_IntList"},
                  {"args", {z, z + 2}},
                  {"results", {z + 3}},
                  {"module", "extra"},
                  {"module_class", "__main__.Unused"},
                  {"loc", ""},
                  {"free", {z, z + 2}}});
  body.push_back({{"kind", "grad"},
                  {"name", "extra.scale"},
                  {"arg", z + 3},
                  {"free", {z + 3}}});
  return json;
}

int64_t scalarTypeCode(const std::string &dtype) {
  return dtype == "bfloat16" ? 15 : dtype == "float16" ? 5 : 6;
}

struct Precision {
  /// "bf16" or "fp16"; "autocast": fp16 autocast (float32 state, no casts
  /// here, the loss scale on the seed).
  std::string mode = "bf16";
  /// Empty: the parameters' dtype.
  std::string gradAccum;
  /// fp16: the loss scaler (plan JSON).
  ordered_json scaler;
};

/// `json` (a validated fp32 plan as toJson writes it) as a native `p.mode`
/// engine (see the file comment).
ordered_json lowPrecision(ordered_json json, const Precision &p) {
  const bool native = p.mode != "autocast";
  const std::string low = p.mode == "bf16" ? "bfloat16"
                          : native         ? "float16"
                                           : "float32";
  for (ordered_json &state : json["state"])
    if (state["dtype"] == "float32")
      state["dtype"] = low;
  ordered_json precision = {
      {"mode", p.mode},
      {"param_dtype", low},
      {"master_dtype", "float32"},
      {"grad_accum_dtype", p.gradAccum.empty() ? low : p.gradAccum}};
  if (!native)
    precision["autocast_dtype"] = "float16";
  if (!p.scaler.is_null())
    precision["loss_scaler"] = p.scaler;
  json["engines"][0]["precision"] = precision;

  for (const char *name : {"train", "eval"}) {
    ordered_json &program = json["programs"][name];
    ordered_json &values = program["values"];
    auto newValue = [&](ordered_json desc) {
      int64_t id = int64_t(values.size());
      desc["id"] = id;
      values.push_back(desc);
      return id;
    };
    auto cast = [&](ordered_json &out, int64_t from, int64_t to,
                    const std::string &dtype, bool freeFrom) {
      int64_t code = newValue({{"type", "int"}});
      out.push_back({{"kind", "constant"},
                     {"result", code},
                     {"value", scalarTypeCode(dtype)}});
      ordered_json free = ordered_json::array({code});
      if (freeFrom)
        free.push_back(from);
      out.push_back({{"kind", "call"},
                     {"op", "aten::to.dtype"},
                     {"args", {from, code}},
                     {"results", {to}},
                     {"module", ""},
                     {"module_class", ""},
                     {"loc", ""},
                     {"free", free}});
    };
    const bool train = std::string(name) == "train";
    const int64_t start = train ? program["backward_start"].get<int64_t>() : -1;
    int64_t newStart = -1, scale = -1;
    const ordered_json old = program["body"];
    ordered_json body = ordered_json::array();
    for (size_t i = 0; i < old.size(); ++i) {
      ordered_json op = old[i];
      if (int64_t(i) == start) {
        newStart = int64_t(body.size());
        if (!p.scaler.is_null()) {
          scale = newValue({{"type", "tensor"},
                            {"dtype", "float32"},
                            {"shape", ordered_json::array()}});
          body.push_back(
              {{"kind", "loss_scale"}, {"engine", "model"}, {"result", scale}});
        }
      }
      if (native && op["kind"] == "state") {
        int64_t result = op["result"];
        ordered_json desc = values[size_t(result)];
        desc["dtype"] = low;
        int64_t stored = newValue(desc);
        op["result"] = stored;
        body.push_back(op);
        cast(body, stored, result, "float32", true);
        continue;
      }
      if (native && op["kind"] == "grad") {
        int64_t arg = op["arg"];
        ordered_json desc = values[size_t(arg)];
        desc["dtype"] = low;
        int64_t rounded = newValue(desc);
        bool freed = false;
        for (const ordered_json &f : op.value("free", ordered_json::array()))
          freed |= f == arg;
        cast(body, arg, rounded, low, freed);
        op["arg"] = rounded;
        op["free"] = {rounded};
        body.push_back(op);
        continue;
      }
      if (scale >= 0 && op["kind"] == "call" &&
          op["op"] == "aten::mse_loss_backward") {
        // The seed times the loss scale.
        int64_t seed = op["args"][0];
        int64_t scaled = newValue(values[size_t(seed)]);
        body.push_back({{"kind", "call"},
                        {"op", "aten::mul.Tensor"},
                        {"args", {seed, scale}},
                        {"results", {scaled}},
                        {"module", ""},
                        {"module_class", ""},
                        {"loc", ""},
                        {"free", {seed, scale}}});
        op["args"][0] = scaled;
        for (ordered_json &f : op["free"])
          if (f == seed)
            f = scaled;
      }
      body.push_back(op);
    }
    program["body"] = body;
    if (train)
      program["backward_start"] = newStart;
  }
  return json;
}

/// The plan on `W` ranks at ZeRO `stage` (buckets of 6, a padding element
/// after each parameter; stage 3 with a backward that reads fc.weight
/// again), native `p`; bucket dtypes from `bucketDtype` when set.
plan::Plan precisionPlan(int64_t W, int64_t stage, const Precision &p,
                         const ordered_json &optimizer = {}, bool withZ = false,
                         std::optional<plan::DType> bucketDtype = {}) {
  ordered_json json = trainJson(optimizer, withZ);
  if (stage == 3)
    json = test::withBackwardWeightRead(json);
  plan::Plan fp32 = test::zeroPlan(json, W, stage, 6, /*gap=*/1);
  plan::Plan plan =
      plan::parsePlan(lowPrecision(plan::toJson(fp32), p), "precision.json");
  if (bucketDtype)
    for (plan::BucketDesc &bucket : plan.engines[0].partition->buckets)
      bucket.dtype = *bucketDtype;
  return plan;
}

struct Batch {
  at::Tensor x, t, z; // The whole batch: W * ROWS rows.
};

std::vector<std::vector<Batch>> makeData(int64_t W, int64_t steps,
                                         bool withZ = false) {
  torch::manual_seed(11);
  std::vector<std::vector<Batch>> data(static_cast<size_t>(steps));
  for (auto &step : data)
    for (int64_t m = 0; m < GAS; ++m)
      step.push_back({torch::randn({W * ROWS, 4}), torch::randn({W * ROWS, 3}),
                      withZ ? torch::randn({W * ROWS, 2}) : at::Tensor()});
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

/// Loads `plan` on each of its ranks (threads) and runs `body`.
void onRanks(const plan::Plan &plan, const std::string &weights,
             const std::function<void(Engine &, int64_t)> &body,
             std::optional<runtime::OptimizerKernel> kernel = std::nullopt) {
  const int64_t W = plan.worldSize;
  test::ThreadGroup group(W);
  auto run = [&](int64_t rank) {
    runtime::LoadOptions options;
    options.weightsPath = weights;
    options.communicator =
        W == 1 ? runtime::createLocalCommunicator() : group.member(rank);
    options.optimizerKernel = kernel;
    Engine engine = Engine::fromPlan(plan, "precision.json", ".", options);
    body(engine, rank);
  };
  if (W == 1)
    run(0);
  else
    group.run(run);
}

/// Probe after each backward: (micro-step).
using Probe = std::function<void(int64_t)>;

/// One optimizer step (GAS micro-steps) on this rank's rows.
StepReport trainStep(Engine &engine, const std::vector<Batch> &micro,
                     int64_t rank, double *loss = nullptr,
                     const Probe &probe = {}) {
  StepReport report;
  for (size_t m = 0; m < micro.size(); ++m) {
    const Batch &b = micro[m];
    std::vector<at::Tensor> inputs = {b.x.narrow(0, rank * ROWS, ROWS),
                                      b.t.narrow(0, rank * ROWS, ROWS)};
    if (b.z.defined())
      inputs.push_back(b.z.narrow(0, rank * ROWS, ROWS));
    double value = engine.forward(inputs)[0].item<double>();
    if (loss)
      *loss += value;
    engine.backward();
    if (probe)
      probe(int64_t(m));
    report = engine.step();
  }
  return report;
}

/// Whole parameters (a collective at stage 3), in kParams order.
std::vector<at::Tensor> wholeParams(const Engine &engine) {
  runtime::NamedTensors named = engine.gatherState();
  std::vector<at::Tensor> result;
  for (const std::string &name : kParams)
    for (const auto &[key, tensor] : named)
      if (key == name)
        result.push_back(tensor.clone());
  return result;
}

/// This rank's shard of the flat parameters, laid out as the master (stage
/// 0: the whole layout). Gathers at stage 3.
at::Tensor parameterShard(const Engine &engine, int64_t rank) {
  const plan::Plan &plan = engine.plan();
  const plan::PartitionDesc &partition = *plan.engines[0].partition;
  std::vector<at::Tensor> whole = wholeParams(engine);
  at::Tensor flat =
      at::zeros({partition.numel}, at::TensorOptions().dtype(whole[0].dtype()));
  for (const plan::FlatParamDesc &param : partition.params)
    for (size_t k = 0; k < kParams.size(); ++k)
      if (kParams[k] == param.name)
        flat.narrow(0, param.offset, whole[k].numel())
            .copy_(whole[k].reshape(-1));
  if (partition.stage == 0)
    return flat;
  std::vector<at::Tensor> blocks;
  for (const plan::BucketDesc &bucket : partition.buckets) {
    int64_t n = bucket.numel / plan.worldSize;
    blocks.push_back(flat.narrow(0, bucket.offset + rank * n, n));
  }
  return at::cat(blocks);
}

ordered_json dynamicScaler(double scale, int64_t window, int64_t hysteresis) {
  return {{"type", "dynamic"},
          {"scale", scale},
          {"scale_window", window},
          {"hysteresis", hysteresis},
          {"consecutive_hysteresis", false},
          {"min_scale", 1.0}};
}

} // namespace

TEST(RuntimePrecisionTest, Bf16TrainsAnFp32MasterAtEveryStage) {
  TempDir dir;
  std::string weights = writeWeights(dir);
  constexpr int64_t STEPS = 3;
  Precision bf16;
  for (int64_t W : {1, 2}) {
    std::vector<std::vector<Batch>> data = makeData(W, STEPS);
    // The fp32 run of the same plan: bf16 lands near it.
    std::vector<at::Tensor> reference;
    onRanks(test::zeroPlan(trainJson(), W, 0, 6, 1), weights,
            [&](Engine &engine, int64_t rank) {
              for (int64_t step = 0; step < STEPS; ++step)
                trainStep(engine, data[size_t(step)], rank);
              if (rank == 0)
                reference = wholeParams(engine);
            });
    for (int64_t stage : {0, 1, 2, 3}) {
      SCOPED_TRACE("W = " + std::to_string(W) + ", stage " +
                   std::to_string(stage));
      plan::Plan plan = precisionPlan(W, stage, bf16);
      std::vector<std::vector<at::Tensor>> finals(static_cast<size_t>(W));
      std::vector<runtime::MemoryStats> memories(static_cast<size_t>(W));
      onRanks(plan, weights, [&](Engine &engine, int64_t rank) {
        const runtime::Optimizer *optimizer = engine.optimizer("model");
        ASSERT_NE(optimizer, nullptr);
        at::Tensor master = engine.masterParameters("model");
        ASSERT_TRUE(master.defined());
        EXPECT_EQ(master.scalar_type(), at::kFloat);
        EXPECT_EQ(optimizer->expAvg().scalar_type(), at::kFloat);
        EXPECT_EQ(optimizer->expAvgSq().scalar_type(), at::kFloat);
        EXPECT_EQ(optimizer->expAvg().numel(), master.numel());
        // Loaded from the fp32 file, rounded to bf16; the master is that.
        EXPECT_TRUE(
            at::equal(parameterShard(engine, rank), master.to(at::kBFloat16)));
        EXPECT_FALSE(engine.lossScale("model"));
        for (int64_t step = 0; step < STEPS; ++step) {
          StepReport report = trainStep(
              engine, data[size_t(step)], rank, nullptr, [&](int64_t) {
                at::Tensor grad = engine.gradient("fc.weight");
                if (stage <= 1) {
                  ASSERT_TRUE(grad.defined());
                  EXPECT_EQ(grad.scalar_type(), at::kBFloat16);
                }
              });
          ASSERT_TRUE(report.updated);
          EXPECT_FALSE(report.skipped());
          EXPECT_EQ(report.engines[0].lossScale, 1.0);
          EXPECT_GT(report.engines[0].gradNorm, 0.0);
          EXPECT_EQ(optimizer->steps(), step + 1);
          // The parameters are the master rounded, bit for bit.
          EXPECT_TRUE(
              at::equal(parameterShard(engine, rank),
                        engine.masterParameters("model").to(at::kBFloat16)));
        }
        finals[size_t(rank)] = wholeParams(engine);
        memories[size_t(rank)] = engine.trainMemory();
      });
      for (size_t k = 0; k < kParams.size(); ++k) {
        EXPECT_EQ(finals[0][k].scalar_type(), at::kBFloat16);
        for (int64_t r = 1; r < W; ++r)
          EXPECT_TRUE(at::equal(finals[0][k], finals[size_t(r)][k]))
              << kParams[k] << ": ranks differ";
        EXPECT_TRUE(at::allclose(finals[0][k].to(at::kFloat), reference[k],
                                 /*rtol=*/0.0, /*atol=*/0.05))
            << kParams[k] << "\n"
            << finals[0][k] << "\n"
            << reference[k];
      }
      // Memory: parameters in bf16, gradients in bf16, the optimizer's
      // state and master in fp32; as predicted.
      const plan::Report report = plan::predictReport(plan);
      const plan::RankReport &predicted = report.ranks[0];
      const runtime::MemoryStats &memory = memories[0];
      EXPECT_EQ(memory.parameterBytes, predicted.paramBytes);
      EXPECT_EQ(memory.gradientBytes, predicted.gradBytes);
      EXPECT_EQ(memory.optimizerBytes, predicted.optimizerStateBytes);
      EXPECT_EQ(memory.transientPeakBytes, predicted.transientBytes);
      const plan::PartitionDesc &partition = *plan.engines[0].partition;
      const int64_t shard = partition.shardNumel(W);
      EXPECT_EQ(memory.optimizerBytes, 3 * 4 * shard); // m, v, master.
      EXPECT_EQ(memory.gradientBytes,
                2 * (stage >= 2 ? shard : partition.numel));
    }
  }
}

TEST(RuntimePrecisionTest, BucketDtypeRoundsTheReduction) {
  // bf16 parameters, float32 gradient buffers, every bucket reduced in
  // bf16: each rank's gradient is rounded to bf16, summed in bf16 (rank
  // order), divided by W in bf16, and cast back to float32.
  TempDir dir;
  std::string weights = writeWeights(dir);
  std::vector<std::vector<Batch>> data = makeData(2, 1);
  Precision p;
  p.gradAccum = "float32";
  for (int64_t stage : {0, 1}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    plan::Plan plan = precisionPlan(2, stage, p, {{"gradient_clipping", 0.0}},
                                    false, plan::DType::BFloat16);
    std::vector<at::Tensor> local(2);
    std::vector<double> norms(2);
    onRanks(plan, weights, [&](Engine &engine, int64_t rank) {
      StepReport report =
          trainStep(engine, data[0], rank, nullptr, [&](int64_t micro) {
            at::Tensor grad = engine.gradient("fc.weight");
            ASSERT_TRUE(grad.defined());
            EXPECT_EQ(grad.scalar_type(), at::kFloat);
            if (micro != GAS - 1)
              return;
            // The whole flat gradient buffer: fc.weight's view starts it.
            const plan::PartitionDesc &partition =
                *engine.plan().engines[0].partition;
            at::Tensor flat = at::zeros({partition.numel});
            for (const plan::FlatParamDesc &param : partition.params) {
              at::Tensor g = engine.gradient(param.name);
              flat.narrow(0, param.offset, g.numel()).copy_(g.reshape(-1));
            }
            local[size_t(rank)] = flat;
          });
      norms[size_t(rank)] = report.engines[0].gradNorm;
    });
    EXPECT_EQ(norms[0], norms[1]);
    const plan::PartitionDesc &partition = *plan.engines[0].partition;
    at::Tensor rounded = local[0].to(at::kBFloat16);
    rounded.add_(local[1].to(at::kBFloat16));
    rounded.div_(2.0);
    at::Tensor reduced = rounded.to(at::kFloat);
    at::Tensor exact = (local[0] + local[1]) / 2.0;
    auto normOf = [&](const at::Tensor &flat) {
      if (stage == 0) {
        std::vector<at::Tensor> views;
        for (const plan::FlatParamDesc &param : partition.params) {
          const plan::StateDesc *state = plan.findState(param.name);
          views.push_back(
              flat.narrow(0, param.offset, *plan::staticNumel(state->shape))
                  .view(state->shape)
                  .clone());
        }
        return runtime::clipGradientsByGlobalNorm(views, 0.0);
      }
      // Stage 1: each rank's shard's squares in float64, summed in rank
      // order.
      at::Tensor total = at::zeros({}, at::kDouble);
      for (int64_t r = 0; r < 2; ++r) {
        std::vector<at::Tensor> blocks;
        for (const plan::BucketDesc &bucket : partition.buckets)
          blocks.push_back(flat.narrow(0, bucket.offset + r * bucket.numel / 2,
                                       bucket.numel / 2));
        total.add_(at::cat(blocks).to(at::kDouble).square().sum());
      }
      return total.sqrt().to(at::kFloat).item<double>();
    };
    EXPECT_EQ(norms[0], normOf(reduced));
    EXPECT_NE(norms[0], normOf(exact)) << "the bf16 rounding is visible";
  }
}

TEST(RuntimePrecisionTest, Fp16LossScalingSkipsOverflowingSteps) {
  // The scale starts far too high: the fp16 gradients overflow, the step is
  // skipped (nothing updated, gradients zeroed, the LR schedule held), and
  // the dynamic scale comes down as DeepSpeed's scaler says, then doubles
  // after each window of clean steps (and overflows again).
  TempDir dir;
  std::string weights = writeWeights(dir);
  constexpr int64_t STEPS = 14;
  Precision fp16;
  fp16.mode = "fp16";
  fp16.scaler = dynamicScaler(std::ldexp(1.0, 22), 3, 2);
  const ordered_json optimizer = {{"scheduler",
                                   {{"type", "WarmupLR"},
                                    {"warmup_min_lr", 0.0},
                                    {"warmup_max_lr", 0.01},
                                    {"warmup_num_steps", 10},
                                    {"warmup_type", "linear"},
                                    {"total_num_steps", nullptr},
                                    {"warmup_min_ratio", 0.0},
                                    {"cos_min_ratio", 0.0001}}}};
  // W = 1 also on the fused kernels (CUDA's), whose overflow check stays
  // on the device (found_inf) and is read at the step's end: the same
  // skips, scales and LR schedule.
  struct Run {
    int64_t W;
    std::optional<runtime::OptimizerKernel> kernel;
  };
  for (Run run : {Run{1, std::nullopt},
                  Run{1, runtime::OptimizerKernel::Fused},
                  Run{2, std::nullopt}}) {
    const int64_t W = run.W;
    std::vector<std::vector<Batch>> data = makeData(W, STEPS);
    for (int64_t stage : {0, 2}) {
      SCOPED_TRACE("W = " + std::to_string(W) + ", stage " +
                   std::to_string(stage) + (run.kernel ? ", fused" : ""));
      plan::Plan plan = precisionPlan(W, stage, fp16, optimizer);
      std::vector<std::vector<bool>> skips(static_cast<size_t>(W));
      onRanks(plan, weights, [&](Engine &engine, int64_t rank) {
        plan::LossScalerDesc scaler;
        scaler.type = plan::LossScalerType::Dynamic;
        scaler.scale = std::ldexp(1.0, 22);
        scaler.scaleWindow = 3;
        scaler.hysteresis = 2;
        runtime::LossScaler expected(scaler);
        const runtime::Optimizer &optimizer = *engine.optimizer("model");
        double lastNorm = 0.0;
        int64_t applied = 0;
        for (int64_t step = 0; step < STEPS; ++step) {
          SCOPED_TRACE("step " + std::to_string(step));
          ASSERT_EQ(engine.lossScale("model"), expected.scale());
          const double lr = *engine.nextLr("model");
          at::Tensor master = engine.masterParameters("model").clone();
          std::vector<at::Tensor> before = wholeParams(engine);
          StepReport report = trainStep(engine, data[size_t(step)], rank);
          ASSERT_EQ(report.engines.size(), 1u);
          const runtime::EngineStepReport &stepped = report.engines[0];
          EXPECT_EQ(stepped.lossScale, expected.scale());
          EXPECT_EQ(stepped.lr, lr);
          EXPECT_EQ(report.skipped(), stepped.skipped);
          skips[size_t(rank)].push_back(stepped.skipped);
          expected.update(stepped.skipped);
          std::vector<at::Tensor> after = wholeParams(engine);
          if (stepped.skipped) {
            for (size_t k = 0; k < kParams.size(); ++k)
              EXPECT_TRUE(at::equal(before[k], after[k])) << kParams[k];
            EXPECT_TRUE(at::equal(master, engine.masterParameters("model")));
            EXPECT_EQ(*engine.nextLr("model"), lr) << "the LR is held";
            EXPECT_EQ(stepped.gradNorm, lastNorm);
            if (stage == 0)
              EXPECT_EQ(engine.gradient("fc.weight").abs().sum().item<double>(),
                        0.0)
                  << "gradients zeroed";
          } else {
            ++applied;
            lastNorm = stepped.gradNorm;
            EXPECT_TRUE(std::isfinite(stepped.gradNorm));
            // (The linear warmup's first LR is 0.)
            if (lr > 0.0)
              EXPECT_FALSE(at::equal(master, engine.masterParameters("model")));
            EXPECT_TRUE(
                at::equal(parameterShard(engine, rank),
                          engine.masterParameters("model").to(at::kHalf)));
          }
          EXPECT_EQ(optimizer.steps(), applied);
          EXPECT_EQ(engine.globalSteps(), step + 1)
              << "skipped steps count as global steps";
        }
        EXPECT_EQ(engine.lossScale("model"), expected.scale());
        EXPECT_EQ(optimizer.kernel(),
                  run.kernel.value_or(runtime::OptimizerKernel::Reference));
      }, run.kernel);
      for (int64_t r = 1; r < W; ++r)
        EXPECT_EQ(skips[size_t(r)], skips[0]) << "every rank skips alike";
      // The sequence: overflows at 2^22 (hysteresis 2: the first keeps the
      // scale), then clean steps, then a doubling that overflows again.
      std::vector<bool> &s = skips[0];
      ASSERT_EQ(s.size(), size_t(STEPS));
      EXPECT_TRUE(s[0] && s[1]);
      int64_t clean = std::count(s.begin(), s.end(), false);
      EXPECT_GE(clean, 3);
      EXPECT_LT(clean, STEPS);
    }
  }
}

TEST(RuntimePrecisionTest, Fp16UnscalesBeforeClippingAndReporting) {
  // Without overflow, a static scale of 1024 and one of 1 give the same
  // (unscaled) gradient norm and nearly the same parameters: fp16 rounding
  // of g * 2^k is 2^k times the rounding of g away from the subnormals.
  TempDir dir;
  std::string weights = writeWeights(dir);
  std::vector<std::vector<Batch>> data = makeData(2, 2);
  std::vector<std::vector<double>> norms;
  std::vector<std::vector<at::Tensor>> finals;
  for (double scale : {1.0, 1024.0}) {
    Precision fp16;
    fp16.mode = "fp16";
    fp16.scaler = dynamicScaler(scale, 1000, 2);
    fp16.scaler["type"] = "static";
    plan::Plan plan = precisionPlan(2, 1, fp16);
    std::vector<double> stepNorms;
    std::vector<at::Tensor> params;
    onRanks(plan, weights, [&](Engine &engine, int64_t rank) {
      std::vector<double> mine;
      for (size_t step = 0; step < data.size(); ++step) {
        StepReport report = trainStep(engine, data[step], rank);
        EXPECT_FALSE(report.skipped());
        EXPECT_EQ(report.engines[0].lossScale, scale);
        mine.push_back(report.engines[0].gradNorm);
      }
      std::vector<at::Tensor> whole = wholeParams(engine);
      if (rank == 0) {
        stepNorms = mine;
        params = whole;
        // The traffic is the prediction's: the reductions, gathers, the
        // norm's and the overflow flag's all-reduces (2 elements each).
        const plan::Report report = plan::predictReport(plan);
        const plan::CommVolume &perStep = report.ranks[0].engines[0].comm;
        // engineReports() returns by value: keep it alive (ASan found a
        // reference into the destroyed temporary).
        const std::vector<plan::EngineReport> reports = engine.engineReports();
        const plan::CommVolume &moved = reports[0].comm;
        const int64_t steps = int64_t(data.size());
        EXPECT_EQ(moved.allReduce, steps * perStep.allReduce);
        EXPECT_EQ(perStep.allReduce, 2 + 2);
        EXPECT_EQ(moved.reduceScatter, steps * perStep.reduceScatter);
        EXPECT_EQ(moved.allGather, steps * perStep.allGather);
      }
    });
    norms.push_back(stepNorms);
    finals.push_back(params);
  }
  for (size_t step = 0; step < norms[0].size(); ++step)
    EXPECT_NEAR(norms[1][step], norms[0][step], 1e-3 * norms[0][step]);
  for (size_t k = 0; k < kParams.size(); ++k)
    EXPECT_TRUE(at::allclose(finals[1][k].to(at::kFloat),
                             finals[0][k].to(at::kFloat), 0.0, 2e-3))
        << kParams[k];
}

TEST(RuntimePrecisionTest, Fp16OverflowOnOneRankSkipsEveryRank) {
  // extra.scale's gradient is the column sums of input z. On step 0 rank
  // 1's z overflows fp16 in extra.scale[0], which lies in rank 1's block
  // at stage 2: only rank 1 sees an inf, and the MAX all-reduce of the
  // flag makes rank 0 skip too. Step 1 is clean on both.
  TempDir dir;
  std::string weights = writeWeights(dir);
  std::vector<std::vector<Batch>> data = makeData(2, 2, /*withZ=*/true);
  for (Batch &micro : data[0])
    micro.z.narrow(0, ROWS, ROWS).select(1, 0).fill_(1e5);
  Precision fp16;
  fp16.mode = "fp16";
  fp16.scaler = dynamicScaler(1.0, 1000, 1);
  fp16.scaler["type"] = "static";
  plan::Plan plan = precisionPlan(2, 2, fp16, {}, /*withZ=*/true);
  // extra.scale[0] (offset 17) is in rank 1's block, extra.scale[1]
  // (offset 18) in rank 0's.
  const plan::PartitionDesc &partition = *plan.engines[0].partition;
  for (const plan::FlatParamDesc &param : partition.params)
    if (param.name == "extra.scale") {
      ASSERT_EQ(param.offset, 17);
      const plan::BucketDesc &bucket =
          partition.buckets[size_t(partition.bucketAt(17))];
      ASSERT_GE(17, bucket.offset + bucket.numel / 2);
      const plan::BucketDesc &next =
          partition.buckets[size_t(partition.bucketAt(18))];
      ASSERT_LT(18, next.offset + next.numel / 2);
    }
  std::vector<std::vector<bool>> skips(2);
  onRanks(plan, weights, [&](Engine &engine, int64_t rank) {
    for (size_t step = 0; step < data.size(); ++step) {
      std::vector<at::Tensor> before = wholeParams(engine);
      StepReport report = trainStep(engine, data[step], rank);
      skips[size_t(rank)].push_back(report.skipped());
      if (report.skipped())
        EXPECT_TRUE(at::equal(before[0], wholeParams(engine)[0]));
      EXPECT_EQ(engine.lossScale("model"), 1.0) << "a static scale stays";
    }
  });
  EXPECT_EQ(skips[0], (std::vector<bool>{true, false}));
  EXPECT_EQ(skips[1], (std::vector<bool>{true, false}));
}

TEST(RuntimePrecisionTest, WeightsLoadIntoTheLowDtype) {
  TempDir dir;
  std::string weights = writeWeights(dir);
  Precision fp16;
  fp16.mode = "fp16";
  fp16.scaler = dynamicScaler(65536.0, 1000, 2);
  plan::Plan plan = precisionPlan(1, 0, fp16);
  runtime::NamedTensors file = runtime::readSafetensors(weights);
  onRanks(plan, weights, [&](Engine &engine, int64_t) {
    std::vector<at::Tensor> whole = wholeParams(engine);
    for (size_t k = 0; k < kParams.size(); ++k) {
      EXPECT_EQ(whole[k].scalar_type(), at::kHalf);
      for (const auto &[name, tensor] : file)
        if (name == kParams[k])
          EXPECT_TRUE(at::equal(whole[k], tensor.to(at::kHalf)));
    }
    EXPECT_EQ(engine.lossScale("model"), 65536.0);
  });
  // Only float32 converts: a float64 file is still a mismatch.
  std::string doubles = dir.file("d.safetensors");
  runtime::writeSafetensors(doubles,
                            {{"fc.weight", torch::randn({3, 4}, at::kDouble)},
                             {"fc.bias", torch::randn({3})},
                             {"extra.scale", torch::randn({2})}});
  EXPECT_THROW_WITH(onRanks(plan, doubles, [](Engine &, int64_t) {}),
                    RuntimeError, "\"fc.weight\": the plan says float16");
}

/// The whole flat float32 master from every rank's shard (stage 0: rank
/// 0's, which is whole).
at::Tensor wholeMaster(const plan::Plan &plan,
                       const std::vector<at::Tensor> &shards) {
  const plan::PartitionDesc &partition = *plan.engines[0].partition;
  if (partition.stage == 0)
    return shards[0];
  at::Tensor flat = at::zeros({partition.numel});
  const int64_t W = plan.worldSize;
  for (size_t b = 0; b < partition.buckets.size(); ++b) {
    const plan::BucketDesc &bucket = partition.buckets[b];
    const int64_t n = bucket.numel / W;
    for (int64_t r = 0; r < W; ++r)
      flat.narrow(0, bucket.offset + r * n, n)
          .copy_(shards[size_t(r)].narrow(0, partition.shardOffset(b, W), n));
  }
  return flat;
}

TEST(RuntimePrecisionTest, CheckpointsResumeBitwise) {
  // N steps, save, M steps; a fresh engine that loads the checkpoint runs
  // the same M steps bitwise: parameters, fp32 master, optimizer state, LR,
  // loss scale (fp16: a dynamic scale that overflows and recovers, saved
  // mid-way) and the skip sequence. ds-zero-to-fp32 rebuilds the master.
  TempDir dir;
  std::string weights = writeWeights(dir);
  constexpr int64_t BEFORE = 4, AFTER = 4;
  const int64_t W = 2;
  std::vector<std::vector<Batch>> data = makeData(W, BEFORE + AFTER);
  struct Case {
    Precision precision;
    int64_t stage;
  };
  std::vector<Case> cases;
  for (int64_t stage : {0, 1, 2, 3})
    cases.push_back({Precision(), stage});
  Precision fp16;
  fp16.mode = "fp16";
  fp16.scaler = dynamicScaler(std::ldexp(1.0, 17), 2, 2);
  for (int64_t stage : {0, 2, 3})
    cases.push_back({fp16, stage});
  for (const Case &c : cases) {
    SCOPED_TRACE(c.precision.mode + ", stage " + std::to_string(c.stage));
    plan::Plan plan = precisionPlan(W, c.stage, c.precision);
    const std::string ckpt =
        dir.file(c.precision.mode + "_ckpt" + std::to_string(c.stage));
    struct After {
      std::vector<StepReport> reports;
      std::vector<at::Tensor> params;
      at::Tensor master, expAvg;
      std::optional<double> scale;
    };
    std::vector<After> straight(static_cast<size_t>(W)),
        resumed(static_cast<size_t>(W));
    std::vector<at::Tensor> savedMaster(static_cast<size_t>(W));
    auto runAfter = [&](Engine &engine, int64_t rank, After &out) {
      for (int64_t step = BEFORE; step < BEFORE + AFTER; ++step)
        out.reports.push_back(trainStep(engine, data[size_t(step)], rank));
      out.params = wholeParams(engine);
      out.master = engine.masterParameters("model").clone();
      out.expAvg = engine.optimizer("model")->expAvg().clone();
      out.scale = engine.lossScale("model");
    };
    onRanks(plan, weights, [&](Engine &engine, int64_t rank) {
      for (int64_t step = 0; step < BEFORE; ++step)
        trainStep(engine, data[size_t(step)], rank);
      EXPECT_EQ(engine.saveCheckpoint(ckpt), "global_step4");
      savedMaster[size_t(rank)] = engine.masterParameters("model").clone();
      runAfter(engine, rank, straight[size_t(rank)]);
    });
    // bf16 shards carry DeepSpeed's bf16_ prefix.
    if (c.stage >= 1)
      EXPECT_EQ(test::readText(ckpt + "/latest"), "global_step4");
    if (c.stage >= 1 && c.precision.mode == "bf16") {
      EXPECT_FALSE(test::listDir(ckpt + "/global_step4").empty());
      std::vector<std::string> files = test::listDir(ckpt + "/global_step4");
      EXPECT_NE(std::find(files.begin(), files.end(),
                          "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt"),
                files.end());
    }
    onRanks(plan, weights, [&](Engine &engine, int64_t rank) {
      engine.loadCheckpoint(ckpt);
      EXPECT_EQ(engine.globalSteps(), BEFORE);
      EXPECT_TRUE(at::equal(engine.masterParameters("model"),
                            savedMaster[size_t(rank)]));
      runAfter(engine, rank, resumed[size_t(rank)]);
    });
    if (c.precision.mode == "fp16") {
      // The resumed window has skipped and applied steps.
      int64_t skipped = 0;
      for (const StepReport &report : straight[0].reports)
        skipped += report.skipped();
      EXPECT_GT(skipped, 0);
      EXPECT_LT(skipped, AFTER);
    }
    for (int64_t r = 0; r < W; ++r) {
      const After &a = straight[size_t(r)], &b = resumed[size_t(r)];
      ASSERT_EQ(a.reports.size(), b.reports.size());
      for (size_t i = 0; i < a.reports.size(); ++i) {
        const runtime::EngineStepReport &x = a.reports[i].engines[0],
                                        &y = b.reports[i].engines[0];
        EXPECT_EQ(x.lr, y.lr) << i;
        EXPECT_EQ(x.gradNorm, y.gradNorm) << i;
        EXPECT_EQ(x.lossScale, y.lossScale) << i;
        EXPECT_EQ(x.skipped, y.skipped) << i;
      }
      for (size_t k = 0; k < kParams.size(); ++k)
        EXPECT_TRUE(at::equal(a.params[k], b.params[k])) << kParams[k];
      EXPECT_TRUE(at::equal(a.master, b.master));
      EXPECT_TRUE(at::equal(a.expAvg, b.expAvg));
      EXPECT_EQ(a.scale, b.scale);
    }
    // zero_to_fp32: the saved master, whole, in float32.
    runtime::ConsolidatedCheckpoint consolidated =
        runtime::consolidateCheckpoint(ckpt);
    at::Tensor master = wholeMaster(plan, savedMaster);
    const plan::PartitionDesc &partition = *plan.engines[0].partition;
    for (const plan::FlatParamDesc &param : partition.params)
      for (const auto &[name, tensor] : consolidated.tensors)
        if (name == param.name) {
          EXPECT_EQ(tensor.scalar_type(), at::kFloat) << name;
          EXPECT_TRUE(at::equal(tensor.reshape(-1),
                                master.narrow(0, param.offset, tensor.numel())))
              << name;
        }
  }
}

TEST(RuntimePrecisionTest, Fp16CheckpointsKeepTheScalerKind) {
  // A checkpoint of a dynamic-scale fp16 engine does not load into a plan
  // whose scale is static, nor into an fp32 plan (its scale is not 1).
  TempDir dir;
  std::string weights = writeWeights(dir);
  std::vector<std::vector<Batch>> data = makeData(1, 1);
  Precision fp16;
  fp16.mode = "fp16";
  fp16.scaler = dynamicScaler(1024.0, 1000, 2);
  onRanks(precisionPlan(1, 1, fp16), weights, [&](Engine &engine, int64_t) {
    trainStep(engine, data[0], 0);
    engine.saveCheckpoint(dir.file("ckpt"));
  });
  fp16.scaler["type"] = "static";
  onRanks(precisionPlan(1, 1, fp16), weights, [&](Engine &engine, int64_t) {
    EXPECT_THROW_WITH(engine.loadCheckpoint(dir.file("ckpt")), RuntimeError,
                      "the checkpoint's loss scale is dynamic, the plan's "
                      "static");
  });
}

TEST(RuntimePrecisionTest, Fp16AutocastGradScalerIsNotCheckpointed) {
  // DeepSpeed keeps fp16 autocast's torch.amp.GradScaler out of its
  // checkpoints (the ZeRO optimizers' state_dict holds their own static
  // scaler of 1, engine.py saves no GradScaler state): a resumed run starts
  // again from the initial scale with a fresh growth count. Here the
  // scaler grows every 3 clean steps from 1024; the checkpoint holds the
  // static 1.0 of an unscaled engine (else the load would refuse it). The
  // gradients are unscaled exactly either way, so the parameters agree
  // bitwise.
  TempDir dir;
  std::string weights = writeWeights(dir);
  constexpr int64_t BEFORE = 4, AFTER = 2;
  std::vector<std::vector<Batch>> data = makeData(2, BEFORE + AFTER);
  Precision autocast;
  autocast.mode = "autocast";
  autocast.scaler = {{"type", "grad_scaler"},
                     {"scale", 1024.0},
                     {"scale_window", 3},
                     {"hysteresis", 1},
                     {"consecutive_hysteresis", false},
                     {"min_scale", 0.0}};
  for (int64_t stage : {0, 2}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    plan::Plan plan = precisionPlan(2, stage, autocast);
    const std::string ckpt = dir.file("ac_ckpt" + std::to_string(stage));
    std::vector<std::vector<double>> straight(2), resumed(2);
    std::vector<std::vector<at::Tensor>> straightParams(2), resumedParams(2);
    onRanks(plan, weights, [&](Engine &engine, int64_t rank) {
      std::vector<double> &scales = straight[size_t(rank)];
      for (int64_t step = 0; step < BEFORE + AFTER; ++step) {
        StepReport report = trainStep(engine, data[size_t(step)], rank);
        EXPECT_FALSE(report.skipped());
        scales.push_back(report.engines[0].lossScale);
        if (step + 1 == BEFORE)
          engine.saveCheckpoint(ckpt);
      }
      scales.push_back(*engine.lossScale("model"));
      straightParams[size_t(rank)] = wholeParams(engine);
    });
    onRanks(plan, weights, [&](Engine &engine, int64_t rank) {
      engine.loadCheckpoint(ckpt);
      std::vector<double> &scales = resumed[size_t(rank)];
      for (int64_t step = BEFORE; step < BEFORE + AFTER; ++step)
        scales.push_back(
            trainStep(engine, data[size_t(step)], rank).engines[0].lossScale);
      scales.push_back(*engine.lossScale("model"));
      resumedParams[size_t(rank)] = wholeParams(engine);
    });
    for (size_t r = 0; r < 2; ++r) {
      // Grown after the 3rd and 6th clean step; resumed: from 1024 again.
      EXPECT_EQ(straight[r], (std::vector<double>{1024, 1024, 1024, 2048, 2048,
                                                  2048, 4096}));
      EXPECT_EQ(resumed[r], (std::vector<double>{1024, 1024, 1024}));
      for (size_t k = 0; k < kParams.size(); ++k)
        EXPECT_TRUE(at::equal(straightParams[r][k], resumedParams[r][k]))
            << kParams[k];
    }
  }
}

TEST(RuntimePrecisionTest, AutocastGathersInTheBucketDtype) {
  // An autocast engine keeps float32 parameters (no master); at stage 3 a
  // sharded bucket whose dtype is the autocast dtype (bf16, or fp16 under
  // fp16 autocast) is gathered in that dtype, so the forward reads rounded
  // weights, while gatherState() and the optimizer see the float32
  // parameters.
  TempDir dir;
  std::string weights = writeWeights(dir);
  std::vector<std::vector<Batch>> data = makeData(2, 1);
  for (auto [name, dtype, scalar] :
       {std::tuple{"bfloat16", plan::DType::BFloat16, at::kBFloat16},
        std::tuple{"float16", plan::DType::Float16, at::kHalf}}) {
    SCOPED_TRACE(name);
    ordered_json json = plan::toJson(test::zeroPlan(
        test::withBackwardWeightRead(trainJson()), 2, 3, 6, /*gap=*/1));
    json["engines"][0]["precision"] = {{"mode", "autocast"},
                                       {"param_dtype", "float32"},
                                       {"master_dtype", "float32"},
                                       {"grad_accum_dtype", "float32"},
                                       {"autocast_dtype", name}};
    // fp16 autocast needs its GradScaler (this plan has no loss_scale op:
    // the scale stays out of its backward).
    if (dtype == plan::DType::Float16)
      json["engines"][0]["precision"]["loss_scaler"] = {
          {"type", "grad_scaler"},
          {"scale", 65536.0},
          {"scale_window", 2000},
          {"hysteresis", 1},
          {"consecutive_hysteresis", false},
          {"min_scale", 0.0}};
    plan::Plan plan = plan::parsePlan(json, "autocast.json");
    for (plan::BucketDesc &bucket : plan.engines[0].partition->buckets)
      bucket.dtype = dtype;
    runtime::NamedTensors file = runtime::readSafetensors(weights);
    onRanks(plan, weights, [&](Engine &engine, int64_t rank) {
      EXPECT_FALSE(engine.masterParameters("model").defined());
      const Batch &b = data[0][0];
      at::Tensor x = b.x.narrow(0, rank * ROWS, ROWS);
      at::Tensor t = b.t.narrow(0, rank * ROWS, ROWS);
      double loss = engine.forwardEval({x, t})[0].item<double>();
      at::Tensor weight = file[0].second, bias = file[1].second;
      for (const auto &[key, tensor] : file) {
        if (key == "fc.weight")
          weight = tensor;
        if (key == "fc.bias")
          bias = tensor;
      }
      auto evalWith = [&](const at::Tensor &w, const at::Tensor &bb) {
        return at::mse_loss(at::linear(x, w, bb), t).item<double>();
      };
      EXPECT_EQ(loss, evalWith(weight.to(scalar).to(at::kFloat),
                               bias.to(scalar).to(at::kFloat)));
      EXPECT_NE(loss, evalWith(weight, bias));
      std::vector<at::Tensor> whole = wholeParams(engine);
      EXPECT_EQ(whole[0].scalar_type(), at::kFloat);
      EXPECT_TRUE(at::equal(whole[0], weight)) << "stored exactly";
      StepReport report = trainStep(engine, data[0], rank);
      EXPECT_TRUE(report.updated);
      EXPECT_FALSE(report.skipped());
      EXPECT_EQ(engine.optimizer("model")->expAvg().scalar_type(), at::kFloat);
    });
  }
}

TEST(RuntimePrecisionTest, DsRunLinesCarryTheLossScaleAndSkips) {
  // ds-run's loss lines: "loss_scale" and "skipped" from the step report,
  // "grad_norm" the last applied update's on a skipped step.
  TempDir dir;
  std::string weights = writeWeights(dir);
  constexpr int64_t STEPS = 6;
  Precision fp16;
  fp16.mode = "fp16";
  fp16.scaler = dynamicScaler(std::ldexp(1.0, 17), 2, 1);
  plan::Plan plan = precisionPlan(1, 0, fp16);
  plan::writePlan(plan, dir.file("fp16.plan.json"));
  std::vector<std::vector<Batch>> data = makeData(1, STEPS);
  std::vector<at::Tensor> xs, ts;
  for (const auto &step : data)
    for (const Batch &b : step) {
      xs.push_back(b.x);
      ts.push_back(b.t);
    }
  runtime::writeSafetensors(dir.file("data.safetensors"),
                            {{"x", at::stack(xs)}, {"t", at::stack(ts)}});
  std::string command = std::string("'") + DS_RUN_EXECUTABLE + "' '" +
                        dir.file("fp16.plan.json") + "' --data '" +
                        dir.file("data.safetensors") + "' --weights '" +
                        weights + "' --steps " + std::to_string(STEPS) +
                        " --losses '" + dir.file("losses.jsonl") +
                        "' >/dev/null 2>'" + dir.file("stderr") + "'";
  ASSERT_EQ(std::system(command.c_str()), 0)
      << test::readText(dir.file("stderr"));
  std::string text = test::readText(dir.file("losses.jsonl"));
  std::vector<ordered_json> lines;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    lines.push_back(ordered_json::parse(text.substr(start, end - start)));
    start = end == std::string::npos ? text.size() : end + 1;
  }
  ASSERT_EQ(lines.size(), size_t(STEPS));
  int64_t skipped = 0;
  onRanks(plan, weights, [&](Engine &engine, int64_t rank) {
    for (int64_t step = 0; step < STEPS; ++step) {
      StepReport report = trainStep(engine, data[size_t(step)], rank);
      const ordered_json &line = lines[size_t(step)];
      EXPECT_EQ(line["loss_scale"].get<double>(), report.engines[0].lossScale);
      EXPECT_EQ(line["skipped"].get<bool>(), report.skipped());
      EXPECT_EQ(line["grad_norm"].get<double>(), report.gradNorm());
      EXPECT_EQ(line["lr"].get<double>(), report.engines[0].lr);
      skipped += report.skipped();
    }
  });
  EXPECT_GT(skipped, 0);
  EXPECT_LT(skipped, STEPS);
}
