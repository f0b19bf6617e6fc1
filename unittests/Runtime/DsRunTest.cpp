//===- DsRunTest.cpp - The ds-run tool, end to end ------------------------===//

#include "TestUtil.h"

#include "ds/Plan/PlanFormat.h"
#include "ds/Plan/Report.h"
#include "ds/Runtime/Engine.h"
#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/Safetensors.h"

#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sys/wait.h>

using namespace ds;
using namespace ds::plan;
using ds::test::TempDir;

namespace {

struct RunResult {
  int exitCode = -1;
  std::string out;
  std::string err;
};

std::string shellQuote(const std::string &text) {
  std::string quoted = "'";
  for (char c : text)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

RunResult runDsRun(const TempDir &dir, const std::vector<std::string> &args) {
  std::string command = shellQuote(DS_RUN_EXECUTABLE);
  for (const std::string &arg : args)
    command += " " + shellQuote(arg);
  command += " >" + shellQuote(dir.file("stdout")) + " 2>" +
             shellQuote(dir.file("stderr"));
  int status = std::system(command.c_str());
  RunResult result;
  result.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = test::readText(dir.file("stdout"));
  result.err = test::readText(dir.file("stderr"));
  std::remove(dir.file("stdout").c_str());
  std::remove(dir.file("stderr").c_str());
  return result;
}

void saveDict(const std::string &path, const std::string &key,
              const at::Tensor &tensor) {
  c10::Dict<std::string, at::Tensor> dict;
  dict.insert(key, tensor);
  std::vector<char> bytes = torch::jit::pickle_save(dict);
  test::writeText(path, std::string(bytes.begin(), bytes.end()));
}

/// Forward returns (sum(x), mean(x)) for x: float32 [2, 3]; GAS 2.
std::string writeTwoLossPlan(const TempDir &dir) {
  test::ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {2, 3});
  ValueId sum = b.tensor(DType::Float32, {});
  ValueId mean = b.tensor(DType::Float32, {});
  b.add(Op::input(0, x));
  b.call("aten::sum", {x}, {sum});
  b.call("aten::mean", {x}, {mean}, {x});
  b.program.results = {sum, mean};
  Plan plan = test::makePlan({{"x", DType::Float32, {2, 3}, true}}, b.program);
  plan.gradientAccumulationSteps = 2;
  plan.engines[0].batch.gradientAccumulationSteps = 2;
  writePlan(plan, dir.file("plan.json"));
  return dir.file("plan.json");
}

/// Every line of `text` parsed as JSON.
std::vector<ordered_json> jsonLines(const std::string &text) {
  std::vector<ordered_json> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    lines.push_back(ordered_json::parse(text.substr(start, end - start)));
    start = end == std::string::npos ? text.size() : end + 1;
  }
  return lines;
}

/// Seeded initial weights of plans/linear_mse_train.json, as
/// dir/w.safetensors.
void writeLinearMseWeights(const TempDir &dir) {
  torch::manual_seed(1);
  runtime::writeSafetensors(dir.file("w.safetensors"),
                            {{"fc.weight", torch::randn({3, 4})},
                             {"fc.bias", torch::randn({3})},
                             {"extra.scale", torch::randn({2})}});
}

} // namespace

TEST(RuntimeDsRunTest, EvalReportsMeanLossesPerStep) {
  TempDir dir;
  std::string plan = writeTwoLossPlan(dir);
  at::Tensor x = torch::randn({5, 2, 3});
  saveDict(dir.file("data.pt"), "x", x);
  RunResult run =
      runDsRun(dir, {plan, "--data", dir.file("data.pt"), "--eval", "--steps",
                     "2", "--losses", dir.file("losses.jsonl")});
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_EQ(run.out, test::readText(dir.file("losses.jsonl")));
  std::vector<ordered_json> lines = jsonLines(run.out);
  ASSERT_EQ(lines.size(), 2u);
  for (int step = 0; step < 2; ++step) {
    // Mean over the step's two micro-steps, per output; "loss" is the sum.
    double sum = (x[2 * step].sum().item<double>() +
                  x[2 * step + 1].sum().item<double>()) /
                 2;
    double mean = (x[2 * step].mean().item<double>() +
                   x[2 * step + 1].mean().item<double>()) /
                  2;
    EXPECT_EQ(lines[step]["step"], step + 1);
    EXPECT_NEAR(lines[step]["losses"][0].get<double>(), sum, 1e-6);
    EXPECT_NEAR(lines[step]["losses"][1].get<double>(), mean, 1e-6);
    EXPECT_NEAR(lines[step]["loss"].get<double>(), sum + mean, 1e-6);
  }
  // No temporary files left next to the outputs.
  for (const std::string &name : test::listDir(dir.path()))
    EXPECT_EQ(name.find(".tmp"), std::string::npos) << name;
}

TEST(RuntimeDsRunTest, DefaultStepsAndWeightsOverride) {
  TempDir dir;
  at::Tensor w = torch::randn({16, 8});
  at::Tensor b = torch::randn({16});
  runtime::writeSafetensors(dir.file("w.safetensors"),
                            {{"fc.weight", w}, {"fc.bias", b}});
  at::Tensor x = torch::randn({3, 4, 8});
  saveDict(dir.file("data.pt"), "in0", x);
  RunResult run = runDsRun(dir, {test::fixture("plans/linear_relu_sum.json"),
                                 "--data", dir.file("data.pt"), "--eval",
                                 "--weights", dir.file("w.safetensors")});
  ASSERT_EQ(run.exitCode, 0) << run.err;
  std::vector<ordered_json> lines = jsonLines(run.out);
  ASSERT_EQ(lines.size(), 3u); // S = 3, GAS = 1.
  for (int step = 0; step < 3; ++step) {
    EXPECT_FALSE(lines[step].contains("losses"));
    EXPECT_FLOAT_EQ(lines[step]["loss"].get<double>(),
                    at::relu(at::linear(x[step], w, b)).sum().item<float>());
  }
}

TEST(RuntimeDsRunTest, ErrorsAreOneLineAndExitCodeOne) {
  TempDir dir;
  std::string plan = writeTwoLossPlan(dir);
  saveDict(dir.file("data.pt"), "x", torch::randn({4, 2, 3}));
  saveDict(dir.file("wide.pt"), "x", torch::randn({4, 3, 3}));
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  std::vector<Case> cases = {
      {{plan, "--data", dir.file("data.pt"), "--eval", "--bogus"},
       "ds-run: error: unknown option '--bogus' (see ds-run --help)"},
      {{plan, "--eval"}, "ds-run: error: missing required option --data"},
      {{plan, "--data", dir.file("data.pt"), "--eval", "--steps", "0"},
       "ds-run: error: --steps: '0' is not a positive integer"},
      {{plan, "--data", dir.file("data.pt"), "--eval", "--steps"},
       "ds-run: error: option --steps needs a value"},
      {{plan, "--data", dir.file("data.pt"), "--save-every", "2"},
       "ds-run: error: --save-every needs --save-checkpoint DIR (see ds-run "
       "--help)"},
      {{plan, "--data", dir.file("data.pt"), "--eval", "--resume", "ck"},
       "ds-run: error: --save-checkpoint and --resume belong to training; they "
       "cannot be combined with --eval (see ds-run --help)"},
      {{plan, "--data", dir.file("data.pt")},
       "ds-run: error: " + plan +
           ": the plan has no train program (programs.train): it was "
           "compiled for evaluation only; pass --eval to run its eval "
           "program"},
      {{plan, "--data", dir.file("data.pt"), "--seed", "x"},
       "ds-run: error: --seed: 'x' is not an integer >= 0"},
      {{plan, "--data", dir.file("data.pt"), "--seed=-1"},
       "ds-run: error: --seed: '-1' is not an integer >= 0"},
      {{plan, "--data", dir.file("data.pt"), "--eval", "--steps", "3"},
       "has S = 4 micro-steps, but 6 are needed (3 step(s) x 2 gradient "
       "accumulation step(s))"},
      {{plan, "--data", dir.file("wide.pt"), "--eval"},
       "key \"x\" has B = 3 rows per micro-step"},
      {{dir.file("nothing.json"), "--data", dir.file("data.pt"), "--eval"},
       "nothing.json: cannot open plan file"},
      {{plan, "--data", dir.file("data.pt"), "--eval", "--weights",
        dir.file("none.safetensors")},
       "none.safetensors: cannot open"},
  };
  for (const Case &c : cases) {
    RunResult run = runDsRun(dir, c.args);
    EXPECT_EQ(run.exitCode, 1) << c.message;
    EXPECT_NE(run.err.find(c.message), std::string::npos)
        << "stderr: " << run.err << "\nexpected: " << c.message;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_EQ(run.err.rfind("ds-run: error: ", 0), 0u) << run.err;
  }
}

// --device: a device that cannot be had is an error naming it, before
// anything is read or written; a plan runs only on the kind of device it
// was compiled for.
TEST(RuntimeDsRunTest, DeviceErrorsNameTheDevice) {
  TempDir dir;
  writeLinearMseWeights(dir);
  runtime::writeSafetensors(dir.file("data.safetensors"),
                            {{"x", torch::randn({2, 4, 4})},
                             {"t", torch::randn({2, 4, 3})}});
  std::string plan = test::fixture("plans/linear_mse_train.json");
  plan::ordered_json cudaJson = test::planJson("linear_mse_train.json");
  cudaJson["device"] = "cuda";
  test::writeText(dir.file("cuda.json"), cudaJson.dump());
  std::vector<std::string> common = {"--data", dir.file("data.safetensors"),
                                     "--weights", dir.file("w.safetensors"),
                                     "--losses", dir.file("losses.jsonl")};
  auto run = [&](std::string planPath, std::vector<std::string> extra) {
    std::vector<std::string> args = {planPath};
    args.insert(args.end(), common.begin(), common.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return runDsRun(dir, args);
  };
  auto expectError = [&](const RunResult &result, const std::string &part) {
    EXPECT_EQ(result.exitCode, 1) << result.err;
    EXPECT_EQ(result.err.rfind("ds-run: error: ", 0), 0u) << result.err;
    EXPECT_NE(result.err.find(part), std::string::npos)
        << "stderr: " << result.err << "\nexpected: " << part;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1)
        << result.err;
    EXPECT_TRUE(result.out.empty()) << result.out;
    EXPECT_FALSE(std::ifstream(dir.file("losses.jsonl")).good());
  };

  expectError(run(plan, {"--device", "tpu"}), "unknown device 'tpu'");
  expectError(run(plan, {"--device="}), "option --device needs a non-empty value");
  expectError(run(plan, {"--device", "cpu:1"}),
              "device 'cpu:1': index 1 is out of range");
  // A plan compiled for cuda on the CPU: refused, naming both.
  expectError(run(dir.file("cuda.json"), {"--device", "cpu"}),
              "cuda.json: the plan was compiled for device 'cuda' (ds-compile "
              "--device cuda), but this run is on cpu");

  // The same plan trains on the CPU when asked by name.
  RunResult cpu = run(plan, {"--device", "cpu", "--steps", "1"});
  EXPECT_EQ(cpu.exitCode, 0) << cpu.err;
  std::remove(dir.file("losses.jsonl").c_str());

  // Without a GPU, cuda is an error that says so, never the CPU: asked for
  // by --device, or by the plan itself.
  RunResult cuda = run(plan, {"--device", "cuda"});
  if (cuda.err.find("no CUDA device is visible") == std::string::npos &&
      cuda.err.find("this build has no CUDA backend") == std::string::npos)
    GTEST_SKIP() << "a CUDA device is visible: " << cuda.err;
  // A build without the CUDA backend (-DDS_ENABLE_CUDA=OFF, as the sanitizer
  // build) says so before it looks for a device.
  std::string expected =
      cuda.err.find("this build has no CUDA backend") != std::string::npos
          ? "device 'cuda': this build has no CUDA backend"
          : "device 'cuda:0': no CUDA device is visible";
  expectError(cuda, expected);
  expectError(run(dir.file("cuda.json"), {}), expected);
}

TEST(RuntimeDsRunTest, Help) {
  TempDir dir;
  RunResult run = runDsRun(dir, {"--help"});
  EXPECT_EQ(run.exitCode, 0);
  EXPECT_EQ(run.out.rfind("usage: ds-run PLAN --data DATA", 0), 0u);
}

TEST(RuntimeDsRunTest, TrainsAndReportsEveryStep) {
  TempDir dir;
  torch::manual_seed(1);
  runtime::NamedTensors weights = {{"fc.weight", torch::randn({3, 4})},
                                   {"fc.bias", torch::randn({3})},
                                   {"extra.scale", torch::randn({2})}};
  runtime::writeSafetensors(dir.file("w.safetensors"), weights);
  at::Tensor x = torch::randn({6, 4, 4});
  at::Tensor t = torch::randn({6, 4, 3});
  runtime::writeSafetensors(dir.file("data.safetensors"), {{"x", x}, {"t", t}});
  std::string plan = test::fixture("plans/linear_mse_train.json");
  RunResult run =
      runDsRun(dir, {plan, "--data", dir.file("data.safetensors"), "--steps",
                     "3", "--weights", dir.file("w.safetensors"), "--losses",
                     dir.file("losses.jsonl"), "--save-params",
                     dir.file("params.safetensors"), "--seed", "3"});
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_EQ(run.out, test::readText(dir.file("losses.jsonl")));

  // The same training in this process: the tool's numbers are the engine's.
  runtime::LoadOptions options;
  options.weightsPath = dir.file("w.safetensors");
  runtime::Engine engine = runtime::Engine::load(plan, options);
  std::vector<ordered_json> lines = jsonLines(run.out);
  ASSERT_EQ(lines.size(), 3u);
  for (int step = 0; step < 3; ++step) {
    const ordered_json &line = lines[step];
    std::vector<std::string> keys;
    for (const auto &item : line.items())
      keys.push_back(item.key());
    EXPECT_EQ(keys, (std::vector<std::string>{"step", "loss", "lr", "grad_norm",
                                              "loss_scale", "skipped"}));
    double loss = engine.forward({x[step], t[step]})[0].item<double>();
    engine.backward();
    runtime::StepReport report = engine.step();
    EXPECT_EQ(line["step"], step + 1);
    EXPECT_EQ(line["loss"].get<double>(), loss);
    EXPECT_EQ(line["lr"].get<double>(), 0.01);
    EXPECT_EQ(line["grad_norm"].get<double>(), report.gradNorm());
    EXPECT_EQ(line["loss_scale"].get<double>(), 1.0);
    EXPECT_EQ(line["skipped"], false);
  }
  // Parameters (and buffers, were there any) by qualified name.
  runtime::NamedTensors saved =
      runtime::readSafetensors(dir.file("params.safetensors"));
  ASSERT_EQ(saved.size(), 3u);
  for (const auto &[name, tensor] : saved) {
    const at::Tensor &ours =
        engine.state().tensor(engine.state().indexOf(name));
    EXPECT_TRUE(tensor.equal(ours)) << name;
  }
  EXPECT_FALSE(saved[0].second.equal(weights[0].second)) << "it trained";
  for (const std::string &name : test::listDir(dir.path()))
    EXPECT_EQ(name.find(".tmp"), std::string::npos) << name;

  // Too little data fails before any work, naming both numbers.
  RunResult shortData =
      runDsRun(dir, {plan, "--data", dir.file("data.safetensors"), "--steps",
                     "7", "--weights", dir.file("w.safetensors")});
  EXPECT_EQ(shortData.exitCode, 1);
  EXPECT_NE(shortData.err.find("has S = 6 micro-steps, but 7 are needed (7 "
                               "step(s) x 1 gradient accumulation step(s))"),
            std::string::npos)
      << shortData.err;
  EXPECT_EQ(shortData.out, "");
}

TEST(RuntimeDsRunTest, TrainLinesForTupleLossesAndFrozenModels) {
  // The two-loss plan with a train program and no parameters: its one
  // engine has no optimizer (frozen), so there is no LR and no gradient.
  TempDir dir;
  std::string path = writeTwoLossPlan(dir);
  Plan plan = readPlan(path);
  Program train = plan.programs.at("eval");
  train.backwardStart = int64_t(train.body.size());
  plan.programs["train"] = train;
  plan.programs["step"] = Program(); // Nothing trains.
  writePlan(plan, path);
  at::Tensor x = torch::randn({4, 2, 3});
  saveDict(dir.file("data.pt"), "x", x);
  RunResult run = runDsRun(dir, {path, "--data", dir.file("data.pt")});
  ASSERT_EQ(run.exitCode, 0) << run.err;
  std::vector<ordered_json> lines = jsonLines(run.out);
  ASSERT_EQ(lines.size(), 2u); // S = 4, GAS = 2.
  for (int step = 0; step < 2; ++step) {
    double sum = (x[2 * step].sum().item<double>() +
                  x[2 * step + 1].sum().item<double>()) /
                 2;
    EXPECT_NEAR(lines[step]["losses"][0].get<double>(), sum, 1e-6);
    EXPECT_TRUE(lines[step]["lr"].is_null());
    EXPECT_EQ(lines[step]["grad_norm"].get<double>(), 0.0);
    EXPECT_EQ(lines[step]["skipped"], false);
  }
}

TEST(RuntimeDsRunTest, ReportMeasuresWhatEachZeroStagePredicts) {
  // One rank; mpi-ds-run-zero-2 and -4 do the same on several.
  TempDir dir;
  writeLinearMseWeights(dir);
  runtime::writeSafetensors(
      dir.file("data.safetensors"),
      {{"x", torch::randn({4, 4, 4})}, {"t", torch::randn({4, 4, 3})}});
  for (int64_t stage : {0, 1, 2}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    Plan plan = test::zeroPlan(test::planJson("linear_mse_train.json"), 1,
                               stage, 6, /*gap=*/1);
    writePlan(plan, dir.file("plan.json"));
    RunResult run = runDsRun(dir, {dir.file("plan.json"), "--data",
                                   dir.file("data.safetensors"), "--weights",
                                   dir.file("w.safetensors"), "--report",
                                   dir.file("report.json")});
    ASSERT_EQ(run.exitCode, 0) << run.err;
    Report measured = reportFromJson(
        ordered_json::parse(test::readText(dir.file("report.json"))));
    const RankReport &m = measured.ranks.at(0);
    const RankReport p = predictReport(plan).ranks.at(0);
    EXPECT_EQ(measured.zeroStage, stage);
    EXPECT_EQ(measured.steps, 4);
    EXPECT_EQ(m.paramBytes, p.paramBytes);
    EXPECT_EQ(m.gradBytes, p.gradBytes);
    EXPECT_EQ(m.optimizerStateBytes, p.optimizerStateBytes);
    EXPECT_EQ(m.activationPeakBytes, p.activationPeakBytes);
    EXPECT_EQ(m.transientBytes, p.transientBytes);
    EXPECT_LE(m.peakBytes, p.peakBytes);
    EXPECT_EQ(m.comm.total(), 0); // One rank moves nothing.
    // 20 elements with padding: stage 2 holds the gradient shard (all of
    // it on one rank), stage 1 a transient shard gradient.
    EXPECT_EQ(m.gradBytes, 80);
    EXPECT_EQ(m.transientBytes, stage == 0 ? 0 : stage == 1 ? 80 : 160);
  }
}

TEST(RuntimeDsRunTest, StageThreeReportsOverlapAndSavesWholeParameters) {
  // One rank at ZeRO stage 3 (mpi-ds-run-zero-2 and -4: several): the
  // report carries the collectives' timing, --save-params the whole
  // parameters (gathered), equal to a stage 0 run's.
  TempDir dir;
  writeLinearMseWeights(dir);
  runtime::writeSafetensors(
      dir.file("data.safetensors"),
      {{"x", torch::randn({4, 4, 4})}, {"t", torch::randn({4, 4, 3})}});
  std::map<int64_t, runtime::NamedTensors> saved;
  for (int64_t stage : {0, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    Plan plan = test::zeroPlan(test::planJson("linear_mse_train.json"), 1,
                               stage, 6, /*gap=*/1);
    writePlan(plan, dir.file("plan.json"));
    std::string params = dir.file("p" + std::to_string(stage) + ".safetensors");
    RunResult run = runDsRun(
        dir, {dir.file("plan.json"), "--data", dir.file("data.safetensors"),
              "--weights", dir.file("w.safetensors"), "--report",
              dir.file("report.json"), "--save-params", params});
    ASSERT_EQ(run.exitCode, 0) << run.err;
    saved[stage] = runtime::readSafetensors(params);
    Report measured = reportFromJson(
        ordered_json::parse(test::readText(dir.file("report.json"))));
    const RankReport &m = measured.ranks.at(0);
    const RankReport p = predictReport(plan).ranks.at(0);
    EXPECT_EQ(measured.zeroStage, stage);
    EXPECT_EQ(m.paramBytes, p.paramBytes);
    EXPECT_EQ(m.transientBytes, p.transientBytes);
    if (stage == 3) {
      EXPECT_EQ(m.peakBytes, p.peakBytes);
    }
    ASSERT_TRUE(m.overlap.has_value());
    // Stage 3, 4 steps of one micro-step: 2 buckets gathered twice and
    // reduce-scattered once per micro-step; one rank's norm needs no
    // all-reduce.
    EXPECT_EQ(m.overlap->allGather.count, stage == 3 ? 4 * 2 * 2 : 0);
    EXPECT_EQ(m.overlap->reduceScatter.count, stage == 3 ? 4 * 2 : 0);
    // Stage 0: 4 buckets all-reduced per step.
    EXPECT_EQ(m.overlap->allReduce.count, stage == 0 ? 4 * 4 : 0);
    EXPECT_GT(m.overlap->trainSeconds, 0.0);
  }
  ASSERT_EQ(saved[0].size(), saved[3].size());
  for (size_t k = 0; k < saved[0].size(); ++k) {
    EXPECT_EQ(saved[0][k].first, saved[3][k].first);
    EXPECT_TRUE(saved[3][k].second.allclose(saved[0][k].second, 1e-6, 1e-7))
        << saved[0][k].first;
  }
}
