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
        isEval_(name == "eval") {}

  void run() {
    checkValues();
    checkBackwardStart();
    states_.assign(program_.values.size(), ValueState());
    std::vector<ValueId> topLevel;
    walkBlock(program_.body, path_ + ".body", topLevel);
    if (program_.backwardStart &&
        *program_.backwardStart == int64_t(program_.body.size()))
      snapshotForward(); // An empty backward.
    for (size_t i = 0; i < program_.results.size(); ++i) {
      std::string where = path_ + indexed(".results", i);
      use(program_.results[i], where, "");
      checkComputedByForward(program_.results[i], where);
    }
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

  void use(ValueId id, const std::string &where,
           const std::string &field) const {
    checkId(id, where, field);
    const ValueState &state = states_[id];
    switch (state.status) {
    case Status::Live:
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
              std::vector<ValueId> &definedHere) {
    checkId(id, where, field);
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
          int64_t(i) == *program_.backwardStart)
        snapshotForward();
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
    use(id, where, field);
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
               definedHere);
    };

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
  /// Indexed by value id; empty until the walk reaches backward_start.
  std::vector<bool> liveAfterForward_;
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
