//===- WeightsTest.cpp - safetensors and TorchScript weights --------------===//

#include "TestUtil.h"

#include "ds/Plan/PlanFormat.h"
#include "ds/Runtime/Engine.h"
#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/RuntimeError.h"
#include "ds/TensorIO/Safetensors.h"

#include <torch/script.h>
#include <torch/torch.h>

using namespace ds;
using ds::runtime::RuntimeError;
using ds::runtime::StateStore;
using ds::test::TempDir;

namespace {

plan::Plan twoTensorPlan() {
  plan::Plan plan;
  plan.engines.push_back({"model", ""});
  plan.state.push_back({"fc.weight",
                        plan::StateKind::Param,
                        plan::DType::Float32,
                        {2, 3},
                        true,
                        "model",
                        "fc",
                        "Linear"});
  plan.state.push_back({"fc.running",
                        plan::StateKind::Buffer,
                        plan::DType::Int64,
                        {2},
                        false,
                        "model",
                        "fc",
                        "Linear"});
  return plan;
}

/// A TorchScript archive with fc.weight (param) and fc.running (buffer),
/// made in C++ so that the test needs no Python.
void saveArchive(const std::string &path, at::Tensor weight,
                 at::Tensor running) {
  torch::jit::Module root("Net"), fc("Linear");
  fc.register_parameter("weight", weight, /*is_buffer=*/false);
  fc.register_buffer("running", running);
  root.register_module("fc", fc);
  root.save(path);
}

} // namespace

TEST(TensorIOSafetensorsTest, RoundTripsEveryDType) {
  TempDir dir;
  runtime::NamedTensors tensors = {
      {"f32", torch::randn({2, 3})},
      {"f64", torch::randn({4}, torch::kDouble)},
      {"bf16", torch::randn({3}).to(torch::kBFloat16)},
      {"i64", torch::arange(5)},
      {"bool", torch::tensor({true, false, true})},
      {"u8", torch::arange(7, torch::kByte)},
      {"scalar", torch::tensor(1.5)},
      {"empty", torch::zeros({0, 4})},
      {"strided", torch::randn({4, 4}).t()},
  };
  runtime::writeSafetensors(dir.file("t.safetensors"), tensors);
  runtime::NamedTensors back =
      runtime::readSafetensors(dir.file("t.safetensors"));
  ASSERT_EQ(back.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(back[i].first, tensors[i].first);
    EXPECT_TRUE(back[i].second.equal(tensors[i].second)) << tensors[i].first;
  }
  // The data section starts 8-byte aligned.
  std::string bytes = test::readText(dir.file("t.safetensors"));
  uint64_t headerLength = 0;
  std::memcpy(&headerLength, bytes.data(), 8);
  EXPECT_EQ(headerLength % 8, 0u);
}

TEST(TensorIOSafetensorsTest, ReportsBrokenFiles) {
  TempDir dir;
  runtime::writeSafetensors(dir.file("t.safetensors"),
                            {{"w", torch::ones({4, 4})}});
  std::string bytes = test::readText(dir.file("t.safetensors"));
  test::writeText(dir.file("short.safetensors"),
                  bytes.substr(0, bytes.size() - 8));
  EXPECT_THROW_WITH(runtime::readSafetensors(dir.file("short.safetensors")),
                    RuntimeError,
                    "short.safetensors: tensor \"w\": data_offsets [0, 64] do "
                    "not lie within the data section (56 bytes)");
  test::writeText(dir.file("tiny.safetensors"), "abc");
  EXPECT_THROW_WITH(runtime::readSafetensors(dir.file("tiny.safetensors")),
                    RuntimeError, "not a safetensors file: 3 bytes");
  std::string garbage(64, 'x');
  test::writeText(dir.file("garbage.safetensors"), garbage);
  EXPECT_THROW_WITH(runtime::readSafetensors(dir.file("garbage.safetensors")),
                    RuntimeError, "exceeds the file size (64 bytes)");
  // Found by the data-file fuzz target: a number no double holds escaped as
  // nlohmann's out_of_range.
  std::string header = R"({"w": {"dtype": "F32", "shape": [1e999]}})";
  std::string big(8, '\0');
  big[0] = char(header.size());
  test::writeText(dir.file("big.safetensors"), big + header);
  EXPECT_THROW_WITH(runtime::readSafetensors(dir.file("big.safetensors")),
                    RuntimeError,
                    "header is not valid JSON (number overflow parsing");
}

TEST(RuntimeStateStoreTest, LoadsATorchScriptArchive) {
  TempDir dir;
  at::Tensor weight = torch::randn({2, 3});
  at::Tensor running = torch::tensor({7, 8});
  saveArchive(dir.file("model.pt"), weight, running);
  plan::Plan plan = twoTensorPlan();
  StateStore store(plan);
  store.loadTorchScript(dir.file("model.pt"));
  EXPECT_TRUE(store.tensor(store.indexOf("fc.weight")).equal(weight));
  EXPECT_TRUE(store.tensor(store.indexOf("fc.running")).equal(running));
  EXPECT_EQ(store.bytes(), 6 * 4 + 2 * 8);
}

TEST(RuntimeStateStoreTest, MismatchesAreListed) {
  TempDir dir;
  saveArchive(dir.file("model.pt"), torch::randn({3, 2}),
              torch::tensor({1.f, 2.f}));
  plan::Plan plan = twoTensorPlan();
  StateStore store(plan);
  EXPECT_THROW_WITH(store.loadTorchScript(dir.file("model.pt")), RuntimeError,
                    "model.pt does not match the plan's state: \"fc.weight\": "
                    "the plan says float32 [2, 3], the file has float32 [3, "
                    "2]; \"fc.running\": the plan says int64 [2], the file has "
                    "float32 [2]");

  runtime::writeSafetensors(
      dir.file("w.safetensors"),
      {{"fc.weight", torch::zeros({2, 3})}, {"fc.extra", torch::zeros({1})}});
  EXPECT_THROW_WITH(store.loadSafetensors(dir.file("w.safetensors")),
                    RuntimeError,
                    "missing buffer \"fc.running\"; \"fc.extra\" (tensor) is "
                    "not in the plan");
  EXPECT_FALSE(store.loaded());

  EXPECT_THROW_WITH(store.loadTorchScript(dir.file("nothing.pt")), RuntimeError,
                    "nothing.pt: cannot open");
  test::writeText(dir.file("text.pt"), "not an archive");
  EXPECT_THROW_WITH(store.loadTorchScript(dir.file("text.pt")), RuntimeError,
                    "text.pt: not a TorchScript archive");
}

TEST(RuntimeStateStoreTest, KindsMustAgree) {
  TempDir dir;
  torch::jit::Module root("Net"), fc("Linear");
  fc.register_buffer("weight", torch::zeros({2, 3}));
  fc.register_parameter("running", torch::zeros({2}, torch::kLong), false);
  root.register_module("fc", fc);
  root.save(dir.file("model.pt"));
  plan::Plan plan = twoTensorPlan();
  StateStore store(plan);
  EXPECT_THROW_WITH(store.loadTorchScript(dir.file("model.pt")), RuntimeError,
                    "\"fc.weight\" is a buffer in the file, the plan says "
                    "parameter");
}

/// twoTensorPlan()'s state once under each prefix (a loss wrapper's
/// submodule).
static plan::Plan prefixedPlan(const std::vector<std::string> &prefixes) {
  plan::Plan plan = twoTensorPlan();
  std::vector<plan::StateDesc> state;
  for (const std::string &prefix : prefixes)
    for (plan::StateDesc desc : plan.state) {
      desc.name = prefix + desc.name;
      state.push_back(desc);
    }
  plan.state = state;
  return plan;
}

TEST(RuntimeStateStoreTest, WrappedModuleNamesTakeTheirPrefix) {
  TempDir dir;
  at::Tensor weight = torch::randn({2, 3});
  at::Tensor running = torch::tensor({7, 8});
  runtime::writeSafetensors(dir.file("hf.safetensors"),
                            {{"fc.weight", weight}, {"fc.running", running}});
  plan::Plan plan = prefixedPlan({"model."});
  StateStore store(plan);
  store.loadSafetensors(dir.file("hf.safetensors"));
  EXPECT_TRUE(store.tensor(store.indexOf("model.fc.weight")).equal(weight));
  EXPECT_TRUE(store.tensor(store.indexOf("model.fc.running")).equal(running));

  // Names already the plan's stay; the others take the one prefix.
  runtime::writeSafetensors(
      dir.file("mixed.safetensors"),
      {{"model.fc.weight", weight}, {"fc.running", running + 1}});
  store.loadSafetensors(dir.file("mixed.safetensors"));
  EXPECT_TRUE(
      store.tensor(store.indexOf("model.fc.running")).equal(running + 1));
}

TEST(RuntimeStateStoreTest, WrappedModuleNamesMustFitOnePrefix) {
  TempDir dir;
  runtime::writeSafetensors(
      dir.file("hf.safetensors"),
      {{"fc.weight", torch::zeros({2, 3})}, {"fc.running", torch::ones({2})}});
  plan::Plan twice = prefixedPlan({"student.", "teacher.model."});
  StateStore store(twice);
  EXPECT_THROW_WITH(store.loadSafetensors(dir.file("hf.safetensors")),
                    RuntimeError,
                    "hf.safetensors: its names match the plan's under several "
                    "prefixes (\"student.\", \"teacher.model.\"); rename them "
                    "to the plan's");

  // No prefix fits every stray name: the load names each mismatch.
  runtime::writeSafetensors(
      dir.file("extra.safetensors"),
      {{"fc.weight", torch::zeros({2, 3})}, {"fc.extra", torch::ones({2})}});
  plan::Plan once = prefixedPlan({"model."});
  StateStore other(once);
  EXPECT_THROW_WITH(other.loadSafetensors(dir.file("extra.safetensors")),
                    RuntimeError,
                    "missing parameter \"model.fc.weight\"; missing buffer "
                    "\"model.fc.running\"; \"fc.extra\" (tensor) is not in the "
                    "plan; \"fc.weight\" (tensor) is not in the plan");
  EXPECT_FALSE(other.loaded());
}

TEST(RuntimeStateStoreTest, BuffersAFileLacksKeepTheirValuesOnRequest) {
  TempDir dir;
  at::Tensor weight = torch::randn({2, 3});
  at::Tensor running = torch::tensor({7, 8});
  runtime::writeSafetensors(dir.file("all.safetensors"),
                            {{"fc.weight", weight}, {"fc.running", running}});
  runtime::writeSafetensors(dir.file("params.safetensors"),
                            {{"fc.weight", weight + 1}});
  plan::Plan plan = twoTensorPlan();
  StateStore store(plan);
  store.loadSafetensors(dir.file("all.safetensors"));
  EXPECT_TRUE(store.keptBuffers().empty());
  // A state dict without its non-persistent buffer, over the plan's weights.
  store.loadSafetensors(dir.file("params.safetensors"),
                        /*keepMissingBuffers=*/true);
  EXPECT_TRUE(store.tensor(store.indexOf("fc.weight")).equal(weight + 1));
  EXPECT_TRUE(store.tensor(store.indexOf("fc.running")).equal(running));
  EXPECT_EQ(store.keptBuffers(), std::vector<std::string>{"fc.running"});
  // Without the request, or for a parameter, a missing entry is an error.
  EXPECT_THROW_WITH(store.loadSafetensors(dir.file("params.safetensors")),
                    RuntimeError, "missing buffer \"fc.running\"");
  runtime::writeSafetensors(dir.file("buffers.safetensors"),
                            {{"fc.running", running}});
  EXPECT_THROW_WITH(
      store.loadSafetensors(dir.file("buffers.safetensors"), true),
      RuntimeError, "missing parameter \"fc.weight\"");
  // Before any load there is nothing to keep.
  StateStore fresh(plan);
  EXPECT_THROW_WITH(fresh.loadSafetensors(dir.file("params.safetensors"), true),
                    RuntimeError, "missing buffer \"fc.running\"");
}

TEST(RuntimeStateStoreTest, EngineLoadsPlanWeightsRelativeToThePlan) {
  TempDir dir;
  plan::ordered_json json = test::planJson("linear_relu_sum.json");
  json["weights"] = {{"kind", "torchscript"}, {"path", "model.pt"}};
  test::writeText(dir.file("plan.json"), json.dump());
  at::Tensor w = torch::randn({16, 8});
  at::Tensor b = torch::randn({16});
  torch::jit::Module root("Net"), fc("Linear");
  fc.register_parameter("weight", w, false);
  fc.register_parameter("bias", b, false);
  root.register_module("fc", fc);
  root.save(dir.file("model.pt"));

  runtime::Engine engine = runtime::Engine::load(dir.file("plan.json"));
  at::Tensor x = torch::randn({4, 8});
  EXPECT_TRUE(
      engine.forwardEval({x})[0].equal(at::relu(at::linear(x, w, b)).sum()));

  json.erase("weights");
  test::writeText(dir.file("plan.json"), json.dump());
  EXPECT_THROW_WITH(runtime::Engine::load(dir.file("plan.json")), RuntimeError,
                    "plan.json: the plan has 2 state tensor(s) but names no "
                    "weights file");
}
