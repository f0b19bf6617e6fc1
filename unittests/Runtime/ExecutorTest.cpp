//===- ExecutorTest.cpp - Running hand-written plans against ATen ---------===//

#include "TestUtil.h"

#include "ds/Plan/MemoryPrediction.h"
#include "ds/Plan/PlanFormat.h"
#include "ds/Runtime/Engine.h"
#include "ds/Runtime/Executor.h"
#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/RuntimeError.h"
#include "ds/TensorIO/Safetensors.h"

#include <torch/torch.h>
#include <torch/version.h>

using namespace ds;
using namespace ds::plan;
using ds::runtime::Engine;
using ds::runtime::RuntimeError;
using ds::test::ProgramBuilder;
using ds::test::TempDir;

namespace {

Engine engineFor(Plan plan, const runtime::LoadOptions &options = {}) {
  return Engine::fromPlan(std::move(plan), "test-plan", ".", options);
}

InputDesc floatInput(const std::string &name, std::vector<int64_t> shape) {
  return {name, DType::Float32, std::move(shape), true};
}

} // namespace

TEST(RuntimeExecutorTest, LinearReluSumWithSafetensorsState) {
  TempDir dir;
  torch::manual_seed(0);
  at::Tensor w = torch::randn({16, 8});
  at::Tensor b = torch::randn({16});
  runtime::writeSafetensors(dir.file("w.safetensors"),
                            {{"fc.weight", w}, {"fc.bias", b}});
  runtime::LoadOptions options;
  options.weightsPath = dir.file("w.safetensors");
  Engine engine =
      Engine::load(test::fixture("plans/linear_relu_sum.json"), options);
  for (int i = 0; i < 3; ++i) {
    at::Tensor x = torch::randn({4, 8});
    std::vector<at::Tensor> out = engine.forwardEval({x});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].equal(at::relu(at::linear(x, w, b)).sum()));
  }
  runtime::MemoryStats memory = engine.memory();
  EXPECT_EQ(memory.currentBytes, 0);
  EXPECT_EQ(memory.peakBytes,
            predictPeakBytes(*engine.plan().findProgram("eval")));
  EXPECT_EQ(memory.stateBytes, (16 * 8 + 16) * 4);
}

TEST(RuntimeExecutorTest, IfRunsTheBranchTheConditionPicks) {
  ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {2, 3});
  ValueId total = b.tensor(DType::Float32, {});
  ValueId zero = b.scalar(ValueType::Int);
  ValueId positive = b.tensor(DType::Bool, {});
  ValueId cond = b.scalar(ValueType::Bool);
  ValueId two = b.scalar(ValueType::Int);
  ValueId relu = b.tensor(DType::Float32, {2, 3});
  ValueId doubled = b.tensor(DType::Float32, {2, 3});
  ValueId negated = b.tensor(DType::Float32, {2, 3});
  ValueId out = b.tensor(DType::Float32, {2, 3});
  b.add(Op::input(0, x));
  b.call("aten::sum", {x}, {total});
  b.add(Op::constant(Constant::ofInt(0), zero));
  b.call("aten::gt.Scalar", {total, zero}, {positive}, {total, zero});
  b.call("aten::Bool.Tensor", {positive}, {cond}, {positive});
  Branch then, otherwise;
  then.body.push_back(Op::constant(Constant::ofInt(2), two));
  then.body.push_back(Op::call("aten::relu", {x}, {relu}));
  then.body.push_back(Op::call("aten::mul.Scalar", {relu, two}, {doubled}));
  then.body.back().free = {relu, two};
  then.yields = {doubled};
  otherwise.body.push_back(Op::call("aten::neg", {x}, {negated}));
  otherwise.yields = {negated};
  b.add(Op::ifOp(cond, then, otherwise, {out})).free = {x, cond};
  b.program.results = {out};
  Engine engine =
      engineFor(test::makePlan({floatInput("x", {2, 3})}, b.program));

  at::Tensor pos = torch::tensor({{1.f, -2.f, 3.f}, {4.f, 5.f, -6.f}});
  EXPECT_TRUE(engine.forwardEval({pos})[0].equal(at::relu(pos) * 2));
  at::Tensor neg = -pos;
  EXPECT_TRUE(engine.forwardEval({neg})[0].equal(pos));
}

TEST(RuntimeExecutorTest, ListOpsSplitUnpackAndCat) {
  ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {4, 3});
  ValueId two = b.scalar(ValueType::Int);
  ValueId zero = b.scalar(ValueType::Int);
  ValueId parts = b.list(ValueType::Tensor);
  ValueId first = b.tensor(DType::Float32, {2, 3});
  ValueId second = b.tensor(DType::Float32, {2, 3});
  ValueId swapped = b.list(ValueType::Tensor);
  ValueId joined = b.tensor(DType::Float32, {4, 3});
  ValueId a = b.tensor(DType::Float32, {2, 3});
  ValueId c = b.tensor(DType::Float32, {2, 3});
  ValueId sum = b.tensor(DType::Float32, {2, 3});
  b.add(Op::input(0, x));
  b.add(Op::constant(Constant::ofInt(2), two));
  b.add(Op::constant(Constant::ofInt(0), zero));
  b.call("aten::split.Tensor", {x, two, zero}, {parts});
  b.add(Op::unpack(parts, {first, second})).free = {parts};
  b.add(Op::list({second, first}, swapped)).free = {first, second};
  b.call("aten::cat", {swapped, zero}, {joined}, {swapped});
  // A list-returning call with several results is unpacked directly.
  b.call("aten::split.Tensor", {x, two, zero}, {a, c}, {x, two, zero});
  b.call("aten::add.Tensor", {a, c}, {sum}, {a, c});
  b.program.results = {joined, sum};
  Engine engine =
      engineFor(test::makePlan({floatInput("x", {4, 3})}, b.program));

  at::Tensor x0 = torch::arange(12, torch::kFloat).reshape({4, 3});
  std::vector<at::Tensor> out = engine.forwardEval({x0});
  EXPECT_TRUE(out[0].equal(at::cat({x0.slice(0, 2), x0.slice(0, 0, 2)})));
  EXPECT_TRUE(out[1].equal(x0.slice(0, 0, 2) + x0.slice(0, 2)));
}

TEST(RuntimeExecutorTest, DynamicShapesFromNonzero) {
  ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {8});
  ValueId zero = b.scalar(ValueType::Float);
  ValueId mask = b.tensor(DType::Bool, {8});
  ValueId nz = b.tensor(DType::Int64, {-1, 1});
  ValueId one = b.scalar(ValueType::Int);
  ValueId idx = b.tensor(DType::Int64, {-1});
  ValueId axis = b.scalar(ValueType::Int);
  ValueId picked = b.tensor(DType::Float32, {-1});
  ValueId total = b.tensor(DType::Float32, {});
  ValueId count = b.scalar(ValueType::Int);
  b.add(Op::input(0, x));
  b.add(Op::constant(Constant::ofFloat(0.0), zero));
  b.call("aten::gt.Scalar", {x, zero}, {mask}, {zero});
  b.call("aten::nonzero", {mask}, {nz}, {mask});
  b.add(Op::constant(Constant::ofInt(1), one));
  b.call("aten::squeeze.dim", {nz, one}, {idx}, {nz, one});
  b.add(Op::constant(Constant::ofInt(0), axis));
  b.call("aten::index_select", {x, axis, idx}, {picked}, {x, idx});
  b.call("aten::sum", {picked}, {total});
  b.call("aten::size.int", {picked, axis}, {count}, {picked, axis});
  b.program.results = {total, count};
  Engine engine = engineFor(test::makePlan({floatInput("x", {8})}, b.program));

  for (int positives : {0, 3, 8}) {
    at::Tensor x0 = -torch::ones({8});
    x0.slice(0, 0, positives).fill_(2.5);
    std::vector<c10::IValue> out = engine.runEval({x0});
    EXPECT_EQ(out[0].toTensor().item<float>(), 2.5f * positives);
    EXPECT_EQ(out[1].toInt(), positives);
  }
  EXPECT_EQ(engine.memory().currentBytes, 0);
}

TEST(RuntimeExecutorTest, InterpreterOperatorsFromTheTorchScriptRegistry) {
  ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {4, 6});
  ValueId sizes = b.list(ValueType::Int);
  ValueId count = b.scalar(ValueType::Int);
  ValueId one = b.scalar(ValueType::Int);
  ValueId cols = b.scalar(ValueType::Int);
  ValueId zero = b.scalar(ValueType::Int);
  ValueId rows = b.scalar(ValueType::Int);
  ValueId numel = b.scalar(ValueType::Int);
  ValueId total = b.scalar(ValueType::Int);
  ValueId same = b.scalar(ValueType::Bool);
  ValueId shape = b.list(ValueType::Int);
  ValueId flat = b.tensor(DType::Float32, {24});
  ValueId asTensor = b.tensor(DType::Float32, {});
  ValueId asInt = b.scalar(ValueType::Int);
  ValueId sum = b.scalar(ValueType::Int);
  b.add(Op::input(0, x));
  b.call("aten::size", {x}, {sizes});
  b.call("aten::len.t", {sizes}, {count});
  b.add(Op::constant(Constant::ofInt(1), one));
  b.call("aten::__getitem__.t", {sizes, one}, {cols}, {sizes});
  b.add(Op::constant(Constant::ofInt(0), zero));
  b.call("aten::size.int", {x, zero}, {rows});
  b.call("aten::mul.int", {rows, cols}, {numel}, {rows, cols});
  b.add(Op::constant(Constant::ofInt(24), total));
  b.call("aten::eq.int", {numel, total}, {same}, {total});
  b.add(Op::list({numel}, shape)).free = {numel};
  b.call("aten::view", {x, shape}, {flat}, {x, shape});
  b.call("aten::numel", {flat}, {asInt});
  // scalar_tensor(Scalar s, *, dtype=None, ...): the rest from defaults.
  b.call("aten::scalar_tensor", {asInt}, {asTensor}, {asInt});
  b.call("aten::Int.Tensor", {asTensor}, {sum}, {asTensor});
  b.program.results = {flat, count, same, sum};
  Engine engine =
      engineFor(test::makePlan({floatInput("x", {4, 6})}, b.program));

  at::Tensor x0 = torch::arange(24, torch::kFloat).reshape({4, 6});
  std::vector<c10::IValue> out = engine.runEval({x0});
  EXPECT_TRUE(out[0].toTensor().equal(x0.flatten()));
  EXPECT_EQ(out[1].toInt(), 2);
  EXPECT_EQ(out[2].toBool(), true);
  EXPECT_EQ(out[3].toInt(), 24);
}

TEST(RuntimeExecutorTest, TensorAndNonFiniteConstants) {
  ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {2, 3});
  ValueId mask = b.tensor(DType::Bool, {2, 3});
  ValueId fill = b.scalar(ValueType::Float);
  ValueId masked = b.tensor(DType::Float32, {2, 3});
  ValueId dim = b.scalar(ValueType::Int);
  ValueId none = b.scalar(ValueType::None);
  ValueId soft = b.tensor(DType::Float32, {2, 3});
  b.add(Op::input(0, x));
  b.add(Op::constant(
      Constant::ofTensor(DType::Bool, {2, 3}, std::string{0, 1, 1, 0, 0, 1}),
      mask));
  b.add(Op::constant(Constant::ofFloat(-INFINITY), fill));
  b.call("aten::masked_fill.Scalar", {x, mask, fill}, {masked},
         {x, mask, fill});
  b.add(Op::constant(Constant::ofInt(1), dim));
  b.add(Op::constant(Constant::none(), none));
  b.call("aten::softmax.int", {masked, dim, none}, {soft}, {masked});
  b.program.results = {soft};
  // Through JSON and back, as a plan file would carry it.
  TempDir dir;
  writePlan(test::makePlan({floatInput("x", {2, 3})}, b.program),
            dir.file("p.json"));
  Engine engine = Engine::load(dir.file("p.json"));

  at::Tensor x0 = torch::randn({2, 3});
  at::Tensor m = torch::tensor({{false, true, true}, {false, false, true}});
  at::Tensor expected = at::softmax(
      x0.masked_fill(m, -std::numeric_limits<float>::infinity()), 1);
  EXPECT_TRUE(engine.forwardEval({x0})[0].equal(expected));
}

// Every device argument (None in the plan) and every tensor constant is the
// executor's device. Meta tensors stand for a device here (no GPU): their
// device is real, their data absent.
TEST(RuntimeExecutorTest, FactoryOpsAndConstantsFollowTheRunDevice) {
  ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {3});
  ValueId s = b.scalar(ValueType::Float);
  ValueId made = b.tensor(DType::Float32, {});
  ValueId c = b.tensor(DType::Float32, {3});
  ValueId one = b.scalar(ValueType::Int);
  ValueId sum = b.tensor(DType::Float32, {3});
  ValueId total = b.tensor(DType::Float32, {3});
  b.add(Op::input(0, x));
  b.add(Op::constant(Constant::ofFloat(2.0), s));
  // scalar_tensor(Scalar s, *, dtype, layout, device, pin_memory): the
  // device is a defaulted None.
  b.call("aten::scalar_tensor", {s}, {made}, {s});
  b.add(Op::constant(Constant::ofTensor(DType::Float32, {3},
                                        std::string(12, '\0')),
                     c));
  b.add(Op::constant(Constant::ofInt(1), one));
  b.call("aten::add.Tensor", {x, c, one}, {sum}, {x, c});
  b.call("aten::add.Tensor", {sum, made, one}, {total}, {sum, one});
  b.program.results = {total, made};
  Plan plan = test::makePlan({floatInput("x", {3})}, b.program);
  runtime::StateStore state(plan);

  for (c10::Device device : {c10::Device(c10::kCPU), c10::Device(c10::kMeta)}) {
    SCOPED_TRACE(device.str());
    runtime::ExecutorOptions options;
    options.device = device;
    runtime::Executor executor(plan, "eval", state, "test-plan", options);
    std::vector<c10::IValue> results =
        executor.run({at::ones({3}, at::TensorOptions().device(device))});
    ASSERT_EQ(results.size(), 2u);
    EXPECT_EQ(results[0].toTensor().device(), device);
    EXPECT_EQ(results[1].toTensor().device(), device); // scalar_tensor's.
    if (device.is_cpu())
      EXPECT_TRUE(results[0].toTensor().equal(at::full({3}, 3.0f)));
  }
  runtime::ExecutorOptions meta;
  meta.device = c10::Device(c10::kMeta);
  runtime::Executor executor(plan, "eval", state, "test-plan", meta);
  EXPECT_THROW_WITH(executor.run({at::ones({3})}), RuntimeError,
                    "test-plan: programs.eval: input 0 (\"x\"): the tensor is "
                    "on cpu, the program runs on meta");
}

TEST(RuntimeExecutorTest, SetStateCopiesIntoTheBuffer) {
  TempDir dir;
  ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {3});
  ValueId r = b.tensor(DType::Float32, {3});
  ValueId one = b.scalar(ValueType::Int);
  ValueId updated = b.tensor(DType::Float32, {3});
  b.add(Op::input(0, x));
  b.add(Op::state("stats.running", r));
  b.add(Op::constant(Constant::ofInt(1), one));
  b.call("aten::add.Tensor", {r, x, one}, {updated}, {r, x, one});
  b.add(Op::setState("stats.running", updated));
  b.program.results = {updated};
  Plan plan = test::makePlan({floatInput("x", {3})}, b.program);
  plan.state.push_back({"stats.running",
                        StateKind::Buffer,
                        DType::Float32,
                        {3},
                        false,
                        "model",
                        "stats",
                        "Stats"});
  runtime::writeSafetensors(dir.file("s.safetensors"),
                            {{"stats.running", torch::zeros({3})}});
  plan.weights = WeightsDesc{"safetensors", "s.safetensors"};
  Engine engine = Engine::fromPlan(plan, "p", dir.path());

  at::Tensor x0 = torch::tensor({1.f, 2.f, 3.f});
  engine.forwardEval({x0});
  engine.forwardEval({x0});
  EXPECT_TRUE(engine.state().tensor(0).equal(x0 * 2));
}

TEST(RuntimeExecutorTest, KernelErrorsNameTheOp) {
  TempDir dir;
  ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {4, -1});
  ValueId w = b.tensor(DType::Float32, {3, 5});
  ValueId y = b.tensor(DType::Float32, {4, 5});
  b.add(Op::input(0, x));
  b.add(Op::state("fc.weight", w));
  b.call("aten::mm", {x, w}, {y}, {x, w});
  b.program.results = {y};
  Plan plan = test::makePlan({floatInput("x", {4, -1})}, b.program);
  plan.microBatchPerRank = 4;
  plan.state.push_back({"fc.weight",
                        StateKind::Param,
                        DType::Float32,
                        {3, 5},
                        true,
                        "model",
                        "fc",
                        "torch.nn.modules.linear.Linear"});
  runtime::writeSafetensors(dir.file("w.safetensors"),
                            {{"fc.weight", torch::ones({3, 5})}});
  runtime::LoadOptions options;
  options.weightsPath = dir.file("w.safetensors");
  Engine engine = engineFor(plan, options);

  EXPECT_EQ(engine.forwardEval({torch::ones({4, 3})})[0].sum().item<float>(),
            60.f);
  try {
    engine.forwardEval({torch::ones({4, 7})});
    FAIL() << "expected a RuntimeError";
  } catch (const RuntimeError &error) {
    std::string message = error.what();
    EXPECT_NE(message.find("test-plan: programs.eval.body[2] (aten::mm) in "
                           "module fc (torch.nn.modules.linear.Linear) at "
                           "model.py:7: "),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("mat1 and mat2 shapes cannot be multiplied"),
              std::string::npos)
        << message;
    EXPECT_EQ(error.context().op, "aten::mm");
  }
  // The failed run released everything it held.
  EXPECT_EQ(engine.memory().currentBytes, 0);
}

TEST(RuntimeExecutorTest, ResultsAndInputsAreChecked) {
  ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {4});
  ValueId y = b.tensor(DType::Float64, {4});
  b.add(Op::input(0, x));
  b.call("aten::relu", {x}, {y}, {x});
  b.program.results = {y};
  Engine engine = engineFor(test::makePlan({floatInput("x", {4})}, b.program));
  EXPECT_THROW_WITH(engine.forwardEval({torch::ones({4})}), RuntimeError,
                    "programs.eval.body[1] (aten::relu) in module fc "
                    "(torch.nn.modules.linear.Linear) at model.py:7: "
                    "results[0]: the operator returned float32 [4], the plan "
                    "declares %1 (tensor float64 [4])");
  EXPECT_THROW_WITH(engine.forwardEval({torch::ones({5})}), RuntimeError,
                    "test-plan: programs.eval: input 0 (\"x\"): expected "
                    "float32 [4], got float32 [5]");
  EXPECT_THROW_WITH(engine.forwardEval({}), RuntimeError,
                    "expected 1 input(s) (x), got 0");
}

TEST(RuntimeExecutorTest, UnknownOperatorsAreLoadErrors) {
  ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {4});
  ValueId y = b.tensor(DType::Float32, {4});
  b.add(Op::input(0, x));
  b.call("aten::does_not_exist", {x}, {y}, {x});
  b.program.results = {y};
  Plan plan = test::makePlan({floatInput("x", {4})}, b.program);
  EXPECT_THROW_WITH(engineFor(plan), PlanError,
                    "test-plan: programs.eval.body[1] "
                    "(aten::does_not_exist): unknown operator "
                    "aten::does_not_exist with no overload name");
  // A plan of another torch release: the message names both versions.
  plan.torchVersion = "2.99.0+cu132";
  EXPECT_THROW_WITH(engineFor(plan), PlanError,
                    "registry has this name) (the plan was compiled with "
                    "torch 2.99.0+cu132, this runtime has torch " TORCH_VERSION
                    ")");
  plan.torchVersion = TORCH_VERSION "+cu132"; // The same release.
  try {
    engineFor(plan);
    ADD_FAILURE() << "expected a PlanError";
  } catch (const PlanError &error) {
    EXPECT_EQ(std::string(error.what()).find("compiled with torch"),
              std::string::npos)
        << error.what();
  }
  plan.torchVersion.clear();

  plan.programs["eval"].body[1].op = "aten::relu.Bogus";
  EXPECT_THROW_WITH(engineFor(plan), PlanError,
                    "unknown operator aten::relu with overload \"Bogus\" "
                    "(known overloads: aten::relu, aten::relu.out)");

  plan.programs["eval"].body[1].op = "aten::linear";
  EXPECT_THROW_WITH(engineFor(plan), PlanError,
                    "programs.eval.body[1] (aten::linear): argument 1 "
                    "(\"weight\") is not passed and has no default");

  plan.programs["eval"].body[1].op = "aten::relu";
  plan.programs["eval"].body[1].args = {x, x};
  EXPECT_THROW_WITH(engineFor(plan), PlanError,
                    "passes 2 arguments, but the operator takes 1");

  ProgramBuilder ints;
  ValueId n = ints.scalar(ValueType::Int);
  ValueId r = ints.tensor(DType::Float32, {});
  ints.add(Op::constant(Constant::ofInt(3), n));
  ints.call("aten::relu", {n}, {r}, {n});
  ints.program.results = {r};
  EXPECT_THROW_WITH(engineFor(test::makePlan({}, ints.program)), PlanError,
                    "args[0]: %0 (int) cannot be passed as argument \"self\" "
                    "of type Tensor");
}

TEST(RuntimeExecutorTest, MeasuredPeakEqualsPrediction) {
  // x -> a = relu(x) -> b = a * a -> c = a + b -> d = sigmoid(c) -> sum(d),
  // each value freed at its last use: peak is x+a, a+b+c = 3 tensors.
  ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {64, 64});
  ValueId a = b.tensor(DType::Float32, {64, 64});
  ValueId sq = b.tensor(DType::Float32, {64, 64});
  ValueId one = b.scalar(ValueType::Int);
  ValueId c = b.tensor(DType::Float32, {64, 64});
  ValueId d = b.tensor(DType::Float32, {64, 64});
  ValueId s = b.tensor(DType::Float32, {});
  b.add(Op::input(0, x));
  b.call("aten::relu", {x}, {a}, {x});
  b.call("aten::mul.Tensor", {a, a}, {sq});
  b.add(Op::constant(Constant::ofInt(1), one));
  b.call("aten::add.Tensor", {a, sq, one}, {c}, {a, sq, one});
  b.call("aten::sigmoid", {c}, {d}, {c});
  b.call("aten::sum", {d}, {s}, {d});
  b.program.results = {s};
  Engine engine =
      engineFor(test::makePlan({floatInput("x", {64, 64})}, b.program));

  engine.forwardEval({torch::randn({64, 64})});
  int64_t predicted = predictPeakBytes(engine.plan().programs.at("eval"));
  EXPECT_EQ(predicted, 3 * 64 * 64 * 4);
  EXPECT_EQ(engine.memory().peakBytes, predicted);
  EXPECT_EQ(engine.memory().currentBytes, 0);
}

TEST(RuntimeExecutorTest, MeasuredPeakWithBranches) {
  // The then branch holds two extra tensors, the else branch none.
  ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {32});
  ValueId cond = b.tensor(DType::Bool, {});
  ValueId flag = b.scalar(ValueType::Bool);
  ValueId t1 = b.tensor(DType::Float32, {32});
  ValueId t2 = b.tensor(DType::Float32, {32});
  ValueId one = b.scalar(ValueType::Int);
  ValueId t3 = b.tensor(DType::Float32, {32});
  ValueId e1 = b.tensor(DType::Float32, {32});
  ValueId out = b.tensor(DType::Float32, {32});
  b.add(Op::input(0, x));
  b.call("aten::any", {x}, {cond});
  b.call("aten::Bool.Tensor", {cond}, {flag}, {cond});
  Branch then, otherwise;
  then.body.push_back(Op::call("aten::exp", {x}, {t1}));
  then.body.push_back(Op::call("aten::sin", {x}, {t2}));
  then.body.push_back(Op::constant(Constant::ofInt(1), one));
  then.body.push_back(Op::call("aten::add.Tensor", {t1, t2, one}, {t3}));
  then.body.back().free = {t1, t2, one};
  then.yields = {t3};
  otherwise.body.push_back(Op::call("aten::neg", {x}, {e1}));
  otherwise.yields = {e1};
  b.add(Op::ifOp(flag, then, otherwise, {out})).free = {x, flag};
  b.program.results = {out};
  Engine engine = engineFor(test::makePlan({floatInput("x", {32})}, b.program));
  int64_t predicted = predictPeakBytes(engine.plan().programs.at("eval"));
  EXPECT_EQ(predicted, 4 * 32 * 4); // x, t1, t2, t3

  engine.forwardEval({torch::zeros({32})}); // else branch
  EXPECT_EQ(engine.memory().peakBytes, 2 * 32 * 4);
  engine.forwardEval({torch::ones({32})}); // then branch
  EXPECT_EQ(engine.memory().peakBytes, predicted);
}

TEST(RuntimeExecutorTest, MaskedOffBackwardOutputsMayBeUndefined) {
  // convolution_backward with output_mask [true, true, false] (a conv
  // without bias) returns an undefined third tensor; it is unused.
  ProgramBuilder b;
  ValueId gradOut = b.tensor(DType::Float32, {1, 2, 3, 3});
  ValueId input = b.tensor(DType::Float32, {1, 1, 5, 5});
  ValueId weight = b.tensor(DType::Float32, {2, 1, 3, 3});
  ValueId none = b.scalar(ValueType::None);
  ValueId one = b.scalar(ValueType::Int);
  ValueId zero = b.scalar(ValueType::Int);
  ValueId ones = b.list(ValueType::Int);
  ValueId zeros = b.list(ValueType::Int);
  ValueId no = b.scalar(ValueType::Bool);
  ValueId yes = b.scalar(ValueType::Bool);
  ValueId mask = b.list(ValueType::Bool);
  ValueId gradInput = b.tensor(DType::Float32, {1, 1, 5, 5});
  ValueId gradWeight = b.tensor(DType::Float32, {2, 1, 3, 3});
  ValueId gradBias = b.tensor(DType::Float32, {2});
  ValueId total = b.tensor(DType::Float32, {});
  b.add(Op::input(0, gradOut));
  b.add(Op::constant(Constant::ofTensor(DType::Float32, {1, 1, 5, 5},
                                        std::string(25 * 4, '\0')),
                     input));
  b.add(Op::constant(Constant::ofTensor(DType::Float32, {2, 1, 3, 3},
                                        std::string(18 * 4, '\0')),
                     weight));
  b.add(Op::constant(Constant::none(), none));
  b.add(Op::constant(Constant::ofInt(1), one));
  b.add(Op::constant(Constant::ofInt(0), zero));
  b.add(Op::list({one, one}, ones));
  b.add(Op::list({zero, zero}, zeros));
  b.add(Op::constant(Constant::ofBool(false), no));
  b.add(Op::constant(Constant::ofBool(true), yes));
  b.add(Op::list({yes, yes, no}, mask));
  b.call(
      "aten::convolution_backward",
      {gradOut, input, weight, none, ones, zeros, ones, no, zeros, one, mask},
      {gradInput, gradWeight, gradBias}, {gradBias});
  b.call("aten::sum", {gradWeight}, {total});
  b.program.results = {total};
  Engine engine =
      engineFor(test::makePlan({floatInput("g", {1, 2, 3, 3})}, b.program));
  std::vector<at::Tensor> out = engine.forwardEval({torch::ones({1, 2, 3, 3})});
  EXPECT_EQ(out[0].item<float>(), 0.0f); // The input is zero.
}

TEST(RuntimeExecutorTest, ReadingAnUngatheredParameterNamesItAndItsBucket) {
  // ZeRO stage 3: a sharded parameter exists whole only while its bucket
  // is gathered. A valid plan never reads it otherwise (the reader checks);
  // the executor still says which parameter and bucket, with the op.
  ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {3});
  ValueId w = b.tensor(DType::Float32, {3});
  ValueId y = b.tensor(DType::Float32, {3});
  b.add(Op::input(0, x));
  b.add(Op::state("fc.weight", w));
  b.call("aten::mul.Tensor", {x, w}, {y}, {x, w});
  b.program.results = {y};
  Plan plan = test::makePlan({floatInput("x", {3})}, b.program);
  plan.state.push_back({"fc.weight",
                        StateKind::Param,
                        DType::Float32,
                        {3},
                        true,
                        "model",
                        "fc",
                        "Linear"});
  validatePlan(plan, "p.json");
  runtime::StateStore state(plan);
  state.install({{"fc.weight", torch::ones({3})}}, {}, {}, "test weights");
  at::Tensor block = torch::zeros({3});
  state.shard(0, "bucket 0 of engine \"model\"",
              [&](const at::Tensor &whole) { block.copy_(whole); });
  runtime::Executor executor(plan, "eval", state, "p.json");
  EXPECT_THROW_WITH(executor.run({torch::ones({3})}), RuntimeError,
                    "p.json: programs.eval.body[1] (state): parameter "
                    "\"fc.weight\" is not gathered: it lies in bucket 0 of "
                    "engine \"model\", which ZeRO stage 3 shards across the "
                    "ranks");
  // Gathered (attached), the same program reads it.
  at::Tensor gathered = torch::full({3}, 2.0);
  state.attach(0, gathered);
  EXPECT_TRUE(executor.run({torch::ones({3})})[0].toTensor().equal(gathered));
  state.detach(0);
  EXPECT_THROW(executor.run({torch::ones({3})}), RuntimeError);
  // A load gives the whole value to the shard's keeper.
  state.install({{"fc.weight", torch::full({3}, 5.0)}}, {}, {}, "again");
  EXPECT_TRUE(block.equal(torch::full({3}, 5.0)));
}
