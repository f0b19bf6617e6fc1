//===- PlanFormatTest.cpp - Reading, writing and validating plans ---------===//

#include "TestUtil.h"

#include "ds/Plan/PlanFormat.h"

#include <cmath>

using namespace ds;
using namespace ds::plan;
using ds::test::planJson;
using ds::test::TempDir;

namespace {

/// parsePlan on `json` must fail with a message containing `text`.
void expectInvalid(const ordered_json &json, const std::string &text) {
  EXPECT_THROW_WITH(parsePlan(json, "test.json"), PlanError, text);
}

ordered_json base() { return planJson("linear_relu_sum.json"); }

ordered_json &evalBody(ordered_json &json) {
  return json["programs"]["eval"]["body"];
}

} // namespace

TEST(PlanFormatTest, ReadsTheCheckedInPlan) {
  Plan plan = readPlan(test::fixture("plans/linear_relu_sum.json"));
  EXPECT_EQ(plan.microBatchPerRank, 4);
  ASSERT_EQ(plan.state.size(), 2u);
  EXPECT_EQ(plan.state[0].name, "fc.weight");
  EXPECT_EQ(plan.state[0].shape, (std::vector<int64_t>{16, 8}));
  const Program *eval = plan.findProgram("eval");
  ASSERT_NE(eval, nullptr);
  ASSERT_EQ(eval->body.size(), 6u);
  EXPECT_EQ(eval->body[3].op, "aten::linear");
  EXPECT_EQ(eval->body[3].module, "fc");
  EXPECT_EQ(eval->body[3].free, (std::vector<ValueId>{0, 1, 2}));
}

TEST(PlanFormatTest, ReadsVersionsSevenAndEight) {
  // Version 7 differs from 8 only in not having the weights kind "pt2".
  ordered_json json = base();
  json["weights"] = {{"kind", "torchscript"}, {"path", "model.pt"}};
  for (int version : {7, 8}) {
    json["version"] = version;
    Plan plan = parsePlan(json, "test.json");
    ASSERT_TRUE(plan.weights);
    EXPECT_EQ(plan.weights->kind, "torchscript");
  }
  json["weights"] = {{"kind", "pt2"}, {"path", "model.pt2"}};
  json["version"] = 8;
  Plan plan = parsePlan(json, "test.json");
  EXPECT_EQ(plan.weights->kind, "pt2");
  EXPECT_EQ(plan.weights->path, "model.pt2");
  // Written back as the version this library writes.
  EXPECT_EQ(toJson(plan)["version"], kPlanFormatVersion);
  json["version"] = 7;
  expectInvalid(json, "test.json: weights.kind: the weights kind \"pt2\" "
                      "needs plan version 8, this plan is version 7");
  json["version"] = 8;
  json["weights"]["kind"] = "onnx";
  expectInvalid(json, "test.json: weights.kind: expected \"torchscript\", "
                      "\"safetensors\" or \"pt2\", found \"onnx\"");
}

TEST(PlanFormatTest, FileErrorsNameTheFile) {
  TempDir dir;
  EXPECT_THROW_WITH(readPlan(dir.file("missing.json")), PlanError,
                    "missing.json: cannot open plan file");
  test::writeText(dir.file("empty.json"), "");
  EXPECT_THROW_WITH(readPlan(dir.file("empty.json")), PlanError,
                    "empty.json: the plan file is empty");
  std::string text =
      test::readText(test::fixture("plans/linear_relu_sum.json"));
  test::writeText(dir.file("truncated.json"), text.substr(0, text.size() / 2));
  EXPECT_THROW_WITH(readPlan(dir.file("truncated.json")), PlanError,
                    "truncated.json: not valid JSON: parse error at line");
  // Found by the plan fuzz target: a number no double holds.
  test::writeText(dir.file("big.json"), "{\"version\": 1e999}");
  EXPECT_THROW_WITH(readPlan(dir.file("big.json")), PlanError,
                    "big.json: not valid JSON: number overflow parsing");
}

TEST(PlanFormatTest, FormatAndVersion) {
  ordered_json json = base();
  json["format"] = "onnx";
  expectInvalid(json, "test.json: format: expected \"ds-plan\"");
  json = base();
  json["version"] = 10;
  expectInvalid(json, "version: plan version 10 is newer than this runtime "
                      "supports (9)");
  json["version"] = 0;
  expectInvalid(json, "plan version 0 is not supported (this runtime reads "
                      "versions 7 to 9)");
  // Older plans (version 6: no offload_optimizer; version 5: no device and
  // torch version; version 4: no shape variants; version 3: no bounds of
  // dynamic tensors; version 2: the engines' settings in their DeepSpeed
  // config; version 1: no optimizer, partition or programs.step): recompile.
  for (int version = 6; version >= 1; --version) {
    json["version"] = version;
    expectInvalid(json, "test.json: version: plan version " +
                            std::to_string(version) +
                            " is not supported (this runtime reads versions "
                            "7 to 9): the plan was written by an older "
                            "ds-compile; recompile it");
  }
  json["version"] = "1";
  expectInvalid(json, "version: expected an integer, found string \"1\"");
  json = base();
  json.erase("version");
  expectInvalid(json, "(top level): missing required field \"version\"");
}

TEST(PlanFormatTest, MissingAndMistypedFields) {
  ordered_json json = base();
  json["state"][1].erase("dtype");
  expectInvalid(json, "state[1]: missing required field \"dtype\"");
  json = base();
  json["state"][0]["dtype"] = "float33";
  expectInvalid(json, "state[0].dtype: unknown dtype \"float33\" (expected "
                      "one of float32, float64");
  json = base();
  evalBody(json)[3].erase("results");
  expectInvalid(json, "programs.eval.body[3] (aten::linear): missing required "
                      "field \"results\"");
  json = base();
  evalBody(json)[4]["args"][0] = "3";
  expectInvalid(json, "programs.eval.body[4].args[0] (aten::relu): expected "
                      "an integer, found string \"3\"");
  json = base();
  evalBody(json)[0]["kind"] = "load";
  expectInvalid(json, "programs.eval.body[0].kind: unknown op kind \"load\"");
  json = base();
  json["programs"].erase("eval");
  expectInvalid(json, "programs: missing required program \"eval\"");
}

TEST(PlanFormatTest, ValuesDefinedOnceBeforeUse) {
  ordered_json json = base();
  // relu reads %4, which it defines itself.
  evalBody(json)[4]["args"][0] = 4;
  expectInvalid(json, "programs.eval.body[4] (aten::relu): args[0]: value %4 "
                      "is used before it is defined");
  json = base();
  evalBody(json)[4]["args"][0] = 40;
  expectInvalid(json, "args[0]: value %40 is out of range (the program has 6 "
                      "values)");
  json = base();
  evalBody(json)[4]["results"][0] = 3;
  expectInvalid(json, "programs.eval.body[4] (aten::relu): results[0]: value "
                      "%3 is defined twice (first by programs.eval.body[3] "
                      "(aten::linear))");
  json = base();
  evalBody(json)[3]["free"] = {0, 1, 2, 3};
  expectInvalid(json, "programs.eval.body[4] (aten::relu): args[0]: value %3 "
                      "is used after it was freed by programs.eval.body[3] "
                      "(aten::linear)");
  json = base();
  evalBody(json)[5]["free"] = {4, 5};
  expectInvalid(json, "programs.eval.results[0]: value %5 is used after it "
                      "was freed");
  json = base();
  json["programs"]["eval"]["values"][2]["id"] = 7;
  expectInvalid(json, "programs.eval.values[2]: id is 7, expected 2");
}

TEST(PlanFormatTest, TypesAndReferences) {
  ordered_json json = base();
  evalBody(json)[1]["name"] = "fc.weights";
  expectInvalid(json, "programs.eval.body[1] (state): name: the plan has no "
                      "state named \"fc.weights\"");
  json = base();
  json["programs"]["eval"]["values"][1]["shape"] = {8, 16};
  expectInvalid(json, "programs.eval.body[1] (state): result: %1 (tensor "
                      "float32 [8, 16]) does not match state \"fc.weight\" "
                      "(float32 [16, 8])");
  json = base();
  json["inputs"][0]["shape"] = {3, 8};
  expectInvalid(json, "inputs[0].shape: the first dimension of a batched "
                      "input is the per-rank micro-batch "
                      "(micro_batch_per_rank = 4), found [3, 8]");
  json = base();
  json["state"][0]["engine"] = "teacher";
  expectInvalid(json, "state[0].engine: no engine named \"teacher\" "
                      "(engines: model)");
  json = base();
  evalBody(json)[3]["op"] = "linear";
  expectInvalid(json, "op: \"linear\" is not an operator name");
  json = base();
  json["outputs"].push_back({{"name", "aux"}, {"kind", "loss"}});
  expectInvalid(json, "programs.eval.results: the eval program returns 1 "
                      "value(s), but \"outputs\" lists 2");
}

TEST(PlanFormatTest, IfBranchesAreChecked) {
  test::ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {4});
  ValueId cond = b.scalar(ValueType::Bool);
  ValueId inner = b.tensor(DType::Float32, {4});
  ValueId out = b.tensor(DType::Float32, {4});
  b.add(Op::input(0, x));
  b.add(Op::constant(Constant::ofBool(true), cond));
  Branch then;
  then.body.push_back(Op::call("aten::relu", {x}, {inner}));
  then.yields = {inner};
  Branch otherwise;
  otherwise.yields = {x};
  b.add(Op::ifOp(cond, then, otherwise, {out}));
  b.program.results = {out};
  Plan plan = test::makePlan({{"x", DType::Float32, {4}, true}}, b.program);
  EXPECT_NO_THROW(validatePlan(plan, "p"));

  Plan arity = plan;
  arity.programs["eval"].body[2].elseBranch.yields = {x, x};
  EXPECT_THROW_WITH(validatePlan(arity, "p"), PlanError,
                    "programs.eval.body[2] (if): else: the branch yields 2 "
                    "value(s), but the if op has 1 result(s)");

  Plan outerFree = plan;
  outerFree.programs["eval"].body[2].thenBranch.body[0].free = {x};
  EXPECT_THROW_WITH(validatePlan(outerFree, "p"), PlanError,
                    "programs.eval.body[2].then.body[0] (aten::relu): "
                    "free[0]: value %0 is defined outside this branch");

  Plan escape = plan;
  escape.programs["eval"].results = {inner};
  EXPECT_THROW_WITH(validatePlan(escape, "p"), PlanError,
                    "value %2 is defined inside a branch (by "
                    "programs.eval.body[2].then.body[0] (aten::relu)) and not "
                    "visible here");

  Plan notBool = plan;
  notBool.programs["eval"].values[cond].type = ValueType::Int;
  notBool.programs["eval"].body[1].value = Constant::ofInt(1);
  EXPECT_THROW_WITH(validatePlan(notBool, "p"), PlanError,
                    "cond: the condition must be bool, but %1 (int) is not");
}

TEST(PlanFormatTest, RoundTripKeepsEverything) {
  test::ProgramBuilder b;
  ValueId x = b.tensor(DType::Float32, {2, 3});
  ValueId mask = b.tensor(DType::Bool, {2, 3});
  ValueId fill = b.scalar(ValueType::Float);
  ValueId nan = b.scalar(ValueType::Float);
  ValueId name = b.scalar(ValueType::Str);
  ValueId none = b.scalar(ValueType::None);
  ValueId y = b.tensor(DType::Float32, {2, 3});
  b.add(Op::input(0, x));
  std::string bytes = {1, 0, 1, 0, 0, 1};
  b.add(Op::constant(Constant::ofTensor(DType::Bool, {2, 3}, bytes), mask));
  b.add(Op::constant(Constant::ofFloat(-INFINITY), fill));
  b.add(Op::constant(Constant::ofFloat(NAN), nan));
  b.add(Op::constant(Constant::ofStr("tanh"), name));
  b.add(Op::constant(Constant::none(), none));
  b.call("aten::masked_fill.Scalar", {x, mask, fill}, {y}, {x, mask, fill});
  b.program.results = {y};
  Plan plan = test::makePlan({{"x", DType::Float32, {2, 3}, true}}, b.program);
  plan.weights = WeightsDesc{"torchscript", "model.pt"};

  ordered_json json = toJson(plan);
  EXPECT_EQ(json["programs"]["eval"]["body"][2]["value"], "-inf");
  EXPECT_EQ(json["programs"]["eval"]["body"][3]["value"], "nan");
  EXPECT_EQ(json["programs"]["eval"]["body"][1]["value"]["base64"], "AQABAAAB");
  Plan back = parsePlan(ordered_json::parse(json.dump()), "round-trip");
  EXPECT_EQ(toJson(back), json);
  const Program &eval = back.programs.at("eval");
  EXPECT_TRUE(std::isinf(eval.body[2].value.floatValue));
  EXPECT_TRUE(std::isnan(eval.body[3].value.floatValue));
  EXPECT_EQ(eval.body[1].value.tensorBytes, bytes);
  EXPECT_EQ(eval.body[4].value.strValue, "tanh");
  EXPECT_EQ(eval.body[5].value.kind, Constant::Kind::None);
  EXPECT_EQ(back.weights->path, "model.pt");
}

TEST(PlanFormatTest, DeviceAndTorchVersion) {
  // The checked-in plan names its device and, hand-written, no torch
  // version.
  Plan plan = parsePlan(base(), "test.json");
  EXPECT_EQ(plan.device, "cpu");
  EXPECT_EQ(plan.torchVersion, "");
  // Absent, the device is the CPU.
  ordered_json json = base();
  json.erase("device");
  EXPECT_EQ(parsePlan(json, "test.json").device, "cpu");

  // Both fields survive writing and reading.
  plan.device = "cuda";
  plan.torchVersion = "2.15.0+cu132";
  json = toJson(plan);
  EXPECT_EQ(json["device"], "cuda");
  EXPECT_EQ(json["torch_version"], "2.15.0+cu132");
  Plan back = parsePlan(ordered_json::parse(json.dump()), "round-trip");
  EXPECT_EQ(back.device, "cuda");
  EXPECT_EQ(back.torchVersion, "2.15.0+cu132");
  EXPECT_EQ(toJson(back), json);

  // Any other device is refused, named; so is a device that is no string.
  json = base();
  json["device"] = "tpu";
  expectInvalid(json, "test.json: device: expected \"cpu\" or \"cuda\" (the "
                      "device the plan is compiled for), found \"tpu\"");
  json["device"] = "CUDA";
  expectInvalid(json, "found \"CUDA\"");
  json["device"] = 1;
  expectInvalid(json, "device: expected a string");
  json = base();
  json["torch_version"] = 2.15;
  expectInvalid(json, "torch_version: expected a string");
  // The writer validates too.
  plan.device = "gpu";
  EXPECT_THROW_WITH(validatePlan(plan, "written"), PlanError,
                    "written: device: expected \"cpu\" or \"cuda\"");
}

TEST(PlanFormatTest, TorchVersionNote) {
  // The runtime's error for an operator it lacks names both versions when
  // they are different releases.
  EXPECT_EQ(torchVersionNote("2.15.0+cu132", "2.11.0"),
            " (the plan was compiled with torch 2.15.0+cu132, this runtime "
            "has torch 2.11.0)");
  EXPECT_EQ(torchVersionNote("2.11.0", "2.15.0"),
            " (the plan was compiled with torch 2.11.0, this runtime has "
            "torch 2.15.0)");
  // The build tag after '+' names the build, not the operators.
  EXPECT_TRUE(sameTorchRelease("2.15.0+cu132", "2.15.0"));
  EXPECT_TRUE(sameTorchRelease("2.15.0+cpu", "2.15.0+cu132"));
  EXPECT_FALSE(sameTorchRelease("2.15.0", "2.15.1"));
  EXPECT_FALSE(sameTorchRelease("2.15.0", "2.1"));
  EXPECT_EQ(torchVersionNote("2.15.0+cu132", "2.15.0"), "");
  // Unknown on either side (a hand-written plan): nothing to say.
  EXPECT_EQ(torchVersionNote("", "2.15.0"), "");
  EXPECT_EQ(torchVersionNote("2.15.0", ""), "");
}

TEST(PlanFormatTest, ConstantsMatchTheirValueType) {
  ordered_json json = base();
  auto &values = json["programs"]["eval"]["values"];
  values.push_back({{"id", 6}, {"type", "float"}});
  values.push_back(
      {{"id", 7}, {"type", "tensor"}, {"dtype", "int32"}, {"shape", {2}}});
  evalBody(json).push_back({{"kind", "constant"}, {"result", 6}, {"value", 1}});
  ordered_json ok = json;
  ok["programs"]["eval"]["body"].push_back(
      {{"kind", "constant"},
       {"result", 7},
       {"value",
        {{"dtype", "int32"}, {"shape", {2}}, {"base64", "AQAAAAIAAAA="}}}});
  Plan plan = parsePlan(ok, "ok");
  EXPECT_EQ(plan.programs["eval"].body[6].value.kind, Constant::Kind::Float);
  EXPECT_EQ(plan.programs["eval"].body[6].value.floatValue, 1.0);

  ordered_json shortBytes = json;
  shortBytes["programs"]["eval"]["body"].push_back(
      {{"kind", "constant"},
       {"result", 7},
       {"value",
        {{"dtype", "int32"}, {"shape", {2}}, {"base64", "AQAAAA=="}}}});
  expectInvalid(shortBytes, "programs.eval.body[7].value.base64 (constant): "
                            "holds 4 bytes, but a int32 tensor of shape [2] "
                            "needs 8");
  ordered_json wrongType = json;
  wrongType["programs"]["eval"]["body"][6]["value"] = "abc";
  expectInvalid(wrongType, "expected a float constant (a number, \"nan\", "
                           "\"inf\" or \"-inf\"), found string \"abc\"");
}

TEST(PlanFormatTest, WritePlanIsAtomicAndValidates) {
  TempDir dir;
  Plan plan = readPlan(test::fixture("plans/linear_relu_sum.json"));
  std::string path = dir.file("out.json");
  writePlan(plan, path);
  EXPECT_EQ(test::listDir(dir.path()), std::vector<std::string>{"out.json"});
  EXPECT_EQ(toJson(readPlan(path)), toJson(plan));
  // One line per op, for diffs and FileCheck.
  EXPECT_NE(test::readText(path).find(
                "\n    {\"kind\": \"call\", \"op\": \"aten::relu\", "
                "\"args\": [3], \"results\": [4], \"module\": \"\", "),
            std::string::npos)
      << test::readText(path);

  // A second write replaces the file; an invalid plan leaves it untouched.
  std::string before = test::readText(path);
  Plan broken = plan;
  broken.programs["eval"].body[4].args = {99};
  EXPECT_THROW_WITH(writePlan(broken, path), PlanError,
                    "value %99 is out of range");
  EXPECT_EQ(test::readText(path), before);
  EXPECT_THROW_WITH(writePlan(plan, dir.file("no/such/dir/out.json")),
                    PlanError, "cannot create a temporary file");
  EXPECT_EQ(test::listDir(dir.path()), std::vector<std::string>{"out.json"});
}

//===----------------------------------------------------------------------===//
// programs.train: grad ops and backward_start
//===----------------------------------------------------------------------===//

namespace {

ordered_json trainBase() { return planJson("linear_mse_train.json"); }

ordered_json &trainBody(ordered_json &json) {
  return json["programs"]["train"]["body"];
}

} // namespace

TEST(PlanFormatTest, ReadsTheTrainPlan) {
  Plan plan = readPlan(test::fixture("plans/linear_mse_train.json"));
  const Program *train = plan.findProgram("train");
  ASSERT_NE(train, nullptr);
  EXPECT_EQ(train->backwardStart, 6);
  EXPECT_FALSE(plan.findProgram("eval")->backwardStart.has_value());
  const Op &grad = train->body[12];
  EXPECT_EQ(grad.kind, OpKind::Grad);
  EXPECT_EQ(grad.name, "fc.weight");
  EXPECT_EQ(grad.arg, 11);
  EXPECT_TRUE(grad.results.empty());
  EXPECT_EQ(grad.label(), "grad");

  // Round trip, and the writer's one line per op.
  ordered_json json = toJson(plan);
  EXPECT_EQ(json["programs"]["train"]["backward_start"], 6);
  EXPECT_FALSE(json["programs"]["eval"].contains("backward_start"));
  EXPECT_EQ(toJson(parsePlan(ordered_json::parse(json.dump()), "rt")), json);
  EXPECT_NE(
      printPlan(plan).find("{\"kind\": \"grad\", \"name\": \"fc.weight\", "
                           "\"arg\": 11, \"free\": [11]}"),
      std::string::npos);
  EXPECT_EQ(Op::grad("fc.bias", 14).kind, OpKind::Grad);
}

TEST(PlanFormatTest, BadGradOps) {
  ordered_json json = trainBase();
  trainBody(json)[12]["name"] = "fc.weights";
  expectInvalid(json, "programs.train.body[12] (grad): name: the plan has no "
                      "state named \"fc.weights\"");
  json = trainBase();
  json["state"][0]["requires_grad"] = false;
  expectInvalid(json, "engines[0].partition.params[0].name: \"fc.weight\" is "
                      "not a trainable parameter of engine \"model\" "
                      "(\"requires_grad\": false)");
  json["engines"][0]["partition"]["params"].erase(0);
  expectInvalid(json, "programs.train.body[12] (grad): name: parameter "
                      "\"fc.weight\" does not require grad");
  json = trainBase();
  json["state"].push_back({{"name", "bn.running_mean"},
                           {"kind", "buffer"},
                           {"dtype", "float32"},
                           {"shape", {3}},
                           {"engine", "model"}});
  trainBody(json)[16]["name"] = "bn.running_mean";
  expectInvalid(json, "programs.train.body[16] (grad): name: "
                      "\"bn.running_mean\" is a buffer; only parameters have "
                      "gradients");
  json = trainBase();
  trainBody(json)[16]["arg"] = 11; // The weight's gradient, already freed.
  expectInvalid(json, "programs.train.body[16] (grad): arg: value %11 is used "
                      "after it was freed by programs.train.body[12] (grad)");
  json = trainBase();
  trainBody(json)[12]["free"] = ordered_json::array();
  trainBody(json)[16]["arg"] = 11; // A [3, 4] tensor for the [3] bias.
  expectInvalid(json, "programs.train.body[16] (grad): arg: %11 (tensor "
                      "float32 [3, 4]) does not match parameter \"fc.bias\" "
                      "(float32 [3])");
  json = trainBase();
  trainBody(json)[15]["free"] = {9};
  trainBody(json)[16]["arg"] = 13;
  expectInvalid(json, "programs.train.body[16] (grad): arg: the value must be "
                      "tensor, but %13 (list of int) is not");
  json = trainBase();
  trainBody(json)[12].erase("arg");
  expectInvalid(json, "programs.train.body[12] (grad): missing required field "
                      "\"arg\"");
  json = trainBase();
  evalBody(json).push_back({{"kind", "grad"}, {"name", "fc.bias"}, {"arg", 5}});
  expectInvalid(json, "programs.eval.body[6] (grad): grad ops belong to "
                      "programs.train");
}

TEST(PlanFormatTest, BackwardStart) {
  ordered_json json = trainBase();
  json["programs"]["train"].erase("backward_start");
  expectInvalid(json, "programs.train: missing required field "
                      "\"backward_start\"");
  json = trainBase();
  json["programs"]["train"]["backward_start"] = 18;
  expectInvalid(json, "programs.train.backward_start: must be in [0, 17] (the "
                      "body has 17 ops), found 18");
  json["programs"]["train"]["backward_start"] = -1;
  expectInvalid(json, "found -1");
  json["programs"]["train"]["backward_start"] = "6";
  expectInvalid(json, "programs.train.backward_start: expected an integer");
  json = trainBase();
  json["programs"]["train"]["backward_start"] = 5; // Before mse_loss.
  expectInvalid(json, "programs.train.results[0]: value %5 is computed by "
                      "programs.train.body[5] (aten::mse_loss), after "
                      "backward_start (5); the results (the losses) must be "
                      "computed by the forward part");
  // Both ends are allowed: an all-backward body has no results to return.
  json["programs"]["train"]["backward_start"] = 17;
  EXPECT_NO_THROW(parsePlan(json, "end"));
  json = trainBase();
  json["programs"]["train"]["results"] = {5, 5};
  expectInvalid(json, "programs.train.results: the train program returns 2 "
                      "value(s), but \"outputs\" lists 1");
  // Ignored outside programs.train, but still range-checked.
  json = trainBase();
  json["programs"]["eval"]["backward_start"] = 3;
  EXPECT_NO_THROW(parsePlan(json, "eval"));
  json["programs"]["eval"]["backward_start"] = 9;
  expectInvalid(json, "programs.eval.backward_start: must be in [0, 6]");
}

TEST(PlanFormatTest, BoundsOfDynamicValues) {
  ordered_json json = base();
  ordered_json &relu = json["programs"]["eval"]["values"][4];
  relu["shape"] = {-1, 16};
  relu["bound"] = {4, 16};
  Plan plan = parsePlan(json, "test.json");
  EXPECT_EQ(plan.programs.at("eval").values[4].bound,
            (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(plan.programs.at("eval").values[3].bound, std::nullopt);
  ordered_json written = toJson(plan);
  EXPECT_EQ(written["programs"]["eval"]["values"][4]["bound"], relu["bound"]);
  EXPECT_FALSE(written["programs"]["eval"]["values"][3].contains("bound"));

  // Only on dynamic tensors, one entry per dim, >= 0, static dims equal.
  json = base();
  json["programs"]["eval"]["values"][3]["bound"] = {4, 16};
  expectInvalid(json, "programs.eval.values[3]: \"bound\" is only allowed on "
                      "tensor values with a dynamic dimension in \"shape\"");
  json = base();
  json["programs"]["eval"]["values"][4]["shape"] = {-1, 16};
  json["programs"]["eval"]["values"][4]["bound"] = {4};
  expectInvalid(json, "programs.eval.values[4].bound: has 1 dimensions, but "
                      "the shape [-1, 16] has 2");
  json["programs"]["eval"]["values"][4]["bound"] = {-1, 16};
  expectInvalid(json, "programs.eval.values[4].bound: dimension 0 is -1 (a "
                      "bound is at least 0)");
  json["programs"]["eval"]["values"][4]["bound"] = {4, 32};
  expectInvalid(json, "programs.eval.values[4].bound: dimension 1 is 32, but "
                      "the shape [-1, 16] fixes it to 16");
  json["programs"]["eval"]["values"][4]["bound"] = "4x16";
  expectInvalid(json, "programs.eval.values[4].bound: expected an array");
}

TEST(PlanFormatTest, ShapeVariants) {
  ordered_json json = planJson("linear_mse_train.json");
  // Edits a variant for batches of 2 rows (or, for the first check, keeps
  // the plan's own shapes).
  auto withVariant = [&](auto edit, int64_t rows = 2) {
    ordered_json copy = json;
    ordered_json variant = test::batchVariant(json, rows);
    edit(variant);
    copy["variants"] = ordered_json::array({variant});
    return copy;
  };
  ordered_json smaller = withVariant([](ordered_json &) {});
  Plan plan = parsePlan(smaller, "test.json");
  ASSERT_EQ(plan.variants.size(), 1u);
  EXPECT_EQ(plan.numShapes(), 2u);
  EXPECT_EQ(plan.variants[0].microBatchPerRank, 2);
  EXPECT_EQ(toJson(parsePlan(ordered_json::parse(toJson(plan).dump()), "rt")),
            toJson(plan));
  // withVariant: the variant's inputs and programs, the plan's step, device
  // and torch version.
  plan.device = "cuda";
  plan.torchVersion = "2.15.0";
  Plan shape = plan.withVariant(0);
  EXPECT_EQ(shape.device, "cuda");
  EXPECT_EQ(shape.torchVersion, "2.15.0");
  EXPECT_EQ(shape.microBatchPerRank, 2);
  EXPECT_EQ(shape.inputs[0].shape, (std::vector<int64_t>{2, 4}));
  EXPECT_TRUE(shape.variants.empty());
  EXPECT_NE(shape.findProgram("step"), nullptr);
  // matchShape: the first shape the per-rank shapes fit.
  EXPECT_EQ(plan.matchShape({{4, 4}, {4, 3}}), std::optional<size_t>(0));
  EXPECT_EQ(plan.matchShape({{2, 4}, {2, 3}}), std::optional<size_t>(1));
  EXPECT_EQ(plan.matchShape({{3, 4}, {3, 3}}), std::nullopt);

  expectInvalid(withVariant([](ordered_json &) {}, 4),
                "test.json: variants[0].inputs: the shapes are taken by the "
                "plan's inputs already; the variant would never run");
  expectInvalid(
      withVariant([](ordered_json &v) { v["inputs"][0]["dtype"] = "float64"; }),
      "test.json: variants[0].inputs[0]: \"x\" (float64) differs from the "
      "plan's input \"x\" (float32): a variant changes shapes only");
  expectInvalid(
      withVariant(
          [](ordered_json &v) { v["inputs"].erase(v["inputs"].begin()); }),
      "test.json: variants[0].inputs: has 1 input(s), the plan has 2");
  expectInvalid(withVariant([&](ordered_json &v) {
                  v["programs"]["step"] = json["programs"]["step"];
                }),
                "test.json: variants[0].programs: unexpected program "
                "\"step\" (a variant has \"eval\" and \"train\"; it shares "
                "the plan's \"step\")");
  expectInvalid(
      withVariant([&](ordered_json &v) { v["programs"].erase("train"); }),
      "test.json: variants[0].programs: missing program \"train\" (the plan "
      "trains)");
  // The variant's programs are checked against its own inputs.
  expectInvalid(withVariant([](ordered_json &v) {
                  v["programs"] =
                      test::planJson("linear_mse_train.json")["programs"];
                  v["programs"].erase("step");
                }),
                "test.json: variants[0]: programs.");
}
