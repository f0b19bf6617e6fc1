//===- PlanPrecisionTest.cpp - Engine precision, bucket dtypes, loss_scale ===//
//
// Mixed precision in the plan (docs/plan-format.md, "Mixed precision"):
// reading, writing and validating an engine's `precision`, a bucket's
// `dtype` and the `loss_scale` op, on the hand-written stage 2 train plan
// of PlanV2Test turned fp16 (every float32 value and state entry float16).
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "ds/Plan/PlanFormat.h"

using namespace ds;
using namespace ds::plan;

namespace {

void expectInvalid(const ordered_json &json, const std::string &text) {
  EXPECT_THROW_WITH(parsePlan(json, "precision.json"), PlanError, text);
}

bool isFloat(const ordered_json &dtype) {
  return dtype == "float32" || dtype == "float16" || dtype == "bfloat16";
}

/// Every float input, state entry and program value becomes `dtype`.
void retype(ordered_json &json, const char *dtype) {
  for (const char *list : {"state", "inputs"})
    for (ordered_json &entry : json[list])
      if (isFloat(entry["dtype"]))
        entry["dtype"] = dtype;
  for (auto &[name, program] : json["programs"].items())
    for (ordered_json &value : program["values"])
      if (value.contains("dtype") && isFloat(value["dtype"]))
        value["dtype"] = dtype;
}

ordered_json scaler() {
  return {{"type", "dynamic"},
          {"scale", 65536.0},
          {"scale_window", 1000},
          {"hysteresis", 2},
          {"consecutive_hysteresis", false},
          {"min_scale", 1.0}};
}

/// The stage 2 plan on two ranks as an fp16 engine, with a loss_scale op
/// (result %15) right at backward_start.
ordered_json fp16Plan() {
  ordered_json json =
      toJson(test::zeroPlan(test::planJson("linear_mse_train.json"), 2, 2, 6));
  retype(json, "float16");
  // The loss scale stays float32.
  json["engines"][0]["precision"] = {{"mode", "fp16"},
                                     {"param_dtype", "float16"},
                                     {"master_dtype", "float32"},
                                     {"grad_accum_dtype", "float32"},
                                     {"loss_scaler", scaler()}};
  ordered_json &train = json["programs"]["train"];
  int64_t id = int64_t(train["values"].size());
  train["values"].push_back({{"id", id},
                             {"type", "tensor"},
                             {"dtype", "float32"},
                             {"shape", ordered_json::array()}});
  int64_t start = train["backward_start"];
  ordered_json op = ordered_json::object();
  op["kind"] = "loss_scale";
  op["engine"] = "model";
  op["result"] = id;
  train["body"].insert(train["body"].begin() + start, op);
  return json;
}

ordered_json &precision(ordered_json &json) {
  return json["engines"][0]["precision"];
}

} // namespace

TEST(PlanPrecisionTest, Fp16EngineRoundTrips) {
  ordered_json json = fp16Plan();
  json["engines"][0]["partition"]["buckets"][1]["dtype"] = "bfloat16";
  Plan plan = parsePlan(json, "precision.json");
  const EngineDesc &model = plan.engines[0];
  ASSERT_TRUE(model.precision && model.precision->lossScaler);
  EXPECT_EQ(model.precision->mode, PrecisionMode::FP16);
  EXPECT_EQ(model.precision->paramDtype, DType::Float16);
  EXPECT_EQ(model.precision->gradAccumDtype, DType::Float32);
  EXPECT_EQ(model.precision->lossScaler->scale, 65536.0);
  EXPECT_EQ(model.gradDtype(DType::Float16), DType::Float32);
  EXPECT_EQ(model.bucketDtype(0, DType::Float16), DType::Float32);
  EXPECT_EQ(model.bucketDtype(1, DType::Float16), DType::BFloat16);
  int64_t start = json["programs"]["train"]["backward_start"];
  EXPECT_EQ(plan.programs.at("train").body[size_t(start)].kind,
            OpKind::LossScale);
  EXPECT_EQ(toJson(parsePlan(ordered_json::parse(json.dump()), "rt")), json);

  // Without precision nothing changes: gradients in the parameters' dtype.
  Plan plain = parsePlan(
      toJson(test::zeroPlan(test::planJson("linear_mse_train.json"), 2, 2, 6)),
      "plain.json");
  EXPECT_FALSE(plain.engines[0].precision);
  EXPECT_EQ(plain.engines[0].bucketDtype(0, DType::Float32), DType::Float32);
}

TEST(PlanPrecisionTest, PrecisionFieldsAreChecked) {
  const std::string at = "engines[0].precision";
  ordered_json json = fp16Plan();
  precision(json)["mode"] = "fp8";
  expectInvalid(json, at + ".mode: unknown precision mode \"fp8\"");
  json = fp16Plan();
  precision(json)["param_dtype"] = "bfloat16";
  expectInvalid(json, at + ".param_dtype: a fp16 engine stores its parameters "
                           "as float16, found bfloat16");
  json = fp16Plan();
  precision(json)["master_dtype"] = "float16";
  expectInvalid(json, at + ".master_dtype: must be float32");
  json = fp16Plan();
  precision(json)["grad_accum_dtype"] = "int64";
  expectInvalid(json, at + ".grad_accum_dtype: must be a float dtype");
  json = fp16Plan();
  precision(json)["autocast_dtype"] = "bfloat16";
  expectInvalid(json, at + ".autocast_dtype: only autocast engines");
  json = fp16Plan();
  precision(json).erase("loss_scaler");
  expectInvalid(json, "a trainable fp16 engine needs a loss_scaler");
  json = fp16Plan();
  precision(json)["loss_scaler"]["type"] = "adaptive";
  expectInvalid(json, at + ".loss_scaler.type: unknown loss scaler");
  json = fp16Plan();
  precision(json)["loss_scaler"]["hysteresis"] = 0;
  expectInvalid(json, at + ".loss_scaler.hysteresis: must be >= 1");
  json = fp16Plan();
  precision(json)["loss_scaler"]["min_scale"] = 0.0;
  expectInvalid(json, at + ".loss_scaler.min_scale: must be positive");
  json = fp16Plan();
  precision(json)["loss_scaler"]["scale"] = -1.0;
  expectInvalid(json, at + ".loss_scaler.scale: must be positive");
  json = fp16Plan();
  precision(json)["loss_scaler"]["scale_window"] = 0;
  expectInvalid(json, at + ".loss_scaler.scale_window: must be >= 1");
  json = fp16Plan();
  json["engines"][0]["partition"]["buckets"][0]["dtype"] = "int32";
  expectInvalid(json, "engines[0].partition.buckets[0].dtype: a bucket "
                      "communicates in a float dtype, found int32");
}

TEST(PlanPrecisionTest, NativeModesStoreEveryFloatStateInTheLowDtype) {
  ordered_json json = fp16Plan();
  for (ordered_json &state : json["state"])
    state["dtype"] = "float32";
  expectInvalid(json, "state[0].dtype: \"fc.weight\" of fp16 engine \"model\" "
                      "must be float16, found float32");
  // Autocast keeps float32 parameters and names its dtype.
  json =
      toJson(test::zeroPlan(test::planJson("linear_mse_train.json"), 2, 2, 6));
  json["engines"][0]["precision"] = {{"mode", "autocast"},
                                     {"param_dtype", "float32"},
                                     {"master_dtype", "float32"},
                                     {"grad_accum_dtype", "float32"}};
  expectInvalid(json, "an autocast engine needs its autocast_dtype");
  precision(json)["autocast_dtype"] = "bfloat16";
  EXPECT_NO_THROW(parsePlan(json, "autocast.json"));
  precision(json)["loss_scaler"] = scaler();
  expectInvalid(json, "only fp16 and fp16 autocast engines scale their loss, "
                      "this one is autocast with autocast_dtype bfloat16");
}

namespace {

ordered_json gradScaler() {
  return {{"type", "grad_scaler"},
          {"scale", 65536.0},
          {"scale_window", 2000},
          {"hysteresis", 1},
          {"consecutive_hysteresis", false},
          {"min_scale", 0.0}};
}

/// The stage 2 plan as an fp16 autocast engine: float32 state, the
/// torch.amp.GradScaler DeepSpeed creates for it, and the loss_scale op.
ordered_json autocastFp16Plan() {
  ordered_json json = fp16Plan();
  retype(json, "float32");
  json["engines"][0]["precision"] = {
      {"mode", "autocast"},          {"param_dtype", "float32"},
      {"master_dtype", "float32"},   {"grad_accum_dtype", "float32"},
      {"autocast_dtype", "float16"}, {"loss_scaler", gradScaler()}};
  return json;
}

} // namespace

TEST(PlanPrecisionTest, Fp16AutocastScalesWithAGradScaler) {
  const std::string at = "engines[0].precision";
  ordered_json json = autocastFp16Plan();
  Plan plan = parsePlan(json, "autocast_fp16.json");
  ASSERT_TRUE(plan.engines[0].precision &&
              plan.engines[0].precision->lossScaler);
  const LossScalerDesc &desc = *plan.engines[0].precision->lossScaler;
  EXPECT_EQ(desc.type, LossScalerType::GradScaler);
  EXPECT_EQ(desc.scaleWindow, 2000);
  EXPECT_EQ(desc.minScale, 0.0);
  EXPECT_EQ(toJson(parsePlan(ordered_json::parse(json.dump()), "rt")), json);

  // A trainable fp16 autocast engine needs its scaler, as an fp16 one does.
  json = autocastFp16Plan();
  precision(json).erase("loss_scaler");
  expectInvalid(json, at + ": a trainable fp16 autocast engine needs a "
                           "loss_scaler");
  // DeepSpeed's fp16 scaler is not the GradScaler, and the other way round.
  json = autocastFp16Plan();
  precision(json)["loss_scaler"] = scaler();
  expectInvalid(json, at + ".loss_scaler.type: an fp16 autocast engine "
                           "scales with \"grad_scaler\"");
  json = fp16Plan();
  precision(json)["loss_scaler"] = gradScaler();
  expectInvalid(json, at + ".loss_scaler.type: \"grad_scaler\" is for fp16 "
                           "autocast engines");
  // GradScaler has no floor and no hysteresis.
  json = autocastFp16Plan();
  precision(json)["loss_scaler"]["min_scale"] = 1.0;
  expectInvalid(json, at + ".loss_scaler.min_scale: must be 0 for a "
                           "grad_scaler");
  json = autocastFp16Plan();
  precision(json)["loss_scaler"]["hysteresis"] = 2;
  expectInvalid(json, at + ".loss_scaler.hysteresis: a grad_scaler has "
                           "hysteresis 1");
  json = autocastFp16Plan();
  precision(json)["loss_scaler"]["scale_window"] = 0;
  expectInvalid(json, at + ".loss_scaler.scale_window: must be >= 1");
  // bf16 autocast has none.
  json = autocastFp16Plan();
  precision(json)["autocast_dtype"] = "bfloat16";
  expectInvalid(json, at + ".loss_scaler: only fp16 and fp16 autocast "
                           "engines scale their loss");
}

TEST(PlanPrecisionTest, LossScaleOps) {
  ordered_json json = fp16Plan();
  int64_t start = json["programs"]["train"]["backward_start"];
  // Before backward_start it belongs to the forward.
  json["programs"]["train"]["backward_start"] = start + 1;
  expectInvalid(json, "loss_scale ops belong to the backward of "
                      "programs.train");
  json = fp16Plan();
  precision(json)["mode"] = "bf16";
  precision(json)["param_dtype"] = "bfloat16";
  precision(json).erase("loss_scaler");
  retype(json, "bfloat16");
  expectInvalid(json, "engine \"model\" has no precision.loss_scaler");
  json = fp16Plan();
  ordered_json &values = json["programs"]["train"]["values"];
  values.back()["dtype"] = "float16";
  expectInvalid(json, "a loss scale");
  json = fp16Plan();
  json["programs"]["train"]["body"][size_t(start)]["engine"] = "nobody";
  expectInvalid(json, "the plan has no engine named \"nobody\"");
}
