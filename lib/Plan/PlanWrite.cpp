//===- PlanWrite.cpp - Plan -> JSON document ------------------------------===//
//
// Writes keys in the order docs/plan-format.md shows them, so that plans
// diff well and FileCheck tests can match them line by line.
//
//===----------------------------------------------------------------------===//

#include "Base64.h"

#include "ds/Plan/PlanFormat.h"

#include <algorithm>
#include <cmath>

namespace ds::plan {

namespace {

ordered_json constantToJson(const Constant &value) {
  switch (value.kind) {
  case Constant::Kind::None:
    return nullptr;
  case Constant::Kind::Int:
    return value.intValue;
  case Constant::Kind::Float:
    // JSON has no NaN or infinity; the plan spells them as strings.
    if (std::isnan(value.floatValue))
      return "nan";
    if (std::isinf(value.floatValue))
      return value.floatValue > 0 ? "inf" : "-inf";
    return value.floatValue;
  case Constant::Kind::Bool:
    return value.boolValue;
  case Constant::Kind::Str:
    return value.strValue;
  case Constant::Kind::Tensor: {
    ordered_json tensor = ordered_json::object();
    tensor["dtype"] = dtypeName(value.tensorDType);
    tensor["shape"] = value.tensorShape;
    tensor["base64"] = detail::encodeBase64(value.tensorBytes);
    return tensor;
  }
  }
  return nullptr;
}

ordered_json valueToJson(const ValueDesc &value) {
  ordered_json json = ordered_json::object();
  json["id"] = value.id;
  json["type"] = valueTypeName(value.type);
  if (value.dtype)
    json["dtype"] = dtypeName(*value.dtype);
  if (value.shape)
    json["shape"] = *value.shape;
  if (value.bound)
    json["bound"] = *value.bound;
  if (value.elem)
    json["elem"] = valueTypeName(*value.elem);
  return json;
}

ordered_json blockToJson(const std::vector<Op> &ops);

ordered_json branchToJson(const Branch &branch) {
  ordered_json json = ordered_json::object();
  json["body"] = blockToJson(branch.body);
  json["yield"] = branch.yields;
  return json;
}

ordered_json singleResult(const Op &op) {
  return op.results.empty() ? ordered_json(nullptr)
                            : ordered_json(op.results[0]);
}

ordered_json opToJson(const Op &op) {
  ordered_json json = ordered_json::object();
  json["kind"] = opKindName(op.kind);
  switch (op.kind) {
  case OpKind::Input:
    json["index"] = op.index;
    json["result"] = singleResult(op);
    break;
  case OpKind::State:
    json["name"] = op.name;
    json["result"] = singleResult(op);
    break;
  case OpKind::SetState:
    json["name"] = op.name;
    json["arg"] = op.arg;
    break;
  case OpKind::Constant:
    json["result"] = singleResult(op);
    json["value"] = constantToJson(op.value);
    break;
  case OpKind::List:
    json["args"] = op.args;
    json["result"] = singleResult(op);
    break;
  case OpKind::Unpack:
    json["arg"] = op.arg;
    json["results"] = op.results;
    break;
  case OpKind::Call:
    json["op"] = op.op;
    json["args"] = op.args;
    json["results"] = op.results;
    break;
  case OpKind::If:
    json["cond"] = op.cond;
    json["then"] = branchToJson(op.thenBranch);
    json["else"] = branchToJson(op.elseBranch);
    json["results"] = op.results;
    break;
  case OpKind::Grad:
    json["name"] = op.name;
    json["arg"] = op.arg;
    break;
  case OpKind::AllReduce:
  case OpKind::ReduceScatter:
  case OpKind::AllGather:
    json["engine"] = op.engine;
    json["bucket"] = op.bucket;
    json["result"] = singleResult(op);
    break;
  case OpKind::Wait:
    json["arg"] = op.arg;
    break;
  case OpKind::OptimizerStep:
  case OpKind::BackwardPrologue:
  case OpKind::BackwardEpilogue:
    json["engine"] = op.engine;
    break;
  case OpKind::Release:
    json["engine"] = op.engine;
    json["bucket"] = op.bucket;
    break;
  case OpKind::LossScale:
    json["engine"] = op.engine;
    json["result"] = singleResult(op);
    break;
  case OpKind::Cotangent:
    json["index"] = op.index;
    json["result"] = singleResult(op);
    break;
  }
  // Calls always carry their origin; other ops only when the compiler set it.
  bool isCall = op.kind == OpKind::Call;
  if (isCall || !op.module.empty())
    json["module"] = op.module;
  if (isCall || !op.moduleClass.empty())
    json["module_class"] = op.moduleClass;
  if (isCall || !op.loc.empty())
    json["loc"] = op.loc;
  if (!op.free.empty())
    json["free"] = op.free;
  return json;
}

ordered_json blockToJson(const std::vector<Op> &ops) {
  ordered_json json = ordered_json::array();
  for (const Op &op : ops)
    json.push_back(opToJson(op));
  return json;
}

ordered_json schedulerToJson(const SchedulerDesc &scheduler) {
  ordered_json json = ordered_json::object();
  json["type"] = schedulerTypeName(scheduler.type);
  json["warmup_min_lr"] = scheduler.warmupMinLr;
  json["warmup_max_lr"] = scheduler.warmupMaxLr
                              ? ordered_json(*scheduler.warmupMaxLr)
                              : ordered_json(nullptr);
  json["warmup_num_steps"] = scheduler.warmupNumSteps;
  json["warmup_type"] = warmupTypeName(scheduler.warmupType);
  json["total_num_steps"] = scheduler.totalNumSteps
                                ? ordered_json(*scheduler.totalNumSteps)
                                : ordered_json(nullptr);
  json["warmup_min_ratio"] = scheduler.warmupMinRatio;
  json["cos_min_ratio"] = scheduler.cosMinRatio;
  return json;
}

ordered_json optimizerToJson(const OptimizerDesc &optimizer) {
  ordered_json json = ordered_json::object();
  json["type"] = optimizerTypeName(optimizer.type);
  json["lr"] = optimizer.lr;
  json["betas"] = {optimizer.betas[0], optimizer.betas[1]};
  json["eps"] = optimizer.eps;
  json["weight_decay"] = optimizer.weightDecay;
  json["momentum"] = optimizer.momentum;
  json["dampening"] = optimizer.dampening;
  json["nesterov"] = optimizer.nesterov;
  json["gradient_clipping"] = optimizer.gradientClipping;
  json["scheduler"] = optimizer.scheduler
                          ? schedulerToJson(*optimizer.scheduler)
                          : ordered_json(nullptr);
  return json;
}

ordered_json partitionToJson(const PartitionDesc &partition) {
  ordered_json json = ordered_json::object();
  json["stage"] = partition.stage;
  json["numel"] = partition.numel;
  ordered_json params = ordered_json::array();
  for (const FlatParamDesc &param : partition.params)
    params.push_back({{"name", param.name}, {"offset", param.offset}});
  json["params"] = std::move(params);
  ordered_json buckets = ordered_json::array();
  for (const BucketDesc &bucket : partition.buckets) {
    ordered_json entry = {{"offset", bucket.offset}, {"numel", bucket.numel}};
    // Stage 3 spells it on every bucket; the other stages never set it.
    if (partition.stage == 3 || bucket.persistent)
      entry["persistent"] = bucket.persistent;
    if (bucket.dtype)
      entry["dtype"] = dtypeName(*bucket.dtype);
    buckets.push_back(std::move(entry));
  }
  json["buckets"] = std::move(buckets);
  return json;
}

ordered_json precisionToJson(const PrecisionDesc &precision) {
  ordered_json json = ordered_json::object();
  json["mode"] = precisionModeName(precision.mode);
  json["param_dtype"] = dtypeName(precision.paramDtype);
  json["master_dtype"] = dtypeName(precision.masterDtype);
  json["grad_accum_dtype"] = dtypeName(precision.gradAccumDtype);
  if (precision.autocastDtype)
    json["autocast_dtype"] = dtypeName(*precision.autocastDtype);
  if (const std::optional<LossScalerDesc> &scaler = precision.lossScaler)
    json["loss_scaler"] = {
        {"type", lossScalerTypeName(scaler->type)},
        {"scale", scaler->scale},
        {"scale_window", scaler->scaleWindow},
        {"hysteresis", scaler->hysteresis},
        {"consecutive_hysteresis", scaler->consecutiveHysteresis},
        {"min_scale", scaler->minScale}};
  return json;
}

ordered_json programToJson(const Program &program) {
  ordered_json json = ordered_json::object();
  ordered_json values = ordered_json::array();
  for (const ValueDesc &value : program.values)
    values.push_back(valueToJson(value));
  json["values"] = std::move(values);
  json["body"] = blockToJson(program.body);
  json["results"] = program.results;
  if (program.backwardStart)
    json["backward_start"] = *program.backwardStart;
  return json;
}

ordered_json programsToJson(const std::map<std::string, Program> &programs) {
  ordered_json json = ordered_json::object();
  for (const auto &[name, program] : programs)
    json[name] = programToJson(program);
  return json;
}

ordered_json inputsToJson(const std::vector<InputDesc> &inputs) {
  ordered_json json = ordered_json::array();
  for (const InputDesc &input : inputs)
    json.push_back({{"name", input.name},
                    {"dtype", dtypeName(input.dtype)},
                    {"shape", input.shape},
                    {"batched", input.batched}});
  return json;
}

/// Nesting depth: 0 for scalars, 1 + the deepest child for containers.
int height(const ordered_json &json) {
  if (!json.is_structured())
    return 0;
  int deepest = 0;
  for (const ordered_json &child : json)
    deepest = std::max(deepest, height(child));
  return deepest + 1;
}

/// Containers up to this height print on one line: {"id": 3, "shape": [4]}.
constexpr int kInlineHeight = 2;

void print(const ordered_json &json, int indent, std::string &out) {
  bool isObject = json.is_object();
  if (!json.is_structured() || json.empty() || height(json) <= kInlineHeight) {
    if (!json.is_structured()) {
      out += json.dump();
      return;
    }
    out += isObject ? '{' : '[';
    bool first = true;
    for (const auto &item : json.items()) {
      out += first ? "" : ", ";
      first = false;
      if (isObject)
        out += ordered_json(item.key()).dump() + ": ";
      print(item.value(), indent, out);
    }
    out += isObject ? '}' : ']';
    return;
  }
  out += isObject ? "{\n" : "[\n";
  std::string pad(indent + 1, ' ');
  bool first = true;
  for (const auto &item : json.items()) {
    out += first ? "" : ",\n";
    first = false;
    out += pad;
    if (isObject)
      out += ordered_json(item.key()).dump() + ": ";
    print(item.value(), indent + 1, out);
  }
  out += "\n" + std::string(indent, ' ') + (isObject ? '}' : ']');
}

} // namespace

std::string printPlan(const Plan &plan) {
  std::string text;
  print(toJson(plan), 0, text);
  return text + "\n";
}

ordered_json toJson(const Plan &plan) {
  ordered_json json = ordered_json::object();
  json["format"] = kPlanFormatName;
  json["version"] = kPlanFormatVersion;
  json["producer"] = plan.producer;
  json["device"] = plan.device;
  json["torch_version"] = plan.torchVersion;
  if (plan.weights)
    json["weights"] = {{"kind", plan.weights->kind},
                       {"path", plan.weights->path}};
  json["world_size"] = plan.worldSize;
  json["micro_batch_per_rank"] = plan.microBatchPerRank;
  json["gradient_accumulation_steps"] = plan.gradientAccumulationSteps;

  ordered_json engines = ordered_json::array();
  for (const EngineDesc &engine : plan.engines) {
    ordered_json entry = {
        {"name", engine.name},
        {"module", engine.module},
        {"trainable", engine.trainable},
        {"zero_stage", engine.zeroStage},
        {"seed", engine.seed ? ordered_json(*engine.seed) : ordered_json()},
        {"batch",
         {{"train_batch_size", engine.batch.trainBatchSize},
          {"micro_batch_per_gpu", engine.batch.microBatchPerGpu},
          {"gradient_accumulation_steps",
           engine.batch.gradientAccumulationSteps}}},
        {"gather_16bit_weights_on_model_save",
         engine.gather16BitWeightsOnModelSave},
        {"ds_config", engine.dsConfig}};
    if (engine.offloadOptimizer)
      entry["offload_optimizer"] = {
          {"device", "cpu"},
          {"pin_memory", engine.offloadOptimizer->pinMemory}};
    if (engine.optimizer)
      entry["optimizer"] = optimizerToJson(*engine.optimizer);
    if (engine.partition)
      entry["partition"] = partitionToJson(*engine.partition);
    if (engine.precision)
      entry["precision"] = precisionToJson(*engine.precision);
    engines.push_back(std::move(entry));
  }
  json["engines"] = std::move(engines);

  ordered_json state = ordered_json::array();
  for (const StateDesc &desc : plan.state)
    state.push_back(
        {{"name", desc.name},
         {"kind", desc.kind == StateKind::Param ? "param" : "buffer"},
         {"dtype", dtypeName(desc.dtype)},
         {"shape", desc.shape},
         {"requires_grad", desc.requiresGrad},
         {"engine", desc.engine},
         {"module", desc.module},
         {"module_class", desc.moduleClass}});
  json["state"] = std::move(state);

  json["inputs"] = inputsToJson(plan.inputs);

  ordered_json outputs = ordered_json::array();
  for (const OutputDesc &output : plan.outputs)
    outputs.push_back({{"name", output.name}, {"kind", output.kind}});
  json["outputs"] = std::move(outputs);

  json["programs"] = programsToJson(plan.programs);
  if (!plan.variants.empty()) {
    ordered_json variants = ordered_json::array();
    for (const ShapeVariant &variant : plan.variants)
      variants.push_back({{"micro_batch_per_rank", variant.microBatchPerRank},
                          {"inputs", inputsToJson(variant.inputs)},
                          {"programs", programsToJson(variant.programs)}});
    json["variants"] = std::move(variants);
  }
  return json;
}

} // namespace ds::plan
