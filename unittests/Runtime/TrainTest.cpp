//===- TrainTest.cpp - forward / backward / step on hand-written plans ----===//
//
// plans/linear_mse_train.json spells out by hand what the compiler's
// autodiff will emit: loss = mse_loss(fc(x), t), then the backward
// (mse_loss_backward, t + mm for the weight, sum over the batch for the
// bias) and grad ops; extra.scale is a trainable parameter that nothing
// uses. Each test trains it through Engine and compares with LibTorch's
// autograd + torch::optim (the reference), applying DeepSpeed's rules:
// losses divided by GAS, gradients accumulated until the boundary,
// clipping to gradient_clipping (default 1.0), every trainable parameter
// stepping (a missing gradient is zero), frozen engines untouched.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "ds/Plan/MemoryPrediction.h"
#include "ds/Plan/PlanFormat.h"
#include "ds/Runtime/Engine.h"
#include "ds/Runtime/LrSchedule.h"
#include "ds/Runtime/Optimizer.h"
#include "ds/Runtime/Seed.h"
#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/RuntimeError.h"
#include "ds/TensorIO/Safetensors.h"

#include <torch/torch.h>

using namespace ds;
using namespace ds::plan;
using ds::runtime::Engine;
using ds::runtime::RuntimeError;
using ds::runtime::StepReport;
using ds::test::TempDir;

namespace {

ordered_json trainPlan() { return test::planJson("linear_mse_train.json"); }

ordered_json &engineConfig(ordered_json &json) {
  return json["engines"][0]["ds_config"];
}

/// The plan's optimizer (what the runtime runs; the config's is the
/// compiler's input): the default AdamW with `changes`.
void setOptimizer(ordered_json &json, const ordered_json &changes) {
  json["engines"][0]["optimizer"] = test::optimizerJson(changes);
}

/// GAS everywhere it appears: the plan, the engine's batch, and the
/// backward's seed 1/GAS (the train program's constant %6).
void setGas(ordered_json &json, int64_t gas) {
  json["gradient_accumulation_steps"] = gas;
  json["engines"][0]["batch"]["gradient_accumulation_steps"] = gas;
  json["programs"]["train"]["body"][6]["value"] = 1.0 / double(gas);
}

struct Weights {
  at::Tensor weight, bias, extra;
};

Weights writeWeights(const TempDir &dir) {
  torch::manual_seed(42);
  Weights w{torch::randn({3, 4}), torch::randn({3}), torch::randn({2})};
  runtime::writeSafetensors(
      dir.file("w.safetensors"),
      {{"fc.weight", w.weight}, {"fc.bias", w.bias}, {"extra.scale", w.extra}});
  return w;
}

Engine load(const ordered_json &json, const TempDir &dir,
            runtime::LoadOptions options = {}) {
  options.weightsPath = dir.file("w.safetensors");
  return Engine::fromPlan(parsePlan(json, "train.json"), "train.json",
                          dir.path(), options);
}

const at::Tensor &param(Engine &engine, const std::string &name) {
  return engine.state().tensor(engine.state().indexOf(name));
}

struct Batch {
  at::Tensor x, t;
};

std::vector<Batch> makeBatches(int count) {
  torch::manual_seed(5);
  std::vector<Batch> batches;
  for (int i = 0; i < count; ++i)
    batches.push_back({torch::randn({4, 4}), torch::randn({4, 3})});
  return batches;
}

/// LibTorch autograd + torch::optim, with DeepSpeed's rules.
struct Reference {
  at::Tensor weight, bias, extra;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  double clip = 1.0;
  int64_t gas = 1;
  bool biasFrozen = false;

  explicit Reference(const Weights &w)
      : weight(w.weight.clone().requires_grad_(true)),
        bias(w.bias.clone().requires_grad_(true)),
        extra(w.extra.clone().requires_grad_(true)) {}

  std::vector<at::Tensor> trainable() const {
    if (biasFrozen)
      return {weight, extra};
    return {weight, bias, extra};
  }

  /// One optimizer step over `batches` (GAS of them); returns the mean
  /// loss and sets `gradNorm`.
  double step(const std::vector<Batch> &batches, double lr, double &gradNorm) {
    double loss = 0.0;
    for (const Batch &b : batches) {
      at::Tensor l = torch::mse_loss(torch::linear(b.x, weight, bias), b.t);
      loss += l.item<double>();
      (l / double(gas)).backward();
    }
    // DeepSpeed's flat buffers: a parameter without a gradient has zeros.
    for (at::Tensor p : trainable())
      if (!p.grad().defined())
        p.mutable_grad() = torch::zeros_like(p);
    gradNorm =
        torch::nn::utils::clip_grad_norm_(trainable(), clip > 0 ? clip : 1e30);
    for (auto &group : optimizer->param_groups())
      group.options().set_lr(lr);
    optimizer->step();
    optimizer->zero_grad();
    return loss / double(batches.size());
  }
};

void expectClose(const at::Tensor &ours, const at::Tensor &reference,
                 const std::string &what) {
  // The design's oracle tolerance is 1e-4 + 1e-4 |x|; correct runs land
  // near 1e-7 (the hand-written backward rounds like autograd's, not
  // identically).
  EXPECT_TRUE(ours.allclose(reference.detach(), 1e-5, 1e-6))
      << what << ": max difference "
      << (ours - reference.detach()).abs().max().item<double>() << "\nours "
      << ours << "\nreference " << reference;
}

/// Trains `engine` for `steps` optimizer steps on `batches` (GAS each) and
/// the reference alongside; compares losses, reports and parameters.
void trainAndCompare(Engine &engine, Reference &reference,
                     const std::vector<Batch> &batches, int steps,
                     const std::vector<double> &lrs) {
  int64_t gas = engine.plan().gradientAccumulationSteps;
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step + 1));
    std::vector<Batch> window(batches.begin() + step * gas,
                              batches.begin() + (step + 1) * gas);
    double loss = 0.0;
    StepReport report;
    for (const Batch &b : window) {
      std::vector<at::Tensor> losses = engine.forward({b.x, b.t});
      ASSERT_EQ(losses.size(), 1u);
      loss += losses[0].item<double>();
      engine.backward();
      report = engine.step();
    }
    ASSERT_TRUE(report.updated);
    ASSERT_EQ(report.engines.size(), 1u);
    double gradNorm = 0.0;
    double expectedLoss = reference.step(window, lrs[step], gradNorm);
    EXPECT_NEAR(loss / double(gas), expectedLoss,
                1e-6 * std::abs(expectedLoss));
    EXPECT_DOUBLE_EQ(report.engines[0].lr, lrs[step]);
    EXPECT_NEAR(report.gradNorm(), gradNorm, 1e-6 * gradNorm);
    expectClose(param(engine, "fc.weight"), reference.weight, "fc.weight");
    expectClose(param(engine, "fc.bias"), reference.bias, "fc.bias");
    expectClose(param(engine, "extra.scale"), reference.extra, "extra.scale");
  }
}

std::unique_ptr<torch::optim::Optimizer> adamw(const Reference &r, double lr,
                                               double wd) {
  return std::make_unique<torch::optim::AdamW>(
      r.trainable(), torch::optim::AdamWOptions(lr).weight_decay(wd));
}

} // namespace

TEST(RuntimeTrainTest, AdamWMatchesAutogradAndTorchOptim) {
  TempDir dir;
  Weights w = writeWeights(dir);
  Engine engine = load(trainPlan(), dir);
  ASSERT_TRUE(engine.canTrain());
  Reference reference(w);
  reference.optimizer = adamw(reference, 0.01, 0.1);
  trainAndCompare(engine, reference, makeBatches(4), 4,
                  {0.01, 0.01, 0.01, 0.01});
  EXPECT_EQ(engine.globalSteps(), 4);
  EXPECT_EQ(engine.microSteps(), 4);
  // The unused parameter stepped with a zero gradient: only the decoupled
  // weight decay moved it.
  at::Tensor decayed = w.extra * (1 - 0.01 * 0.1);
  for (int i = 1; i < 4; ++i)
    decayed = decayed * (1 - 0.01 * 0.1);
  EXPECT_TRUE(param(engine, "extra.scale").allclose(decayed, 1e-6, 0));
  EXPECT_FALSE(param(engine, "extra.scale").equal(w.extra));
}

TEST(RuntimeTrainTest, GradientAccumulationStepsOnTheBoundaryOnly) {
  TempDir dir;
  Weights w = writeWeights(dir);
  ordered_json json = trainPlan();
  setGas(json, 2);
  Engine engine = load(json, dir);
  std::vector<Batch> batches = makeBatches(6);

  // Micro-step 1: gradients accumulate, nothing moves.
  EXPECT_FALSE(engine.isGradientAccumulationBoundary());
  engine.forward({batches[0].x, batches[0].t});
  engine.backward();
  at::Tensor firstGrad = engine.gradient("fc.weight").clone();
  EXPECT_GT(firstGrad.abs().sum().item<double>(), 0.0);
  StepReport report = engine.step();
  EXPECT_FALSE(report.updated);
  EXPECT_TRUE(report.engines.empty());
  EXPECT_TRUE(param(engine, "fc.weight").equal(w.weight));
  EXPECT_EQ(engine.globalSteps(), 0);

  // Micro-step 2: the boundary; the accumulated gradient is the sum of the
  // two micro-steps' gradients, each scaled by 1/GAS in the program.
  EXPECT_TRUE(engine.isGradientAccumulationBoundary());
  engine.forward({batches[1].x, batches[1].t});
  engine.backward();
  at::Tensor weight = w.weight.clone().requires_grad_(true);
  for (int i = 0; i < 2; ++i)
    (torch::mse_loss(torch::linear(batches[i].x, weight, w.bias),
                     batches[i].t) /
     2.0)
        .backward();
  EXPECT_TRUE(engine.gradient("fc.weight").allclose(weight.grad(), 1e-6, 1e-7));
  report = engine.step();
  EXPECT_TRUE(report.updated);
  EXPECT_FALSE(param(engine, "fc.weight").equal(w.weight));
  // Zeroed after the update.
  EXPECT_EQ(engine.gradient("fc.weight").abs().sum().item<double>(), 0.0);
  EXPECT_FALSE(engine.isGradientAccumulationBoundary());

  // The whole run against the reference (a fresh engine).
  Engine fresh = load(json, dir);
  Reference reference(w);
  reference.gas = 2;
  reference.optimizer = adamw(reference, 0.01, 0.1);
  trainAndCompare(fresh, reference, batches, 3, {0.01, 0.01, 0.01});
}

TEST(RuntimeTrainTest, ClippingReportsThePreClipNorm) {
  TempDir dir;
  Weights w = writeWeights(dir);
  for (double clip : {0.05, 0.0}) {
    SCOPED_TRACE("gradient_clipping " + std::to_string(clip));
    ordered_json json = trainPlan();
    // SGD makes the clipped gradient visible in the update itself.
    setOptimizer(json, {{"type", "sgd"},
                        {"lr", 0.1},
                        {"weight_decay", 0.0},
                        {"gradient_clipping", clip}});
    Engine engine = load(json, dir);
    Reference reference(w);
    reference.clip = clip;
    reference.optimizer = std::make_unique<torch::optim::SGD>(
        reference.trainable(), torch::optim::SGDOptions(0.1));
    std::vector<Batch> batches = makeBatches(3);
    trainAndCompare(engine, reference, batches, 3, {0.1, 0.1, 0.1});
  }
  // The plan's 1.0 (the compiler resolved DeepSpeed's default) clips.
  ordered_json json = trainPlan();
  Engine engine = load(json, dir);
  EXPECT_EQ(engine.plan().engines[0].dsConfig.count("gradient_clipping"), 0u);
  EXPECT_EQ(engine.plan().engines[0].optimizer->gradientClipping, 1.0);
  Reference reference(w);
  reference.clip = 1.0;
  reference.optimizer = adamw(reference, 0.01, 0.1);
  trainAndCompare(engine, reference, makeBatches(2), 2, {0.01, 0.01});
}

TEST(RuntimeTrainTest, TheOptimizerComesFromThePlanNotTheConfig) {
  TempDir dir;
  Weights w = writeWeights(dir);
  ordered_json json = trainPlan();
  // The config says SGD at lr 5 and no clipping; the plan's AdamW runs.
  engineConfig(json)["optimizer"] = {{"type", "SGD"},
                                     {"params", {{"lr", 5.0}}}};
  engineConfig(json)["gradient_clipping"] = 0.0;
  engineConfig(json)["scheduler"] = {{"type", "WarmupLR"},
                                     {"params", {{"warmup_max_lr", 7.0}}}};
  Engine engine = load(json, dir);
  Reference reference(w);
  reference.optimizer = adamw(reference, 0.01, 0.1);
  trainAndCompare(engine, reference, makeBatches(2), 2, {0.01, 0.01});
}

TEST(RuntimeTrainTest, SgdLeavesAParameterWithoutGradientAlone) {
  TempDir dir;
  Weights w = writeWeights(dir);
  ordered_json json = trainPlan();
  setOptimizer(
      json,
      {{"type", "sgd"}, {"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 0.0}});
  Engine engine = load(json, dir);
  Reference reference(w);
  reference.optimizer = std::make_unique<torch::optim::SGD>(
      reference.trainable(), torch::optim::SGDOptions(0.1).momentum(0.9));
  trainAndCompare(engine, reference, makeBatches(3), 3, {0.1, 0.1, 0.1});
  EXPECT_TRUE(param(engine, "extra.scale").equal(w.extra));
}

TEST(RuntimeTrainTest, FrozenEngineIsNeverUpdated) {
  TempDir dir;
  Weights w = writeWeights(dir);
  ordered_json json = trainPlan();
  // fc.bias belongs to a teacher engine without an optimizer: frozen. The
  // program has no grad op for it (the compiler emits none).
  ordered_json teacher = json["engines"][0];
  teacher["name"] = "teacher";
  teacher["module"] = "fc";
  teacher["trainable"] = false;
  teacher.erase("optimizer");
  teacher.erase("partition");
  json["engines"].push_back(teacher);
  json["state"][1]["engine"] = "teacher";
  // The student's flat buffers without it (a padding gap at [12, 15)).
  json["engines"][0]["partition"]["params"].erase(1);
  ordered_json &body = json["programs"]["train"]["body"];
  ASSERT_EQ(body[16]["kind"], "grad");
  body.erase(16);
  body[15]["free"] = {9, 13, 14}; // Nobody reads the bias gradient now.
  Engine engine = load(json, dir);
  EXPECT_EQ(engine.optimizer("teacher"), nullptr);
  EXPECT_NE(engine.optimizer("model"), nullptr);
  EXPECT_FALSE(engine.gradient("fc.bias").defined());
  EXPECT_FALSE(engine.nextLr("teacher").has_value());

  Reference reference(w);
  reference.biasFrozen = true;
  reference.bias.requires_grad_(false);
  reference.optimizer = adamw(reference, 0.01, 0.1);
  trainAndCompare(engine, reference, makeBatches(3), 3, {0.01, 0.01, 0.01});
  EXPECT_TRUE(param(engine, "fc.bias").equal(w.bias));

  // A grad op for a frozen engine's parameter is a plan error.
  ordered_json withGrad = trainPlan();
  withGrad["engines"] = json["engines"];
  withGrad["state"][1]["engine"] = "teacher";
  EXPECT_NO_THROW(parsePlan(withGrad, "grad.json")); // A runtime refusal.
  EXPECT_THROW_WITH(load(withGrad, dir), PlanError,
                    "programs.train.body[16] (grad): name: parameter "
                    "\"fc.bias\" of engine \"teacher\" has no gradient "
                    "buffer: the engine is frozen");
}

TEST(RuntimeTrainTest, SchedulerGivesEachUpdateItsLearningRate) {
  TempDir dir;
  Weights w = writeWeights(dir);
  ordered_json json = trainPlan();
  setOptimizer(json, {{"type", "sgd"},
                      {"lr", 0.5},
                      {"weight_decay", 0.0},
                      {"scheduler",
                       {{"type", "WarmupLR"},
                        {"warmup_min_lr", 0.01},
                        {"warmup_max_lr", 0.2},
                        {"warmup_num_steps", 3},
                        {"warmup_type", "linear"},
                        {"total_num_steps", nullptr},
                        {"warmup_min_ratio", 0.0},
                        {"cos_min_ratio", 0.0001}}}});
  Engine engine = load(json, dir);
  plan::SchedulerDesc scheduler;
  scheduler.type = plan::SchedulerType::WarmupLR;
  scheduler.warmupMinLr = 0.01;
  scheduler.warmupMaxLr = 0.2;
  scheduler.warmupNumSteps = 3;
  scheduler.warmupType = plan::WarmupType::Linear;
  std::vector<double> lrs;
  for (int k = 0; k < 5; ++k)
    lrs.push_back(runtime::schedulerLrForUpdate(scheduler, 0.5, k));
  // min, min, min + 1/3, min + 2/3 of the way, max.
  EXPECT_DOUBLE_EQ(lrs[0], 0.01);
  EXPECT_DOUBLE_EQ(lrs[4], 0.2);
  EXPECT_EQ(*engine.nextLr("model"), lrs[0]);

  Reference reference(w);
  reference.optimizer = std::make_unique<torch::optim::SGD>(
      reference.trainable(), torch::optim::SGDOptions(0.5));
  trainAndCompare(engine, reference, makeBatches(5), 5, lrs);
  EXPECT_EQ(*engine.nextLr("model"),
            runtime::schedulerLrForUpdate(scheduler, 0.5, 5));
}

TEST(RuntimeTrainTest, CallsMustComeInOrder) {
  TempDir dir;
  writeWeights(dir);
  Engine engine = load(trainPlan(), dir);
  std::vector<Batch> batches = makeBatches(1);
  EXPECT_THROW_WITH(engine.backward(), RuntimeError,
                    "backward: no forward() to differentiate");
  EXPECT_THROW_WITH(engine.step(), RuntimeError, "step: call backward() first");
  engine.forward({batches[0].x, batches[0].t});
  EXPECT_THROW_WITH(engine.step(), RuntimeError, "step: call backward() first");
  engine.backward();
  EXPECT_THROW_WITH(engine.backward(), RuntimeError,
                    "backward() already ran for this micro-step");
  EXPECT_TRUE(engine.step().updated);

  // A forward that is never differentiated is dropped by the next one.
  engine.forward({batches[0].x, batches[0].t});
  engine.forward({batches[0].x, batches[0].t});
  engine.backward();
  EXPECT_TRUE(engine.step().updated);
  EXPECT_EQ(engine.trainMemory().currentBytes, 0);

  // Wrong inputs fail in forward and leave the engine usable.
  EXPECT_THROW_WITH(engine.forward({batches[0].x}), RuntimeError,
                    "programs.train: expected 2 input(s) (x, t), got 1");
  EXPECT_THROW_WITH(engine.backward(), RuntimeError, "no forward()");

  // The eval program still runs, with the trained parameters.
  std::vector<at::Tensor> eval =
      engine.forwardEval({batches[0].x, batches[0].t});
  EXPECT_TRUE(eval[0].equal(
      torch::mse_loss(torch::linear(batches[0].x, param(engine, "fc.weight"),
                                    param(engine, "fc.bias")),
                      batches[0].t)));

  // Plans without a train program cannot train.
  ordered_json evalOnly = trainPlan();
  evalOnly["programs"].erase("train");
  evalOnly["programs"].erase("step");
  Engine noTrain = load(evalOnly, dir);
  EXPECT_FALSE(noTrain.canTrain());
  EXPECT_THROW_WITH(noTrain.forward({batches[0].x, batches[0].t}), RuntimeError,
                    "train.json: forward: the plan has no train program");
}

TEST(RuntimeTrainTest, MeasuredPeakMatchesThePrediction) {
  TempDir dir;
  writeWeights(dir);
  Engine engine = load(trainPlan(), dir);
  std::vector<Batch> batches = makeBatches(2);
  for (const Batch &b : batches) {
    engine.forward({b.x, b.t});
    engine.backward();
    engine.step();
  }
  runtime::MemoryStats memory = engine.trainMemory();
  EXPECT_EQ(memory.currentBytes, 0);
  EXPECT_EQ(memory.peakBytes,
            predictPeakBytes(*engine.plan().findProgram("train")));
  EXPECT_EQ(memory.stateBytes, (12 + 3 + 2) * 4);
  EXPECT_EQ(memory.gradientBytes, (12 + 3 + 2) * 4);
  EXPECT_EQ(memory.optimizerBytes, 2 * (12 + 3 + 2) * 4);
}

TEST(RuntimeTrainTest, MicroStepSeedsFixRandomDraws) {
  // forward: sum(rand_like(x)); an empty backward.
  test::ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {2, 3});
  ValueId r = b.tensor(DType::Float32, {2, 3});
  ValueId s = b.tensor(DType::Float32, {});
  b.add(Op::input(0, x));
  b.call("aten::rand_like", {x}, {r}, {x});
  b.call("aten::sum", {r}, {s}, {r});
  b.program.results = {s};
  Plan plan = test::makePlan({{"x", DType::Float32, {2, 3}, true}}, b.program);
  b.program.backwardStart = int64_t(b.program.body.size());
  plan.programs["train"] = b.program;
  plan.programs["step"] = Program(); // Nothing trains.
  plan.gradientAccumulationSteps = 2;
  plan.engines[0].batch.gradientAccumulationSteps = 2;
  plan.engines[0].seed = 1234;

  auto run = [&](std::optional<int64_t> seed, int64_t rank) {
    runtime::LoadOptions options;
    options.seed = seed;
    options.rank = rank;
    Engine engine = Engine::fromPlan(plan, "seed.json", ".", options);
    std::vector<double> draws;
    for (int i = 0; i < 4; ++i) {
      torch::manual_seed(999); // Whatever ran before does not matter.
      draws.push_back(engine.forward({torch::zeros({2, 3})})[0].item<double>());
      engine.backward();
      engine.step();
    }
    return std::make_pair(draws, engine.seed());
  };
  auto [draws, seed] = run(std::nullopt, 0);
  EXPECT_EQ(seed, 1234u);
  for (int i = 0; i < 4; ++i) {
    // Micro-step i is (global step i / 2, position i % 2).
    at::manual_seed(runtime::microStepSeed(1234, i / 2, i % 2, 0));
    EXPECT_EQ(draws[i], at::rand({2, 3}).sum().item<double>()) << i;
  }
  EXPECT_NE(draws[0], draws[1]);
  EXPECT_NE(draws[0], draws[2]);
  EXPECT_EQ(run(std::nullopt, 0).first, draws) << "runs are reproducible";
  EXPECT_NE(run(std::nullopt, 1).first, draws) << "ranks draw differently";
  auto [overridden, overrideSeed] = run(7, 0);
  EXPECT_EQ(overrideSeed, 7u);
  EXPECT_NE(overridden, draws);
  // SplitMix64 reference value (seed 0 -> 0xE220A8397B1DCDAF).
  EXPECT_EQ(runtime::splitMix64(0), 0xE220A8397B1DCDAFULL);
}

TEST(RuntimeTrainTest, EngineConfigErrorsNameTheEngine) {
  TempDir dir;
  writeWeights(dir);
  ordered_json json = trainPlan();
  json["engines"][0]["optimizer"]["type"] = "lamb";
  EXPECT_THROW_WITH(load(json, dir), PlanError,
                    "train.json: engines[0].optimizer.type: unknown "
                    "optimizer type \"lamb\" (expected \"adamw\", \"adam\" "
                    "or \"sgd\")");
  json = trainPlan();
  json["engines"][0]["seed"] = "7";
  EXPECT_THROW_WITH(load(json, dir), PlanError,
                    "train.json: engines[0].seed: expected an integer, "
                    "found string \"7\"");
  // The DeepSpeed config is provenance: nothing reads it.
  json = trainPlan();
  json["programs"].erase("train");
  json["programs"].erase("step");
  engineConfig(json) = ordered_json::object();
  EXPECT_NO_THROW(load(json, dir));
}

TEST(RuntimeTrainTest, ShapeVariantsRunByTheInputsShapes) {
  // A plan of two shapes, batches of 4 and 2 rows: each micro-step runs the
  // programs of its shape on the one set of parameters and optimizer.
  TempDir dir;
  Weights w = writeWeights(dir);
  ordered_json json = trainPlan();
  setGas(json, 2);
  json["variants"] = ordered_json::array({test::batchVariant(json, 2)});
  Engine engine = load(json, dir);
  std::vector<Batch> batches = makeBatches(6);
  for (size_t i = 1; i < batches.size(); i += 2)
    batches[i] = {batches[i].x.narrow(0, 0, 2), batches[i].t.narrow(0, 0, 2)};
  Reference reference(w);
  reference.gas = 2;
  reference.optimizer = adamw(reference, 0.01, 0.1);
  trainAndCompare(engine, reference, batches, 3, {0.01, 0.01, 0.01});
  EXPECT_EQ(engine.forwardEval({batches[1].x, batches[1].t}).size(), 1u);

  // Rows of no compiled shape: the error names them and every shape.
  at::Tensor x = torch::randn({3, 4}), t = torch::randn({3, 3});
  EXPECT_THROW_WITH(engine.forward({x, t}), RuntimeError,
                    "train.json: inputs of shapes x [3, 4], t [3, 3] match no "
                    "compiled program (compiled: x [4, 4], t [4, 3]; x [2, "
                    "4], t [2, 3])");
  EXPECT_THROW_WITH(engine.forwardEval({x, t}), RuntimeError,
                    "match no compiled program");
}
