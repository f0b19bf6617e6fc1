//===- OperatorImport.cpp - one operator call -----------------------------===//
//
// An operator call goes, in order, to its handler in the op-handler table
// (OpHandlers.cpp), to static evaluation (traced shape arithmetic on 0-dim
// tensors, ShapeEvaluation.cpp; anything whose arguments are static and whose
// results are not tensors), else to the generic import: run on the examples,
// typed from the results, emitted as `ds.aten`.
//
// In-place operators are made functional: `x.add_(y)` becomes `aten::add` and
// later uses of `x` see the result; on a buffer it also writes the buffer with
// `ds.set_buffer`; inside a data-dependent branch the new value leaves the
// `ds.if` as an extra result (ControlFlow.cpp).
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"
#include "OpHandlers.h"
#include "ds/Dialect/DS/IR/AtenRegistry.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::import;
namespace jit = torch::jit;

/// Operators whose result shape depends on tensor data.
static const llvm::StringSet<> &dataDependentShapeOps() {
  static const llvm::StringSet<> ops = {
      "aten::nonzero",       "aten::masked_select", "aten::unique",
      "aten::_unique",       "aten::_unique2",      "aten::unique_consecutive",
      "aten::nonzero_numpy", "aten::unique_dim"};
  return ops;
}

/// Calls whose result shape depends on tensor data though the operator's
/// does not always: `torch.where(cond)` (one argument: the indices of the
/// true elements) and indexing with a boolean mask (`x[mask]`).
static bool isMaskSelection(const c10::FunctionSchema &schema,
                            ArrayRef<Abstract> args) {
  if (schema.name() == "aten::where" && schema.overload_name().empty())
    return true;
  if (schema.name() != "aten::index" || args.size() < 2)
    return false;
  auto isMask = [](const c10::IValue &index) {
    return index.isTensor() && (index.toTensor().scalar_type() == at::kBool ||
                                index.toTensor().scalar_type() == at::kByte);
  };
  if (args[1].example.isList())
    return llvm::any_of(args[1].example.toListRef(), isMask);
  return llvm::any_of(args[1].elements,
                      [&](const Abstract &e) { return isMask(e.example); });
}

/// Operators whose result has the shape of their first argument whatever
/// the others are (they write into a copy of it).
static const llvm::StringSet<> &resultShapedLikeSelf() {
  static const llvm::StringSet<> ops = {
      "aten::index_add",   "aten::index_copy",     "aten::index_fill",
      "aten::scatter",     "aten::scatter_add",    "aten::scatter_reduce",
      "aten::masked_fill", "aten::masked_scatter", "aten::index_put"};
  return ops;
}

//===----------------------------------------------------------------------===//
// The call as handlers see it
//===----------------------------------------------------------------------===//

bool OpCall::allArgsStatic() const {
  return llvm::all_of(args(), [](const Abstract &a) {
    return a.isStatic() || a.kind == Abstract::Kind::Module;
  });
}

namespace mlir::ds::import {
/// An operator node of the TorchScript graph being imported.
class NodeCall : public OpCall {
public:
  NodeCall(GraphImporter &gi, jit::Node *node, ArrayRef<Abstract> arguments)
      : gi(gi), node(node), arguments(arguments) {}

  std::string name() const override {
    const c10::FunctionSchema *schema = node->maybeSchema();
    return schema ? operatorName(*schema) : node->kind().toQualString();
  }
  ArrayRef<Abstract> args() const override { return arguments; }
  bool producesTensor() const override {
    return llvm::any_of(node->outputs(), [](jit::Value *v) {
      c10::TypeKind kind = v->type()->kind();
      return kind == c10::TypeKind::TensorType ||
             (kind == c10::TypeKind::ListType &&
              v->type()->containedType(0)->kind() == c10::TypeKind::TensorType);
    });
  }
  Location loc() override { return gi.loc(node); }
  InFlightDiagnostic error() override { return gi.error(node); }
  OpBuilder &builder() override { return gi.builder; }
  bool speculative() const override { return gi.speculative; }
  bool gradEnabled() const override { return gi.gradEnabled(); }
  Value materialize(const Abstract &a) override {
    return gi.materialize(a, loc());
  }
  Operation *emitAten(StringRef name, ArrayRef<Value> operands,
                      TypeRange resultTypes) override {
    return gi.emitAten(name, operands, resultTypes, node);
  }
  bool runOnExamples(std::vector<c10::IValue> &outputs,
                     std::string &message) override {
    return gi.runOnExamples(node, arguments, outputs, message);
  }
  LogicalResult evaluateStatic() override { return gi.evaluateStatic(node); }
  void setResult(unsigned index, Abstract value) override {
    gi.bind(node->output(index), std::move(value));
  }
  void updateArgument(unsigned index, Abstract value) override {
    gi.rebind(node->input(index), std::move(value));
  }

private:
  GraphImporter &gi;
  jit::Node *node;
  ArrayRef<Abstract> arguments;
};
} // namespace mlir::ds::import

//===----------------------------------------------------------------------===//
// Which dims vary: the op run again on grown examples
//===----------------------------------------------------------------------===//

/// How a size the examples had is grown. `Offset`: v -> 2v + 2, applied to
/// every dynamic dim and every dynamic int alike, so that sizes that agreed
/// still agree (n + c -> 2(n + c) + 2 either way; n * k too), and by more
/// than any stride: a dim that depends on a size changes (floor((2H + 2 -
/// k) / s) differs from floor((H - k) / s) for any s <= H + 2). `Doubled`:
/// v -> 2v, the second try where the first fails, for sizes that must stay
/// multiples of a static one (`x[mask].view(B, -1, D)`); never from 0.
enum class Growth { Offset, Doubled };

static int64_t grownSize(int64_t v, Growth growth) {
  return growth == Growth::Offset ? 2 * v + 2 : 2 * v;
}

/// `t` with dim `d` grown to grownSize: t twice, then (Offset) its first
/// slice twice (values the tensor already holds: indices stay in range);
/// zeros where it was empty.
static at::Tensor grownAlong(const at::Tensor &t, int64_t d, Growth growth) {
  int64_t size = t.size(d);
  if (size == 0) {
    std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
    shape[d] = grownSize(0, growth);
    return at::zeros(shape, t.options());
  }
  if (growth == Growth::Doubled)
    return at::cat({t, t}, d);
  at::Tensor first = t.narrow(d, 0, 1);
  return at::cat({t, t, first, first}, d);
}

/// The example of `a` with every tensor's values replaced: all false / zero
/// (`high` false), or all true / 1, 2, 3, ... (`high`: nothing zero, no two
/// equal), for the operators whose result sizes depend on the data (a mask's
/// count, nonzero, unique).
static Abstract refilledAbstract(const Abstract &a, bool high) {
  Abstract g = a;
  if (a.kind == Abstract::Kind::Tuple || a.kind == Abstract::Kind::List) {
    for (Abstract &e : g.elements)
      e = refilledAbstract(e, high);
    return g;
  }
  if (!a.example.isTensor() || !a.example.toTensor().defined())
    return g;
  const at::Tensor &t = a.example.toTensor();
  at::Tensor filled;
  if (!high)
    filled = at::zeros_like(t);
  else if (t.scalar_type() == at::kBool)
    filled = at::ones_like(t);
  else
    filled = at::arange(1, t.numel() + 1, t.options()).reshape(t.sizes());
  g.example = filled;
  return g;
}

/// The example of `a` with its dynamic dims and dynamic ints grown; false
/// in `ok` where it cannot be (a dynamic value without an example, or one
/// that is neither a tensor nor ints).
static Abstract grownAbstract(const Abstract &a, Growth growth, bool &ok) {
  Abstract g = a;
  switch (a.kind) {
  case Abstract::Kind::Static:
  case Abstract::Kind::Module:
    return g;
  case Abstract::Kind::Tuple:
  case Abstract::Kind::List:
    for (Abstract &e : g.elements)
      e = grownAbstract(e, growth, ok);
    return g;
  case Abstract::Kind::Dynamic:
    break;
  }
  // Doubling leaves 0 where it was: a dim depending on it would not move.
  auto grow = [&](int64_t v) {
    if (growth == Growth::Doubled && v == 0)
      ok = false;
    return grownSize(v, growth);
  };
  if (a.example.isTensor()) {
    at::Tensor t = a.example.toTensor();
    if (!t.defined()) {
      ok = false;
      return g;
    }
    for (int64_t d = 0; d < t.dim() && d < (int64_t)a.dynamicDims.size(); ++d)
      if (a.dynamicDims[d]) {
        grow(t.size(d));
        t = grownAlong(t, d, growth);
      }
    g.example = t;
  } else if (a.example.isInt()) {
    g.example = grow(a.example.toInt());
  } else if (a.example.isIntList()) {
    // A list computed as a whole (`[len(x)]`, `x.shape`): every element.
    std::vector<int64_t> sizes = a.example.toIntVector();
    for (int64_t &v : sizes)
      v = grow(v);
    g.example = c10::IValue(sizes);
  } else {
    // A computed float or bool (a scale factor, a flag) might decide a size
    // in a way growing the others does not show: the rules decide.
    ok = false;
  }
  return g;
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

LogicalResult GraphImporter::importOperator(jit::Node *node) {
  SmallVector<Abstract> args;
  for (jit::Value *in : node->inputs())
    args.push_back(lookup(in));
  NodeCall call(*this, node, args);
  if (OpHandler handler = lookupOpHandler(call.name())) {
    switch (handler(call)) {
    case HandlerResult::Handled:
      return success();
    case HandlerResult::Failed:
      return failure();
    case HandlerResult::Declined:
      break;
    }
  }

  std::string qualName = node->kind().toQualString();
  if (!node->maybeSchema())
    return error(node) << "unsupported operator '" << qualName
                       << "' (no schema)";

  // Traced shape arithmetic on 0-dim tensors (ShapeEvaluation.cpp).
  if (call.allArgsStatic() && call.producesTensor() &&
      isShapeArithmetic(qualName)) {
    std::vector<c10::IValue> outs;
    std::string message;
    if (runOnExamples(node, args, outs, message) && isStaticShapeValue(outs)) {
      for (auto [out, v] : llvm::zip(node->outputs(), outs))
        bind(out, Abstract::makeStatic(v));
      return success();
    }
  }
  if (call.foldsStatically())
    return evaluateStatic(node);
  return importGenericOperator(node, args);
}

//===----------------------------------------------------------------------===//
// The generic import
//===----------------------------------------------------------------------===//

LogicalResult GraphImporter::importGenericOperator(jit::Node *node,
                                                   ArrayRef<Abstract> args) {
  const c10::FunctionSchema *schema = node->maybeSchema();
  std::string name = operatorName(*schema);

  // In-place operators become their functional form.
  std::string emitName = name;
  int mutatedArg = -1;
  if (schema->is_mutable()) {
    for (size_t i = 0; i < schema->arguments().size(); ++i) {
      const auto *alias = schema->arguments()[i].alias_info();
      if (alias && alias->isWrite()) {
        mutatedArg = i;
        break;
      }
    }
    std::string base = schema->name();
    if (mutatedArg != 0 || base.empty() || base.back() != '_')
      return error(node) << "unsupported operator '" << name
                         << "': it writes to an argument other than self";
    base.pop_back();
    emitName = base;
    if (!schema->overload_name().empty())
      emitName += "." + schema->overload_name();
    const Abstract &target = args[0];
    if (target.isParam)
      return error(node) << "in-place '" << name << "' on parameter '"
                         << target.path << "' is not supported";
    std::string unwritable = unwritableViewReason(target);
    if (!unwritable.empty())
      return error(node) << "in-place '" << name << "' on " << unwritable;
  }

  // A traced Python number (a 0-dim tensor constant) as the other operand
  // of add/sub/mul/div: the `.Scalar` overload, as a scripted model has it.
  SmallVector<Abstract> operandArgs(args.begin(), args.end());
  if (mutatedArg < 0 && args.size() >= 2 && args[1].isStatic() &&
      args[1].example.isTensor())
    if (auto scalarName =
            scalarOverloadOf(*schema, exampleOf(args[0]), args[1].example)) {
      emitName = *scalarName;
      operandArgs[1] =
          Abstract::makeStatic(scalarOf(args[1].example.toTensor()));
    }
  for (size_t i = 0; i < operandArgs.size(); ++i)
    if (operandArgs[i].isStatic() &&
        isDefaultPinMemory(*schema, i, operandArgs[i].example))
      operandArgs[i] = Abstract::makeStatic(c10::IValue());

  if (!lookupAtenOp(emitName))
    return error(node) << "unsupported operator '" << name << "' ("
                       << c10::toString(*schema) << ")";
  auto info = *lookupAtenOp(emitName);
  if (info.numArgs != args.size())
    return error(node) << "operator '" << emitName << "' takes " << info.numArgs
                       << " arguments, TorchScript gave " << args.size();

  // Shapes and examples.
  std::vector<c10::IValue> outs;
  std::string message;
  bool ran = runOnExamples(node, args, outs, message);
  if (!ran && !speculative)
    return error(node) << "'" << name
                       << "' fails on the example inputs: " << message;

  // Which result dims vary at run time.
  bool dynamicInputs = false;
  for (const Abstract &a : args) {
    if (a.kind == Abstract::Kind::Dynamic && !a.dynamicDims.empty() &&
        llvm::any_of(a.dynamicDims, [](bool d) { return d; }))
      dynamicInputs = true;
    if (a.kind == Abstract::Kind::Dynamic &&
        !isa<TensorType>(a.value.getType()))
      dynamicInputs = true;
    if (a.kind == Abstract::Kind::List && !a.isStatic())
      for (const Abstract &e : a.elements)
        if (e.kind == Abstract::Kind::Dynamic &&
            !isa<TensorType>(e.value.getType()))
          dynamicInputs = true;
  }
  // A tensor of dynamic shape inside a list argument (an index of
  // `x[rows, cols]`, a piece of `torch.cat`) makes the result's shape
  // dynamic too; it does not change how many tensors a list-returning
  // operator returns (`broadcast_tensors`: one per element).
  bool dynamicListElement = llvm::any_of(args, [](const Abstract &a) {
    return a.kind == Abstract::Kind::List &&
           llvm::any_of(a.elements, [](const Abstract &e) {
             return e.kind == Abstract::Kind::Dynamic &&
                    llvm::is_contained(e.dynamicDims, true);
           });
  });
  // Which result dims vary, where inputs vary: the op runs again on the
  // examples with every dynamic dim and dynamic int grown (grownSize); a
  // result dim that kept its size does not depend on them. Where that run
  // fails (sizes the growth made disagree, an index it pushed out of range)
  // the rules below decide. Random operators are not run twice (the
  // generator's state).
  bool dataDependent = dataDependentShapeOps().contains(schema->name()) ||
                       isMaskSelection(*schema, args);
  std::vector<c10::IValue> grownOuts, lowOuts, highOuts;
  bool grown = false, refilled = false;
  std::string ignored;
  // Backward kernels (`*_backward`, `*_backward_data`) trust their callers'
  // shapes: grown arguments that no longer agree would make them write out
  // of bounds, so they are never run grown.
  bool backwardKernel = StringRef(schema->name()).contains("_backward");
  if (growExamples && ran && (dynamicInputs || dynamicListElement) &&
      info.effect != AtenEffect::Random && !backwardKernel) {
    for (Growth growth : {Growth::Offset, Growth::Doubled}) {
      bool ok = true;
      SmallVector<Abstract> grownArgs;
      for (const Abstract &a : args)
        grownArgs.push_back(grownAbstract(a, growth, ok));
      grownOuts.clear();
      grown = ok && runOnExamples(node, grownArgs, grownOuts, ignored) &&
              grownOuts.size() == outs.size();
      if (grown)
        break;
    }
  }
  // Operators whose sizes depend on the data: which result dims the data
  // decides. The op runs on every tensor argument all false / zero and all
  // true / 1, 2, 3, ...; the dims that differ (the count of a mask, of
  // nonzeros, of unique values).
  if (growExamples && ran && dataDependent) {
    SmallVector<Abstract> low, high;
    for (const Abstract &a : args) {
      low.push_back(refilledAbstract(a, false));
      high.push_back(refilledAbstract(a, true));
    }
    refilled = runOnExamples(node, low, lowOuts, ignored) &&
               runOnExamples(node, high, highOuts, ignored) &&
               lowOuts.size() == outs.size() && highOuts.size() == outs.size();
  }
  // Whether `b`'s sizes differ from `a`'s in dim d, per dim; nullopt where
  // they are not comparable tensors.
  auto moved = [](const at::Tensor &a, const c10::IValue &b)
      -> std::optional<std::vector<bool>> {
    if (!b.isTensor() || !b.toTensor().defined() || b.toTensor().dim() != a.dim())
      return std::nullopt;
    std::vector<bool> dims(a.dim());
    for (int64_t d = 0; d < a.dim(); ++d)
      dims[d] = b.toTensor().size(d) != a.size(d);
    return dims;
  };
  auto dynamicDimsFor = [&](const at::Tensor &t, const c10::IValue &after,
                            const c10::IValue &low, const c10::IValue &high) {
    std::vector<bool> dims(t.dim(), false);
    std::optional<std::vector<bool>> bySize = moved(t, after);
    bool sizesStatic = !dynamicInputs && !dynamicListElement;
    if (dataDependent) {
      std::optional<std::vector<bool>> byData;
      if (low.isTensor())
        byData = moved(low.toTensor(), high);
      if (byData && (sizesStatic || bySize)) {
        dims = *byData;
        for (int64_t d = 0; bySize && d < t.dim(); ++d)
          dims[d] = dims[d] || (*bySize)[d];
        return dims;
      }
      if (schema->name() == "aten::nonzero" && t.dim() == 2)
        dims[0] = true;
      else
        dims.assign(t.dim(), true);
      return dims;
    }
    if (sizesStatic)
      return dims;
    if (bySize)
      return *bySize;
    // Operators whose result is shaped like `self` (scatters into it; the
    // in-place forms too): `self`'s dynamic dims, none for a self of static
    // shape (a `zeros((B * T, D))` a mixture of experts adds into).
    StringRef base = StringRef(schema->name()).rtrim('_');
    if (resultShapedLikeSelf().contains(base) && !args.empty()) {
      const Abstract &self = args[0];
      if (self.kind == Abstract::Kind::Dynamic && self.value)
        if (auto type = dyn_cast<RankedTensorType>(self.value.getType());
            type && type.getRank() == t.dim() &&
            llvm::all_of(llvm::seq<int64_t>(0, t.dim()), [&](int64_t d) {
              // masked_fill / masked_scatter broadcast self against the
              // mask: only a self whose static dims are the result's.
              return type.isDynamicDim(d) || type.getDimSize(d) == t.size(d);
            })) {
          for (int64_t d = 0; d < type.getRank(); ++d)
            dims[d] = type.isDynamicDim(d);
          return dims;
        }
      if (self.kind == Abstract::Kind::Static && self.example.isTensor() &&
          self.example.toTensor().sizes() == t.sizes())
        return dims;
    }
    // Same shape as a dynamic-shaped input: same dynamic dims (elementwise
    // ops). A static input of the same shape proves nothing: the dynamic
    // one (an index) may still change the result's shape.
    for (const Abstract &a : args)
      if (a.kind == Abstract::Kind::Dynamic && a.example.isTensor() &&
          llvm::is_contained(a.dynamicDims, true) &&
          a.example.toTensor().sizes() == t.sizes() &&
          a.dynamicDims.size() == static_cast<size_t>(t.dim()))
        return a.dynamicDims;
    dims.assign(t.dim(), true);
    return dims;
  };

  Location l = loc(node);
  SmallVector<Value> operands;
  for (const Abstract &a : operandArgs) {
    Value v = materialize(a, l);
    if (!v)
      return error(node) << "argument of '" << name
                         << "' is not a value the IR can carry";
    operands.push_back(v);
  }

  // A list-returning operator whose length the example fixes (split, chunk,
  // unbind on static shapes) gets one result per element.
  bool unpackList = ran && outs.size() == 1 && outs[0].isTensorList() &&
                    !dynamicInputs && node->outputs().size() == 1;
  SmallVector<Type> resultTypes;
  SmallVector<std::vector<bool>> resultDyn;
  if (unpackList) {
    // The grown run's list, where it has as many tensors (broadcast_tensors
    // of a dynamic element: one per element either way).
    std::optional<c10::ArrayRef<c10::IValue>> grownItems;
    if (grown && grownOuts[0].isTensorList() &&
        grownOuts[0].toListRef().size() == outs[0].toListRef().size())
      grownItems = grownOuts[0].toListRef();
    for (auto [i, t] : llvm::enumerate(outs[0].toListRef())) {
      resultDyn.push_back(dynamicDimsFor(
          t.toTensor(), grownItems ? (*grownItems)[i] : c10::IValue(),
          c10::IValue(), c10::IValue()));
      resultTypes.push_back(tensorTypeOf(ctx, t.toTensor(), resultDyn.back()));
    }
  } else {
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      c10::IValue ex = ran ? outs[i] : c10::IValue();
      std::vector<bool> dyn;
      if (ex.isTensor())
        dyn = dynamicDimsFor(ex.toTensor(),
                             grown ? grownOuts[i] : c10::IValue(),
                             refilled ? lowOuts[i] : c10::IValue(),
                             refilled ? highOuts[i] : c10::IValue());
      Type type = typeOfExample(ex, dyn, node->outputs()[i]->type());
      // In a branch the example does not take, the op may not run on the
      // examples; a scatter into `self` still has self's type.
      if (!ran && i == 0 && !operands.empty() &&
          resultShapedLikeSelf().contains(
              StringRef(schema->name()).rtrim('_')))
        if (auto self = dyn_cast<RankedTensorType>(operands[0].getType())) {
          type = self;
          dyn.clear();
          for (int64_t d = 0; d < self.getRank(); ++d)
            dyn.push_back(self.isDynamicDim(d));
        }
      if (!type)
        return error(node) << "cannot type result #" << i << " of '" << name
                           << "'";
      resultTypes.push_back(type);
      resultDyn.push_back(dyn);
    }
  }
  Operation *op = emitAten(emitName, operands, resultTypes, node);

  // A result that shares memory with the first argument is a view of it
  // (Views.cpp).
  auto makeDynamic = [&](Value v, c10::IValue ex, std::vector<bool> dyn,
                         unsigned index, bool listElement) {
    Abstract a;
    a.kind = Abstract::Kind::Dynamic;
    a.value = v;
    a.example = std::move(ex);
    a.dynamicDims = std::move(dyn);
    if (mutatedArg < 0)
      if (auto step =
              viewStepOf(node, args, a, index, listElement, emitName))
        recordView(a, args[0], node->input(0), std::move(*step));
    return a;
  };
  if (unpackList) {
    Abstract list;
    list.kind = Abstract::Kind::List;
    list.elementType = c10::TensorType::get();
    auto items = outs[0].toListRef();
    for (unsigned i = 0; i < op->getNumResults(); ++i)
      list.elements.push_back(
          makeDynamic(op->getResult(i), items[i], resultDyn[i], i, true));
    bind(node->output(), list);
    return success();
  }
  SmallVector<Abstract> results;
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    results.push_back(makeDynamic(op->getResult(i),
                                  ran ? outs[i] : c10::IValue(), resultDyn[i],
                                  i, false));

  if (mutatedArg >= 0) {
    // Later uses of the mutated value see the result.
    Abstract updated = results[0];
    updated.path = args[0].path;
    updated.isBuffer = args[0].isBuffer;
    updated.storage = args[0].storage;
    jit::Value *target = node->input(mutatedArg);
    if (args[0].isBuffer)
      SetBufferOp::create(builder, l, args[0].path, updated.value);
    if (args[0].isView) {
      if (failed(writeIntoBase(node, args[0], updated)))
        return failure();
      // Still the same view of the same base, now taken from the base as
      // written: a second write into it (or a chained `.add_(1).mul_(2)`)
      // is written into the base too.
      auto record = std::make_shared<ViewRecord>(*args[0].view);
      record->rootValue = lookup(record->root).value;
      updated.isView = true;
      updated.view = std::move(record);
    }
    rebindUpdated(target, updated);
    results[0] = updated;
    inplaceResultOf[node->output(0)] = target;
    inplaceResultsOf[target].push_back(node->output(0));
  }
  for (auto [out, a] : llvm::zip(node->outputs(), results))
    bind(out, a);
  return success();
}

//===----------------------------------------------------------------------===//
// In-place updates
//===----------------------------------------------------------------------===//

/// `target` and every name of the same tensor through in-place results (the
/// result of an in-place op is its target: in `x.mul_(a).add_(b)` the second
/// op updates x too, and a traced or exported graph goes on with the result
/// `y = x.add_(1)` where a script names x) see `updated` from here on.
void GraphImporter::rebindUpdated(jit::Value *target, const Abstract &updated) {
  SmallVector<jit::Value *> targets = {target};
  for (auto it = inplaceResultOf.find(target); it != inplaceResultOf.end();
       it = inplaceResultOf.find(it->second))
    targets.push_back(it->second);
  // The results of in-place ops on any of them that are bound already, as
  // the same tensor (not a loop's earlier iteration).
  for (size_t i = 0; i < targets.size(); ++i) {
    auto it = inplaceResultsOf.find(targets[i]);
    if (it == inplaceResultsOf.end())
      continue;
    for (jit::Value *result : it->second) {
      Abstract *bound = find(result);
      if (bound && bound->storage == updated.storage &&
          !llvm::is_contained(targets, result))
        targets.push_back(result);
    }
  }
  for (jit::Value *t : targets)
    rebind(t, updated);
}

//===----------------------------------------------------------------------===//
// Static evaluation
//===----------------------------------------------------------------------===//

/// Static evaluation: an operator whose inputs the example shapes decide and
/// whose result is not a tensor (sizes, int arithmetic, comparisons).
LogicalResult GraphImporter::evaluateStatic(jit::Node *node) {
  SmallVector<Abstract> args;
  for (jit::Value *in : node->inputs())
    args.push_back(lookup(in));
  std::vector<c10::IValue> outs;
  std::string message;
  if (!runOnExamples(node, args, outs, message))
    return error(node) << "cannot evaluate '" << node->kind().toQualString()
                       << "' on the example shapes: " << message;
  for (auto [out, v] : llvm::zip(node->outputs(), outs))
    bind(out, Abstract::makeStatic(v));
  // An argument the operator writes (`aten::append(t[](a!) self, ...)`, in a
  // loop that builds a list) takes the value of the result that aliases it:
  // the examples ran on copies (a list's example is built afresh from its
  // elements). A list stays a list of static elements, which a later append
  // of a computed value extends.
  if (const c10::FunctionSchema *schema = node->maybeSchema()) {
    const auto &params = schema->arguments();
    const auto &returns = schema->returns();
    for (size_t i = 0; i < params.size() && i < node->inputs().size(); ++i) {
      const c10::AliasInfo *written = params[i].alias_info();
      if (!written || !written->isWrite())
        continue;
      for (size_t r = 0; r < returns.size() && r < outs.size(); ++r)
        if (const c10::AliasInfo *result = returns[r].alias_info();
            result && result->beforeSets() == written->beforeSets()) {
          Abstract value = Abstract::makeStatic(outs[r]);
          if (outs[r].isList() && lookup(node->input(i)).kind ==
                                      Abstract::Kind::List) {
            value = lookup(node->input(i));
            value.elements.clear();
            for (const c10::IValue &e : outs[r].toListRef())
              value.elements.push_back(Abstract::makeStatic(e));
          }
          rebind(node->input(i), std::move(value));
        }
    }
  }
  return success();
}
