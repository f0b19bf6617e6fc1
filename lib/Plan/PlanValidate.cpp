//===- PlanValidate.cpp - Structural checks of a whole plan ---------------===//
//
// Everything in docs/plan-format.md "Validation on load" except operator
// names (the runtime owns the registry): counts, references to state and
// inputs, value ids defined once before use, value types per op kind,
// lifetimes (no use after free, branch-local frees), branch arities, and
// the training program's forward / backward split and grad ops.
//
//===----------------------------------------------------------------------===//

#include "ds/Plan/PlanFormat.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace ds::plan {

namespace {

bool shapesCompatible(const std::vector<int64_t> &a,
                      const std::vector<int64_t> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i] && a[i] != kDynamicDim && b[i] != kDynamicDim)
      return false;
  return true;
}

std::string indexed(const std::string &field, size_t index) {
  return field + "[" + std::to_string(index) + "]";
}

std::string valueName(ValueId id) { return "%" + std::to_string(id); }

std::string quoted(const std::string &text) { return "\"" + text + "\""; }

/// Ops that talk to the other ranks (or step the optimizer, which may, or
/// drop what a collective gathered): never inside branches.
bool isCommunication(OpKind kind) {
  return isCollective(kind) || kind == OpKind::Wait ||
         kind == OpKind::OptimizerStep || kind == OpKind::Release;
}

bool isBackwardMarker(OpKind kind) {
  return kind == OpKind::BackwardPrologue || kind == OpKind::BackwardEpilogue;
}

/// Ops of the train program's backward, outside branches.
bool isBackwardOnly(OpKind kind) {
  return isBackwardMarker(kind) || kind == OpKind::LossScale;
}

bool isFloat(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64 ||
         dtype == DType::Float16 || dtype == DType::BFloat16;
}

/// Elements of a state entry (its shape is static once checkState ran).
int64_t stateNumel(const StateDesc &state) {
  return staticNumel(state.shape).value_or(0);
}

/// "args[1]: " before a message about that field; nothing for "".
std::string fieldPrefix(const std::string &field) {
  return field.empty() ? std::string() : field + ": ";
}

/// "operator" names: "ns::name" or "ns::name.overload".
bool isQualifiedOperatorName(const std::string &name) {
  size_t sep = name.find("::");
  if (sep == std::string::npos || sep == 0 || sep + 2 >= name.size())
    return false;
  std::string rest = name.substr(sep + 2);
  size_t dot = rest.find('.');
  if (dot == 0 || rest.find("::") != std::string::npos)
    return false;
  return dot == std::string::npos ||
         (dot + 1 < rest.size() &&
          rest.find('.', dot + 1) == std::string::npos);
}

class ProgramValidator {
public:
  ProgramValidator(const Plan &plan, const Program &program,
                   const std::string &origin, const std::string &name)
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

  void run() {
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
      std::string where = path_ + indexed(".results", i);
      use(program_.results[i], where, "");
      checkComputedByForward(program_.results[i], where);
    }
    checkCollectivesComplete();
    checkBackwardMarkersComplete();
  }

private:
  enum class Status { Undefined, Live, Freed, OutOfScope };
  struct ValueState {
    Status status = Status::Undefined;
    int depth = 0;
    std::string definedAt;
    std::string freedAt;
  };

  [[noreturn]] void fail(const std::string &where,
                         const std::string &detail) const {
    throw PlanError(origin_, where, detail);
  }

  //===--------------------------------------------------------------------===//
  // The forward / backward split (programs.train)
  //===--------------------------------------------------------------------===//

  void checkBackwardStart() const {
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

  /// Values live when forward() ends, i.e. before body[backward_start].
  void snapshotForward() {
    liveAfterForward_.assign(states_.size(), false);
    for (size_t id = 0; id < states_.size(); ++id)
      liveAfterForward_[id] = states_[id].status == Status::Live;
  }

  /// forward() returns the losses: they must exist when it ends.
  void checkComputedByForward(ValueId id, const std::string &where) const {
    if (!isTrain_ || !program_.backwardStart || liveAfterForward_.empty() ||
        liveAfterForward_[id])
      return;
    fail(where, "value " + valueName(id) + " is computed by " +
                    states_[id].definedAt + ", after backward_start (" +
                    std::to_string(*program_.backwardStart) +
                    "); the results (the losses) must be computed by the "
                    "forward part");
  }

  //===--------------------------------------------------------------------===//
  // Value table
  //===--------------------------------------------------------------------===//

  void checkValues() const {
    for (size_t i = 0; i < program_.values.size(); ++i) {
      const ValueDesc &value = program_.values[i];
      std::string where = path_ + indexed(".values", i);
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

  const ValueDesc &desc(ValueId id) const { return program_.values[id]; }

  std::string describe(ValueId id) const {
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

  void checkId(ValueId id, const std::string &where,
               const std::string &field) const {
    if (id < 0 || id >= ValueId(program_.values.size()))
      fail(where, fieldPrefix(field) + "value " + valueName(id) +
                      " is out of range (the program has " +
                      std::to_string(program_.values.size()) + " values)");
  }

  /// Only `wait` (and `free` lists) may name a token.
  void use(ValueId id, const std::string &where, const std::string &field,
           bool tokenAllowed = false) const {
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

  void define(ValueId id, const std::string &where, const std::string &field,
              std::vector<ValueId> &definedHere, bool tokenAllowed = false) {
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

  void expectType(ValueId id, ValueType type, const std::string &where,
                  const std::string &field, const char *why) const {
    if (desc(id).type != type)
      fail(where, field + ": " + why + " must be " + valueTypeName(type) +
                      ", but " + describe(id) + " is not");
  }

  /// Tensor value vs a declared dtype and shape (state, inputs, constants).
  void expectTensor(ValueId id, DType dtype, const std::vector<int64_t> &shape,
                    const std::string &where, const std::string &field,
                    const std::string &what) const {
    expectType(id, ValueType::Tensor, where, field, "the value");
    const ValueDesc &value = desc(id);
    if ((value.dtype && *value.dtype != dtype) ||
        (value.shape && !shapesCompatible(*value.shape, shape)))
      fail(where, field + ": " + describe(id) + " does not match " + what +
                      " (" + dtypeName(dtype) + " " + formatShape(shape) + ")");
  }

  /// Does a value of type `type` fit a list element of type `elem`?
  static bool fitsElement(ValueType type, ValueType elem) {
    // Tensor lists may hold None: TorchScript's Tensor?[] (aten::index).
    return type == elem ||
           (elem == ValueType::Tensor && type == ValueType::None);
  }

  //===--------------------------------------------------------------------===//
  // Blocks and ops
  //===--------------------------------------------------------------------===//

  void walkBlock(const std::vector<Op> &ops, const std::string &path,
                 std::vector<ValueId> &definedHere) {
    bool topLevel = depth_ == 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (topLevel && program_.backwardStart &&
          int64_t(i) == *program_.backwardStart) {
        snapshotForward();
        inBackward_ = true;
      }
      const Op &op = ops[i];
      std::string where = indexed(path, i) + " (" + op.label() + ")";
      checkOp(op, indexed(path, i), where, definedHere);
      for (size_t k = 0; k < op.free.size(); ++k)
        release(op.free[k], where, indexed("free", k));
    }
  }

  void release(ValueId id, const std::string &where, const std::string &field) {
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

  void checkOp(const Op &op, const std::string &path, const std::string &where,
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
                   : indexed("results", k),
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
        use(op.args[k], where, indexed("args", k));
      defineResults();
      ValueId result = op.results[0];
      expectType(result, ValueType::List, where, "result", "the result");
      ValueType elem = *desc(result).elem;
      for (size_t k = 0; k < op.args.size(); ++k)
        if (!fitsElement(desc(op.args[k]).type, elem))
          fail(where, indexed("args", k) + ": " + describe(op.args[k]) +
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
          fail(where, indexed("results", k) + ": " + describe(op.results[k]) +
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
        use(op.args[k], where, indexed("args", k));
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
    case OpKind::If:
      use(op.cond, where, "cond");
      expectType(op.cond, ValueType::Bool, where, "cond", "the condition");
      checkBranch(op.thenBranch, op, path + ".then", where, "then");
      checkBranch(op.elseBranch, op, path + ".else", where, "else");
      defineResults();
      return;
    }
  }

  //===--------------------------------------------------------------------===//
  // Collectives, waits and optimizer steps (plan version 2)
  //===--------------------------------------------------------------------===//

  /// Which program may hold which op kinds, and never inside branches.
  void checkKindAllowed(const Op &op, const std::string &where) const {
    if (isBackwardOnly(op.kind)) {
      if (!isTrain_ || depth_ > 0 || !inBackward_)
        fail(where, std::string(opKindName(op.kind)) +
                        " ops belong to the backward of programs.train (at "
                        "or after backward_start), outside \"if\" branches");
      return;
    }
    bool communication = isCommunication(op.kind);
    if (isStep_ && (!communication || op.kind == OpKind::Release))
      fail(where, "programs.step holds only all_reduce, reduce_scatter, "
                  "all_gather, wait and optimizer_step ops" +
                      std::string(op.kind == OpKind::Release
                                      ? " (release belongs to programs.train "
                                        "and programs.eval: programs.step "
                                        "never gathers a sharded bucket)"
                                      : ""));
    if (!communication)
      return;
    // Stage 3: the eval program gathers and releases sharded buckets.
    bool gathering = op.kind == OpKind::AllGather || op.kind == OpKind::Wait ||
                     op.kind == OpKind::Release;
    if (isEval_ && !gathering)
      fail(where, std::string(opKindName(op.kind)) +
                      " ops do not belong to programs.eval");
    if (depth_ > 0)
      fail(where, std::string(opKindName(op.kind)) +
                      " ops are not allowed inside \"if\" branches: every "
                      "rank must run the same collectives in the same order");
  }

  /// The engine an op names; it must have a partition.
  const EngineDesc &partitionedEngine(const Op &op,
                                      const std::string &where) const {
    const EngineDesc *engine = plan_.findEngine(op.engine);
    if (!engine)
      fail(where, "engine: the plan has no engine named " + quoted(op.engine));
    if (!engine->partition)
      fail(where, "engine: engine " + quoted(op.engine) +
                      " has no partition (a frozen engine has no gradients "
                      "to reduce and no parameters to gather)");
    return *engine;
  }

  /// The partitioned engine an op names, with its `bucket` in range.
  const EngineDesc &bucketedEngine(const Op &op,
                                   const std::string &where) const {
    const EngineDesc &engine = partitionedEngine(op, where);
    int64_t buckets = int64_t(engine.partition->buckets.size());
    if (op.bucket < 0 || op.bucket >= buckets)
      fail(where, "bucket: engine " + quoted(engine.name) + " has " +
                      std::to_string(buckets) + " bucket(s), found " +
                      std::to_string(op.bucket));
    return engine;
  }

  /// The trainable engine an op names; `frozenDetail` says why a frozen one
  /// cannot be named there.
  const EngineDesc &trainableEngine(const Op &op, const std::string &where,
                                    const std::string &frozenDetail) const {
    const EngineDesc *engine = plan_.findEngine(op.engine);
    if (!engine)
      fail(where, "engine: the plan has no engine named " + quoted(op.engine));
    if (!engine->optimizer)
      fail(where, "engine: engine " + quoted(op.engine) + frozenDetail);
    return *engine;
  }

  std::string bucketName(const std::string &engine, int64_t bucket) const {
    return "bucket " + std::to_string(bucket) + " of engine " + quoted(engine);
  }

  void checkCollective(const Op &op, const std::string &where,
                       std::vector<ValueId> &definedHere) {
    const EngineDesc &engine = bucketedEngine(op, where);
    const PartitionDesc &partition = *engine.partition;
    std::string stage = std::to_string(partition.stage);
    const bool sharded = partition.shardsParameters(size_t(op.bucket));
    if (isEval_ && !(op.kind == OpKind::AllGather && sharded))
      fail(where, std::string(opKindName(op.kind)) +
                      " ops do not belong to programs.eval" +
                      (op.kind == OpKind::AllGather
                           ? " (it gathers only the sharded buckets of ZeRO "
                             "stage 3 engines; " +
                                 bucketName(op.engine, op.bucket) + " is " +
                                 (partition.stage == 3
                                      ? std::string("persistent)")
                                      : "of a stage " + stage + " engine)")
                           : std::string()));
    if (!engine.optimizer && op.kind != OpKind::AllGather)
      fail(where, std::string(opKindName(op.kind)) + " of engine " +
                      quoted(engine.name) +
                      ", which is frozen: it has no gradients to reduce (a "
                      "frozen stage 3 engine only gathers its parameters)");
    switch (op.kind) {
    case OpKind::AllReduce:
      if (partition.stage != 0)
        fail(where, "all_reduce is for ZeRO stage 0 engines; engine " +
                        quoted(engine.name) + " is at stage " + stage +
                        " (its gradients are reduce_scatter'ed)");
      if (!isStep_)
        fail(where, "all_reduce belongs to programs.step (stage 0 reduces "
                    "at the accumulation boundary)");
      break;
    case OpKind::ReduceScatter:
      if (partition.stage == 0)
        fail(where, "reduce_scatter is for ZeRO stages 1-3; engine " +
                        quoted(engine.name) +
                        " is at stage 0 (its gradients are all_reduce'd)");
      if (partition.stage == 1 && !isStep_)
        fail(where, "a stage 1 engine's reduce_scatter belongs to "
                    "programs.step (stage 1 reduces at the accumulation "
                    "boundary)");
      if (partition.stage >= 2 && !isTrain_)
        fail(where, "a stage " + stage +
                        " engine's reduce_scatter belongs to "
                        "programs.train (after the last grad op that writes "
                        "into its bucket)");
      break;
    default: // AllGather
      if (partition.stage == 0)
        fail(where, "all_gather is for ZeRO stages 1-3; engine " +
                        quoted(engine.name) +
                        " is at stage 0 (its parameters are not sharded)");
      if (sharded && !isTrain_ && !isEval_)
        fail(where, "all_gather of " + bucketName(op.engine, op.bucket) +
                        ", a sharded bucket (ZeRO stage 3), belongs to "
                        "programs.train and programs.eval, before its "
                        "parameters are read (programs.step does not gather "
                        "it: the next forward does)");
      if (!sharded && !isStep_)
        fail(where, std::string(partition.stage == 3
                                    ? "all_gather of a persistent bucket"
                                    : "all_gather") +
                        " belongs to programs.step (after the engine's "
                        "optimizer_step)");
      break;
    }
    if (op.kind == OpKind::ReduceScatter)
      if (auto it = epilogueAt_.find(op.engine); it != epilogueAt_.end())
        fail(where, "reduce_scatter of " + bucketName(op.engine, op.bucket) +
                        " after the engine's backward_epilogue (" + it->second +
                        "): the epilogue ends the engine's reductions");
    auto key = std::make_pair(op.engine, op.bucket);
    if (op.kind == OpKind::AllGather && sharded) {
      Gather &gather = gathers_.at(key);
      if (gather.status != Gather::Status::Released)
        fail(where, "all_gather of " + bucketName(op.engine, op.bucket) +
                        " while it is gathered already (by " +
                        gather.gatheredAt +
                        "); a sharded bucket alternates all_gather, wait and "
                        "release");
      gather.status = Gather::Status::Gathering;
      gather.gatheredAt = where;
    } else if (op.kind == OpKind::AllGather) {
      if (!steppedAt_.count(op.engine))
        fail(where, "all_gather of " + bucketName(op.engine, op.bucket) +
                        " comes before the engine's optimizer_step (it "
                        "gathers the updated shards)");
      if (auto it = gatheredAt_.find(key); it != gatheredAt_.end())
        fail(where, bucketName(op.engine, op.bucket) +
                        " is gathered twice (first by " + it->second + ")");
      gatheredAt_[key] = where;
    } else {
      if (auto it = reducedAt_.find(key); it != reducedAt_.end())
        fail(where, bucketName(op.engine, op.bucket) +
                        " is reduced twice (first by " + it->second.where +
                        ")");
      if (auto it = steppedAt_.find(op.engine); it != steppedAt_.end())
        fail(where, std::string(opKindName(op.kind)) + " of " +
                        bucketName(op.engine, op.bucket) +
                        " comes after the engine's optimizer_step (" +
                        it->second + ")");
    }
    if (op.results.size() != 1)
      fail(where,
           "expected 1 result(s), found " + std::to_string(op.results.size()));
    define(op.results[0], where, "result", definedHere,
           /*tokenAllowed=*/true);
    expectType(op.results[0], ValueType::Token, where, "result", "the result");
    if (op.kind != OpKind::AllGather)
      reducedAt_[key] = {where, op.results[0]};
    else if (sharded) {
      gathers_.at(key).token = op.results[0];
      gatherOf_[op.results[0]] = key;
    }
    startedAt_[op.results[0]] = where;
  }

  /// Stage 3: `release` drops a sharded bucket that was gathered and
  /// waited; no value read from it may outlive it.
  void checkRelease(const Op &op, const std::string &where) {
    const EngineDesc &engine = bucketedEngine(op, where);
    const PartitionDesc &partition = *engine.partition;
    if (partition.stage != 3)
      fail(where, "release is for ZeRO stage 3 engines; engine " +
                      quoted(engine.name) + " is at stage " +
                      std::to_string(partition.stage) +
                      " (its parameters are never dropped)");
    std::string bucket = bucketName(op.engine, op.bucket);
    if (!partition.shardsParameters(size_t(op.bucket)))
      fail(where, bucket + " is persistent (its parameters stay whole on every "
                           "rank); only sharded buckets are released");
    Gather &gather = gathers_.at({op.engine, op.bucket});
    if (gather.status == Gather::Status::Released)
      fail(where, "release of " + bucket + ", which is not gathered here (" +
                      (gather.releasedAt.empty()
                           ? std::string("no all_gather of it comes before")
                           : "released already by " + gather.releasedAt) +
                      "); a sharded bucket alternates all_gather, wait and "
                      "release");
    if (gather.status == Gather::Status::Gathering)
      fail(where,
           "release of " + bucket + " before the wait of its all_gather (" +
               gather.gatheredAt + ", token " + valueName(gather.token) + ")");
    for (const auto &[id, readAt] : gather.reads)
      if (states_[size_t(id)].status == Status::Live)
        fail(where, "value " + valueName(id) + " (read by " + readAt +
                        ") is still live at the release of " + bucket +
                        ": it views the gathered parameters, which the "
                        "release drops; free it before (read the parameter "
                        "again after the next all_gather)");
    gather.reads.clear();
    gather.status = Gather::Status::Released;
    gather.releasedAt = where;
  }

  /// Stage 3: a `state` op of a sharded bucket's parameter lies between the
  /// wait of a gather of that bucket and its release.
  void checkShardedRead(const StateDesc &state, ValueId result,
                        const std::string &where) {
    auto it = shardedParam_.find(state.name);
    if (it == shardedParam_.end())
      return;
    Gather &gather = gathers_.at(it->second);
    std::string bucket = bucketName(it->second.first, it->second.second);
    switch (gather.status) {
    case Gather::Status::Gathered:
      gather.reads.emplace_back(result, where);
      return;
    case Gather::Status::Gathering:
      fail(where, "name: parameter " + quoted(state.name) + " lies in " +
                      bucket + " (ZeRO stage 3, sharded), whose all_gather (" +
                      gather.gatheredAt +
                      ") is not waited yet; read it after the wait");
    case Gather::Status::Released:
      fail(where, "name: parameter " + quoted(state.name) + " lies in " +
                      bucket +
                      " (ZeRO stage 3, sharded), which is not gathered here (" +
                      (gather.releasedAt.empty()
                           ? std::string("no all_gather of it comes before")
                           : "released by " + gather.releasedAt) +
                      "); a state op of it lies between the wait of an "
                      "all_gather of the bucket and its release");
    }
  }

  void checkOptimizerStep(const Op &op, const std::string &where) {
    if (!isStep_)
      fail(where, "optimizer_step belongs to programs.step (the "
                  "accumulation boundary)");
    const EngineDesc *engine = &trainableEngine(
        op, where, " has no optimizer (a frozen engine is never updated)");
    if (auto it = steppedAt_.find(op.engine); it != steppedAt_.end())
      fail(where, "engine " + quoted(op.engine) + " steps twice (first by " +
                      it->second + ")");
    if (engine->partition && engine->partition->stage <= 1) {
      const char *reduction =
          engine->partition->stage == 0 ? "all_reduce" : "reduce_scatter";
      for (size_t b = 0; b < engine->partition->buckets.size(); ++b) {
        auto it = reducedAt_.find({op.engine, int64_t(b)});
        if (it == reducedAt_.end())
          fail(where, "the optimizer_step of engine " + quoted(op.engine) +
                          " comes before the " + reduction + " of " +
                          bucketName(op.engine, int64_t(b)) +
                          " (the update needs the averaged gradients)");
        if (!waitedAt_.count(it->second.token))
          fail(where, "the optimizer_step of engine " + quoted(op.engine) +
                          " comes before the wait for " + it->second.where +
                          " (token " + valueName(it->second.token) + ")");
      }
    }
    steppedAt_[op.engine] = where;
  }

  /// Stages 2-3: a bucket is reduce-scattered after the last grad op that
  /// writes into it; a later one would be lost.
  void checkGradBeforeReduceScatter(const StateDesc &state,
                                    const std::string &where) const {
    const EngineDesc *engine = plan_.findEngine(state.engine);
    if (!engine || !engine->partition || engine->partition->stage < 2)
      return;
    const PartitionDesc &partition = *engine->partition;
    auto param = std::find_if(
        partition.params.begin(), partition.params.end(),
        [&](const FlatParamDesc &p) { return p.name == state.name; });
    if (param == partition.params.end())
      return;
    int64_t begin = param->offset, end = param->offset + stateNumel(state);
    for (size_t b = 0; b < partition.buckets.size(); ++b) {
      const BucketDesc &bucket = partition.buckets[b];
      if (bucket.offset >= end || bucket.offset + bucket.numel <= begin)
        continue;
      auto it = reducedAt_.find({engine->name, int64_t(b)});
      if (it != reducedAt_.end())
        fail(where, "name: parameter " + quoted(state.name) + " writes into " +
                        bucketName(engine->name, int64_t(b)) + ", which " +
                        it->second.where +
                        " reduce-scattered already (a bucket is "
                        "reduce_scatter'ed after the last grad op that "
                        "writes into it)");
    }
  }

  //===--------------------------------------------------------------------===//
  // Per-engine backward prologue and epilogue
  //===--------------------------------------------------------------------===//

  void noteEngineGrad(const StateDesc &state, const std::string &where) {
    firstGradAt_.try_emplace(state.engine, where);
    if (auto it = epilogueAt_.find(state.engine); it != epilogueAt_.end())
      fail(where, "name: a gradient of engine " + quoted(state.engine) +
                      " after its backward_epilogue (" + it->second +
                      "); every grad op of an engine lies between its "
                      "prologue and its epilogue");
  }

  void checkBackwardMarker(const Op &op, const std::string &where) {
    trainableEngine(op, where,
                    " is frozen; only trainable engines have a backward "
                    "prologue and epilogue");
    if (op.kind == OpKind::BackwardPrologue) {
      if (auto it = prologueAt_.find(op.engine); it != prologueAt_.end())
        fail(where,
             "engine " + quoted(op.engine) +
                 " has a second backward_prologue (first: " + it->second + ")");
      if (auto it = firstGradAt_.find(op.engine); it != firstGradAt_.end())
        fail(where, "the backward_prologue of engine " + quoted(op.engine) +
                        " comes after a gradient of it (" + it->second + ")");
      prologueAt_[op.engine] = where;
      return;
    }
    if (!prologueAt_.count(op.engine))
      fail(where, "the backward_epilogue of engine " + quoted(op.engine) +
                      " has no backward_prologue before it");
    if (auto it = epilogueAt_.find(op.engine); it != epilogueAt_.end())
      fail(where, "engine " + quoted(op.engine) +
                      " has a second backward_epilogue (first: " + it->second +
                      ")");
    for (const auto &[key, reduction] : reducedAt_)
      if (key.first == op.engine && !waitedAt_.count(reduction.token))
        fail(where, "the backward_epilogue of engine " + quoted(op.engine) +
                        " comes before the wait for " + reduction.where +
                        " (the epilogue ends the engine's reductions)");
    epilogueAt_[op.engine] = where;
  }

  /// A program with prologues and epilogues has one pair for every
  /// trainable engine that has gradients in it.
  void checkBackwardMarkersComplete() const {
    if (prologueAt_.empty() && epilogueAt_.empty())
      return;
    for (const auto &[engine, where] : prologueAt_)
      if (!epilogueAt_.count(engine))
        fail(path_, "engine " + quoted(engine) + " has a backward_prologue (" +
                        where + ") but no backward_epilogue");
    for (const auto &[engine, where] : firstGradAt_)
      if (!prologueAt_.count(engine))
        fail(path_, "engine " + quoted(engine) + " has gradients (" + where +
                        ") but no backward_prologue, while other engines "
                        "have one (a plan marks every trainable engine's "
                        "backward or none)");
  }

  /// At the end of a program: tokens waited, every bucket reduced and
  /// gathered where the engine's stage says, every trainable engine
  /// stepped.
  void checkCollectivesComplete() const {
    for (const auto &[token, where] : startedAt_)
      if (!waitedAt_.count(token))
        fail(path_, "token " + valueName(token) + " (started by " + where +
                        ") is never waited (every token is waited exactly "
                        "once, later in the same program)");
    for (const EngineDesc &engine : plan_.engines) {
      if (!engine.partition)
        continue;
      const PartitionDesc &partition = *engine.partition;
      for (size_t b = 0; b < partition.buckets.size(); ++b) {
        auto key = std::make_pair(engine.name, int64_t(b));
        if (isTrain_ && partition.stage >= 2 && engine.optimizer &&
            !reducedAt_.count(key))
          fail(path_, bucketName(engine.name, int64_t(b)) + " (ZeRO stage " +
                          std::to_string(partition.stage) +
                          ") is never reduce_scatter'ed in programs.train");
        if (isStep_ && partition.stage >= 1 && engine.optimizer &&
            !partition.shardsParameters(b) && !gatheredAt_.count(key))
          fail(path_, bucketName(engine.name, int64_t(b)) +
                          " is never all_gather'ed (" +
                          (partition.stage == 3
                               ? std::string("stage 3 gathers the updated "
                                             "shards of its persistent "
                                             "buckets")
                               : std::string("stages 1-2 gather the updated "
                                             "shards")) +
                          " after optimizer_step)");
        if (partition.shardsParameters(b)) {
          const Gather &gather = gathers_.at(key);
          if (gather.status != Gather::Status::Released)
            fail(path_, bucketName(engine.name, int64_t(b)) +
                            " (ZeRO stage 3, sharded) is still gathered when "
                            "the program ends (gathered by " +
                            gather.gatheredAt + "); release it before the end");
        }
      }
    }
    if (isStep_)
      for (const EngineDesc &engine : plan_.engines)
        if (engine.optimizer && !steppedAt_.count(engine.name))
          fail(path_, "engine " + quoted(engine.name) +
                          " has no optimizer_step (every trainable engine "
                          "steps once at the accumulation boundary)");
  }

  const StateDesc *findState(const std::string &name,
                             const std::string &where) const {
    if (const StateDesc *state = plan_.findState(name))
      return state;
    fail(where, "name: the plan has no state named \"" + name + "\"");
  }

  void checkBranch(const Branch &branch, const Op &op, const std::string &path,
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
      std::string field = std::string(side) + indexed(".yield", k);
      ValueId yielded = branch.yields[k];
      use(yielded, where, field);
      checkId(op.results[k], where, indexed("results", k));
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

  void checkConstant(const Constant &value, ValueId result,
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

  const Plan &plan_;
  const Program &program_;
  const std::string &origin_;
  std::string path_;
  std::vector<ValueState> states_;
  int depth_ = 0;
  bool isTrain_;
  bool isEval_;
  bool isStep_;
  /// Indexed by value id; empty until the walk reaches backward_start.
  std::vector<bool> liveAfterForward_;

  struct Reduction {
    std::string where;
    ValueId token = -1;
  };
  /// (engine, bucket) -> the all_reduce or reduce_scatter of it.
  std::map<std::pair<std::string, int64_t>, Reduction> reducedAt_;
  /// (engine, bucket) -> the all_gather of it.
  std::map<std::pair<std::string, int64_t>, std::string> gatheredAt_;
  /// Engine -> its optimizer_step.
  std::map<std::string, std::string> steppedAt_;
  /// Engine -> its first grad op, backward_prologue, backward_epilogue.
  std::map<std::string, std::string> firstGradAt_, prologueAt_, epilogueAt_;
  /// Past backward_start (top level of programs.train).
  bool inBackward_ = false;
  /// Token -> the collective that started it / the wait that ended it.
  std::map<ValueId, std::string> startedAt_;
  std::map<ValueId, std::string> waitedAt_;

  /// Stage 3: where each sharded bucket is in its all_gather, wait,
  /// release cycle.
  struct Gather {
    enum class Status { Released, Gathering, Gathered };
    Status status = Status::Released;
    std::string gatheredAt, waitedAt, releasedAt;
    ValueId token = -1;
    /// Results of state ops since the wait, with the op that read them.
    std::vector<std::pair<ValueId, std::string>> reads;
  };
  std::map<std::pair<std::string, int64_t>, Gather> gathers_;
  /// Token -> the sharded bucket its all_gather gathers.
  std::map<ValueId, std::pair<std::string, int64_t>> gatherOf_;
  /// Parameter name -> its sharded bucket (stage 3 engines only).
  std::map<std::string, std::pair<std::string, int64_t>> shardedParam_;
};

//===----------------------------------------------------------------------===//
// Top level
//===----------------------------------------------------------------------===//

class PlanValidator {
public:
  PlanValidator(const Plan &plan, const std::string &origin)
      : plan_(plan), origin_(origin) {}

  void run() {
    atLeastOne(plan_.worldSize, "world_size");
    atLeastOne(plan_.microBatchPerRank, "micro_batch_per_rank");
    atLeastOne(plan_.gradientAccumulationSteps, "gradient_accumulation_steps");
    if (plan_.weights) {
      if (plan_.weights->kind != "torchscript" &&
          plan_.weights->kind != "safetensors")
        fail("weights.kind", "expected \"torchscript\" or \"safetensors\", "
                             "found \"" +
                                 plan_.weights->kind + "\"");
      if (plan_.weights->path.empty())
        fail("weights.path", "is empty");
    }
    checkEngines();
    checkState();
    checkTraining();
    checkInputs();
    checkOutputs();
    checkPrograms();
  }

private:
  [[noreturn]] void fail(const std::string &where,
                         const std::string &detail) const {
    throw PlanError(origin_, where, detail);
  }

  void atLeastOne(int64_t value, const char *field) const {
    if (value < 1)
      fail(field, "must be at least 1, found " + std::to_string(value));
  }

  /// Non-empty and not seen before in `seen`.
  void uniqueName(const std::string &name, const std::string &where,
                  const char *what, std::set<std::string> &seen) const {
    if (name.empty())
      fail(where, std::string("empty ") + what + " name");
    if (!seen.insert(name).second)
      fail(where, std::string("duplicate ") + what + " name \"" + name + "\"");
  }

  void checkEngines() {
    std::set<std::string> names;
    for (size_t i = 0; i < plan_.engines.size(); ++i)
      uniqueName(plan_.engines[i].name, indexed("engines", i) + ".name",
                 "engine", names);
  }

  void checkState() {
    std::set<std::string> names;
    for (size_t i = 0; i < plan_.state.size(); ++i) {
      const StateDesc &state = plan_.state[i];
      std::string where = indexed("state", i);
      uniqueName(state.name, where + ".name", "state", names);
      if (!staticNumel(state.shape))
        fail(where + ".shape",
             "state shapes must be static, found " + formatShape(state.shape));
      bool known = false;
      std::string engines;
      for (const EngineDesc &engine : plan_.engines) {
        known |= engine.name == state.engine;
        engines += (engines.empty() ? "" : ", ") + engine.name;
      }
      if (!known)
        fail(where + ".engine",
             "no engine named \"" + state.engine +
                 "\" (engines: " + (engines.empty() ? "none" : engines) + ")");
    }
  }

  //===--------------------------------------------------------------------===//
  // Optimizers and partitions (plan version 2)
  //===--------------------------------------------------------------------===//

  void checkTraining() const {
    const bool training = plan_.findProgram("train") != nullptr;
    for (size_t i = 0; i < plan_.engines.size(); ++i) {
      const EngineDesc &engine = plan_.engines[i];
      std::string where = indexed("engines", i);
      if (training) {
        if (engine.trainable && (!engine.optimizer || !engine.partition))
          fail(where,
               std::string("a trainable engine needs \"optimizer\" and "
                           "\"partition\" (missing ") +
                   (!engine.optimizer ? "\"optimizer\"" : "") +
                   (!engine.optimizer && !engine.partition ? " and " : "") +
                   (!engine.partition ? "\"partition\"" : "") + ")");
        if (!engine.trainable && engine.optimizer)
          fail(where + ".optimizer",
               "a frozen engine (\"trainable\": false) has no "
               "\"optimizer\"");
        if (!engine.trainable && engine.partition &&
            engine.partition->stage != 3)
          fail(where + ".partition",
               "a frozen engine (\"trainable\": false) has a partition only "
               "at ZeRO stage 3 (its parameters sharded), found stage " +
                   std::to_string(engine.partition->stage));
      }
      if (engine.optimizer)
        checkOptimizer(*engine.optimizer, where + ".optimizer");
      if (engine.partition)
        checkPartition(engine, *engine.partition, where + ".partition");
      if (engine.precision)
        checkPrecision(engine, *engine.precision, where + ".precision");
      checkEngineSettings(engine, where);
    }
  }

  /// The engine's typed settings: a ZeRO stage the partition agrees with,
  /// positive batch sizes, and the plan's GAS. (The top-level
  /// micro_batch_per_rank and world_size are what the runtime runs; the
  /// engine's batch is what its config resolved to.)
  void checkEngineSettings(const EngineDesc &engine,
                           const std::string &where) const {
    if (engine.zeroStage < 0 || engine.zeroStage > 3)
      fail(where + ".zero_stage",
           "must be 0, 1, 2 or 3, found " + std::to_string(engine.zeroStage));
    if (engine.partition && engine.partition->stage != engine.zeroStage)
      fail(where + ".partition.stage",
           "is " + std::to_string(engine.partition->stage) +
               ", but the engine's zero_stage is " +
               std::to_string(engine.zeroStage));
    const BatchDesc &batch = engine.batch;
    const std::string at = where + ".batch";
    for (auto [value, key] :
         {std::pair{batch.trainBatchSize, "train_batch_size"},
          std::pair{batch.microBatchPerGpu, "micro_batch_per_gpu"},
          std::pair{batch.gradientAccumulationSteps,
                    "gradient_accumulation_steps"}})
      if (value < 1)
        fail(at + "." + key, "must be >= 1, found " + std::to_string(value));
    if (batch.gradientAccumulationSteps != plan_.gradientAccumulationSteps)
      fail(at + ".gradient_accumulation_steps",
           "is " + std::to_string(batch.gradientAccumulationSteps) +
               ", but the plan's gradient_accumulation_steps is " +
               std::to_string(plan_.gradientAccumulationSteps));
  }

  void checkPrecision(const EngineDesc &engine, const PrecisionDesc &precision,
                      const std::string &where) const {
    const std::string mode = precisionModeName(precision.mode);
    DType expected = precision.mode == PrecisionMode::BF16   ? DType::BFloat16
                     : precision.mode == PrecisionMode::FP16 ? DType::Float16
                                                             : DType::Float32;
    if (precision.paramDtype != expected)
      fail(where + ".param_dtype", "a " + mode +
                                       " engine stores its parameters as " +
                                       dtypeName(expected) + ", found " +
                                       dtypeName(precision.paramDtype));
    if (precision.masterDtype != DType::Float32)
      fail(where + ".master_dtype", std::string("must be float32, found ") +
                                        dtypeName(precision.masterDtype));
    if (!isFloat(precision.gradAccumDtype))
      fail(where + ".grad_accum_dtype",
           std::string("must be a float dtype, found ") +
               dtypeName(precision.gradAccumDtype));
    bool autocast = precision.mode == PrecisionMode::Autocast;
    if (autocast != precision.autocastDtype.has_value())
      fail(where + ".autocast_dtype",
           autocast ? "an autocast engine needs its autocast_dtype"
                    : "only autocast engines have an autocast_dtype");
    if (autocast && *precision.autocastDtype != DType::BFloat16 &&
        *precision.autocastDtype != DType::Float16)
      fail(where + ".autocast_dtype",
           std::string("must be bfloat16 or float16, found ") +
               dtypeName(*precision.autocastDtype));
    // fp16 engines scale their loss with DeepSpeed's scaler, fp16 autocast
    // engines with the torch.amp.GradScaler DeepSpeed creates for them.
    bool fp16 = precision.mode == PrecisionMode::FP16;
    bool fp16Autocast = autocast && *precision.autocastDtype == DType::Float16;
    if (precision.lossScaler && !fp16 && !fp16Autocast)
      fail(where + ".loss_scaler",
           "only fp16 and fp16 autocast engines scale their loss, this one "
           "is " +
               mode +
               (autocast ? std::string(" with autocast_dtype ") +
                               dtypeName(*precision.autocastDtype)
                         : std::string()));
    if (fp16 && engine.optimizer && !precision.lossScaler)
      fail(where, "a trainable fp16 engine needs a loss_scaler");
    if (fp16Autocast && engine.optimizer && !precision.lossScaler)
      fail(where, "a trainable fp16 autocast engine needs a loss_scaler "
                  "(DeepSpeed's torch.amp.GradScaler: type \"grad_scaler\")");
    if (precision.lossScaler)
      checkLossScaler(*precision.lossScaler, where + ".loss_scaler",
                      fp16Autocast);
    // Native modes store every float parameter and buffer in the low dtype.
    if (autocast)
      return;
    for (size_t i = 0; i < plan_.state.size(); ++i) {
      const StateDesc &state = plan_.state[i];
      if (state.engine == engine.name && isFloat(state.dtype) &&
          state.dtype != expected)
        fail(indexed("state", i) + ".dtype",
             quoted(state.name) + " of " + mode + " engine " +
                 quoted(engine.name) + " must be " + dtypeName(expected) +
                 ", found " + dtypeName(state.dtype));
    }
  }

  /// `gradScaler`: the engine is fp16 autocast, whose scaler is
  /// torch.amp.GradScaler (type "grad_scaler": hysteresis 1, no floor);
  /// else DeepSpeed's fp16 scaler ("dynamic" or "static").
  void checkLossScaler(const LossScalerDesc &scaler, const std::string &where,
                       bool gradScaler) const {
    if (gradScaler && scaler.type != LossScalerType::GradScaler)
      fail(where + ".type",
           "an fp16 autocast engine scales with \"grad_scaler\" "
           "(DeepSpeed's torch.amp.GradScaler), found " +
               quoted(lossScalerTypeName(scaler.type)));
    if (!gradScaler && scaler.type == LossScalerType::GradScaler)
      fail(where + ".type", "\"grad_scaler\" is for fp16 autocast engines; "
                            "an fp16 engine's is \"dynamic\" or \"static\"");
    checkFinite(scaler.scale, where + ".scale");
    if (scaler.scale <= 0)
      fail(where + ".scale",
           "must be positive, found " + formatNumber(scaler.scale));
    if (scaler.scaleWindow < 1)
      fail(where + ".scale_window",
           "must be >= 1, found " + std::to_string(scaler.scaleWindow));
    if (scaler.hysteresis < 1)
      fail(where + ".hysteresis",
           "must be >= 1, found " + std::to_string(scaler.hysteresis));
    checkFinite(scaler.minScale, where + ".min_scale");
    if (gradScaler) {
      if (scaler.minScale != 0)
        fail(where + ".min_scale",
             "must be 0 for a grad_scaler (torch.amp.GradScaler has no "
             "minimum scale), found " +
                 formatNumber(scaler.minScale));
      if (scaler.hysteresis != 1 || scaler.consecutiveHysteresis)
        fail(where + ".hysteresis",
             "a grad_scaler has hysteresis 1 and consecutive_hysteresis "
             "false (torch.amp.GradScaler halves on every overflow), found " +
                 std::to_string(scaler.hysteresis) +
                 (scaler.consecutiveHysteresis ? " (consecutive)" : ""));
      return;
    }
    if (scaler.minScale <= 0)
      fail(where + ".min_scale",
           "must be positive, found " + formatNumber(scaler.minScale));
  }

  void checkFinite(double value, const std::string &where) const {
    if (!std::isfinite(value))
      fail(where, "must be a finite number");
  }

  void checkAtLeast(double value, double low, const std::string &where) const {
    checkFinite(value, where);
    if (value < low)
      fail(where, "must be >= " + formatNumber(low) + ", found " +
                      formatNumber(value));
  }

  void checkUnit(double value, const std::string &where, bool closed) const {
    checkFinite(value, where);
    if (value < 0 || value > 1 || (!closed && value == 1))
      fail(where, std::string("must be in [0, 1") + (closed ? "]" : ")") +
                      ", found " + formatNumber(value));
  }

  static std::string formatNumber(double value) {
    return ordered_json(value).dump();
  }

  void checkOptimizer(const OptimizerDesc &optimizer,
                      const std::string &where) const {
    checkAtLeast(optimizer.lr, 0.0, where + ".lr");
    checkUnit(optimizer.betas[0], where + ".betas[0]", false);
    checkUnit(optimizer.betas[1], where + ".betas[1]", false);
    checkAtLeast(optimizer.eps, 0.0, where + ".eps");
    checkAtLeast(optimizer.weightDecay, 0.0, where + ".weight_decay");
    checkAtLeast(optimizer.momentum, 0.0, where + ".momentum");
    checkFinite(optimizer.dampening, where + ".dampening");
    if (optimizer.type == OptimizerType::SGD && optimizer.nesterov &&
        (optimizer.momentum <= 0 || optimizer.dampening != 0))
      fail(where + ".nesterov",
           "nesterov needs a momentum > 0 and zero dampening (as "
           "torch.optim.SGD), found momentum " +
               formatNumber(optimizer.momentum) + ", dampening " +
               formatNumber(optimizer.dampening));
    checkAtLeast(optimizer.gradientClipping, 0.0, where + ".gradient_clipping");
    if (!optimizer.scheduler)
      return;
    const SchedulerDesc &scheduler = *optimizer.scheduler;
    std::string at = where + ".scheduler";
    checkFinite(scheduler.warmupMinLr, at + ".warmup_min_lr");
    if (scheduler.warmupMaxLr)
      checkFinite(*scheduler.warmupMaxLr, at + ".warmup_max_lr");
    if (scheduler.warmupNumSteps < 0)
      fail(at + ".warmup_num_steps",
           "must be >= 0, found " + std::to_string(scheduler.warmupNumSteps));
    if (scheduler.type != SchedulerType::WarmupLR &&
        (!scheduler.totalNumSteps || *scheduler.totalNumSteps < 1))
      fail(at + ".total_num_steps",
           std::string(schedulerTypeName(scheduler.type)) +
               " needs total_num_steps >= 1, found " +
               (scheduler.totalNumSteps
                    ? std::to_string(*scheduler.totalNumSteps)
                    : std::string("null")));
    checkUnit(scheduler.warmupMinRatio, at + ".warmup_min_ratio", true);
    checkUnit(scheduler.cosMinRatio, at + ".cos_min_ratio", true);
  }

  /// The flat layout of one engine: parameters inside [0, numel) without
  /// overlap, every trainable parameter once; buckets sorted, disjoint,
  /// covering [0, numel), each a multiple of world_size.
  void checkPartition(const EngineDesc &engine, const PartitionDesc &partition,
                      const std::string &where) const {
    if (partition.stage < 0 || partition.stage > 3)
      fail(where + ".stage",
           "expected 0, 1, 2 or 3, found " + std::to_string(partition.stage));
    if (partition.numel < 0)
      fail(where + ".numel",
           "must be >= 0, found " + std::to_string(partition.numel));

    struct Placed {
      int64_t begin, end;
      size_t index;
    };
    std::vector<Placed> placed;
    std::map<std::string, size_t> seen;
    std::optional<DType> dtype;
    for (size_t k = 0; k < partition.params.size(); ++k) {
      const FlatParamDesc &param = partition.params[k];
      std::string at = where + indexed(".params", k);
      const StateDesc *state = plan_.findState(param.name);
      if (!state)
        fail(at + ".name", "the plan has no state named " + quoted(param.name));
      // A frozen stage 3 engine shards all its parameters; a trainable
      // engine those that require grad.
      if (state->kind != StateKind::Param ||
          (!state->requiresGrad && engine.optimizer) ||
          state->engine != engine.name)
        fail(at + ".name",
             quoted(param.name) + " is not a trainable parameter of engine " +
                 quoted(engine.name) +
                 (state->kind != StateKind::Param ? " (it is a buffer)"
                  : !state->requiresGrad ? " (\"requires_grad\": false)"
                                         : " (it belongs to engine " +
                                               quoted(state->engine) + ")"));
      if (auto it = seen.find(param.name); it != seen.end())
        fail(at + ".name", quoted(param.name) + " is placed twice (first by " +
                               where + indexed(".params", it->second) + ")");
      seen[param.name] = k;
      if (dtype && *dtype != state->dtype)
        fail(at + ".name",
             quoted(param.name) + " is " + dtypeName(state->dtype) +
                 ", but the engine's other parameters are " +
                 dtypeName(*dtype) + " (one flat buffer holds one dtype)");
      dtype = state->dtype;
      int64_t numel = stateNumel(*state);
      if (param.offset < 0 || param.offset + numel > partition.numel)
        fail(at + ".offset", quoted(param.name) + " (" + std::to_string(numel) +
                                 " elements at offset " +
                                 std::to_string(param.offset) +
                                 ") does not lie inside [0, " +
                                 std::to_string(partition.numel) + ")");
      placed.push_back({param.offset, param.offset + numel, k});
    }
    std::sort(placed.begin(), placed.end(),
              [](const Placed &a, const Placed &b) {
                return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
              });
    for (size_t k = 1; k < placed.size(); ++k)
      if (placed[k].begin < placed[k - 1].end) {
        const FlatParamDesc &a = partition.params[placed[k - 1].index];
        const FlatParamDesc &b = partition.params[placed[k].index];
        fail(where + indexed(".params", placed[k].index),
             quoted(b.name) + " [" + std::to_string(placed[k].begin) + ", " +
                 std::to_string(placed[k].end) + ") overlaps " +
                 quoted(a.name) + " [" + std::to_string(placed[k - 1].begin) +
                 ", " + std::to_string(placed[k - 1].end) + ")");
      }
    for (const StateDesc &state : plan_.state)
      if (state.kind == StateKind::Param &&
          (state.requiresGrad || !engine.optimizer) &&
          state.engine == engine.name && !seen.count(state.name))
        fail(where + ".params", "parameter " + quoted(state.name) +
                                    " of engine " + quoted(engine.name) +
                                    " has no place in the flat buffers");

    int64_t next = 0;
    for (size_t b = 0; b < partition.buckets.size(); ++b) {
      const BucketDesc &bucket = partition.buckets[b];
      std::string at = where + indexed(".buckets", b);
      if (bucket.offset != next)
        fail(at + ".offset",
             "expected " + std::to_string(next) +
                 " (buckets are sorted, disjoint and cover [0, numel) "
                 "without gaps), found " +
                 std::to_string(bucket.offset));
      if (bucket.numel <= 0)
        fail(at + ".numel",
             "must be positive, found " + std::to_string(bucket.numel));
      if (bucket.numel % plan_.worldSize != 0)
        fail(at + ".numel", std::to_string(bucket.numel) +
                                " is not a multiple of world_size " +
                                std::to_string(plan_.worldSize) +
                                " (each rank owns numel / world_size of it)");
      if (bucket.dtype && !isFloat(*bucket.dtype))
        fail(at + ".dtype", std::string("a bucket communicates in a float "
                                        "dtype, found ") +
                                dtypeName(*bucket.dtype));
      if (bucket.persistent && partition.stage != 3)
        fail(at + ".persistent",
             "only ZeRO stage 3 buckets may be persistent (stage 3 keeps "
             "their parameters whole); this engine is at stage " +
                 std::to_string(partition.stage));
      next = bucket.offset + bucket.numel;
    }
    if (next != partition.numel)
      fail(where + ".buckets", "the buckets cover [0, " + std::to_string(next) +
                                   "), but numel is " +
                                   std::to_string(partition.numel));
    if (partition.stage != 3)
      return;
    // Stage 3 gathers a bucket's parameters whole into one buffer: a
    // parameter split between two buckets could never be read whole.
    for (size_t k = 0; k < partition.params.size(); ++k) {
      const FlatParamDesc &param = partition.params[k];
      int64_t numel = stateNumel(*plan_.findState(param.name));
      if (numel == 0)
        continue;
      int64_t b = partition.bucketAt(param.offset);
      const BucketDesc &bucket = partition.buckets[size_t(b)];
      if (param.offset + numel > bucket.offset + bucket.numel)
        fail(where + indexed(".params", k) + ".offset",
             quoted(param.name) + " [" + std::to_string(param.offset) + ", " +
                 std::to_string(param.offset + numel) +
                 ") does not lie inside " + indexed("buckets", size_t(b)) +
                 " [" + std::to_string(bucket.offset) + ", " +
                 std::to_string(bucket.offset + bucket.numel) +
                 ") (at ZeRO stage 3 each parameter lies inside one bucket: a "
                 "gathered bucket holds its parameters whole)");
    }
  }

  void checkInputs() {
    std::set<std::string> names;
    for (size_t i = 0; i < plan_.inputs.size(); ++i) {
      const InputDesc &input = plan_.inputs[i];
      std::string where = indexed("inputs", i);
      uniqueName(input.name, where + ".name", "input", names);
      for (int64_t dim : input.shape)
        if (dim < kDynamicDim)
          fail(where + ".shape", "dimension " + std::to_string(dim) +
                                     " is negative (-1 marks a dynamic size)");
      if (!input.batched)
        continue;
      if (input.shape.empty())
        fail(where + ".shape", "a batched input needs a batch dimension, "
                               "found a scalar shape []");
      int64_t batch = input.shape[0];
      if (batch != kDynamicDim && batch != plan_.microBatchPerRank)
        fail(where + ".shape",
             "the first dimension of a batched input is the per-rank "
             "micro-batch (micro_batch_per_rank = " +
                 std::to_string(plan_.microBatchPerRank) + "), found " +
                 formatShape(input.shape));
    }
  }

  void checkOutputs() {
    std::set<std::string> names;
    for (size_t i = 0; i < plan_.outputs.size(); ++i)
      uniqueName(plan_.outputs[i].name, indexed("outputs", i) + ".name",
                 "output", names);
  }

  void checkPrograms() {
    const Program *eval = plan_.findProgram("eval");
    if (!eval)
      fail("programs", "missing required program \"eval\"");
    if (eval->results.size() != plan_.outputs.size())
      fail("programs.eval.results", "the eval program returns " +
                                        std::to_string(eval->results.size()) +
                                        " value(s), but \"outputs\" lists " +
                                        std::to_string(plan_.outputs.size()));
    if (plan_.findProgram("train") && !plan_.findProgram("step"))
      fail("programs", "missing required program \"step\" (the "
                       "accumulation boundary's collectives and "
                       "optimizer_step; required with \"train\")");
    if (const Program *train = plan_.findProgram("train");
        train && train->results.size() != plan_.outputs.size())
      fail("programs.train.results", "the train program returns " +
                                         std::to_string(train->results.size()) +
                                         " value(s), but \"outputs\" lists " +
                                         std::to_string(plan_.outputs.size()));
    for (const auto &[name, program] : plan_.programs)
      ProgramValidator(plan_, program, origin_, name).run();
  }

  const Plan &plan_;
  const std::string &origin_;
};

} // namespace

void validatePlan(const Plan &plan, const std::string &origin) {
  PlanValidator(plan, origin).run();
}

} // namespace ds::plan
