//===- Plan.cpp - Names, factories and helpers of the plan structs --------===//

#include "ds/Plan/Plan.h"

#include <array>
#include <utility>

namespace ds::plan {

namespace {

struct DTypeInfo {
  DType dtype;
  const char *name;
  int64_t size;
};

constexpr std::array<DTypeInfo, 10> kDTypes = {{
    {DType::Float32, "float32", 4},
    {DType::Float64, "float64", 8},
    {DType::Float16, "float16", 2},
    {DType::BFloat16, "bfloat16", 2},
    {DType::Int64, "int64", 8},
    {DType::Int32, "int32", 4},
    {DType::Int16, "int16", 2},
    {DType::Int8, "int8", 1},
    {DType::UInt8, "uint8", 1},
    {DType::Bool, "bool", 1},
}};

constexpr std::array<std::pair<ValueType, const char *>, 8> kValueTypes = {{
    {ValueType::Tensor, "tensor"},
    {ValueType::Int, "int"},
    {ValueType::Float, "float"},
    {ValueType::Bool, "bool"},
    {ValueType::None, "none"},
    {ValueType::Str, "str"},
    {ValueType::List, "list"},
    {ValueType::Token, "token"},
}};

constexpr std::array<std::pair<OpKind, const char *>, 19> kOpKinds = {{
    {OpKind::Input, "input"},
    {OpKind::State, "state"},
    {OpKind::SetState, "set_state"},
    {OpKind::Constant, "constant"},
    {OpKind::List, "list"},
    {OpKind::Unpack, "unpack"},
    {OpKind::Call, "call"},
    {OpKind::If, "if"},
    {OpKind::Grad, "grad"},
    {OpKind::AllReduce, "all_reduce"},
    {OpKind::ReduceScatter, "reduce_scatter"},
    {OpKind::AllGather, "all_gather"},
    {OpKind::Wait, "wait"},
    {OpKind::OptimizerStep, "optimizer_step"},
    {OpKind::Release, "release"},
    {OpKind::BackwardPrologue, "backward_prologue"},
    {OpKind::BackwardEpilogue, "backward_epilogue"},
    {OpKind::LossScale, "loss_scale"},
    {OpKind::Cotangent, "cotangent"},
}};

constexpr std::array<std::pair<OptimizerType, const char *>, 3>
    kOptimizerTypes = {{
        {OptimizerType::AdamW, "adamw"},
        {OptimizerType::Adam, "adam"},
        {OptimizerType::SGD, "sgd"},
    }};

constexpr std::array<std::pair<SchedulerType, const char *>, 3>
    kSchedulerTypes = {{
        {SchedulerType::WarmupLR, "WarmupLR"},
        {SchedulerType::WarmupDecayLR, "WarmupDecayLR"},
        {SchedulerType::WarmupCosineLR, "WarmupCosineLR"},
    }};

constexpr std::array<std::pair<WarmupType, const char *>, 2> kWarmupTypes = {{
    {WarmupType::Log, "log"},
    {WarmupType::Linear, "linear"},
}};

constexpr std::array<std::pair<LossScalerType, const char *>, 3>
    kLossScalerTypes = {{
        {LossScalerType::Dynamic, "dynamic"},
        {LossScalerType::Static, "static"},
        {LossScalerType::GradScaler, "grad_scaler"},
    }};

constexpr std::array<std::pair<PrecisionMode, const char *>, 3>
    kPrecisionModes = {{
        {PrecisionMode::BF16, "bf16"},
        {PrecisionMode::FP16, "fp16"},
        {PrecisionMode::Autocast, "autocast"},
    }};

/// The spelling of `value` in `table`.
template <typename Enum, size_t N>
const char *nameIn(const std::array<std::pair<Enum, const char *>, N> &table,
                   Enum value) {
  for (const auto &[entry, name] : table)
    if (entry == value)
      return name;
  return "?";
}

/// The enumerator spelled `name` in `table`.
template <typename Enum, size_t N>
std::optional<Enum>
parseIn(const std::array<std::pair<Enum, const char *>, N> &table,
        std::string_view name) {
  for (const auto &[entry, spelling] : table)
    if (name == spelling)
      return entry;
  return std::nullopt;
}

const DTypeInfo &info(DType dtype) {
  for (const DTypeInfo &entry : kDTypes)
    if (entry.dtype == dtype)
      return entry;
  return kDTypes[0]; // Unreachable: every enumerator is in the table.
}

} // namespace

const char *dtypeName(DType dtype) { return info(dtype).name; }

bool sameTorchRelease(std::string_view a, std::string_view b) {
  auto release = [](std::string_view version) {
    return version.substr(0, version.find('+'));
  };
  return release(a) == release(b);
}

std::string torchVersionNote(std::string_view planVersion,
                             std::string_view runtimeVersion) {
  if (planVersion.empty() || runtimeVersion.empty() ||
      sameTorchRelease(planVersion, runtimeVersion))
    return "";
  return " (the plan was compiled with torch " + std::string(planVersion) +
         ", this runtime has torch " + std::string(runtimeVersion) + ")";
}

bool isPlanDevice(std::string_view device) {
  for (const char *name : kPlanDevices)
    if (device == name)
      return true;
  return false;
}

int64_t dtypeSize(DType dtype) { return info(dtype).size; }

std::optional<DType> parseDType(std::string_view name) {
  for (const DTypeInfo &entry : kDTypes)
    if (name == entry.name)
      return entry.dtype;
  return std::nullopt;
}

std::string allDTypeNames() {
  std::string names;
  for (const DTypeInfo &entry : kDTypes) {
    if (!names.empty())
      names += ", ";
    names += entry.name;
  }
  return names;
}

const char *valueTypeName(ValueType type) { return nameIn(kValueTypes, type); }

std::optional<ValueType> parseValueType(std::string_view name) {
  return parseIn(kValueTypes, name);
}

const char *opKindName(OpKind kind) { return nameIn(kOpKinds, kind); }

std::optional<OpKind> parseOpKind(std::string_view name) {
  return parseIn(kOpKinds, name);
}

const char *optimizerTypeName(OptimizerType type) {
  return nameIn(kOptimizerTypes, type);
}

std::optional<OptimizerType> parseOptimizerType(std::string_view name) {
  return parseIn(kOptimizerTypes, name);
}

const char *schedulerTypeName(SchedulerType type) {
  return nameIn(kSchedulerTypes, type);
}

std::optional<SchedulerType> parseSchedulerType(std::string_view name) {
  return parseIn(kSchedulerTypes, name);
}

const char *warmupTypeName(WarmupType type) {
  return nameIn(kWarmupTypes, type);
}

std::optional<WarmupType> parseWarmupType(std::string_view name) {
  return parseIn(kWarmupTypes, name);
}

const char *lossScalerTypeName(LossScalerType type) {
  return nameIn(kLossScalerTypes, type);
}

std::optional<LossScalerType> parseLossScalerType(std::string_view name) {
  return parseIn(kLossScalerTypes, name);
}

const char *precisionModeName(PrecisionMode mode) {
  return nameIn(kPrecisionModes, mode);
}

std::optional<PrecisionMode> parsePrecisionMode(std::string_view name) {
  return parseIn(kPrecisionModes, name);
}

//===----------------------------------------------------------------------===//
// Factories
//===----------------------------------------------------------------------===//

ValueDesc ValueDesc::tensor(ValueId id, DType dtype,
                            std::vector<int64_t> shape) {
  ValueDesc desc;
  desc.id = id;
  desc.type = ValueType::Tensor;
  desc.dtype = dtype;
  desc.shape = std::move(shape);
  return desc;
}

ValueDesc ValueDesc::scalar(ValueId id, ValueType type) {
  ValueDesc desc;
  desc.id = id;
  desc.type = type;
  return desc;
}

ValueDesc ValueDesc::list(ValueId id, ValueType elem) {
  ValueDesc desc;
  desc.id = id;
  desc.type = ValueType::List;
  desc.elem = elem;
  return desc;
}

Constant Constant::none() { return Constant(); }

Constant Constant::ofInt(int64_t value) {
  Constant c;
  c.kind = Kind::Int;
  c.intValue = value;
  return c;
}

Constant Constant::ofFloat(double value) {
  Constant c;
  c.kind = Kind::Float;
  c.floatValue = value;
  return c;
}

Constant Constant::ofBool(bool value) {
  Constant c;
  c.kind = Kind::Bool;
  c.boolValue = value;
  return c;
}

Constant Constant::ofStr(std::string value) {
  Constant c;
  c.kind = Kind::Str;
  c.strValue = std::move(value);
  return c;
}

Constant Constant::ofTensor(DType dtype, std::vector<int64_t> shape,
                            std::string bytes) {
  Constant c;
  c.kind = Kind::Tensor;
  c.tensorDType = dtype;
  c.tensorShape = std::move(shape);
  c.tensorBytes = std::move(bytes);
  return c;
}

/// An op of `kind` that names a position (`index`) and defines `result`.
static Op indexedOp(OpKind kind, int64_t index, ValueId result) {
  Op op;
  op.kind = kind;
  op.index = index;
  op.results = {result};
  return op;
}

Op Op::input(int64_t index, ValueId result) {
  return indexedOp(OpKind::Input, index, result);
}

Op Op::state(std::string name, ValueId result) {
  Op op;
  op.kind = OpKind::State;
  op.name = std::move(name);
  op.results = {result};
  return op;
}

Op Op::setState(std::string name, ValueId arg) {
  Op op;
  op.kind = OpKind::SetState;
  op.name = std::move(name);
  op.arg = arg;
  return op;
}

Op Op::constant(Constant value, ValueId result) {
  Op op;
  op.kind = OpKind::Constant;
  op.value = std::move(value);
  op.results = {result};
  return op;
}

Op Op::list(std::vector<ValueId> args, ValueId result) {
  Op op;
  op.kind = OpKind::List;
  op.args = std::move(args);
  op.results = {result};
  return op;
}

Op Op::unpack(ValueId arg, std::vector<ValueId> results) {
  Op op;
  op.kind = OpKind::Unpack;
  op.arg = arg;
  op.results = std::move(results);
  return op;
}

Op Op::call(std::string name, std::vector<ValueId> args,
            std::vector<ValueId> results) {
  Op op;
  op.kind = OpKind::Call;
  op.op = std::move(name);
  op.args = std::move(args);
  op.results = std::move(results);
  return op;
}

Op Op::ifOp(ValueId cond, Branch thenBranch, Branch elseBranch,
            std::vector<ValueId> results) {
  Op op;
  op.kind = OpKind::If;
  op.cond = cond;
  op.thenBranch = std::move(thenBranch);
  op.elseBranch = std::move(elseBranch);
  op.results = std::move(results);
  return op;
}

Op Op::grad(std::string name, ValueId arg) {
  Op op;
  op.kind = OpKind::Grad;
  op.name = std::move(name);
  op.arg = arg;
  return op;
}

Op Op::collective(OpKind kind, std::string engine, int64_t bucket,
                  ValueId result) {
  Op op;
  op.kind = kind;
  op.engine = std::move(engine);
  op.bucket = bucket;
  op.results = {result};
  return op;
}

bool isCollective(OpKind kind) {
  return kind == OpKind::AllReduce || kind == OpKind::ReduceScatter ||
         kind == OpKind::AllGather;
}

Op Op::wait(ValueId token) {
  Op op;
  op.kind = OpKind::Wait;
  op.arg = token;
  return op;
}

Op Op::optimizerStep(std::string engine) {
  Op op;
  op.kind = OpKind::OptimizerStep;
  op.engine = std::move(engine);
  return op;
}

Op Op::release(std::string engine, int64_t bucket) {
  Op op;
  op.kind = OpKind::Release;
  op.engine = std::move(engine);
  op.bucket = bucket;
  return op;
}

static Op engineMarker(OpKind kind, std::string engine) {
  Op op;
  op.kind = kind;
  op.engine = std::move(engine);
  return op;
}

Op Op::backwardPrologue(std::string engine) {
  return engineMarker(OpKind::BackwardPrologue, std::move(engine));
}

Op Op::backwardEpilogue(std::string engine) {
  return engineMarker(OpKind::BackwardEpilogue, std::move(engine));
}

Op Op::lossScale(std::string engine, ValueId result) {
  Op op = engineMarker(OpKind::LossScale, std::move(engine));
  op.results = {result};
  return op;
}

Op Op::cotangent(int64_t index, ValueId result) {
  return indexedOp(OpKind::Cotangent, index, result);
}

std::string Op::label() const {
  if (kind == OpKind::Call)
    return op;
  return opKindName(kind);
}

//===----------------------------------------------------------------------===//
// Lookups and shapes
//===----------------------------------------------------------------------===//

const Program *Plan::findProgram(const std::string &name) const {
  auto it = programs.find(name);
  return it == programs.end() ? nullptr : &it->second;
}

Plan Plan::withVariant(size_t index) const {
  const ShapeVariant &variant = variants.at(index);
  Plan plan;
  plan.producer = producer;
  plan.device = device;
  plan.torchVersion = torchVersion;
  plan.weights = weights;
  plan.worldSize = worldSize;
  plan.microBatchPerRank = variant.microBatchPerRank;
  plan.gradientAccumulationSteps = gradientAccumulationSteps;
  plan.engines = engines;
  plan.state = state;
  plan.inputs = variant.inputs;
  plan.outputs = outputs;
  plan.programs = variant.programs;
  if (const Program *step = findProgram("step"))
    plan.programs["step"] = *step;
  return plan;
}

const std::vector<InputDesc> &Plan::shapeInputs(size_t index) const {
  return index == 0 ? inputs : variants.at(index - 1).inputs;
}

std::optional<size_t>
Plan::matchShape(const std::vector<std::vector<int64_t>> &shapes) const {
  for (size_t index = 0; index < numShapes(); ++index) {
    const std::vector<InputDesc> &descs = shapeInputs(index);
    bool fits = shapes.size() == descs.size();
    for (size_t i = 0; fits && i < descs.size(); ++i)
      fits = shapeFits(shapes[i], descs[i]);
    if (fits)
      return index;
  }
  return std::nullopt;
}

std::string Plan::describeShapes() const {
  std::string text;
  for (size_t index = 0; index < numShapes(); ++index) {
    std::vector<std::vector<int64_t>> shapes;
    for (const InputDesc &input : shapeInputs(index))
      shapes.push_back(input.shape);
    text += (index ? "; " : "") + formatInputShapes(inputs, shapes);
  }
  return text;
}

const StateDesc *Plan::findState(const std::string &name) const {
  for (const StateDesc &desc : state)
    if (desc.name == name)
      return &desc;
  return nullptr;
}

const EngineDesc *Plan::findEngine(const std::string &name) const {
  for (const EngineDesc &desc : engines)
    if (desc.name == name)
      return &desc;
  return nullptr;
}

DType EngineDesc::gradDtype(DType paramDtype) const {
  return precision ? precision->gradAccumDtype : paramDtype;
}

DType EngineDesc::bucketDtype(size_t bucket, DType paramDtype) const {
  if (partition && bucket < partition->buckets.size() &&
      partition->buckets[bucket].dtype)
    return *partition->buckets[bucket].dtype;
  return gradDtype(paramDtype);
}

int64_t PartitionDesc::shardNumel(int64_t worldSize) const {
  if (stage == 0 || worldSize <= 0)
    return numel;
  int64_t total = 0;
  for (const BucketDesc &bucket : buckets)
    total += bucket.numel / worldSize;
  return total;
}

int64_t PartitionDesc::shardOffset(size_t bucket, int64_t worldSize) const {
  if (stage == 0 || worldSize <= 0)
    return bucket < buckets.size() ? buckets[bucket].offset : numel;
  int64_t offset = 0;
  for (size_t i = 0; i < bucket && i < buckets.size(); ++i)
    offset += buckets[i].numel / worldSize;
  return offset;
}

bool PartitionDesc::shardsParameters(size_t bucket) const {
  return stage == 3 && bucket < buckets.size() && !buckets[bucket].persistent;
}

int64_t PartitionDesc::bucketAt(int64_t offset) const {
  for (size_t b = 0; b < buckets.size(); ++b)
    if (offset >= buckets[b].offset &&
        offset < buckets[b].offset + buckets[b].numel)
      return int64_t(b);
  return -1;
}

std::optional<int64_t> staticNumel(const std::vector<int64_t> &shape) {
  int64_t numel = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      return std::nullopt;
    numel *= dim;
  }
  return numel;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

std::string formatInputShapes(const std::vector<InputDesc> &inputs,
                              const std::vector<std::vector<int64_t>> &shapes) {
  std::string text;
  for (size_t i = 0; i < shapes.size(); ++i)
    text += (i ? ", " : "") +
            (i < inputs.size() ? inputs[i].name : "in" + std::to_string(i)) +
            " " + formatShape(shapes[i]);
  return text;
}

bool shapeFits(const std::vector<int64_t> &shape, const InputDesc &input) {
  if (shape.size() != input.shape.size())
    return false;
  for (size_t d = 0; d < shape.size(); ++d)
    if (input.shape[d] != kDynamicDim && input.shape[d] != shape[d])
      return false;
  return true;
}

} // namespace ds::plan
