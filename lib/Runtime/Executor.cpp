//===- Executor.cpp - Runs one program of a plan --------------------------===//
//
// Load time: every op becomes a Step with what running it needs precomputed
// (resolved operator, schema defaults, argument coercions, decoded
// constants, state indices, branch-local values). Run time: a loop over
// steps on a vector of IValue slots, one per value id.
//
// Memory accounting counts each slot's tensor bytes when the slot is set and
// uncounts them when it is cleared; `state` results are not counted (state
// is reported separately). Clearing happens after each op's `free` list, at
// the end of a branch for the values it defined (before the if's results are
// stored), and at the end of a run. MemoryPrediction.cpp mirrors this order.
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/Executor.h"

#include "OperatorResolver.h"
#include "RunDevice.h"

#include "ds/Plan/PlanError.h"
#include "ds/Runtime/ExecutionObserver.h"
#include "ds/Runtime/FaultPoints.h"
#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/DTypes.h"
#include "ds/TensorIO/RuntimeError.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <sstream>

namespace ds::runtime {

using plan::Op;
using plan::OpKind;
using plan::ValueDesc;
using plan::ValueId;
using plan::ValueType;

namespace {

std::string schemaText(const c10::FunctionSchema &schema) {
  std::ostringstream text;
  text << schema;
  return text.str();
}

std::string valueText(const ValueDesc &value) {
  std::string text =
      "%" + std::to_string(value.id) + " (" + plan::valueTypeName(value.type);
  if (value.type == ValueType::Tensor && value.dtype)
    text += std::string(" ") + plan::dtypeName(*value.dtype);
  if (value.type == ValueType::Tensor && value.shape)
    text += " " + plan::formatShape(*value.shape);
  return text + ")";
}

/// Can a value of the plan's type be passed where the schema wants `type`?
/// Conservative: kinds the plan cannot express are accepted and left to the
/// kernel.
bool accepts(const c10::TypePtr &type, ValueType value) {
  switch (type->kind()) {
  case c10::TypeKind::TensorType:
    return value == ValueType::Tensor;
  case c10::TypeKind::IntType:
  case c10::TypeKind::SymIntType:
  case c10::TypeKind::ScalarTypeType:
  case c10::TypeKind::LayoutType:
  case c10::TypeKind::MemoryFormatType:
    return value == ValueType::Int;
  case c10::TypeKind::FloatType:
    return value == ValueType::Float || value == ValueType::Int;
  case c10::TypeKind::BoolType:
    return value == ValueType::Bool;
  case c10::TypeKind::NumberType:
    return value == ValueType::Int || value == ValueType::Float ||
           value == ValueType::Bool;
  case c10::TypeKind::StringType:
    return value == ValueType::Str;
  case c10::TypeKind::NoneType:
    return value == ValueType::None;
  case c10::TypeKind::ListType:
    return value == ValueType::List;
  case c10::TypeKind::OptionalType:
    return value == ValueType::None ||
           accepts(type->expectRef<c10::OptionalType>().getElementType(),
                   value);
  default:
    return true;
  }
}

/// Argument conversions the boxed kernels need but the plan cannot spell.
/// RunDevice: the plan writes device arguments as None; every operator runs
/// on the run's device (ExecutorOptions::device), so a factory op such as
/// aten::zeros allocates there.
enum class Coercion { None, IntToFloat, ToOptionalTensorList, RunDevice };

Coercion coercionFor(c10::TypePtr type) {
  if (type->kind() == c10::TypeKind::OptionalType)
    type = type->expectRef<c10::OptionalType>().getElementType();
  if (type->kind() == c10::TypeKind::DeviceObjType)
    return Coercion::RunDevice;
  if (type->kind() == c10::TypeKind::FloatType)
    return Coercion::IntToFloat;
  if (type->kind() == c10::TypeKind::ListType) {
    c10::TypePtr elem = type->expectRef<c10::ListType>().getElementType();
    if (elem->kind() == c10::TypeKind::OptionalType &&
        elem->expectRef<c10::OptionalType>().getElementType()->kind() ==
            c10::TypeKind::TensorType)
      return Coercion::ToOptionalTensorList;
  }
  return Coercion::None;
}

c10::IValue coerce(c10::IValue value, Coercion coercion,
                   const c10::Device &device) {
  if (coercion == Coercion::RunDevice && value.isNone())
    return device;
  if (coercion == Coercion::IntToFloat && value.isInt())
    return double(value.toInt());
  if (coercion == Coercion::ToOptionalTensorList && value.isTensorList()) {
    c10::List<c10::optional<at::Tensor>> list;
    for (const at::Tensor &tensor : value.toTensorList())
      list.push_back(tensor);
    return list;
  }
  return value;
}

c10::IValue makeConstant(const plan::Constant &value,
                         const c10::Device &device) {
  switch (value.kind) {
  case plan::Constant::Kind::None:
    return c10::IValue();
  case plan::Constant::Kind::Int:
    return value.intValue;
  case plan::Constant::Kind::Float:
    return value.floatValue;
  case plan::Constant::Kind::Bool:
    return value.boolValue;
  case plan::Constant::Kind::Str:
    return value.strValue;
  case plan::Constant::Kind::Tensor: {
    at::Tensor tensor =
        at::empty(value.tensorShape,
                  at::TensorOptions().dtype(toScalarType(value.tensorDType)));
    if (!value.tensorBytes.empty()) // Little-endian bytes on a little host.
      std::memcpy(tensor.data_ptr(), value.tensorBytes.data(),
                  value.tensorBytes.size());
    return device.is_cpu() ? tensor : tensor.to(device);
  }
  }
  return c10::IValue();
}

bool shapeMatches(at::IntArrayRef actual, const std::vector<int64_t> &shape) {
  if (actual.size() != shape.size())
    return false;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != plan::kDynamicDim && shape[i] != actual[i])
      return false;
  return true;
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return text;
}

} // namespace

//===----------------------------------------------------------------------===//
// Steps
//===----------------------------------------------------------------------===//

class Executor::Impl {
public:
  Impl(const plan::Plan &plan, const std::string &programName,
       StateStore &state, std::string origin, ExecutorOptions options,
       TrainingOps *training)
      : plan_(plan), program_(findProgram(plan, programName, origin)),
        state_(state), training_(training), origin_(std::move(origin)),
        options_(options), path_("programs." + programName),
        takesInputs_(programName != "step"),
        basePart_(programName == "step"    ? ProgramPart::Step
                  : programName == "train" ? ProgramPart::Forward
                                           : ProgramPart::Eval) {
    build(program_.body, path_ + ".body", steps_);
  }

  std::vector<c10::IValue> run(const std::vector<c10::IValue> &inputs);
  void start(const std::vector<c10::IValue> &inputs);
  void runRange(size_t begin, size_t end);
  std::vector<c10::IValue> results() const;
  void finish() {
    clearAll();
    stack_.clear();
    inputs_.clear();
    cotangents_.clear();
  }
  size_t size() const { return steps_.size(); }

  int64_t current_ = 0;
  int64_t peak_ = 0;
  ExecutionObserver *observer_ = nullptr;

private:
  static const plan::Program &findProgram(const plan::Plan &plan,
                                          const std::string &name,
                                          const std::string &origin) {
    if (const plan::Program *program = plan.findProgram(name))
      return *program;
    throw plan::PlanError(origin, "programs",
                          "the plan has no program \"" + name + "\"");
  }

  struct CallInfo {
    detail::ResolvedOperator op;
    /// Schema defaults for trailing arguments the op leaves out.
    std::vector<c10::IValue> defaults;
    std::vector<Coercion> coercions;
    /// The single list result is split into `results`.
    bool unpackResult = false;
  };

  struct Step {
    const Op *op = nullptr;
    OpContext context;
    /// state, set_state, grad: the state entry; collectives and
    /// optimizer_step: the plan engine.
    int64_t stateIndex = -1;
    c10::IValue constant;
    std::unique_ptr<CallInfo> call;
    std::vector<Step> thenSteps, elseSteps;
    /// Values defined directly in each branch: cleared when it ends.
    std::vector<ValueId> thenLocals, elseLocals;
  };

  void build(const std::vector<Op> &ops, const std::string &path,
             std::vector<Step> &steps);
  std::unique_ptr<CallInfo> resolveCall(const Op &op,
                                        const std::string &where) const;
  std::vector<ValueId> localsOf(const std::vector<Op> &ops) const;

  void runBlock(const std::vector<Step> &steps);
  void runStep(const Step &step);
  void runObservedStep(const Step &step);
  void runStepBody(const Step &step);
  /// What runRange(begin, ...) runs, for the observer.
  ProgramPart partAt(size_t begin) const;
  void execute(const Step &step);
  void executeCall(const Step &step);
  void executeIf(const Step &step);
  void executeList(const Step &step);
  void executeUnpack(const Step &step);
  void executeGrad(const Step &step);
  int64_t gradientIndex(const Op &op, const std::string &where) const;
  int64_t engineIndex(const Op &op, const std::string &where) const;

  [[noreturn]] void fail(const Step &step, const std::string &detail) const {
    throw RuntimeError(step.context, detail);
  }
  void checkInputs(const std::vector<c10::IValue> &inputs) const;
  void checkResult(const Step &step, const std::string &field, ValueId id,
                   const c10::IValue &value) const;
  bool truthy(const Step &step, const c10::IValue &value) const;

  const c10::IValue &get(ValueId id) const { return slots_[id]; }
  void set(ValueId id, c10::IValue value, bool counted = true) {
    clear(id);
    int64_t bytes = 0;
    if (counted && value.isTensor() && value.toTensor().defined())
      bytes = int64_t(value.toTensor().nbytes());
    slots_[id] = std::move(value);
    slotBytes_[id] = bytes;
    current_ += bytes;
    peak_ = std::max(peak_, current_);
    if (bytes && training_)
      training_->liveBytesChanged(current_);
  }
  void clear(ValueId id) {
    int64_t bytes = slotBytes_[id];
    current_ -= bytes;
    slotBytes_[id] = 0;
    slots_[id] = c10::IValue();
    if (bytes && training_)
      training_->liveBytesChanged(current_);
  }
  void clearAll() {
    for (size_t id = 0; id < slots_.size(); ++id)
      clear(ValueId(id));
  }

  const plan::Plan &plan_;
  const plan::Program &program_;
  StateStore &state_;
  TrainingOps *training_;
  std::string origin_;
  ExecutorOptions options_;
  std::string path_;
  /// False for programs.step, which has no inputs.
  bool takesInputs_;
  /// Forward for programs.train (whose backward starts at backward_start).
  ProgramPart basePart_;
  std::vector<Step> steps_;

  // Per run (kept between the parts of a split run).
  std::vector<c10::IValue> inputs_;
  /// The cotangent of each program result (backward only).
  std::vector<at::Tensor> cotangents_;

public:
  void setCotangents(std::vector<at::Tensor> cotangents) {
    cotangents_ = std::move(cotangents);
  }

private:
  std::vector<c10::IValue> slots_;
  std::vector<int64_t> slotBytes_;
  torch::jit::Stack stack_;
};

void Executor::Impl::build(const std::vector<Op> &ops, const std::string &path,
                           std::vector<Step> &steps) {
  steps.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op &op = ops[i];
    std::string indexed = path + "[" + std::to_string(i) + "]";
    Step step;
    step.op = &op;
    step.context.origin = origin_;
    step.context.where = indexed + " (" + op.label() + ")";
    step.context.op = op.label();
    step.context.module = op.module;
    step.context.moduleClass = op.moduleClass;
    step.context.loc = op.loc;
    switch (op.kind) {
    case OpKind::State:
    case OpKind::SetState:
      step.stateIndex = state_.indexOf(op.name);
      break;
    case OpKind::Constant:
      step.constant = makeConstant(op.value, options_.device);
      break;
    case OpKind::Call:
      step.call = resolveCall(op, step.context.where);
      break;
    case OpKind::Grad:
      step.stateIndex = gradientIndex(op, step.context.where);
      break;
    case OpKind::AllReduce:
    case OpKind::ReduceScatter:
    case OpKind::AllGather:
    case OpKind::OptimizerStep:
    case OpKind::Release:
    case OpKind::LossScale:
      step.stateIndex = engineIndex(op, step.context.where);
      break;
    case OpKind::Wait:
      engineIndex(op, step.context.where); // Checks for a training side.
      break;
    case OpKind::If:
      build(op.thenBranch.body, indexed + ".then.body", step.thenSteps);
      build(op.elseBranch.body, indexed + ".else.body", step.elseSteps);
      step.thenLocals = localsOf(op.thenBranch.body);
      step.elseLocals = localsOf(op.elseBranch.body);
      break;
    default:
      break;
    }
    steps.push_back(std::move(step));
  }
}

int64_t Executor::Impl::gradientIndex(const Op &op,
                                      const std::string &where) const {
  int64_t index = state_.indexOf(op.name);
  if (!training_)
    throw plan::PlanError(origin_, where,
                          "grad ops run only in programs.train (this "
                          "executor has no gradient buffers)");
  if (!training_->hasGradient(index)) {
    const plan::StateDesc &desc = state_.desc(index);
    throw plan::PlanError(
        origin_, where,
        "name: parameter \"" + desc.name + "\" of engine \"" + desc.engine +
            "\" has no gradient buffer: the engine is frozen (its config has "
            "no \"optimizer\"), so it gets no gradients");
  }
  return index;
}

int64_t Executor::Impl::engineIndex(const Op &op,
                                    const std::string &where) const {
  if (!training_)
    throw plan::PlanError(origin_, where,
                          std::string(plan::opKindName(op.kind)) +
                              " ops run only in training (programs.train and "
                              "programs.step) and, for ZeRO stage 3 gathers, "
                              "in a plan whose engines are partitioned");
  for (size_t e = 0; e < plan_.engines.size(); ++e)
    if (plan_.engines[e].name == op.engine)
      return int64_t(e);
  return -1; // wait: no engine.
}

std::vector<ValueId>
Executor::Impl::localsOf(const std::vector<Op> &ops) const {
  std::vector<ValueId> locals;
  for (const Op &op : ops)
    locals.insert(locals.end(), op.results.begin(), op.results.end());
  return locals;
}

std::unique_ptr<Executor::Impl::CallInfo>
Executor::Impl::resolveCall(const Op &op, const std::string &where) const {
  auto fail = [&](const std::string &detail) {
    throw plan::PlanError(origin_, where, detail);
  };
  std::string error;
  std::optional<detail::ResolvedOperator> resolved =
      detail::OperatorResolver::resolve(op.op, error, plan_.torchVersion);
  if (!resolved)
    fail(error);
  auto info = std::make_unique<CallInfo>();
  info->op = *resolved;
  const c10::FunctionSchema &schema = resolved->schema();
  const auto &arguments = schema.arguments();

  if (!schema.is_vararg()) {
    if (op.args.size() > arguments.size())
      fail("passes " + std::to_string(op.args.size()) +
           " arguments, but the operator takes " +
           std::to_string(arguments.size()) + ": " + schemaText(schema));
    for (size_t k = op.args.size(); k < arguments.size(); ++k) {
      const c10::Argument &argument = arguments[k];
      if (!argument.default_value())
        fail("argument " + std::to_string(k) + " (\"" + argument.name() +
             "\") is not passed and has no default: " + schemaText(schema));
      info->defaults.push_back(coerce(*argument.default_value(),
                                      coercionFor(argument.type()),
                                      options_.device));
    }
    for (size_t k = 0; k < op.args.size(); ++k) {
      const ValueDesc &value = program_.values[op.args[k]];
      if (!accepts(arguments[k].type(), value.type))
        fail("args[" + std::to_string(k) + "]: " + valueText(value) +
             " cannot be passed as argument \"" + arguments[k].name() +
             "\" of type " + arguments[k].type()->str() + ": " +
             schemaText(schema));
      info->coercions.push_back(coercionFor(arguments[k].type()));
    }
  } else {
    info->coercions.assign(op.args.size(), Coercion::None);
  }

  const auto &returns = schema.returns();
  if (!schema.is_varret()) {
    bool singleList = returns.size() == 1 &&
                      returns[0].type()->kind() == c10::TypeKind::ListType;
    if (op.results.size() == returns.size())
      info->unpackResult =
          singleList && program_.values[op.results[0]].type != ValueType::List;
    else if (singleList)
      info->unpackResult = true;
    else
      fail("the operator returns " + std::to_string(returns.size()) +
           " value(s), but the op has " + std::to_string(op.results.size()) +
           " result(s): " + schemaText(schema));
  }
  return info;
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

std::vector<c10::IValue>
Executor::Impl::run(const std::vector<c10::IValue> &inputs) {
  start(inputs);
  runRange(0, steps_.size());
  std::vector<c10::IValue> values = results();
  finish();
  return values;
}

void Executor::Impl::start(const std::vector<c10::IValue> &inputs) {
  finish();
  if (takesInputs_)
    checkInputs(inputs);
  else if (!inputs.empty())
    throw RuntimeError(origin_ + ": " + path_ + ": takes no inputs, got " +
                       std::to_string(inputs.size()));
  inputs_ = inputs;
  slots_.assign(program_.values.size(), c10::IValue());
  slotBytes_.assign(program_.values.size(), 0);
  current_ = 0;
}

ProgramPart Executor::Impl::partAt(size_t begin) const {
  if (basePart_ == ProgramPart::Forward && program_.backwardStart &&
      int64_t(begin) >= *program_.backwardStart)
    return ProgramPart::Backward;
  return basePart_;
}

void Executor::Impl::runRange(size_t begin, size_t end) {
  end = std::min(end, steps_.size());
  // The `ds` RNG operators use this device's generator.
  detail::RunDeviceScope runDevice(options_.device);
  ExecutionObserver *observer = observer_;
  ProgramPart part = partAt(begin);
  if (observer)
    observer->partBegin(part);
  try {
    for (size_t i = begin; i < end; ++i)
      runStep(steps_[i]);
  } catch (...) {
    if (observer)
      observer->partEnd(part);
    finish();
    throw;
  }
  if (observer)
    observer->partEnd(part);
}

std::vector<c10::IValue> Executor::Impl::results() const {
  std::vector<c10::IValue> values;
  values.reserve(program_.results.size());
  for (ValueId id : program_.results)
    values.push_back(get(id));
  return values;
}

void Executor::Impl::checkInputs(const std::vector<c10::IValue> &inputs) const {
  const auto &descs = plan_.inputs;
  if (inputs.size() != descs.size()) {
    std::string names;
    for (const plan::InputDesc &desc : descs)
      names += (names.empty() ? "" : ", ") + desc.name;
    throw RuntimeError(origin_ + ": " + path_ + ": expected " +
                       std::to_string(descs.size()) + " input(s) (" + names +
                       "), got " + std::to_string(inputs.size()));
  }
  for (size_t i = 0; i < descs.size(); ++i) {
    const plan::InputDesc &desc = descs[i];
    std::string expected = describeTensor(desc.dtype, desc.shape);
    std::string which = origin_ + ": " + path_ + ": input " +
                        std::to_string(i) + " (\"" + desc.name + "\")";
    if (!inputs[i].isTensor())
      throw RuntimeError(which + ": expected a tensor " + expected + ", got " +
                         inputs[i].tagKind());
    const at::Tensor &tensor = inputs[i].toTensor();
    if (!tensor.defined() || tensor.scalar_type() != toScalarType(desc.dtype) ||
        !shapeMatches(tensor.sizes(), desc.shape))
      throw RuntimeError(which + ": expected " + expected + ", got " +
                         describeTensor(tensor));
    if (tensor.device() != options_.device)
      throw RuntimeError(which + ": the tensor is on " +
                         tensor.device().str() + ", the program runs on " +
                         options_.device.str());
  }
}

void Executor::Impl::runBlock(const std::vector<Step> &steps) {
  for (const Step &step : steps)
    runStep(step);
}

void Executor::Impl::runStep(const Step &step) {
  // Unobserved runs pay this test only.
  if (observer_)
    runObservedStep(step);
  else
    runStepBody(step);
}

void Executor::Impl::runObservedStep(const Step &step) {
  observer_->opBegin(*step.op);
  try {
    runStepBody(step);
  } catch (...) {
    observer_->opEnd(*step.op);
    throw;
  }
  observer_->opEnd(*step.op);
}

void Executor::Impl::runStepBody(const Step &step) {
  try {
    execute(step);
  } catch (const RuntimeError &error) {
    if (!error.context().where.empty())
      throw; // Already names its op (an op inside a branch).
    fail(step, error.what());
  } catch (const c10::Error &error) {
    fail(step, trimmed(error.what_without_backtrace()));
  } catch (const std::exception &error) {
    fail(step, trimmed(error.what()));
  }
  for (ValueId id : step.op->free)
    clear(id);
}

void Executor::Impl::execute(const Step &step) {
  const Op &op = *step.op;
  switch (op.kind) {
  case OpKind::Input:
    set(op.results[0], inputs_[op.index]);
    return;
  case OpKind::State:
    // A sharded (ZeRO stage 3) parameter must be gathered: a RuntimeError
    // naming it and its bucket otherwise.
    set(op.results[0], state_.read(step.stateIndex), /*counted=*/false);
    return;
  case OpKind::SetState:
    state_.assign(step.stateIndex, get(op.arg).toTensor());
    return;
  case OpKind::Constant:
    set(op.results[0], step.constant);
    return;
  case OpKind::List:
    executeList(step);
    return;
  case OpKind::Unpack:
    executeUnpack(step);
    return;
  case OpKind::Call:
    executeCall(step);
    return;
  case OpKind::If:
    executeIf(step);
    return;
  case OpKind::Grad:
    executeGrad(step);
    return;
  case OpKind::AllReduce:
  case OpKind::ReduceScatter:
  case OpKind::AllGather: {
    c10::IValue token =
        training_->startCollective(op.kind, size_t(step.stateIndex), op.bucket);
    checkResult(step, "result", op.results[0], token);
    set(op.results[0], std::move(token));
    if (op.kind == OpKind::AllGather)
      reachFaultPoint(FaultPoint::AllGather); // Tests only (FaultPoints.h).
    return;
  }
  case OpKind::Wait:
    training_->wait(get(op.arg));
    return;
  case OpKind::OptimizerStep:
    reachFaultPoint(FaultPoint::OptimizerStep); // Tests only.
    training_->optimizerStep(size_t(step.stateIndex));
    return;
  case OpKind::Release:
    training_->release(size_t(step.stateIndex), op.bucket);
    return;
  case OpKind::LossScale: {
    c10::IValue scale = training_->lossScale(size_t(step.stateIndex));
    checkResult(step, "result", op.results[0], scale);
    set(op.results[0], std::move(scale));
    return;
  }
  case OpKind::Cotangent: {
    if (size_t(op.index) >= cotangents_.size() ||
        !cotangents_[size_t(op.index)].defined())
      throw RuntimeError(origin_ + ": " + step.context.where +
                         ": no cotangent was given for result " +
                         std::to_string(op.index));
    // Moved: the backward frees it after its last use, as any value.
    c10::IValue cotangent = std::move(cotangents_[size_t(op.index)]);
    checkResult(step, "result", op.results[0], cotangent);
    set(op.results[0], std::move(cotangent));
    return;
  }
  case OpKind::BackwardPrologue:
  case OpKind::BackwardEpilogue:
    // Markers: the plan's validation already placed every grad op and
    // reduction wait of the engine between the two.
    return;
  }
}

void Executor::Impl::executeGrad(const Step &step) {
  const c10::IValue &value = get(step.op->arg);
  if (!value.isTensor())
    fail(step, std::string("arg: expected a tensor, got ") + value.tagKind());
  training_->accumulateGradient(step.stateIndex, value.toTensor());
}

void Executor::Impl::executeCall(const Step &step) {
  const Op &op = *step.op;
  CallInfo &call = *step.call;
  stack_.clear();
  for (size_t k = 0; k < op.args.size(); ++k)
    stack_.push_back(
        coerce(get(op.args[k]), call.coercions[k], options_.device));
  stack_.insert(stack_.end(), call.defaults.begin(), call.defaults.end());
  call.op.call(stack_);

  if (call.unpackResult) {
    if (stack_.size() != 1 || !stack_[0].isList())
      fail(step, "the operator did not return one list");
    c10::List<c10::IValue> list = stack_[0].toList();
    if (list.size() != op.results.size())
      fail(step, "the operator returned a list of " +
                     std::to_string(list.size()) + " element(s), the op has " +
                     std::to_string(op.results.size()) + " result(s)");
    for (size_t k = 0; k < op.results.size(); ++k) {
      checkResult(step, "results[" + std::to_string(k) + "]", op.results[k],
                  list.get(k));
      set(op.results[k], list.get(k));
    }
  } else {
    if (stack_.size() != op.results.size())
      fail(step, "the operator returned " + std::to_string(stack_.size()) +
                     " value(s), the op has " +
                     std::to_string(op.results.size()) + " result(s)");
    for (size_t k = 0; k < op.results.size(); ++k) {
      checkResult(step, "results[" + std::to_string(k) + "]", op.results[k],
                  stack_[k]);
      set(op.results[k], std::move(stack_[k]));
    }
  }
  stack_.clear();
}

void Executor::Impl::executeIf(const Step &step) {
  const Op &op = *step.op;
  bool taken = truthy(step, get(op.cond));
  const plan::Branch &branch = taken ? op.thenBranch : op.elseBranch;
  runBlock(taken ? step.thenSteps : step.elseSteps);
  std::vector<c10::IValue> yielded;
  yielded.reserve(branch.yields.size());
  for (ValueId id : branch.yields)
    yielded.push_back(get(id));
  // The branch's values die before the if's results are counted.
  for (ValueId id : taken ? step.thenLocals : step.elseLocals)
    clear(id);
  for (size_t k = 0; k < op.results.size(); ++k)
    set(op.results[k], std::move(yielded[k]));
}

void Executor::Impl::executeList(const Step &step) {
  const Op &op = *step.op;
  ValueType elem = *program_.values[op.results[0]].elem;
  auto wrongElement = [&](size_t k) {
    fail(step, "args[" + std::to_string(k) + "]: expected a " +
                   plan::valueTypeName(elem) + " element, got " +
                   get(op.args[k]).tagKind());
  };
  c10::IValue list;
  switch (elem) {
  case ValueType::Tensor: {
    bool anyNone = std::any_of(op.args.begin(), op.args.end(),
                               [&](ValueId id) { return get(id).isNone(); });
    if (anyNone) { // TorchScript's Tensor?[] (aten::index).
      c10::List<c10::optional<at::Tensor>> items;
      for (size_t k = 0; k < op.args.size(); ++k) {
        const c10::IValue &item = get(op.args[k]);
        if (!item.isNone() && !item.isTensor())
          wrongElement(k);
        items.push_back(item.isNone() ? c10::optional<at::Tensor>()
                                      : item.toTensor());
      }
      list = items;
    } else {
      c10::List<at::Tensor> items;
      for (size_t k = 0; k < op.args.size(); ++k) {
        if (!get(op.args[k]).isTensor())
          wrongElement(k);
        items.push_back(get(op.args[k]).toTensor());
      }
      list = items;
    }
    break;
  }
  case ValueType::Int: {
    c10::List<int64_t> items;
    for (size_t k = 0; k < op.args.size(); ++k) {
      if (!get(op.args[k]).isInt())
        wrongElement(k);
      items.push_back(get(op.args[k]).toInt());
    }
    list = items;
    break;
  }
  case ValueType::Float: {
    c10::List<double> items;
    for (size_t k = 0; k < op.args.size(); ++k) {
      const c10::IValue &item = get(op.args[k]);
      if (!item.isDouble() && !item.isInt())
        wrongElement(k);
      items.push_back(item.isInt() ? double(item.toInt()) : item.toDouble());
    }
    list = items;
    break;
  }
  case ValueType::Bool: {
    c10::List<bool> items;
    for (size_t k = 0; k < op.args.size(); ++k) {
      if (!get(op.args[k]).isBool())
        wrongElement(k);
      items.push_back(get(op.args[k]).toBool());
    }
    list = items;
    break;
  }
  case ValueType::Str: {
    c10::List<std::string> items;
    for (size_t k = 0; k < op.args.size(); ++k) {
      if (!get(op.args[k]).isString())
        wrongElement(k);
      items.push_back(get(op.args[k]).toStringRef());
    }
    list = items;
    break;
  }
  default: {
    c10::impl::GenericList items(c10::NoneType::get());
    for (size_t k = 0; k < op.args.size(); ++k)
      items.push_back(get(op.args[k]));
    list = items;
    break;
  }
  }
  set(op.results[0], std::move(list));
}

void Executor::Impl::executeUnpack(const Step &step) {
  const Op &op = *step.op;
  const c10::IValue &value = get(op.arg);
  if (!value.isList())
    fail(step, std::string("arg: expected a list, got ") + value.tagKind());
  c10::List<c10::IValue> list = value.toList();
  if (list.size() != op.results.size())
    fail(step, "the list has " + std::to_string(list.size()) +
                   " element(s), the op unpacks " +
                   std::to_string(op.results.size()));
  for (size_t k = 0; k < op.results.size(); ++k) {
    checkResult(step, "results[" + std::to_string(k) + "]", op.results[k],
                list.get(k));
    set(op.results[k], list.get(k));
  }
}

bool Executor::Impl::truthy(const Step &step, const c10::IValue &value) const {
  if (value.isBool())
    return value.toBool();
  if (value.isInt())
    return value.toInt() != 0;
  if (value.isDouble())
    return value.toDouble() != 0.0;
  if (value.isTensor())
    return value.toTensor().is_nonzero();
  fail(step, std::string("cond: expected a bool, got ") + value.tagKind());
}

void Executor::Impl::checkResult(const Step &step, const std::string &field,
                                 ValueId id, const c10::IValue &value) const {
  if (!options_.checkResults)
    return;
  const ValueDesc &desc = program_.values[id];
  bool ok = true;
  switch (desc.type) {
  case ValueType::Tensor:
    ok = value.isTensor() || value.isNone(); // Tensor? results may be None.
    break;
  case ValueType::Int:
    ok = value.isInt();
    break;
  case ValueType::Float:
    ok = value.isDouble();
    break;
  case ValueType::Bool:
    ok = value.isBool();
    break;
  case ValueType::None:
    ok = value.isNone();
    break;
  case ValueType::Str:
    ok = value.isString();
    break;
  case ValueType::List:
    ok = value.isList();
    break;
  case ValueType::Token:
    ok = value.isInt();
    break;
  }
  if (!ok)
    fail(step, field + ": the operator returned " + value.tagKind() +
                   ", the plan declares " + valueText(desc));
  if (desc.type != ValueType::Tensor || !value.isTensor())
    return;
  const at::Tensor &tensor = value.toTensor();
  // Backward kernels return undefined tensors for outputs their output_mask
  // switched off (convolution_backward without a bias); the plan has no type
  // for "nothing", and a consumer of one fails in its kernel.
  if (!tensor.defined())
    return;
  bool dtypeOk =
      !desc.dtype || tensor.scalar_type() == toScalarType(*desc.dtype);
  bool shapeOk = !desc.shape || shapeMatches(tensor.sizes(), *desc.shape);
  if (!dtypeOk || !shapeOk)
    fail(step, field + ": the operator returned " + describeTensor(tensor) +
                   ", the plan declares " + valueText(desc));
}

//===----------------------------------------------------------------------===//
// Executor
//===----------------------------------------------------------------------===//

TrainingOps::~TrainingOps() = default;

Executor::Executor(const plan::Plan &plan, const std::string &programName,
                   StateStore &state, std::string origin,
                   ExecutorOptions options, TrainingOps *training)
    : impl_(std::make_unique<Impl>(plan, programName, state, std::move(origin),
                                   options, training)) {}

Executor::~Executor() = default;

std::vector<c10::IValue> Executor::run(const std::vector<c10::IValue> &inputs) {
  return impl_->run(inputs);
}

void Executor::start(const std::vector<c10::IValue> &inputs) {
  impl_->start(inputs);
}

void Executor::setObserver(ExecutionObserver *observer) {
  impl_->observer_ = observer;
}

void Executor::runRange(size_t begin, size_t end) {
  impl_->runRange(begin, end);
}

std::vector<c10::IValue> Executor::results() const { return impl_->results(); }

void Executor::finish() { impl_->finish(); }

void Executor::setCotangents(std::vector<at::Tensor> cotangents) {
  impl_->setCotangents(std::move(cotangents));
}

size_t Executor::size() const { return impl_->size(); }

int64_t Executor::currentBytes() const { return impl_->current_; }

int64_t Executor::peakBytes() const { return impl_->peak_; }

void Executor::resetPeak() { impl_->peak_ = impl_->current_; }

} // namespace ds::runtime
