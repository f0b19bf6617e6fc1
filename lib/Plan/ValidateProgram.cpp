//===- ValidateProgram.cpp - Values, lifetimes and ops of one program -----===//
//
// docs/plan-format.md, "Programs" and "The training program": value ids
// defined once before use, types per op kind, no use after free, branch
// scopes and arities, constants, and the forward / backward split.
//
//===----------------------------------------------------------------------===//

#include "PlanValidator.h"

#include <algorithm>

namespace ds::plan::detail {

ProgramValidator::ProgramValidator(const Plan &plan, const Program &program,
                                   const std::string &origin,
                                   const std::string &name)
    : plan_(plan), program_(program), origin_(origin),
      path_("programs." + name), isTrain_(name == "train"),
      isEval_(name == "eval"), isStep_(name == "step") {
  // Stage 3: which sharded bucket holds each parameter (checkPartition
  // made sure that a parameter lies inside one bucket).
  for (const EngineDesc &engine : plan_.engines) {
    if (!engine.partition || engine.partition->stage != 3)
      continue;
    const PartitionDesc &partition = *engine.partition;
    for (const FlatParamDesc &param : partition.params) {
      int64_t bucket = partition.bucketAt(param.offset);
      if (bucket >= 0 && partition.shardsParameters(size_t(bucket)))
        shardedParam_[param.name] = {engine.name, bucket};
    }
    for (size_t b = 0; b < partition.buckets.size(); ++b)
      if (partition.shardsParameters(b))
        gathers_[{engine.name, int64_t(b)}] = Gather();
  }
}

void ProgramValidator::run() {
  checkValues();
  checkBackwardStart();
  states_.assign(program_.values.size(), ValueState());
  std::vector<ValueId> topLevel;
  walkBlock(program_.body, path_ + ".body", topLevel);
  if (program_.backwardStart &&
      *program_.backwardStart == int64_t(program_.body.size()))
    snapshotForward(); // An empty backward.
  if (isStep_ && !program_.results.empty())
    fail(path_ + ".results", "the step program returns nothing, found " +
                                 std::to_string(program_.results.size()) +
                                 " result(s)");
  for (size_t i = 0; i < program_.results.size(); ++i) {
    std::string where = path_ + joinIndex(".results", i);
    use(program_.results[i], where, "");
    checkComputedByForward(program_.results[i], where);
  }
  checkCollectivesComplete();
  checkBackwardMarkersComplete();
}

void ProgramValidator::fail(const std::string &where,
                            const std::string &detail) const {
  throw PlanError(origin_, where, detail);
}

void ProgramValidator::checkBackwardStart() const {
  if (!program_.backwardStart) {
    if (isTrain_)
      fail(path_, "missing required field \"backward_start\" (the index "
                  "of the first backward op in \"body\")");
    return;
  }
  int64_t start = *program_.backwardStart;
  if (start < 0 || start > int64_t(program_.body.size()))
    fail(path_ + ".backward_start",
         "must be in [0, " + std::to_string(program_.body.size()) +
             "] (the body has " + std::to_string(program_.body.size()) +
             " ops), found " + std::to_string(start));
}

void ProgramValidator::snapshotForward() {
  liveAfterForward_.assign(states_.size(), false);
  for (size_t id = 0; id < states_.size(); ++id)
    liveAfterForward_[id] = states_[id].status == Status::Live;
}

void ProgramValidator::checkComputedByForward(ValueId id,
                                              const std::string &where) const {
  if (!isTrain_ || !program_.backwardStart || liveAfterForward_.empty() ||
      liveAfterForward_[id])
    return;
  fail(where, "value " + valueName(id) + " is computed by " +
                  states_[id].definedAt + ", after backward_start (" +
                  std::to_string(*program_.backwardStart) +
                  "); the results (the losses) must be computed by the "
                  "forward part");
}

void ProgramValidator::checkValues() const {
  for (size_t i = 0; i < program_.values.size(); ++i) {
    const ValueDesc &value = program_.values[i];
    std::string where = path_ + joinIndex(".values", i);
    if (value.id != ValueId(i))
      fail(where, "id is " + std::to_string(value.id) + ", expected " +
                      std::to_string(i) +
                      " (ids are the positions in \"values\")");
    bool tensor = value.type == ValueType::Tensor;
    if (!tensor && (value.dtype || value.shape))
      fail(where, std::string("\"dtype\" and \"shape\" are only allowed on "
                              "tensor values, this one is ") +
                      valueTypeName(value.type));
    if (value.shape)
      for (int64_t dim : *value.shape)
        if (dim < kDynamicDim)
          fail(where + ".shape", "dimension " + std::to_string(dim) +
                                     " is negative (-1 marks a dynamic "
                                     "size)");
    if (value.bound)
      checkBound(value, where);
    if (value.type == ValueType::List) {
      if (!value.elem)
        fail(where, "a list value needs \"elem\" (its element type)");
      if (*value.elem == ValueType::List)
        fail(where, "lists of lists are not part of the format");
      if (*value.elem == ValueType::Token)
        fail(where, "lists of tokens are not part of the format");
    } else if (value.elem) {
      fail(where, std::string("\"elem\" is only allowed on list values, "
                              "this one is ") +
                      valueTypeName(value.type));
    }
  }
}

void ProgramValidator::checkBound(const ValueDesc &value,
                                  const std::string &where) const {
  const std::vector<int64_t> &bound = *value.bound;
  if (!value.shape || std::find(value.shape->begin(), value.shape->end(),
                                kDynamicDim) == value.shape->end())
    fail(where, "\"bound\" is only allowed on tensor values with a dynamic "
                "dimension in \"shape\"");
  const std::vector<int64_t> &shape = *value.shape;
  if (bound.size() != shape.size())
    fail(where + ".bound",
         "has " + std::to_string(bound.size()) + " dimensions, but the shape " +
             formatShape(shape) + " has " + std::to_string(shape.size()));
  for (size_t d = 0; d < bound.size(); ++d) {
    if (bound[d] < 0)
      fail(where + ".bound", "dimension " + std::to_string(d) + " is " +
                                 std::to_string(bound[d]) +
                                 " (a bound is at least 0)");
    if (shape[d] != kDynamicDim && bound[d] != shape[d])
      fail(where + ".bound", "dimension " + std::to_string(d) + " is " +
                                 std::to_string(bound[d]) + ", but the shape " +
                                 formatShape(shape) + " fixes it to " +
                                 std::to_string(shape[d]));
  }
}

std::string ProgramValidator::describe(ValueId id) const {
  const ValueDesc &value = desc(id);
  std::string text = valueName(id) + " (" + valueTypeName(value.type);
  if (value.type == ValueType::Tensor) {
    if (value.dtype)
      text += std::string(" ") + dtypeName(*value.dtype);
    if (value.shape)
      text += " " + formatShape(*value.shape);
  } else if (value.type == ValueType::List && value.elem) {
    text += std::string(" of ") + valueTypeName(*value.elem);
  }
  return text + ")";
}

void ProgramValidator::checkId(ValueId id, const std::string &where,
                               const std::string &field) const {
  if (id < 0 || id >= ValueId(program_.values.size()))
    fail(where, fieldPrefix(field) + "value " + valueName(id) +
                    " is out of range (the program has " +
                    std::to_string(program_.values.size()) + " values)");
}

void ProgramValidator::use(ValueId id, const std::string &where,
                           const std::string &field, bool tokenAllowed) const {
  checkId(id, where, field);
  const ValueState &state = states_[id];
  switch (state.status) {
  case Status::Live:
    if (!tokenAllowed && desc(id).type == ValueType::Token)
      fail(where, fieldPrefix(field) + "value " + valueName(id) +
                      " is a token; only wait ops take tokens");
    return;
  case Status::Undefined:
    fail(where, fieldPrefix(field) + "value " + valueName(id) +
                    " is used before it is defined");
  case Status::Freed:
    fail(where, fieldPrefix(field) + "value " + valueName(id) +
                    " is used after it was freed by " + state.freedAt);
  case Status::OutOfScope:
    fail(where, fieldPrefix(field) + "value " + valueName(id) +
                    " is defined inside a branch (by " + state.definedAt +
                    ") and not visible here");
  }
}

void ProgramValidator::define(ValueId id, const std::string &where,
                              const std::string &field,
                              std::vector<ValueId> &definedHere,
                              bool tokenAllowed) {
  checkId(id, where, field);
  if (!tokenAllowed && desc(id).type == ValueType::Token)
    fail(where, fieldPrefix(field) + "value " + valueName(id) +
                    " is a token; only all_reduce, reduce_scatter and "
                    "all_gather define tokens");
  ValueState &state = states_[id];
  if (state.status != Status::Undefined)
    fail(where, fieldPrefix(field) + "value " + valueName(id) +
                    " is defined twice (first by " + state.definedAt + ")");
  state.status = Status::Live;
  state.depth = depth_;
  state.definedAt = where;
  definedHere.push_back(id);
}

void ProgramValidator::expectType(ValueId id, ValueType type,
                                  const std::string &where,
                                  const std::string &field,
                                  const char *why) const {
  if (desc(id).type != type)
    fail(where, field + ": " + why + " must be " + valueTypeName(type) +
                    ", but " + describe(id) + " is not");
}

void ProgramValidator::expectTensor(ValueId id, DType dtype,
                                    const std::vector<int64_t> &shape,
                                    const std::string &where,
                                    const std::string &field,
                                    const std::string &what) const {
  expectType(id, ValueType::Tensor, where, field, "the value");
  const ValueDesc &value = desc(id);
  if ((value.dtype && *value.dtype != dtype) ||
      (value.shape && !shapesCompatible(*value.shape, shape)))
    fail(where, field + ": " + describe(id) + " does not match " + what + " (" +
                    dtypeName(dtype) + " " + formatShape(shape) + ")");
}

bool ProgramValidator::fitsElement(ValueType type, ValueType elem) {
  // Tensor lists may hold None: TorchScript's Tensor?[] (aten::index).
  return type == elem || (elem == ValueType::Tensor && type == ValueType::None);
}

void ProgramValidator::walkBlock(const std::vector<Op> &ops,
                                 const std::string &path,
                                 std::vector<ValueId> &definedHere) {
  bool topLevel = depth_ == 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (topLevel && program_.backwardStart &&
        int64_t(i) == *program_.backwardStart) {
      snapshotForward();
      inBackward_ = true;
    }
    const Op &op = ops[i];
    std::string where = joinIndex(path, i) + " (" + op.label() + ")";
    checkOp(op, joinIndex(path, i), where, definedHere);
    for (size_t k = 0; k < op.free.size(); ++k)
      release(op.free[k], where, joinIndex("free", k));
  }
}

void ProgramValidator::release(ValueId id, const std::string &where,
                               const std::string &field) {
  checkId(id, where, field);
  ValueState &state = states_[id];
  if (state.status == Status::Freed)
    fail(where, fieldPrefix(field) + "value " + valueName(id) +
                    " is freed twice (first by " + state.freedAt + ")");
  use(id, where, field, /*tokenAllowed=*/true);
  if (state.depth < depth_)
    fail(where, fieldPrefix(field) + "value " + valueName(id) +
                    " is defined outside this branch (by " + state.definedAt +
                    "); the enclosing \"if\" op must free it");
  state.status = Status::Freed;
  state.freedAt = where;
}

void ProgramValidator::checkOp(const Op &op, const std::string &path,
                               const std::string &where,
                               std::vector<ValueId> &definedHere) {
  auto expectResults = [&](size_t count) {
    if (op.results.size() != count)
      fail(where, "expected " + std::to_string(count) + " result(s), found " +
                      std::to_string(op.results.size()));
  };
  auto defineResults = [&] {
    for (size_t k = 0; k < op.results.size(); ++k)
      define(op.results[k], where,
             op.results.size() == 1 && op.kind != OpKind::Call &&
                     op.kind != OpKind::Unpack && op.kind != OpKind::If
                 ? std::string("result")
                 : joinIndex("results", k),
             definedHere, isCollective(op.kind));
  };
  checkKindAllowed(op, where);

  switch (op.kind) {
  case OpKind::Input: {
    expectResults(1);
    if (op.index < 0 || op.index >= int64_t(plan_.inputs.size()))
      fail(where, "index: input " + std::to_string(op.index) +
                      " does not exist (the plan has " +
                      std::to_string(plan_.inputs.size()) + " inputs)");
    defineResults();
    const InputDesc &input = plan_.inputs[op.index];
    expectTensor(op.results[0], input.dtype, input.shape, where, "result",
                 "input \"" + input.name + "\"");
    return;
  }
  case OpKind::State: {
    expectResults(1);
    const StateDesc *state = findState(op.name, where);
    defineResults();
    expectTensor(op.results[0], state->dtype, state->shape, where, "result",
                 "state \"" + state->name + "\"");
    checkShardedRead(*state, op.results[0], where);
    return;
  }
  case OpKind::SetState: {
    expectResults(0);
    const StateDesc *state = findState(op.name, where);
    if (state->kind != StateKind::Buffer)
      fail(where, "name: \"" + state->name +
                      "\" is a parameter; set_state replaces buffers only");
    use(op.arg, where, "arg");
    expectTensor(op.arg, state->dtype, state->shape, where, "arg",
                 "buffer \"" + state->name + "\"");
    return;
  }
  case OpKind::Constant:
    expectResults(1);
    defineResults();
    checkConstant(op.value, op.results[0], where);
    return;
  case OpKind::List: {
    expectResults(1);
    for (size_t k = 0; k < op.args.size(); ++k)
      use(op.args[k], where, joinIndex("args", k));
    defineResults();
    ValueId result = op.results[0];
    expectType(result, ValueType::List, where, "result", "the result");
    ValueType elem = *desc(result).elem;
    for (size_t k = 0; k < op.args.size(); ++k)
      if (!fitsElement(desc(op.args[k]).type, elem))
        fail(where, joinIndex("args", k) + ": " + describe(op.args[k]) +
                        " does not fit the element type of " +
                        describe(result));
    return;
  }
  case OpKind::Unpack: {
    use(op.arg, where, "arg");
    expectType(op.arg, ValueType::List, where, "arg", "the operand");
    defineResults();
    ValueType elem = *desc(op.arg).elem;
    for (size_t k = 0; k < op.results.size(); ++k)
      if (!fitsElement(desc(op.results[k]).type, elem))
        fail(where, joinIndex("results", k) + ": " + describe(op.results[k]) +
                        " cannot hold an element of " + describe(op.arg));
    return;
  }
  case OpKind::Call:
    if (!isQualifiedOperatorName(op.op))
      fail(where, "op: \"" + op.op +
                      "\" is not an operator name (expected "
                      "\"namespace::name\" or \"namespace::name.overload\", "
                      "e.g. \"aten::add.Tensor\")");
    for (size_t k = 0; k < op.args.size(); ++k)
      use(op.args[k], where, joinIndex("args", k));
    defineResults();
    return;
  case OpKind::Grad: {
    expectResults(0);
    if (isEval_)
      fail(where, "grad ops belong to programs.train (the eval program "
                  "computes no gradients)");
    const StateDesc *state = findState(op.name, where);
    if (state->kind != StateKind::Param)
      fail(where, "name: \"" + state->name +
                      "\" is a buffer; only parameters have gradients");
    if (!state->requiresGrad)
      fail(where, "name: parameter \"" + state->name +
                      "\" does not require grad (\"requires_grad\": "
                      "false)");
    use(op.arg, where, "arg");
    expectTensor(op.arg, state->dtype, state->shape, where, "arg",
                 "parameter \"" + state->name + "\"");
    checkGradBeforeReduceScatter(*state, where);
    noteEngineGrad(*state, where);
    return;
  }
  case OpKind::AllReduce:
  case OpKind::ReduceScatter:
  case OpKind::AllGather:
    checkCollective(op, where, definedHere);
    return;
  case OpKind::Wait:
    expectResults(0);
    use(op.arg, where, "arg", /*tokenAllowed=*/true);
    expectType(op.arg, ValueType::Token, where, "arg", "the operand");
    if (auto it = waitedAt_.find(op.arg); it != waitedAt_.end())
      fail(where, "arg: token " + valueName(op.arg) +
                      " is waited twice (first by " + it->second + ")");
    waitedAt_[op.arg] = where;
    if (auto it = gatherOf_.find(op.arg); it != gatherOf_.end()) {
      Gather &gather = gathers_.at(it->second);
      gather.status = Gather::Status::Gathered;
      gather.waitedAt = where;
    }
    return;
  case OpKind::Release:
    expectResults(0);
    checkRelease(op, where);
    return;
  case OpKind::OptimizerStep:
    expectResults(0);
    checkOptimizerStep(op, where);
    return;
  case OpKind::BackwardPrologue:
  case OpKind::BackwardEpilogue:
    expectResults(0);
    checkBackwardMarker(op, where);
    return;
  case OpKind::LossScale: {
    expectResults(1);
    const EngineDesc &engine = trainableEngine(
        op, where, " has no optimizer (a frozen engine has no loss scale)");
    if (!engine.precision || !engine.precision->lossScaler)
      fail(where, "engine: engine " + quoted(op.engine) +
                      " has no precision.loss_scaler (only fp16 and fp16 "
                      "autocast engines scale their loss)");
    defineResults();
    expectTensor(op.results[0], DType::Float32, {}, where, "result",
                 "a loss scale");
    return;
  }
  case OpKind::Cotangent: {
    expectResults(1);
    if (op.index < 0 || op.index >= int64_t(program_.results.size()))
      fail(where, "index: " + std::to_string(op.index) +
                      " is not a result of the program (it has " +
                      std::to_string(program_.results.size()) + ")");
    defineResults();
    ValueId result = program_.results[size_t(op.index)];
    if (result < 0 || result >= ValueId(program_.values.size()))
      return; // The results' own check names it.
    const ValueDesc &of = desc(result);
    if (of.type != ValueType::Tensor || !of.dtype || !isFloat(*of.dtype))
      fail(where, "index: result " + std::to_string(op.index) + " is " +
                      describe(result) + ", which has no gradient");
    // A result of unknown shape constrains only the dtype.
    std::vector<int64_t> shape = of.shape ? *of.shape
                                          : desc(op.results[0]).shape.value_or(
                                                std::vector<int64_t>{});
    expectTensor(op.results[0], *of.dtype, shape, where, "result",
                 "result " + std::to_string(op.index) + " of the program");
    return;
  }
  case OpKind::If:
    use(op.cond, where, "cond");
    expectType(op.cond, ValueType::Bool, where, "cond", "the condition");
    checkBranch(op.thenBranch, op, path + ".then", where, "then");
    checkBranch(op.elseBranch, op, path + ".else", where, "else");
    defineResults();
    return;
  }
}

const StateDesc *ProgramValidator::findState(const std::string &name,
                                             const std::string &where) const {
  if (const StateDesc *state = plan_.findState(name))
    return state;
  fail(where, "name: the plan has no state named \"" + name + "\"");
}

void ProgramValidator::checkBranch(const Branch &branch, const Op &op,
                                   const std::string &path,
                                   const std::string &where, const char *side) {
  ++depth_;
  std::vector<ValueId> locals;
  walkBlock(branch.body, path + ".body", locals);
  if (branch.yields.size() != op.results.size())
    fail(where, std::string(side) + ": the branch yields " +
                    std::to_string(branch.yields.size()) +
                    " value(s), but the if op has " +
                    std::to_string(op.results.size()) + " result(s)");
  for (size_t k = 0; k < branch.yields.size(); ++k) {
    std::string field = std::string(side) + joinIndex(".yield", k);
    ValueId yielded = branch.yields[k];
    use(yielded, where, field);
    checkId(op.results[k], where, joinIndex("results", k));
    const ValueDesc &from = desc(yielded);
    const ValueDesc &to = desc(op.results[k]);
    bool dtypeClash = from.dtype && to.dtype && *from.dtype != *to.dtype;
    if (from.type != to.type || from.elem != to.elem || dtypeClash)
      fail(where, field + ": " + describe(yielded) +
                      " does not match the if result " +
                      describe(op.results[k]));
  }
  // Values of a branch die with it.
  for (ValueId id : locals)
    states_[id].status = Status::OutOfScope;
  --depth_;
}

void ProgramValidator::checkConstant(const Constant &value, ValueId result,
                                     const std::string &where) const {
  ValueType type = desc(result).type;
  ValueType expected = ValueType::None;
  switch (value.kind) {
  case Constant::Kind::None:
    expected = ValueType::None;
    break;
  case Constant::Kind::Int:
    expected = ValueType::Int;
    break;
  case Constant::Kind::Float:
    expected = ValueType::Float;
    break;
  case Constant::Kind::Bool:
    expected = ValueType::Bool;
    break;
  case Constant::Kind::Str:
    expected = ValueType::Str;
    break;
  case Constant::Kind::Tensor:
    expected = ValueType::Tensor;
    break;
  }
  if (type != expected)
    fail(where, std::string("value: a ") + valueTypeName(expected) +
                    " constant cannot define " + describe(result));
  if (value.kind != Constant::Kind::Tensor)
    return;
  std::optional<int64_t> numel = staticNumel(value.tensorShape);
  if (!numel)
    fail(where, "value: a constant tensor's shape must be static, found " +
                    formatShape(value.tensorShape));
  int64_t bytes = *numel * dtypeSize(value.tensorDType);
  if (int64_t(value.tensorBytes.size()) != bytes)
    fail(where, "value: holds " + std::to_string(value.tensorBytes.size()) +
                    " bytes, but a " + dtypeName(value.tensorDType) +
                    " tensor of shape " + formatShape(value.tensorShape) +
                    " needs " + std::to_string(bytes));
  expectTensor(result, value.tensorDType, value.tensorShape, where, "result",
               "the constant");
}

} // namespace ds::plan::detail
