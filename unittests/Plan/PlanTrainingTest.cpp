//===- PlanTrainingTest.cpp - Optimizers, partitions and programs.step ----===//
//
// The engines' optimizer and partition and programs.step (docs/plan-format.md,
// "The accumulation boundary"): reading, writing and every validation rule of
// them, on the hand-written
// train plan partitioned for two ranks by test::partitionEngine (17
// gradient elements in buckets of 6: [0, 6), [6, 12), [12, 18), one
// element of padding).
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "ds/Plan/PlanFormat.h"

using namespace ds;
using namespace ds::plan;

namespace {

/// parsePlan on `json` must fail with a message containing `text`.
void expectInvalid(const ordered_json &json, const std::string &text) {
  EXPECT_THROW_WITH(parsePlan(json, "training.json"), PlanError, text);
}

/// The train plan at `stage` on two ranks. programs.step:
///  stage 0: all_reduce b0..b2 (tokens %0..%2), waits, optimizer_step;
///  stage 1: reduce_scatter b0..b2, waits, optimizer_step (body[6]),
///           all_gather b0..b2 (%3..%5), waits;
///  stage 2: optimizer_step, all_gather b0..b2, waits.
/// Stage 2's programs.train: body[13], body[14] reduce_scatter b0, b1
/// (after the weight's grad op, body[12]); body[19] b2 (after the bias's,
/// body[18]); body[20..22] the waits.
ordered_json planAt(int64_t stage) {
  return toJson(
      test::zeroPlan(test::planJson("linear_mse_train.json"), 2, stage, 6));
}

ordered_json &engine(ordered_json &json) { return json["engines"][0]; }

/// A frozen engine without optimizer or partition, for planAt's plans.
ordered_json frozenEngine(const std::string &name) {
  return {{"name", name},
          {"trainable", false},
          {"zero_stage", 0},
          {"batch",
           {{"train_batch_size", 8},
            {"micro_batch_per_gpu", 4},
            {"gradient_accumulation_steps", 1}}}};
}
ordered_json &stepBody(ordered_json &json) {
  return json["programs"]["step"]["body"];
}
ordered_json &trainBody(ordered_json &json) {
  return json["programs"]["train"]["body"];
}

} // namespace

TEST(PlanTrainingTest, EveryPartitionedStageIsValidAndRoundTrips) {
  for (int64_t stage : {0, 1, 2}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    ordered_json json = planAt(stage);
    Plan plan = parsePlan(json, "training.json");
    const EngineDesc &model = plan.engines[0];
    ASSERT_TRUE(model.optimizer && model.partition);
    EXPECT_EQ(model.partition->stage, stage);
    EXPECT_EQ(model.partition->numel, 18);
    EXPECT_EQ(model.partition->buckets.size(), 3u);
    // A rank's shard: half of each bucket (stage 0 shards nothing).
    EXPECT_EQ(model.partition->shardNumel(2), stage == 0 ? 18 : 9);
    EXPECT_EQ(model.partition->shardOffset(2, 2), stage == 0 ? 12 : 6);
    EXPECT_EQ(toJson(parsePlan(ordered_json::parse(json.dump()), "rt")), json);
  }
  // Every field of the optimizer and the scheduler survives.
  Plan plan = parsePlan(planAt(2), "training.json");
  OptimizerDesc &optimizer = *plan.engines[0].optimizer;
  optimizer.type = OptimizerType::SGD;
  optimizer.lr = 0.25;
  optimizer.betas = {0.5, 0.75};
  optimizer.eps = 1e-6;
  optimizer.weightDecay = 0.125;
  optimizer.momentum = 0.9;
  optimizer.dampening = 0.0;
  optimizer.nesterov = true;
  optimizer.gradientClipping = 0.0;
  SchedulerDesc scheduler;
  scheduler.type = SchedulerType::WarmupCosineLR;
  scheduler.warmupMinLr = 0.001;
  scheduler.warmupNumSteps = 7;
  scheduler.warmupType = WarmupType::Linear;
  scheduler.totalNumSteps = 70;
  scheduler.warmupMinRatio = 0.1;
  scheduler.cosMinRatio = 0.01;
  optimizer.scheduler = scheduler;
  ordered_json json = toJson(plan);
  EXPECT_TRUE(
      json["engines"][0]["optimizer"]["scheduler"]["warmup_max_lr"].is_null());
  Plan back = parsePlan(ordered_json::parse(json.dump()), "rt");
  EXPECT_EQ(toJson(back), json);
  const OptimizerDesc &read = *back.engines[0].optimizer;
  EXPECT_EQ(read.betas[1], 0.75);
  EXPECT_TRUE(read.nesterov);
  EXPECT_EQ(read.scheduler->totalNumSteps, 70);
  EXPECT_FALSE(read.scheduler->warmupMaxLr.has_value());

  // One line per op, as FileCheck tests read them.
  std::string text = printPlan(back);
  for (const char *line :
       {"{\"kind\": \"reduce_scatter\", \"engine\": \"model\", \"bucket\": 0, "
        "\"result\": 15}",
        "{\"kind\": \"wait\", \"arg\": 15}",
        "{\"kind\": \"optimizer_step\", \"engine\": \"model\"}",
        "{\"kind\": \"all_gather\", \"engine\": \"model\", \"bucket\": 2, "
        "\"result\": 2}",
        "{\"id\": 0, \"type\": \"token\"}"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
}

TEST(PlanTrainingTest, ReadingChecksTheNewFields) {
  ordered_json json = planAt(1);
  engine(json)["optimizer"].erase("eps");
  expectInvalid(json, "training.json: engines[0].optimizer: missing required field "
                      "\"eps\"");
  json = planAt(1);
  engine(json)["optimizer"]["betas"] = {0.9};
  expectInvalid(json, "engines[0].optimizer.betas: expected two numbers "
                      "[beta1, beta2], found an array of 1");
  json = planAt(1);
  engine(json)["optimizer"]["nesterov"] = 0;
  expectInvalid(json, "engines[0].optimizer.nesterov: expected a boolean");
  json = planAt(1);
  engine(json)["optimizer"]["scheduler"] = {{"type", "WarmupLR"}};
  expectInvalid(json, "engines[0].optimizer.scheduler: missing required field "
                      "\"warmup_min_lr\"");
  json = planAt(1);
  engine(json)["partition"]["numel"] = "18";
  expectInvalid(json, "engines[0].partition.numel: expected an integer, found "
                      "string \"18\"");
  json = planAt(1);
  engine(json)["partition"]["buckets"][1].erase("offset");
  expectInvalid(json, "engines[0].partition.buckets[1]: missing required "
                      "field \"offset\"");
  json = planAt(1);
  stepBody(json)[0].erase("bucket");
  expectInvalid(json, "programs.step.body[0] (reduce_scatter): missing "
                      "required field \"bucket\"");
  json = planAt(1);
  stepBody(json)[0]["kind"] = "reduce_scatter_async";
  expectInvalid(json, "unknown op kind \"reduce_scatter_async\" (expected "
                      "input, state, set_state, constant, list, unpack, call, "
                      "if, grad, all_reduce, reduce_scatter, all_gather, wait, "
                      "optimizer_step, release, backward_prologue, "
                      "backward_epilogue, loss_scale or cotangent)");
  json = planAt(1);
  json["programs"]["eval"]["values"].push_back({{"id", 6}, {"type", "token"}});
  json["programs"]["eval"]["body"].push_back(
      {{"kind", "constant"}, {"result", 6}, {"value", 1}});
  expectInvalid(json, "programs.eval.body[6].value (constant): token "
                      "constants are not part of the format");
}

TEST(PlanTrainingTest, OptimizerValues) {
  struct Case {
    const char *key;
    ordered_json value;
    const char *message;
  };
  for (const Case &c : std::vector<Case>{
           {"type", "lamb",
            "engines[0].optimizer.type: unknown optimizer type \"lamb\" "
            "(expected \"adamw\", \"adam\" or \"sgd\")"},
           {"lr", -1.0, "engines[0].optimizer.lr: must be >= 0.0, found -1.0"},
           {"betas",
            {0.9, 1.0},
            "engines[0].optimizer.betas[1]: must be in [0, 1), found 1.0"},
           {"eps", -1e-8, "engines[0].optimizer.eps: must be >= 0.0"},
           {"weight_decay", -0.1,
            "engines[0].optimizer.weight_decay: must be >= 0.0"},
           {"gradient_clipping", -1.0,
            "engines[0].optimizer.gradient_clipping: must be >= 0.0"},
       }) {
    ordered_json json = planAt(0);
    engine(json)["optimizer"][c.key] = c.value;
    expectInvalid(json, c.message);
  }
  ordered_json json = planAt(0);
  engine(json)["optimizer"]["type"] = "sgd";
  engine(json)["optimizer"]["nesterov"] = true;
  expectInvalid(json, "engines[0].optimizer.nesterov: nesterov needs a "
                      "momentum > 0 and zero dampening (as torch.optim.SGD), "
                      "found momentum 0.0, dampening 0.0");

  ordered_json scheduler = {
      {"type", "WarmupLR"},      {"warmup_min_lr", 0.0},
      {"warmup_max_lr", 0.01},   {"warmup_num_steps", 10},
      {"warmup_type", "log"},    {"total_num_steps", nullptr},
      {"warmup_min_ratio", 0.0}, {"cos_min_ratio", 0.0001}};
  json = planAt(0);
  engine(json)["optimizer"]["scheduler"] = scheduler;
  EXPECT_NO_THROW(parsePlan(json, "ok"));
  engine(json)["optimizer"]["scheduler"]["type"] = "OneCycle";
  expectInvalid(json, "engines[0].optimizer.scheduler.type: unknown scheduler "
                      "type \"OneCycle\"");
  engine(json)["optimizer"]["scheduler"] = scheduler;
  engine(json)["optimizer"]["scheduler"]["warmup_type"] = "cosine";
  expectInvalid(json, "engines[0].optimizer.scheduler.warmup_type: unknown "
                      "warmup type \"cosine\" (expected \"log\" or "
                      "\"linear\")");
  engine(json)["optimizer"]["scheduler"] = scheduler;
  engine(json)["optimizer"]["scheduler"]["type"] = "WarmupDecayLR";
  expectInvalid(json, "engines[0].optimizer.scheduler.total_num_steps: "
                      "WarmupDecayLR needs total_num_steps >= 1, found null");
  engine(json)["optimizer"]["scheduler"]["total_num_steps"] = 100;
  EXPECT_NO_THROW(parsePlan(json, "ok"));
}

TEST(PlanTrainingTest, TrainableEnginesCarryOptimizerAndPartition) {
  ordered_json json = planAt(0);
  engine(json).erase("partition");
  expectInvalid(json, "training.json: engines[0]: a trainable engine needs "
                      "\"optimizer\" and \"partition\" (missing "
                      "\"partition\")");
  json = planAt(0);
  engine(json).erase("partition");
  engine(json)["optimizer"] = nullptr;
  expectInvalid(json, "(missing \"optimizer\" and \"partition\")");
  json = planAt(0);
  engine(json)["trainable"] = false;
  expectInvalid(json, "engines[0].optimizer: a frozen engine (\"trainable\": "
                      "false) has no \"optimizer\"");
  // Eval-only plans may carry them or not.
  json = planAt(0);
  json["programs"].erase("train");
  json["programs"].erase("step");
  EXPECT_NO_THROW(parsePlan(json, "eval-only"));
  engine(json).erase("partition");
  engine(json).erase("optimizer");
  EXPECT_NO_THROW(parsePlan(json, "eval-only"));
}

TEST(PlanTrainingTest, PartitionLayout) {
  ordered_json json = planAt(1);
  engine(json)["partition"]["stage"] = 4;
  expectInvalid(json,
                "engines[0].partition.stage: expected 0, 1, 2 or 3, found 4");
  auto params = [](ordered_json &json) -> ordered_json & {
    return engine(json)["partition"]["params"];
  };
  json = planAt(1);
  params(json)[1]["name"] = "fc.bais";
  expectInvalid(json, "engines[0].partition.params[1].name: the plan has no "
                      "state named \"fc.bais\"");
  json = planAt(1);
  params(json)[2]["name"] = "fc.bias";
  expectInvalid(json, "engines[0].partition.params[2].name: \"fc.bias\" is "
                      "placed twice (first by engines[0].partition.params[1])");
  json = planAt(1);
  params(json)[1]["offset"] = 10;
  expectInvalid(json, "engines[0].partition.params[1]: \"fc.bias\" [10, 13) "
                      "overlaps \"fc.weight\" [0, 12)");
  json = planAt(1);
  params(json)[2]["offset"] = 17;
  expectInvalid(json, "engines[0].partition.params[2].offset: "
                      "\"extra.scale\" (2 elements at offset 17) does not lie "
                      "inside [0, 18)");
  json = planAt(1);
  params(json)[0]["offset"] = -1;
  expectInvalid(json, "does not lie inside [0, 18)");
  json = planAt(1);
  params(json).erase(2);
  expectInvalid(json, "engines[0].partition.params: parameter "
                      "\"extra.scale\" of engine \"model\" has no place in "
                      "the flat buffers");
  json = planAt(1);
  json["state"][2]["dtype"] = "float64";
  expectInvalid(json, "engines[0].partition.params[2].name: \"extra.scale\" "
                      "is float64, but the engine's other parameters are "
                      "float32 (one flat buffer holds one dtype)");
  json = planAt(1);
  json["engines"].push_back(frozenEngine("other"));
  json["state"][2]["engine"] = "other";
  expectInvalid(json, "engines[0].partition.params[2].name: \"extra.scale\" "
                      "is not a trainable parameter of engine \"model\" (it "
                      "belongs to engine \"other\")");

  auto buckets = [](ordered_json &json) -> ordered_json & {
    return engine(json)["partition"]["buckets"];
  };
  json = planAt(1);
  buckets(json)[1]["offset"] = 8;
  expectInvalid(json, "engines[0].partition.buckets[1].offset: expected 6 "
                      "(buckets are sorted, disjoint and cover [0, numel) "
                      "without gaps), found 8");
  json = planAt(1);
  buckets(json)[2]["numel"] = 5;
  expectInvalid(json, "engines[0].partition.buckets[2].numel: 5 is not a "
                      "multiple of world_size 2 (each rank owns numel / "
                      "world_size of it)");
  json = planAt(1);
  buckets(json)[2]["numel"] = 0;
  expectInvalid(json, "engines[0].partition.buckets[2].numel: must be "
                      "positive, found 0");
  json = planAt(1);
  engine(json)["partition"]["numel"] = 20;
  expectInvalid(json, "engines[0].partition.buckets: the buckets cover [0, "
                      "18), but numel is 20");
  // A gap between parameters is padding, and so is the tail.
  json = planAt(1);
  params(json)[1]["offset"] = 13;
  params(json)[2]["offset"] = 16;
  EXPECT_NO_THROW(parsePlan(json, "gaps"));
}

TEST(PlanTrainingTest, ProgramsStepAndTokens) {
  ordered_json json = planAt(0);
  json["programs"].erase("step");
  expectInvalid(json, "training.json: programs: missing required program \"step\" "
                      "(the accumulation boundary's collectives and "
                      "optimizer_step; required with \"train\")");
  json = planAt(0);
  json["programs"]["step"]["results"] = {0};
  expectInvalid(json, "programs.step.results: the step program returns "
                      "nothing, found 1 result(s)");
  json = planAt(0);
  json["programs"]["step"]["values"].push_back({{"id", 3}, {"type", "float"}});
  stepBody(json).push_back(
      {{"kind", "constant"}, {"result", 3}, {"value", 1.0}});
  expectInvalid(json, "programs.step.body[7] (constant): programs.step holds "
                      "only all_reduce, reduce_scatter, all_gather, wait and "
                      "optimizer_step ops");

  // Tokens: waited exactly once, only by wait ops.
  json = planAt(0);
  stepBody(json).erase(4); // The wait for %1.
  expectInvalid(json, "programs.step.body[5] (optimizer_step): the "
                      "optimizer_step of engine \"model\" comes before the "
                      "wait for programs.step.body[1] (all_reduce) (token "
                      "%1)");
  json = planAt(1);
  stepBody(json).erase(12); // The last all_gather's wait.
  expectInvalid(json, "programs.step: token %5 (started by "
                      "programs.step.body[9] (all_gather)) is never waited");
  json = planAt(1);
  stepBody(json)[11]["arg"] = 3;
  expectInvalid(json, "programs.step.body[11] (wait): arg: token %3 is "
                      "waited twice (first by programs.step.body[10] (wait))");
  json = planAt(2);
  trainBody(json)[20]["arg"] = 5; // The loss.
  expectInvalid(json, "programs.train.body[20] (wait): arg: the operand must "
                      "be token, but %5 (tensor float32 []) is not");
  json = planAt(2);
  trainBody(json)[20]["free"] = {15};
  EXPECT_NO_THROW(parsePlan(json, "free after wait"));
  trainBody(json)[14]["free"] = {15};
  expectInvalid(json, "programs.train.body[20] (wait): arg: value %15 is used "
                      "after it was freed by programs.train.body[14] "
                      "(reduce_scatter)");
  json = planAt(1);
  json["programs"]["step"]["values"].push_back(
      {{"id", 6},
       {"type", "tensor"},
       {"dtype", "float32"},
       {"shape", ordered_json::array()}});
  stepBody(json).push_back(
      {{"kind", "call"}, {"op", "aten::abs"}, {"args", {0}}, {"results", {6}}});
  expectInvalid(json, "programs.step.body[13] (aten::abs): programs.step "
                      "holds only");
  json = planAt(2);
  trainBody(json)[17]["args"] = {15, 13}; // The bias's sum, of a token.
  expectInvalid(json, "programs.train.body[17] (aten::sum.dim_IntList): "
                      "args[0]: value %15 is a token; only wait ops take "
                      "tokens");
  json = planAt(2);
  json["programs"]["train"]["values"][9]["type"] = "token";
  json["programs"]["train"]["values"][9].erase("dtype");
  json["programs"]["train"]["values"][9].erase("shape");
  expectInvalid(json, "programs.train.body[9] (aten::mse_loss_backward): "
                      "results[0]: value %9 is a token; only all_reduce, "
                      "reduce_scatter and all_gather define tokens");
  json = planAt(1);
  json["programs"]["step"]["values"][0] = {
      {"id", 0}, {"type", "list"}, {"elem", "token"}};
  expectInvalid(json, "programs.step.values[0]: lists of tokens are not part "
                      "of the format");
  json = planAt(0);
  json["programs"]["step"]["values"][0] = {{"id", 0}, {"type", "int"}};
  expectInvalid(json, "programs.step.body[0] (all_reduce): result: the result "
                      "must be token, but %0 (int) is not");
}

TEST(PlanTrainingTest, CollectivesFollowTheStageAndTheProgram) {
  ordered_json json = planAt(0);
  stepBody(json)[0]["engine"] = "student";
  expectInvalid(json, "programs.step.body[0] (all_reduce): engine: the plan "
                      "has no engine named \"student\"");
  json = planAt(0);
  json["engines"].push_back(frozenEngine("teacher"));
  stepBody(json)[0]["engine"] = "teacher";
  expectInvalid(json, "programs.step.body[0] (all_reduce): engine: engine "
                      "\"teacher\" has no partition (a frozen engine has no "
                      "gradients to reduce and no parameters to gather)");
  json = planAt(0);
  stepBody(json)[0]["bucket"] = 3;
  expectInvalid(json, "programs.step.body[0] (all_reduce): bucket: engine "
                      "\"model\" has 3 bucket(s), found 3");

  // The kind against the stage.
  json = planAt(1);
  stepBody(json)[0]["kind"] = "all_reduce";
  expectInvalid(json, "programs.step.body[0] (all_reduce): all_reduce is for "
                      "ZeRO stage 0 engines; engine \"model\" is at stage 1 "
                      "(its gradients are reduce_scatter'ed)");
  json = planAt(0);
  stepBody(json)[0]["kind"] = "reduce_scatter";
  expectInvalid(json, "programs.step.body[0] (reduce_scatter): reduce_scatter "
                      "is for ZeRO stages 1-3; engine \"model\" is at stage 0 "
                      "(its gradients are all_reduce'd)");
  json = planAt(0);
  stepBody(json)[0]["kind"] = "all_gather";
  expectInvalid(json, "programs.step.body[0] (all_gather): all_gather is for "
                      "ZeRO stages 1-3; engine \"model\" is at stage 0 (its "
                      "parameters are not sharded)");

  // The kind against the program: stage 2's reduce_scatter in train, the
  // rest in step.
  json = planAt(1);
  json["programs"]["train"]["values"].push_back(
      {{"id", 15}, {"type", "token"}});
  trainBody(json).push_back({{"kind", "reduce_scatter"},
                             {"engine", "model"},
                             {"bucket", 0},
                             {"result", 15}});
  expectInvalid(json, "programs.train.body[17] (reduce_scatter): a stage 1 "
                      "engine's reduce_scatter belongs to programs.step");
  trainBody(json)[17]["kind"] = "all_gather";
  expectInvalid(json, "programs.train.body[17] (all_gather): all_gather "
                      "belongs to programs.step (after the engine's "
                      "optimizer_step)");
  json = planAt(0);
  json["programs"]["train"]["values"].push_back(
      {{"id", 15}, {"type", "token"}});
  trainBody(json).push_back({{"kind", "all_reduce"},
                             {"engine", "model"},
                             {"bucket", 0},
                             {"result", 15}});
  expectInvalid(json, "programs.train.body[17] (all_reduce): all_reduce "
                      "belongs to programs.step (stage 0 reduces at the "
                      "accumulation boundary)");
  json = planAt(2);
  json["programs"]["step"]["values"].push_back({{"id", 3}, {"type", "token"}});
  ordered_json reduceScatter = {{"kind", "reduce_scatter"},
                                {"engine", "model"},
                                {"bucket", 0},
                                {"result", 3}};
  stepBody(json).insert(stepBody(json).begin(), reduceScatter);
  expectInvalid(json, "programs.step.body[0] (reduce_scatter): a stage 2 "
                      "engine's reduce_scatter belongs to programs.train "
                      "(after the last grad op that writes into its bucket)");
  json = planAt(2);
  json["programs"]["eval"]["values"].push_back({{"id", 6}, {"type", "token"}});
  json["programs"]["eval"]["body"].push_back({{"kind", "reduce_scatter"},
                                              {"engine", "model"},
                                              {"bucket", 0},
                                              {"result", 6}});
  expectInvalid(json, "programs.eval.body[6] (reduce_scatter): reduce_scatter "
                      "ops do not belong to programs.eval");

  // Never inside branches: every rank runs the same collectives.
  json = planAt(2);
  ordered_json &train = json["programs"]["train"];
  train["values"].push_back({{"id", 18}, {"type", "bool"}});
  ordered_json rs = trainBody(json)[19];
  trainBody(json).erase(19);
  ordered_json constant = {
      {"kind", "constant"}, {"result", 18}, {"value", true}};
  ordered_json branch = {{"body", ordered_json::array({rs})},
                         {"yield", ordered_json::array()}};
  ordered_json empty = {{"body", ordered_json::array()},
                        {"yield", ordered_json::array()}};
  ordered_json ifOp = {{"kind", "if"},
                       {"cond", 18},
                       {"then", branch},
                       {"else", empty},
                       {"results", ordered_json::array()}};
  trainBody(json).insert(trainBody(json).begin() + 19, constant);
  trainBody(json).insert(trainBody(json).begin() + 20, ifOp);
  expectInvalid(json, "programs.train.body[20].then.body[0] (reduce_scatter): "
                      "reduce_scatter ops are not allowed inside \"if\" "
                      "branches: every rank must run the same collectives in "
                      "the same order");
}

TEST(PlanTrainingTest, EveryBucketOnceInOrder) {
  ordered_json json = planAt(0);
  stepBody(json)[1]["bucket"] = 0;
  expectInvalid(json, "programs.step.body[1] (all_reduce): bucket 0 of engine "
                      "\"model\" is reduced twice (first by "
                      "programs.step.body[0] (all_reduce))");
  json = planAt(1);
  stepBody(json)[8]["bucket"] = 0;
  expectInvalid(json, "programs.step.body[8] (all_gather): bucket 0 of engine "
                      "\"model\" is gathered twice (first by "
                      "programs.step.body[7] (all_gather))");
  json = planAt(0);
  stepBody(json)[2]["bucket"] = 1;
  stepBody(json)[1]["bucket"] = 0;
  stepBody(json)[0]["bucket"] = 2;
  EXPECT_NO_THROW(parsePlan(json, "any order"));

  // optimizer_step: after every reduction was waited, once per engine,
  // before the gathers.
  json = planAt(0);
  stepBody(json).erase(5); // The wait for %2,
  stepBody(json).erase(2); // and the all_reduce of bucket 2.
  expectInvalid(json, "programs.step.body[4] (optimizer_step): the "
                      "optimizer_step of engine \"model\" comes before the "
                      "all_reduce of bucket 2 of engine \"model\" (the update "
                      "needs the averaged gradients)");
  json = planAt(0);
  ordered_json step = stepBody(json)[6];
  stepBody(json).erase(6);
  stepBody(json).insert(stepBody(json).begin() + 2, step);
  expectInvalid(json, "programs.step.body[2] (optimizer_step): the "
                      "optimizer_step of engine \"model\" comes before the "
                      "wait for programs.step.body[0] (all_reduce) (token "
                      "%0)");
  json = planAt(0);
  stepBody(json).push_back(stepBody(json)[6]);
  expectInvalid(json, "programs.step.body[7] (optimizer_step): engine "
                      "\"model\" steps twice (first by programs.step.body[6] "
                      "(optimizer_step))");
  json = planAt(0);
  stepBody(json).erase(6);
  expectInvalid(json, "programs.step: engine \"model\" has no optimizer_step "
                      "(every trainable engine steps once at the accumulation "
                      "boundary)");
  json = planAt(0);
  json["engines"].push_back(frozenEngine("teacher"));
  stepBody(json)[6]["engine"] = "teacher";
  expectInvalid(json, "programs.step.body[6] (optimizer_step): engine: engine "
                      "\"teacher\" has no optimizer (a frozen engine is never "
                      "updated)");
  json = planAt(0);
  trainBody(json).push_back({{"kind", "optimizer_step"}, {"engine", "model"}});
  expectInvalid(json, "programs.train.body[17] (optimizer_step): "
                      "optimizer_step belongs to programs.step (the "
                      "accumulation boundary)");
  json = planAt(1);
  step = stepBody(json)[6];
  stepBody(json).erase(6);
  stepBody(json).insert(stepBody(json).begin() + 9, step);
  expectInvalid(json, "programs.step.body[6] (all_gather): all_gather of "
                      "bucket 0 of engine \"model\" comes before the engine's "
                      "optimizer_step (it gathers the updated shards)");
  json = planAt(1);
  stepBody(json).erase(9);
  stepBody(json).erase(11); // Its wait.
  expectInvalid(json, "programs.step: bucket 2 of engine \"model\" is never "
                      "all_gather'ed (stages 1-2 gather the updated shards "
                      "after optimizer_step)");
  // Stage 2: each bucket reduce-scattered in train after its last grad op.
  json = planAt(2);
  trainBody(json).erase(22); // Waits first: no dangling token.
  trainBody(json).erase(19);
  expectInvalid(json, "programs.train: bucket 2 of engine \"model\" (ZeRO "
                      "stage 2) is never reduce_scatter'ed in programs.train");
  json = planAt(2);
  // Bucket 2's reduce-scatter before the bias's grad op (body[18]).
  ordered_json early = trainBody(json)[19];
  trainBody(json).erase(19);
  trainBody(json).insert(trainBody(json).begin() + 15, early);
  expectInvalid(json, "programs.train.body[19] (grad): name: parameter "
                      "\"fc.bias\" writes into bucket 2 of engine \"model\", "
                      "which programs.train.body[15] (reduce_scatter) "
                      "reduce-scattered already (a bucket is "
                      "reduce_scatter'ed after the last grad op that writes "
                      "into it)");
}

//===----------------------------------------------------------------------===//
// ZeRO stage 3 (docs/plan-format.md, "Stage 3")
//===----------------------------------------------------------------------===//

namespace {

/// The train plan at stage 3 on two ranks (test::partitionEngine): bucket
/// 0 holds fc.weight [0, 12), bucket 1 fc.bias and extra.scale [12, 18),
/// persistent when `persistent`. programs.train: all_gather b0, b1 at the
/// start, each waited before its state op, released after the linear that
/// frees the values; again (unread) at the start of the backward.
/// programs.eval the same for the forward; programs.step: optimizer_step
/// (and the persistent bucket's all_gather and wait).
ordered_json planAt3(bool persistent = false) {
  test::Stage3Options options;
  options.persistentNumel = persistent ? 3 : 0;
  return toJson(test::zeroPlan(test::planJson("linear_mse_train.json"), 2, 3, 6,
                               0, options));
}

ordered_json &evalBody(ordered_json &json) {
  return json["programs"]["eval"]["body"];
}

/// Index of the `nth` op of `kind` (with `field` equal to `value`, when
/// given) in `body`.
size_t find(const ordered_json &body, const std::string &kind, int nth = 0,
            const std::string &field = "", const ordered_json &value = {}) {
  for (size_t i = 0; i < body.size(); ++i)
    if (body[i]["kind"] == kind && (field.empty() || body[i][field] == value) &&
        nth-- == 0)
      return i;
  ADD_FAILURE() << "no " << kind << " op";
  return 0;
}

/// Appends a value to `program`; returns its id.
int64_t addValue(ordered_json &program, ordered_json value) {
  int64_t id = int64_t(program["values"].size());
  value["id"] = id;
  program["values"].push_back(value);
  return id;
}

ordered_json release(int64_t bucket) {
  return {{"kind", "release"}, {"engine", "model"}, {"bucket", bucket}};
}

std::string at(const char *program, size_t index, const char *kind) {
  return std::string("programs.") + program + ".body[" + std::to_string(index) +
         "] (" + kind + ")";
}

} // namespace

TEST(PlanTrainingTest, StageThreeIsValidAndRoundTrips) {
  for (bool persistent : {false, true}) {
    ordered_json json = planAt3(persistent);
    Plan plan = parsePlan(json, "v3.json");
    const PartitionDesc &partition = *plan.engines[0].partition;
    EXPECT_EQ(partition.stage, 3);
    ASSERT_EQ(partition.buckets.size(), 2u);
    EXPECT_FALSE(partition.buckets[0].persistent);
    EXPECT_EQ(partition.buckets[1].persistent, persistent);
    EXPECT_TRUE(partition.shardsParameters(0));
    EXPECT_EQ(partition.shardsParameters(1), !persistent);
    EXPECT_EQ(partition.bucketAt(11), 0);
    EXPECT_EQ(partition.bucketAt(12), 1);
    EXPECT_EQ(partition.bucketAt(18), -1);
    // Stage 3 spells "persistent" on every bucket.
    EXPECT_EQ(engine(json)["partition"]["buckets"][0]["persistent"], false);
    EXPECT_EQ(engine(json)["partition"]["buckets"][1]["persistent"],
              persistent);
    EXPECT_EQ(toJson(parsePlan(ordered_json::parse(json.dump()), "rt")), json);
    // The eval program gathers and releases what it reads.
    EXPECT_EQ(evalBody(json)[find(evalBody(json), "release")], release(0));
  }
  // Other stages do not write it, and absent means false.
  ordered_json two = planAt(2);
  EXPECT_FALSE(engine(two)["partition"]["buckets"][0].contains("persistent"));
  ordered_json json = planAt3();
  engine(json)["partition"]["buckets"][1].erase("persistent");
  EXPECT_FALSE(
      parsePlan(json, "v3.json").engines[0].partition->buckets[1].persistent);
  // A release names its engine and bucket.
  json = planAt3();
  evalBody(json)[find(evalBody(json), "release")].erase("bucket");
  expectInvalid(json, "(release): missing required field \"bucket\"");
}

TEST(PlanTrainingTest, StageThreePartition) {
  ordered_json json = planAt(2);
  engine(json)["partition"]["buckets"][1]["persistent"] = true;
  expectInvalid(json, "engines[0].partition.buckets[1].persistent: only ZeRO "
                      "stage 3 buckets may be persistent (stage 3 keeps their "
                      "parameters whole); this engine is at stage 2");
  json = planAt(2);
  engine(json)["partition"]["buckets"][1]["persistent"] = false;
  EXPECT_NO_THROW(parsePlan(json, "training.json"));
  // A gathered bucket holds its parameters whole: none may straddle two.
  json = planAt3();
  engine(json)["partition"]["buckets"] = {{{"offset", 0}, {"numel", 6}},
                                          {{"offset", 6}, {"numel", 12}}};
  expectInvalid(json, "engines[0].partition.params[0].offset: \"fc.weight\" "
                      "[0, 12) does not lie inside buckets[0] [0, 6) (at ZeRO "
                      "stage 3 each parameter lies inside one bucket");
}

TEST(PlanTrainingTest, StageThreeReadsLieBetweenWaitAndRelease) {
  // Before the wait of the gather.
  ordered_json json = planAt3();
  ordered_json &body = trainBody(json);
  size_t wait = find(body, "wait");
  size_t read = find(body, "state", 0, "name", "fc.weight");
  ASSERT_EQ(read, wait + 1);
  std::swap(body[wait], body[read]);
  expectInvalid(json, at("train", wait, "state") +
                          ": name: parameter \"fc.weight\" lies in bucket 0 of "
                          "engine \"model\" (ZeRO stage 3, sharded), whose "
                          "all_gather (" +
                          at("train", 0, "all_gather") +
                          ") is not waited yet; read it after the wait");
  // Without any gather.
  json = planAt3();
  ordered_json &eval = evalBody(json);
  eval.erase(find(eval, "release", 0, "bucket", 0));
  eval.erase(find(eval, "wait", 0));
  eval.erase(find(eval, "all_gather", 0, "bucket", 0));
  read = find(eval, "state", 0, "name", "fc.weight");
  expectInvalid(json, at("eval", read, "state") +
                          ": name: parameter \"fc.weight\" lies in bucket 0 of "
                          "engine \"model\" (ZeRO stage 3, sharded), which is "
                          "not gathered here (no all_gather of it comes "
                          "before); a state op of it lies between the wait of "
                          "an all_gather of the bucket and its release");
  // After the release.
  json = planAt3();
  size_t released = find(evalBody(json), "release", 0, "bucket", 0);
  ordered_json again = evalBody(json)[find(evalBody(json), "state")];
  ordered_json &program = json["programs"]["eval"];
  int64_t w = addValue(
      program, {{"type", "tensor"}, {"dtype", "float32"}, {"shape", {3, 4}}});
  again["result"] = w;
  again["free"] = {w};
  evalBody(json).insert(evalBody(json).begin() + int64_t(released) + 1, again);
  expectInvalid(json, at("eval", released + 1, "state") +
                          ": name: parameter \"fc.weight\" lies in bucket 0 of "
                          "engine \"model\" (ZeRO stage 3, sharded), which is "
                          "not gathered here (released by " +
                          at("eval", released, "release") + ")");

  // At any depth: inside an if branch, the same rule.
  auto branchRead = [&](size_t position) {
    ordered_json json = planAt3();
    ordered_json &program = json["programs"]["eval"];
    int64_t cond = addValue(program, {{"type", "bool"}});
    int64_t w = addValue(
        program, {{"type", "tensor"}, {"dtype", "float32"}, {"shape", {3, 4}}});
    ordered_json state = {
        {"kind", "state"}, {"name", "fc.weight"}, {"result", w}};
    ordered_json ifOp = {
        {"kind", "if"},
        {"cond", cond},
        {"then",
         {{"body", ordered_json::array({state})},
          {"yield", ordered_json::array()}}},
        {"else",
         {{"body", ordered_json::array()}, {"yield", ordered_json::array()}}},
        {"results", ordered_json::array()},
        {"free", {cond}}};
    ordered_json &body = program["body"];
    body.insert(body.begin() + int64_t(position), ifOp);
    body.insert(
        body.begin() + int64_t(position),
        ordered_json{{"kind", "constant"}, {"result", cond}, {"value", true}});
    return json;
  };
  // Between the wait (body[4]) and the release: fine.
  json = planAt3();
  size_t inside = find(evalBody(json), "wait") + 1;
  EXPECT_NO_THROW(parsePlan(branchRead(inside), "v3.json"));
  size_t after = find(evalBody(json), "release", 0, "bucket", 0) + 1;
  expectInvalid(branchRead(after),
                "programs.eval.body[" + std::to_string(after + 1) +
                    "].then.body[0] (state): name: parameter \"fc.weight\" "
                    "lies in bucket 0 of engine \"model\" (ZeRO stage 3, "
                    "sharded), which is not gathered here (released by ");
}

TEST(PlanTrainingTest, StageThreeGatherWaitReleaseAlternate) {
  // Gathered twice without a release.
  ordered_json json = planAt3();
  ordered_json &program = json["programs"]["train"];
  int64_t token = addValue(program, {{"type", "token"}});
  trainBody(json).insert(trainBody(json).begin() + 1,
                         ordered_json{{"kind", "all_gather"},
                                      {"engine", "model"},
                                      {"bucket", 0},
                                      {"result", token}});
  expectInvalid(json, at("train", 1, "all_gather") +
                          ": all_gather of bucket 0 of engine \"model\" while "
                          "it is gathered already (by " +
                          at("train", 0, "all_gather") +
                          "); a sharded bucket alternates all_gather, wait and "
                          "release");
  // Released before its wait.
  json = planAt3();
  size_t released = find(trainBody(json), "release", 0, "bucket", 0);
  ordered_json op = trainBody(json)[released];
  trainBody(json).erase(released);
  trainBody(json).insert(trainBody(json).begin() + 1, op);
  int64_t gatherToken = trainBody(json)[0]["result"];
  expectInvalid(json, at("train", 1, "release") +
                          ": release of bucket 0 of engine \"model\" before "
                          "the wait of its all_gather (" +
                          at("train", 0, "all_gather") + ", token %" +
                          std::to_string(gatherToken) + ")");
  // Released without a gather.
  json = planAt3();
  evalBody(json).insert(evalBody(json).begin(), release(1));
  expectInvalid(json, at("eval", 0, "release") +
                          ": release of bucket 1 of engine \"model\", which is "
                          "not gathered here (no all_gather of it comes "
                          "before)");
  // Released twice.
  json = planAt3();
  released = find(evalBody(json), "release", 0, "bucket", 0);
  evalBody(json).insert(evalBody(json).begin() + int64_t(released) + 1,
                        release(0));
  expectInvalid(json, at("eval", released + 1, "release") +
                          ": release of bucket 0 of engine \"model\", which is "
                          "not gathered here (released already by " +
                          at("eval", released, "release") + ")");
  // Never released.
  json = planAt3();
  evalBody(json).erase(find(evalBody(json), "release", 0, "bucket", 1));
  expectInvalid(json, "training.json: programs.eval: bucket 1 of engine \"model\" "
                      "(ZeRO stage 3, sharded) is still gathered when the "
                      "program ends (gathered by " +
                          at("eval", 1, "all_gather") +
                          "); release it before the end");
  // A value read from the bucket outlives its release.
  json = planAt3();
  ordered_json &eval = evalBody(json);
  size_t linear = find(eval, "call", 0, "op", "aten::linear");
  size_t loss = find(eval, "call", 0, "op", "aten::mse_loss");
  size_t read = find(eval, "state", 0, "name", "fc.weight");
  int64_t weight = eval[read]["result"];
  eval[linear]["free"] = ordered_json::array();
  for (const ordered_json &id : evalBody(json)[linear]["args"])
    if (id != weight)
      eval[linear]["free"].push_back(id);
  eval[loss]["free"].push_back(weight);
  expectInvalid(json,
                at("eval", find(eval, "release", 0, "bucket", 0), "release") +
                    ": value %" + std::to_string(weight) + " (read by " +
                    at("eval", read, "state") +
                    ") is still live at the release of bucket 0 of "
                    "engine \"model\": it views the gathered "
                    "parameters, which the release drops; free it "
                    "before");
}

TEST(PlanTrainingTest, StageThreeOpsFollowTheProgramAndTheBucket) {
  // A sharded bucket is not gathered in programs.step.
  ordered_json json = planAt3();
  ordered_json &step = json["programs"]["step"];
  int64_t token = addValue(step, {{"type", "token"}});
  stepBody(json).push_back({{"kind", "all_gather"},
                            {"engine", "model"},
                            {"bucket", 0},
                            {"result", token}});
  stepBody(json).push_back({{"kind", "wait"}, {"arg", token}});
  expectInvalid(json, at("step", 1, "all_gather") +
                          ": all_gather of bucket 0 of engine \"model\", a "
                          "sharded bucket (ZeRO stage 3), belongs to "
                          "programs.train and programs.eval, before its "
                          "parameters are read (programs.step does not gather "
                          "it: the next forward does)");
  // A persistent bucket is gathered in programs.step only, after the
  // update, and never released.
  json = planAt3(/*persistent=*/true);
  ordered_json &train = json["programs"]["train"];
  token = addValue(train, {{"type", "token"}});
  trainBody(json).insert(trainBody(json).begin(),
                         ordered_json{{"kind", "all_gather"},
                                      {"engine", "model"},
                                      {"bucket", 1},
                                      {"result", token}});
  expectInvalid(json, at("train", 0, "all_gather") +
                          ": all_gather of a persistent bucket belongs to "
                          "programs.step (after the engine's optimizer_step)");
  json = planAt3(true);
  evalBody(json).insert(evalBody(json).begin(), release(1));
  expectInvalid(json, at("eval", 0, "release") +
                          ": bucket 1 of engine \"model\" is persistent (its "
                          "parameters stay whole on every rank); only sharded "
                          "buckets are released");
  json = planAt3(true);
  ordered_json &eval = json["programs"]["eval"];
  token = addValue(eval, {{"type", "token"}});
  evalBody(json).insert(evalBody(json).begin(),
                        ordered_json{{"kind", "all_gather"},
                                     {"engine", "model"},
                                     {"bucket", 1},
                                     {"result", token}});
  expectInvalid(json, at("eval", 0, "all_gather") +
                          ": all_gather ops do not belong to programs.eval (it "
                          "gathers only the sharded buckets of ZeRO stage 3 "
                          "engines; bucket 1 of engine \"model\" is "
                          "persistent)");
  json = planAt3(true);
  size_t gather = find(stepBody(json), "all_gather");
  int64_t gathered = stepBody(json)[gather]["result"];
  stepBody(json).erase(find(stepBody(json), "wait", 0, "arg", gathered));
  stepBody(json).erase(gather);
  expectInvalid(json, "training.json: programs.step: bucket 1 of engine \"model\" "
                      "is never all_gather'ed (stage 3 gathers the updated "
                      "shards of its persistent buckets after "
                      "optimizer_step)");
  // release: only stage 3, never in programs.step or inside branches.
  json = planAt3();
  stepBody(json).push_back(release(0));
  expectInvalid(json, at("step", 1, "release") +
                          ": programs.step holds only all_reduce, "
                          "reduce_scatter, all_gather, wait and "
                          "optimizer_step ops (release belongs to "
                          "programs.train and programs.eval: programs.step "
                          "never gathers a sharded bucket)");
  json = planAt(2);
  trainBody(json).insert(trainBody(json).begin(), release(0));
  expectInvalid(json, at("train", 0, "release") +
                          ": release is for ZeRO stage 3 engines; engine "
                          "\"model\" is at stage 2 (its parameters are never "
                          "dropped)");
  json = planAt3();
  size_t released = find(evalBody(json), "release", 0, "bucket", 0);
  int64_t cond = addValue(json["programs"]["eval"], {{"type", "bool"}});
  ordered_json ifOp = {
      {"kind", "if"},
      {"cond", cond},
      {"then",
       {{"body", ordered_json::array({release(0)})},
        {"yield", ordered_json::array()}}},
      {"else",
       {{"body", ordered_json::array()}, {"yield", ordered_json::array()}}},
      {"results", ordered_json::array()}};
  evalBody(json)[released] = ifOp;
  evalBody(json).insert(
      evalBody(json).begin() + int64_t(released),
      ordered_json{{"kind", "constant"}, {"result", cond}, {"value", true}});
  expectInvalid(json, "programs.eval.body[" + std::to_string(released + 1) +
                          "].then.body[0] (release): release ops are not "
                          "allowed inside \"if\" branches");
  json = planAt3();
  evalBody(json).insert(evalBody(json).begin(), release(2));
  expectInvalid(json, at("eval", 0, "release") +
                          ": bucket: engine \"model\" has 2 bucket(s), found "
                          "2");

  // Gradients as at stage 2: reduce_scatter in programs.train, every
  // bucket, after its last grad op.
  json = planAt3();
  token = addValue(json["programs"]["step"], {{"type", "token"}});
  stepBody(json).insert(stepBody(json).begin(),
                        ordered_json{{"kind", "reduce_scatter"},
                                     {"engine", "model"},
                                     {"bucket", 0},
                                     {"result", token}});
  expectInvalid(json, at("step", 0, "reduce_scatter") +
                          ": a stage 3 engine's reduce_scatter belongs to "
                          "programs.train (after the last grad op that writes "
                          "into its bucket)");
  json = planAt3();
  size_t scatter = find(trainBody(json), "reduce_scatter", 0, "bucket", 1);
  int64_t scattered = trainBody(json)[scatter]["result"];
  trainBody(json).erase(find(trainBody(json), "wait", 0, "arg", scattered));
  trainBody(json).erase(scatter);
  expectInvalid(json, "training.json: programs.train: bucket 1 of engine \"model\" "
                      "(ZeRO stage 3) is never reduce_scatter'ed in "
                      "programs.train");
  json = planAt3();
  size_t first = find(trainBody(json), "reduce_scatter", 0, "bucket", 0);
  ordered_json early = trainBody(json)[first];
  trainBody(json).erase(first);
  size_t grad = find(trainBody(json), "grad", 0, "name", "fc.weight");
  trainBody(json).insert(trainBody(json).begin() + int64_t(grad), early);
  expectInvalid(json,
                at("train", grad + 1, "grad") +
                    ": name: parameter \"fc.weight\" writes into bucket 0 "
                    "of engine \"model\", which " +
                    at("train", grad, "reduce_scatter") +
                    " reduce-scattered already");
}

TEST(PlanTrainingTest, BackwardPrologueAndEpilogue) {
  // Stage 2: body[12] the weight's grad, body[13..14] reduce_scatter b0, b1,
  // body[18] the bias's grad, body[19] reduce_scatter b2, body[20..22] waits.
  auto withMarkers = [](int64_t prologueAt, int64_t epilogueAt,
                        int64_t stage = 2) {
    ordered_json json = planAt(stage);
    ordered_json &body = trainBody(json);
    auto marker = [](const char *kind) {
      ordered_json op = ordered_json::object();
      op["kind"] = kind;
      op["engine"] = "model";
      return op;
    };
    body.insert(body.begin() + epilogueAt, marker("backward_epilogue"));
    body.insert(body.begin() + prologueAt, marker("backward_prologue"));
    return json;
  };
  int64_t start = planAt(2)["programs"]["train"]["backward_start"];
  Plan plan = parsePlan(withMarkers(start, 23), "training.json");
  ordered_json round = toJson(plan);
  EXPECT_EQ(round["programs"]["train"]["body"][start]["kind"],
            "backward_prologue");
  EXPECT_EQ(round["programs"]["train"]["body"][24]["kind"],
            "backward_epilogue");

  expectInvalid(withMarkers(start, 22),
                "the backward_epilogue of engine \"model\" comes before the "
                "wait for");
  // Stage 0 reduces in programs.step: an epilogue before a grad op.
  expectInvalid(withMarkers(start, start, 0),
                "a gradient of engine \"model\" after its backward_epilogue");
  expectInvalid(withMarkers(13, 23),
                "the backward_prologue of engine \"model\" comes after a "
                "gradient of it");
  expectInvalid(withMarkers(start - 1, 23),
                "backward_prologue ops belong to the backward of "
                "programs.train");
  ordered_json json = withMarkers(start, 23);
  trainBody(json).erase(trainBody(json).begin() + 24);
  expectInvalid(json, "engine \"model\" has a backward_prologue");
  json = withMarkers(start, 23);
  trainBody(json)[start]["engine"] = "nobody";
  expectInvalid(json, "the plan has no engine named \"nobody\"");
}

TEST(PlanTrainingTest, FrozenEnginesArePartitionedOnlyAtStage3) {
  ordered_json json = planAt(0);
  engine(json)["trainable"] = false;
  engine(json).erase("optimizer");
  expectInvalid(json, "engines[0].partition: a frozen engine (\"trainable\": "
                      "false) has a partition only at ZeRO stage 3");
}

TEST(PlanTrainingTest, CotangentOps) {
  // A cotangent of the loss (result 0, float32 []) right at backward_start,
  // as -ds-autodiff seeds the backward (version 9).
  auto withCotangent = [](int64_t at, int64_t index,
                          const char *dtype = "float32") {
    ordered_json json = planAt(2);
    ordered_json &values = json["programs"]["train"]["values"];
    int64_t id = int64_t(values.size());
    values.push_back({{"id", id},
                      {"type", "tensor"},
                      {"dtype", dtype},
                      {"shape", ordered_json::array()}});
    ordered_json op = {{"kind", "cotangent"}, {"index", index}, {"result", id},
                       {"free", {id}}};
    trainBody(json).insert(trainBody(json).begin() + at, op);
    return json;
  };
  int64_t start = planAt(2)["programs"]["train"]["backward_start"];
  Plan plan = parsePlan(withCotangent(start, 0), "training.json");
  const Op &op = plan.findProgram("train")->body[size_t(start)];
  EXPECT_EQ(op.kind, OpKind::Cotangent);
  EXPECT_EQ(op.index, 0);
  ordered_json round = toJson(plan);
  EXPECT_EQ(round["programs"]["train"]["body"][start]["kind"], "cotangent");
  EXPECT_EQ(round["programs"]["train"]["body"][start]["index"], 0);

  expectInvalid(withCotangent(start, 1),
                "index: 1 is not a result of the program (it has 1)");
  expectInvalid(withCotangent(start, 0, "float64"),
                "does not match result 0 of the program (float32 [])");
  expectInvalid(withCotangent(start - 1, 0),
                "cotangent ops belong to the backward of programs.train");
}
