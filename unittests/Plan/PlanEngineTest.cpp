//===- PlanEngineTest.cpp - The engines' typed settings -------------------===//
//
// docs/plan-format.md, "ENGINE": trainable, zero_stage, seed, batch, the
// 16-bit save policy and ds_config (provenance), and the enumerations
// (optimizer, scheduler, warmup, loss scaler, precision mode) whose unknown
// spellings are load errors at their JSON path.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "ds/Plan/PlanFormat.h"

using namespace ds;
using namespace ds::plan;

namespace {

void expectInvalid(const ordered_json &json, const std::string &text) {
  EXPECT_THROW_WITH(parsePlan(json, "v3.json"), PlanError, text);
}

ordered_json trainPlan() { return test::planJson("linear_mse_train.json"); }

ordered_json &engine(ordered_json &json) { return json["engines"][0]; }

} // namespace

TEST(PlanEngineTest, ReadsEverySetting) {
  Plan plan = parsePlan(trainPlan(), "v3.json");
  const EngineDesc &model = plan.engines[0];
  EXPECT_TRUE(model.trainable);
  EXPECT_EQ(model.zeroStage, 0);
  EXPECT_FALSE(model.seed.has_value());
  EXPECT_EQ(model.batch.trainBatchSize, 4);
  EXPECT_EQ(model.batch.microBatchPerGpu, 4);
  EXPECT_EQ(model.batch.gradientAccumulationSteps, 1);
  EXPECT_FALSE(model.gather16BitWeightsOnModelSave);
  EXPECT_EQ(model.dsConfig["train_micro_batch_size_per_gpu"], 4);

  ordered_json json = trainPlan();
  engine(json)["seed"] = 1234;
  engine(json)["gather_16bit_weights_on_model_save"] = true;
  engine(json)["batch"] = {{"train_batch_size", 8},
                           {"micro_batch_per_gpu", 4},
                           {"gradient_accumulation_steps", 2}};
  json["gradient_accumulation_steps"] = 2;
  plan = parsePlan(json, "v3.json");
  EXPECT_EQ(plan.engines[0].seed, 1234);
  EXPECT_TRUE(plan.engines[0].gather16BitWeightsOnModelSave);
  EXPECT_EQ(plan.engines[0].batch.trainBatchSize, 8);
  EXPECT_EQ(plan.engines[0].batch.gradientAccumulationSteps, 2);
  // The engines print as written.
  EXPECT_EQ(toJson(plan)["engines"], json["engines"]);
}

TEST(PlanEngineTest, OptionalSettingsHaveDefaults) {
  ordered_json json = trainPlan();
  engine(json).erase("seed");
  engine(json).erase("gather_16bit_weights_on_model_save");
  engine(json).erase("ds_config");
  Plan plan = parsePlan(json, "v3.json");
  EXPECT_FALSE(plan.engines[0].seed.has_value());
  EXPECT_FALSE(plan.engines[0].gather16BitWeightsOnModelSave);
  EXPECT_TRUE(plan.engines[0].dsConfig.empty());
}

TEST(PlanEngineTest, RequiredSettingsAndTheirTypes) {
  for (const char *key : {"trainable", "zero_stage", "batch"}) {
    ordered_json json = trainPlan();
    engine(json).erase(key);
    expectInvalid(json, std::string("v3.json: engines[0]: missing required "
                                    "field \"") +
                            key + "\"");
  }
  for (const char *key : {"train_batch_size", "micro_batch_per_gpu",
                          "gradient_accumulation_steps"}) {
    ordered_json json = trainPlan();
    engine(json)["batch"].erase(key);
    expectInvalid(json, std::string("engines[0].batch: missing required "
                                    "field \"") +
                            key + "\"");
  }
  ordered_json json = trainPlan();
  engine(json)["trainable"] = "yes";
  expectInvalid(json, "engines[0].trainable: expected a boolean");
  json = trainPlan();
  engine(json)["seed"] = 1.5;
  expectInvalid(json, "engines[0].seed: expected an integer");
  json = trainPlan();
  engine(json)["gather_16bit_weights_on_model_save"] = 1;
  expectInvalid(json, "engines[0].gather_16bit_weights_on_model_save: expected "
                      "a boolean");
  json = trainPlan();
  engine(json)["ds_config"] = "{}";
  expectInvalid(json, "engines[0].ds_config: expected an object");
}

TEST(PlanEngineTest, SettingsAreConsistent) {
  ordered_json json = trainPlan();
  engine(json)["zero_stage"] = 4;
  engine(json).erase("partition");
  json["programs"].erase("train");
  json["programs"].erase("step");
  expectInvalid(json, "engines[0].zero_stage: must be 0, 1, 2 or 3, found 4");
  json = trainPlan();
  engine(json)["zero_stage"] = 2;
  expectInvalid(json, "engines[0].partition.stage: is 0, but the engine's "
                      "zero_stage is 2");
  json = trainPlan();
  engine(json)["batch"]["micro_batch_per_gpu"] = 0;
  expectInvalid(json, "engines[0].batch.micro_batch_per_gpu: must be >= 1, "
                      "found 0");
  json = trainPlan();
  engine(json)["batch"]["gradient_accumulation_steps"] = 2;
  expectInvalid(json, "engines[0].batch.gradient_accumulation_steps: is 2, "
                      "but the plan's gradient_accumulation_steps is 1");
}

TEST(PlanEngineTest, TrainableDecidesOptimizerAndPartition) {
  // The config is provenance: an optimizer section there changes nothing.
  ordered_json json = trainPlan();
  engine(json)["trainable"] = false;
  expectInvalid(json, "engines[0].optimizer: a frozen engine (\"trainable\": "
                      "false) has no \"optimizer\"");
  json = trainPlan();
  engine(json)["ds_config"] = ordered_json::object();
  EXPECT_NO_THROW(parsePlan(json, "v3.json"));
}

TEST(PlanEngineTest, UnknownEnumValuesAreLoadErrors) {
  struct Case {
    std::vector<const char *> path;
    const char *value;
    const char *message;
  };
  ordered_json scheduler = {
      {"type", "WarmupLR"},      {"warmup_min_lr", 0.0},
      {"warmup_max_lr", 0.01},   {"warmup_num_steps", 10},
      {"warmup_type", "log"},    {"total_num_steps", nullptr},
      {"warmup_min_ratio", 0.0}, {"cos_min_ratio", 0.0001}};
  for (const Case &c : std::vector<Case>{
           {{"optimizer", "type"},
            "lamb",
            "v3.json: engines[0].optimizer.type: unknown optimizer type "
            "\"lamb\" (expected \"adamw\", \"adam\" or \"sgd\")"},
           {{"optimizer", "scheduler", "type"},
            "OneCycle",
            "v3.json: engines[0].optimizer.scheduler.type: unknown scheduler "
            "type \"OneCycle\" (expected \"WarmupLR\", \"WarmupDecayLR\" or "
            "\"WarmupCosineLR\")"},
           {{"optimizer", "scheduler", "warmup_type"},
            "cosine",
            "v3.json: engines[0].optimizer.scheduler.warmup_type: unknown "
            "warmup type \"cosine\" (expected \"log\" or \"linear\")"},
           {{"precision", "mode"},
            "fp8",
            "v3.json: engines[0].precision.mode: unknown precision mode "
            "\"fp8\" (expected \"bf16\", \"fp16\" or \"autocast\")"},
           {{"precision", "loss_scaler", "type"},
            "adaptive",
            "v3.json: engines[0].precision.loss_scaler.type: unknown loss "
            "scaler \"adaptive\" (expected \"dynamic\", \"static\" or "
            "\"grad_scaler\")"},
       }) {
    ordered_json json = trainPlan();
    engine(json)["optimizer"]["scheduler"] = scheduler;
    engine(json)["precision"] = {{"mode", "bf16"},
                                 {"param_dtype", "bfloat16"},
                                 {"master_dtype", "float32"},
                                 {"grad_accum_dtype", "bfloat16"},
                                 {"loss_scaler",
                                  {{"type", "dynamic"},
                                   {"scale", 65536.0},
                                   {"scale_window", 1000},
                                   {"hysteresis", 2},
                                   {"consecutive_hysteresis", false},
                                   {"min_scale", 1.0}}}};
    ordered_json *field = &engine(json);
    for (size_t i = 0; i + 1 < c.path.size(); ++i)
      field = &(*field)[c.path[i]];
    (*field)[c.path.back()] = c.value;
    expectInvalid(json, c.message);
  }
}

TEST(PlanEngineTest, EnumNamesRoundTrip) {
  for (OptimizerType type :
       {OptimizerType::AdamW, OptimizerType::Adam, OptimizerType::SGD})
    EXPECT_EQ(parseOptimizerType(optimizerTypeName(type)), type);
  for (SchedulerType type :
       {SchedulerType::WarmupLR, SchedulerType::WarmupDecayLR,
        SchedulerType::WarmupCosineLR})
    EXPECT_EQ(parseSchedulerType(schedulerTypeName(type)), type);
  for (WarmupType type : {WarmupType::Log, WarmupType::Linear})
    EXPECT_EQ(parseWarmupType(warmupTypeName(type)), type);
  for (LossScalerType type : {LossScalerType::Dynamic, LossScalerType::Static,
                              LossScalerType::GradScaler})
    EXPECT_EQ(parseLossScalerType(lossScalerTypeName(type)), type);
  for (PrecisionMode mode :
       {PrecisionMode::BF16, PrecisionMode::FP16, PrecisionMode::Autocast})
    EXPECT_EQ(parsePrecisionMode(precisionModeName(mode)), mode);
  EXPECT_FALSE(parseOptimizerType("AdamW").has_value());
  EXPECT_FALSE(parsePrecisionMode("fp32").has_value());
}

TEST(PlanEngineTest, OffloadOptimizerRoundTripsAndNeedsAStage) {
  // Absent: no offload.
  EXPECT_FALSE(parsePlan(trainPlan(), "v7.json").engines[0].offloadOptimizer);
  Plan plan = test::zeroPlan(trainPlan(), 2, 2, 6);
  plan.engines[0].offloadOptimizer = OffloadDesc{/*pinMemory=*/true};
  ordered_json json = toJson(plan);
  EXPECT_EQ(engine(json)["offload_optimizer"],
            ordered_json({{"device", "cpu"}, {"pin_memory", true}}));
  Plan read = parsePlan(json, "v7.json");
  ASSERT_TRUE(read.engines[0].offloadOptimizer);
  EXPECT_TRUE(read.engines[0].offloadOptimizer->pinMemory);
  // pin_memory defaults to false.
  engine(json)["offload_optimizer"].erase("pin_memory");
  EXPECT_FALSE(
      parsePlan(json, "v7.json").engines[0].offloadOptimizer->pinMemory);

  ordered_json nvme = json;
  engine(nvme)["offload_optimizer"]["device"] = "nvme";
  expectInvalid(nvme, "engines[0].offload_optimizer.device: expected \"cpu\"");
  ordered_json stage0 = trainPlan();
  engine(stage0)["offload_optimizer"] = {{"device", "cpu"}};
  expectInvalid(stage0, "engines[0].offload_optimizer: needs ZeRO stage 1, 2 "
                        "or 3");
}
