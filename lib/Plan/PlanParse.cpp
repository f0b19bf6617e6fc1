//===- PlanParse.cpp - JSON document -> Plan ------------------------------===//
//
// Converts the JSON document into the Plan structs, checking the JSON type
// of every field on the way (JsonCursor), then hands the result to
// validatePlan for the checks that need the whole plan (definitions before
// uses, state names, branch arities, ...).
//
//===----------------------------------------------------------------------===//

#include "Base64.h"
#include "JsonCursor.h"

#include "ds/Plan/PlanFormat.h"

#include <cmath>
#include <limits>

namespace ds::plan {

using detail::JsonCursor;
using json::describeValue;

namespace {

DType parseDTypeAt(const JsonCursor &cursor) {
  std::string name = cursor.toString();
  if (std::optional<DType> dtype = parseDType(name))
    return *dtype;
  cursor.fail("unknown dtype \"" + name + "\" (expected one of " +
              allDTypeNames() + ")");
}

ValueType parseValueTypeAt(const JsonCursor &cursor) {
  std::string name = cursor.toString();
  if (std::optional<ValueType> type = parseValueType(name))
    return *type;
  cursor.fail("unknown value type \"" + name +
              "\" (expected tensor, int, float, bool, none, str, list or "
              "token)");
}

/// The enumerator a string field spells; `expected` lists the spellings
/// for the message.
template <typename Enum, typename Parse>
Enum parseEnumAt(const JsonCursor &cursor, Parse parse, const char *what,
                 const char *expected) {
  std::string name = cursor.toString();
  if (std::optional<Enum> value = parse(name))
    return *value;
  cursor.fail(std::string("unknown ") + what + " \"" + name + "\" (expected " +
              expected + ")");
}

std::string optionalString(const JsonCursor &object, const char *key,
                           std::string fallback = "") {
  if (auto field = object.optionalField(key))
    return field->toString();
  return fallback;
}

std::vector<ValueId> idList(const JsonCursor &object, const char *key) {
  return object.field(key).toIntArray();
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

double parseFloatConstant(const JsonCursor &cursor) {
  const ordered_json &json = cursor.json();
  if (json.is_number())
    return json.get<double>();
  if (json.is_string()) {
    // JSON has no NaN or infinity; the plan spells them as strings.
    std::string text = json.get<std::string>();
    if (text == "nan")
      return std::numeric_limits<double>::quiet_NaN();
    if (text == "inf")
      return std::numeric_limits<double>::infinity();
    if (text == "-inf")
      return -std::numeric_limits<double>::infinity();
  }
  cursor.fail("expected a float constant (a number, \"nan\", \"inf\" or "
              "\"-inf\"), found " +
              describeValue(json));
}

Constant parseTensorConstant(const JsonCursor &cursor) {
  if (!cursor.json().is_object())
    cursor.fail("expected a tensor constant {\"dtype\", \"shape\", "
                "\"base64\"}, found " +
                describeValue(cursor.json()));
  DType dtype = parseDTypeAt(cursor.field("dtype"));
  JsonCursor shapeCursor = cursor.field("shape");
  std::vector<int64_t> shape = shapeCursor.toIntArray();
  std::optional<int64_t> numel = staticNumel(shape);
  if (!numel)
    shapeCursor.fail("a constant tensor's shape must be static, found " +
                     formatShape(shape));
  JsonCursor dataCursor = cursor.field("base64");
  std::optional<std::string> bytes =
      detail::decodeBase64(dataCursor.toString());
  if (!bytes)
    dataCursor.fail("not valid base64 (standard alphabet, '=' padding)");
  int64_t expected = *numel * dtypeSize(dtype);
  if (int64_t(bytes->size()) != expected)
    dataCursor.fail("holds " + std::to_string(bytes->size()) +
                    " bytes, but a " + dtypeName(dtype) + " tensor of shape " +
                    formatShape(shape) + " needs " + std::to_string(expected));
  return Constant::ofTensor(dtype, std::move(shape), std::move(*bytes));
}

/// `type` is the result value's declared type when known: it decides how a
/// JSON number reads (1 is an int for int values, 1.0 for float values).
Constant parseConstant(const JsonCursor &cursor,
                       std::optional<ValueType> type) {
  const ordered_json &json = cursor.json();
  if (type) {
    switch (*type) {
    case ValueType::Int:
      return Constant::ofInt(cursor.toInt());
    case ValueType::Float:
      return Constant::ofFloat(parseFloatConstant(cursor));
    case ValueType::Bool:
      return Constant::ofBool(cursor.toBool());
    case ValueType::Str:
      return Constant::ofStr(cursor.toString());
    case ValueType::None:
      if (!json.is_null())
        cursor.fail("expected null for a none constant, found " +
                    describeValue(json));
      return Constant::none();
    case ValueType::Tensor:
      return parseTensorConstant(cursor);
    case ValueType::List:
      cursor.fail("list constants are not part of the format; build the list "
                  "with a \"list\" op");
    case ValueType::Token:
      cursor.fail("token constants are not part of the format; tokens come "
                  "from collectives");
    }
  }
  // Unknown result type: read the JSON as it is and let validation report
  // the bad result id.
  if (json.is_null())
    return Constant::none();
  if (json.is_boolean())
    return Constant::ofBool(json.get<bool>());
  if (json.is_number_integer())
    return Constant::ofInt(cursor.toInt());
  if (json.is_number())
    return Constant::ofFloat(json.get<double>());
  if (json.is_string())
    return Constant::ofStr(json.get<std::string>());
  return parseTensorConstant(cursor);
}

//===----------------------------------------------------------------------===//
// Programs
//===----------------------------------------------------------------------===//

class ProgramParser {
public:
  explicit ProgramParser(Program &program) : program_(program) {}

  void parse(const JsonCursor &cursor) {
    cursor.requireObject();
    JsonCursor values = cursor.field("values");
    for (size_t i = 0; i < values.size(); ++i)
      program_.values.push_back(parseValue(values.element(i)));
    program_.body = parseBlock(cursor.field("body"));
    program_.results = idList(cursor, "results");
    if (auto start = cursor.optionalField("backward_start"))
      program_.backwardStart = start->toInt();
  }

private:
  ValueDesc parseValue(const JsonCursor &cursor) {
    cursor.requireObject();
    ValueDesc desc;
    desc.id = cursor.field("id").toInt();
    desc.type = parseValueTypeAt(cursor.field("type"));
    if (auto dtype = cursor.optionalField("dtype"))
      desc.dtype = parseDTypeAt(*dtype);
    if (auto shape = cursor.optionalField("shape"))
      desc.shape = shape->toIntArray();
    if (auto bound = cursor.optionalField("bound"))
      desc.bound = bound->toIntArray();
    if (auto elem = cursor.optionalField("elem"))
      desc.elem = parseValueTypeAt(*elem);
    return desc;
  }

  std::vector<Op> parseBlock(const JsonCursor &cursor) {
    std::vector<Op> ops;
    ops.reserve(cursor.size());
    for (size_t i = 0; i < cursor.size(); ++i)
      ops.push_back(parseOp(cursor.element(i)));
    return ops;
  }

  Branch parseBranch(const JsonCursor &cursor) {
    cursor.requireObject();
    Branch branch;
    branch.body = parseBlock(cursor.field("body"));
    branch.yields = idList(cursor, "yield");
    return branch;
  }

  std::optional<ValueType> declaredType(ValueId id) const {
    if (id < 0 || id >= ValueId(program_.values.size()))
      return std::nullopt;
    return program_.values[id].type;
  }

  Op parseOp(JsonCursor cursor) {
    cursor.requireObject();
    JsonCursor kindCursor = cursor.field("kind");
    std::string kindName = kindCursor.toString();
    std::optional<OpKind> kind = parseOpKind(kindName);
    if (!kind)
      kindCursor.fail("unknown op kind \"" + kindName +
                      "\" (expected input, state, set_state, constant, list, "
                      "unpack, call, if, grad, all_reduce, reduce_scatter, "
                      "all_gather, wait, optimizer_step, release, "
                      "backward_prologue, backward_epilogue, loss_scale or "
                      "cotangent)");
    Op op;
    op.kind = *kind;
    if (op.kind == OpKind::Call) {
      op.op = cursor.field("op").toString();
      cursor = cursor.withLabel(op.op);
    } else {
      cursor = cursor.withLabel(kindName);
    }

    switch (op.kind) {
    case OpKind::Input:
    case OpKind::Cotangent:
      op.index = cursor.field("index").toInt();
      op.results = {cursor.field("result").toInt()};
      break;
    case OpKind::State:
      op.name = cursor.field("name").toString();
      op.results = {cursor.field("result").toInt()};
      break;
    case OpKind::SetState:
      op.name = cursor.field("name").toString();
      op.arg = cursor.field("arg").toInt();
      break;
    case OpKind::Constant:
      op.results = {cursor.field("result").toInt()};
      op.value =
          parseConstant(cursor.field("value"), declaredType(op.results[0]));
      break;
    case OpKind::List:
      op.args = idList(cursor, "args");
      op.results = {cursor.field("result").toInt()};
      break;
    case OpKind::Unpack:
      op.arg = cursor.field("arg").toInt();
      op.results = idList(cursor, "results");
      break;
    case OpKind::Call:
      op.args = idList(cursor, "args");
      op.results = idList(cursor, "results");
      break;
    case OpKind::If:
      op.cond = cursor.field("cond").toInt();
      op.thenBranch = parseBranch(cursor.field("then"));
      op.elseBranch = parseBranch(cursor.field("else"));
      op.results = idList(cursor, "results");
      break;
    case OpKind::Grad:
      op.name = cursor.field("name").toString();
      op.arg = cursor.field("arg").toInt();
      break;
    case OpKind::AllReduce:
    case OpKind::ReduceScatter:
    case OpKind::AllGather:
      op.engine = cursor.field("engine").toString();
      op.bucket = cursor.field("bucket").toInt();
      op.results = {cursor.field("result").toInt()};
      break;
    case OpKind::Wait:
      op.arg = cursor.field("arg").toInt();
      break;
    case OpKind::OptimizerStep:
    case OpKind::BackwardPrologue:
    case OpKind::BackwardEpilogue:
      op.engine = cursor.field("engine").toString();
      break;
    case OpKind::LossScale:
      op.engine = cursor.field("engine").toString();
      op.results = {cursor.field("result").toInt()};
      break;
    case OpKind::Release:
      op.engine = cursor.field("engine").toString();
      op.bucket = cursor.field("bucket").toInt();
      break;
    }
    if (cursor.has("free"))
      op.free = idList(cursor, "free");
    op.module = optionalString(cursor, "module");
    op.moduleClass = optionalString(cursor, "module_class");
    op.loc = optionalString(cursor, "loc");
    return op;
  }

  Program &program_;
};

//===----------------------------------------------------------------------===//
// Top level
//===----------------------------------------------------------------------===//

/// The plan's version, when this library reads it.
int64_t checkFormatAndVersion(const JsonCursor &root) {
  JsonCursor format = root.field("format");
  if (!format.json().is_string() ||
      format.json().get<std::string>() != kPlanFormatName)
    format.fail(std::string("expected \"") + kPlanFormatName +
                "\" (this is not a plan file), found " +
                describeValue(format.json()));
  JsonCursor versionCursor = root.field("version");
  int64_t version = versionCursor.toInt();
  if (version > kPlanFormatVersion)
    versionCursor.fail("plan version " + std::to_string(version) +
                       " is newer than this runtime supports (" +
                       std::to_string(kPlanFormatVersion) + ")");
  if (version < kOldestPlanFormatVersion)
    versionCursor.fail(
        "plan version " + std::to_string(version) +
        " is not supported (this runtime reads versions " +
        std::to_string(kOldestPlanFormatVersion) + " to " +
        std::to_string(kPlanFormatVersion) +
        "): the plan was written by an older ds-compile; recompile it");
  return version;
}

WeightsDesc parseWeights(const JsonCursor &cursor, int64_t version) {
  cursor.requireObject();
  WeightsDesc weights;
  JsonCursor kind = cursor.field("kind");
  weights.kind = kind.toString();
  // Version 8 added the kind "pt2"; version 7 is otherwise the same.
  if (weights.kind == "pt2" && version < 8)
    kind.fail("the weights kind \"pt2\" needs plan version 8, this plan is "
              "version " +
              std::to_string(version));
  weights.path = cursor.field("path").toString();
  return weights;
}

double number(const JsonCursor &object, const char *key) {
  return object.field(key).toNumber();
}

/// An optional field that may also be null; nullopt for both.
std::optional<JsonCursor> nullableField(const JsonCursor &object,
                                        const char *key) {
  std::optional<JsonCursor> field = object.optionalField(key);
  if (field && field->json().is_null())
    return std::nullopt;
  return field;
}

SchedulerDesc parseScheduler(const JsonCursor &cursor) {
  cursor.requireObject();
  SchedulerDesc scheduler;
  scheduler.type = parseEnumAt<SchedulerType>(
      cursor.field("type"), parseSchedulerType, "scheduler type",
      "\"WarmupLR\", \"WarmupDecayLR\" or \"WarmupCosineLR\"");
  scheduler.warmupMinLr = number(cursor, "warmup_min_lr");
  // Present (the writer resolves every field), null without a value.
  cursor.field("warmup_max_lr");
  if (auto maxLr = nullableField(cursor, "warmup_max_lr"))
    scheduler.warmupMaxLr = maxLr->toNumber();
  scheduler.warmupNumSteps = cursor.field("warmup_num_steps").toInt();
  scheduler.warmupType =
      parseEnumAt<WarmupType>(cursor.field("warmup_type"), parseWarmupType,
                              "warmup type", "\"log\" or \"linear\"");
  cursor.field("total_num_steps");
  if (auto total = nullableField(cursor, "total_num_steps"))
    scheduler.totalNumSteps = total->toInt();
  scheduler.warmupMinRatio = number(cursor, "warmup_min_ratio");
  scheduler.cosMinRatio = number(cursor, "cos_min_ratio");
  return scheduler;
}

OptimizerDesc parseOptimizer(const JsonCursor &cursor) {
  cursor.requireObject();
  OptimizerDesc optimizer;
  optimizer.type = parseEnumAt<OptimizerType>(
      cursor.field("type"), parseOptimizerType, "optimizer type",
      "\"adamw\", \"adam\" or \"sgd\"");
  optimizer.lr = number(cursor, "lr");
  JsonCursor betas = cursor.field("betas");
  if (betas.size() != 2)
    betas.fail("expected two numbers [beta1, beta2], found an array of " +
               std::to_string(betas.size()));
  optimizer.betas = {betas.element(0).toNumber(), betas.element(1).toNumber()};
  optimizer.eps = number(cursor, "eps");
  optimizer.weightDecay = number(cursor, "weight_decay");
  optimizer.momentum = number(cursor, "momentum");
  optimizer.dampening = number(cursor, "dampening");
  optimizer.nesterov = cursor.field("nesterov").toBool();
  optimizer.gradientClipping = number(cursor, "gradient_clipping");
  if (auto scheduler = nullableField(cursor, "scheduler"))
    optimizer.scheduler = parseScheduler(*scheduler);
  return optimizer;
}

PartitionDesc parsePartition(const JsonCursor &cursor) {
  cursor.requireObject();
  PartitionDesc partition;
  partition.stage = cursor.field("stage").toInt();
  partition.numel = cursor.field("numel").toInt();
  JsonCursor params = cursor.field("params");
  for (size_t i = 0; i < params.size(); ++i) {
    JsonCursor param = params.element(i);
    param.requireObject();
    partition.params.push_back(
        {param.field("name").toString(), param.field("offset").toInt()});
  }
  JsonCursor buckets = cursor.field("buckets");
  for (size_t i = 0; i < buckets.size(); ++i) {
    JsonCursor bucket = buckets.element(i);
    bucket.requireObject();
    BucketDesc desc;
    desc.offset = bucket.field("offset").toInt();
    desc.numel = bucket.field("numel").toInt();
    if (auto persistent = bucket.optionalField("persistent"))
      desc.persistent = persistent->toBool();
    if (auto dtype = bucket.optionalField("dtype"))
      desc.dtype = parseDTypeAt(*dtype);
    partition.buckets.push_back(desc);
  }
  return partition;
}

PrecisionDesc parsePrecision(const JsonCursor &cursor) {
  cursor.requireObject();
  PrecisionDesc precision;
  precision.mode = parseEnumAt<PrecisionMode>(
      cursor.field("mode"), parsePrecisionMode, "precision mode",
      "\"bf16\", \"fp16\" or \"autocast\"");
  precision.paramDtype = parseDTypeAt(cursor.field("param_dtype"));
  precision.masterDtype = parseDTypeAt(cursor.field("master_dtype"));
  precision.gradAccumDtype = parseDTypeAt(cursor.field("grad_accum_dtype"));
  if (auto autocast = nullableField(cursor, "autocast_dtype"))
    precision.autocastDtype = parseDTypeAt(*autocast);
  if (auto scaler = nullableField(cursor, "loss_scaler")) {
    scaler->requireObject();
    LossScalerDesc desc;
    desc.type = parseEnumAt<LossScalerType>(
        scaler->field("type"), parseLossScalerType, "loss scaler",
        "\"dynamic\", \"static\" or \"grad_scaler\"");
    desc.scale = number(*scaler, "scale");
    desc.scaleWindow = scaler->field("scale_window").toInt();
    desc.hysteresis = scaler->field("hysteresis").toInt();
    desc.consecutiveHysteresis =
        scaler->field("consecutive_hysteresis").toBool();
    desc.minScale = number(*scaler, "min_scale");
    precision.lossScaler = desc;
  }
  return precision;
}

BatchDesc parseBatch(const JsonCursor &cursor) {
  cursor.requireObject();
  BatchDesc batch;
  batch.trainBatchSize = cursor.field("train_batch_size").toInt();
  batch.microBatchPerGpu = cursor.field("micro_batch_per_gpu").toInt();
  batch.gradientAccumulationSteps =
      cursor.field("gradient_accumulation_steps").toInt();
  return batch;
}

EngineDesc parseEngine(const JsonCursor &cursor) {
  cursor.requireObject();
  EngineDesc engine;
  engine.name = cursor.field("name").toString();
  engine.module = optionalString(cursor, "module");
  engine.trainable = cursor.field("trainable").toBool();
  engine.zeroStage = cursor.field("zero_stage").toInt();
  if (auto seed = nullableField(cursor, "seed"))
    engine.seed = seed->toInt();
  engine.batch = parseBatch(cursor.field("batch"));
  if (auto gather = cursor.optionalField("gather_16bit_weights_on_model_save"))
    engine.gather16BitWeightsOnModelSave = gather->toBool();
  if (auto offload = nullableField(cursor, "offload_optimizer")) {
    offload->requireObject();
    JsonCursor device = offload->field("device");
    if (device.toString() != "cpu")
      device.fail("expected \"cpu\" (the only offload device), found " +
                  describeValue(device.json()));
    OffloadDesc desc;
    if (auto pin = offload->optionalField("pin_memory"))
      desc.pinMemory = pin->toBool();
    engine.offloadOptimizer = desc;
  }
  if (auto config = cursor.optionalField("ds_config")) {
    config->requireObject();
    engine.dsConfig = config->json();
  }
  if (auto optimizer = nullableField(cursor, "optimizer"))
    engine.optimizer = parseOptimizer(*optimizer);
  if (auto partition = nullableField(cursor, "partition"))
    engine.partition = parsePartition(*partition);
  if (auto precision = nullableField(cursor, "precision"))
    engine.precision = parsePrecision(*precision);
  return engine;
}

StateDesc parseState(const JsonCursor &cursor) {
  cursor.requireObject();
  StateDesc state;
  state.name = cursor.field("name").toString();
  JsonCursor kind = cursor.field("kind");
  std::string kindName = kind.toString();
  if (kindName == "param")
    state.kind = StateKind::Param;
  else if (kindName == "buffer")
    state.kind = StateKind::Buffer;
  else
    kind.fail("expected \"param\" or \"buffer\", found " +
              describeValue(kind.json()));
  state.dtype = parseDTypeAt(cursor.field("dtype"));
  state.shape = cursor.field("shape").toIntArray();
  if (auto requiresGrad = cursor.optionalField("requires_grad"))
    state.requiresGrad = requiresGrad->toBool();
  state.engine = cursor.field("engine").toString();
  state.module = optionalString(cursor, "module");
  state.moduleClass = optionalString(cursor, "module_class");
  return state;
}

InputDesc parseInput(const JsonCursor &cursor) {
  cursor.requireObject();
  InputDesc input;
  input.name = cursor.field("name").toString();
  input.dtype = parseDTypeAt(cursor.field("dtype"));
  input.shape = cursor.field("shape").toIntArray();
  if (auto batched = cursor.optionalField("batched"))
    input.batched = batched->toBool();
  return input;
}

OutputDesc parseOutput(const JsonCursor &cursor) {
  cursor.requireObject();
  OutputDesc output;
  output.name = cursor.field("name").toString();
  output.kind = cursor.field("kind").toString();
  return output;
}

template <typename T, typename Fn>
std::vector<T> parseArray(const JsonCursor &cursor, Fn parseOne) {
  std::vector<T> items;
  items.reserve(cursor.size());
  for (size_t i = 0; i < cursor.size(); ++i)
    items.push_back(parseOne(cursor.element(i)));
  return items;
}

std::map<std::string, Program> parsePrograms(const JsonCursor &cursor) {
  cursor.requireObject();
  std::map<std::string, Program> programs;
  for (const auto &item : cursor.json().items())
    ProgramParser(programs[item.key()]).parse(cursor.field(item.key().c_str()));
  return programs;
}

} // namespace

Plan parsePlan(const ordered_json &json, const std::string &origin) {
  JsonCursor root(json, "", origin);
  root.requireObject();
  // Format and version first: a newer plan may differ in everything else.
  int64_t version = checkFormatAndVersion(root);

  Plan plan;
  plan.producer = optionalString(root, "producer");
  if (auto device = root.optionalField("device"))
    plan.device = device->toString();
  plan.torchVersion = optionalString(root, "torch_version");
  if (auto weights = root.optionalField("weights");
      weights && !weights->json().is_null())
    plan.weights = parseWeights(*weights, version);
  plan.worldSize = root.field("world_size").toInt();
  plan.microBatchPerRank = root.field("micro_batch_per_rank").toInt();
  plan.gradientAccumulationSteps =
      root.field("gradient_accumulation_steps").toInt();
  plan.engines = parseArray<EngineDesc>(root.field("engines"), parseEngine);
  plan.state = parseArray<StateDesc>(root.field("state"), parseState);
  plan.inputs = parseArray<InputDesc>(root.field("inputs"), parseInput);
  plan.outputs = parseArray<OutputDesc>(root.field("outputs"), parseOutput);

  plan.programs = parsePrograms(root.field("programs"));
  if (auto variants = root.optionalField("variants"))
    plan.variants =
        parseArray<ShapeVariant>(*variants, [](const JsonCursor &cursor) {
          cursor.requireObject();
          ShapeVariant variant;
          variant.microBatchPerRank =
              cursor.field("micro_batch_per_rank").toInt();
          variant.inputs =
              parseArray<InputDesc>(cursor.field("inputs"), parseInput);
          variant.programs = parsePrograms(cursor.field("programs"));
          return variant;
        });

  validatePlan(plan, origin);
  return plan;
}

} // namespace ds::plan
