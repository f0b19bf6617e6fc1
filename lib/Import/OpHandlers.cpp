//===- OpHandlers.cpp - the op-handler table ------------------------------===//
//
// Every operator the importer does not import generically, keyed by aten
// schema (OpHandlers.h). A handler that declines leaves the call to static
// evaluation and the generic import; handlers of operators that static
// evaluation could fold decline when it applies, so only what it cannot do
// is here.
//
//===----------------------------------------------------------------------===//

#include "OpHandlers.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::import;

static HandlerResult bindStatic(OpCall &call, c10::IValue value) {
  call.setResult(0, Abstract::makeStatic(std::move(value)));
  return HandlerResult::Handled;
}

static HandlerResult evaluate(OpCall &call) {
  return failed(call.evaluateStatic()) ? HandlerResult::Failed
                                       : HandlerResult::Handled;
}

//===----------------------------------------------------------------------===//
// Folded flags and statements
//===----------------------------------------------------------------------===//

/// Training runs with grad mode on; the eval forward as under
/// torch.no_grad(), so fused inference paths (nn.MultiheadAttention's fast
/// path) are taken exactly where PyTorch takes them.
static HandlerResult foldGradEnabled(OpCall &call) {
  return bindStatic(call, call.gradEnabled());
}

static HandlerResult foldAutocastEnabled(OpCall &call) {
  return bindStatic(call, false);
}

/// Warnings and prints have no effect on what is computed.
static HandlerResult dropStatement(OpCall &) { return HandlerResult::Handled; }

/// `x.detach_()`: the value itself (gradients are the autodiff's business).
static HandlerResult identity(OpCall &call) {
  call.setResult(0, call.args()[0]);
  return HandlerResult::Handled;
}

/// Messages of warnings and exceptions on paths that are dropped anyway; a
/// message built from static values is folded as it is.
static HandlerResult placeholderMessage(OpCall &call) {
  if (call.foldsStatically())
    return HandlerResult::Declined;
  return bindStatic(call, std::string("<message>"));
}

//===----------------------------------------------------------------------===//
// Metadata queries
//===----------------------------------------------------------------------===//

/// Tensor metadata queries: static when the queried facts are, which the
/// examples decide.
static HandlerResult metadataQuery(OpCall &call) { return evaluate(call); }

/// No dim of `t` varies at run time.
static bool shapeKnown(const Abstract &t) {
  return t.kind != Abstract::Kind::Dynamic ||
         llvm::none_of(t.dynamicDims, [](bool d) { return d; });
}

/// Folds a size query whose answer is `known`, with a static second argument
/// if it has one; otherwise the query is emitted.
static HandlerResult foldSizeQuery(OpCall &call, bool known) {
  ArrayRef<Abstract> args = call.args();
  if (known && (args.size() == 1 || args[1].isStatic()))
    return evaluate(call);
  return HandlerResult::Declined;
}

/// `aten::numel`, `prim::shape`: known unless a dim is dynamic.
static HandlerResult shapeQuery(OpCall &call) {
  return foldSizeQuery(call, shapeKnown(call.args()[0]));
}

/// `x.size()`, `x.size(d)`: `x.size(d)` needs only dim d to be static.
static HandlerResult sizeQuery(OpCall &call) {
  ArrayRef<Abstract> args = call.args();
  const Abstract &t = args[0];
  bool known = shapeKnown(t);
  if (args.size() == 2 && args[1].isStatic() &&
      t.kind == Abstract::Kind::Dynamic) {
    int64_t d = args[1].example.toInt();
    if (d < 0)
      d += t.dynamicDims.size();
    known = d >= 0 && d < static_cast<int64_t>(t.dynamicDims.size()) &&
            !t.dynamicDims[d];
  }
  return foldSizeQuery(call, known);
}

/// `len(x)`: the first dim of a tensor; the length of a list whose elements
/// the importer tracks.
static HandlerResult lenQuery(OpCall &call) {
  const Abstract &t = call.args()[0];
  if (t.kind == Abstract::Kind::List)
    return bindStatic(call, static_cast<int64_t>(t.elements.size()));
  bool known = shapeKnown(t);
  if (t.kind == Abstract::Kind::Dynamic && !t.dynamicDims.empty())
    known = !t.dynamicDims[0];
  return foldSizeQuery(call, known);
}

//===----------------------------------------------------------------------===//
// Lists whose elements the importer tracks
//===----------------------------------------------------------------------===//

static HandlerResult listGetItem(OpCall &call) {
  ArrayRef<Abstract> args = call.args();
  if (call.foldsStatically() || args[0].kind != Abstract::Kind::List ||
      !args[1].isStatic())
    return HandlerResult::Declined;
  int64_t i = args[1].example.toInt();
  int64_t n = args[0].elements.size();
  if (i < 0)
    i += n;
  if (i < 0 || i >= n) {
    call.error() << "list index " << args[1].example.toInt()
                 << " out of range for a list of " << n;
    return HandlerResult::Failed;
  }
  call.setResult(0, args[0].elements[i]);
  return HandlerResult::Handled;
}

static HandlerResult listAppend(OpCall &call) {
  ArrayRef<Abstract> args = call.args();
  if (call.foldsStatically() || args[0].kind != Abstract::Kind::List)
    return HandlerResult::Declined;
  Abstract list = args[0];
  list.elements.push_back(args[1]);
  call.updateArgument(0, list);
  call.setResult(0, list);
  return HandlerResult::Handled;
}

//===----------------------------------------------------------------------===//
// Training-mode dropout and batch norm
//===----------------------------------------------------------------------===//

/// Training-mode dropout keeps its mask as a value, so that the backward uses
/// the forward's mask: emitted as `aten::dropout`, which -ds-lower-dropout
/// draws as the target device does. The importer draws no mask: the example
/// is the input's.
static HandlerResult trainingDropout(OpCall &call) {
  ArrayRef<Abstract> args = call.args();
  if (!args[1].isStatic() || !args[2].isStatic() || !args[2].example.toBool() ||
      args[1].example.toDouble() <= 0.0 || args[1].example.toDouble() >= 1.0)
    return HandlerResult::Declined;
  Value x = call.materialize(args[0]);
  Value p = call.materialize(args[1]);
  Value train = call.materialize(args[2]);
  Abstract result = args[0];
  result.value =
      call.emitAten("aten::dropout", {x, p, train}, x.getType())->getResult(0);
  result.isView = false;
  result.view = nullptr;
  result.storage = 0; // a new tensor
  result.isParam = result.isBuffer = false;
  result.path.clear();
  call.setResult(0, result);
  return HandlerResult::Handled;
}

/// aten::batch_norm in training mode normalises with the batch statistics and
/// updates the running statistics in place. Emitted as its functional form
/// (torch's own `_native_batch_norm_legit_functional`, whose last two results
/// are the new running statistics), which writes both buffers and is
/// decomposed after import (Decompositions.cpp).
static HandlerResult trainingBatchNorm(OpCall &call) {
  ArrayRef<Abstract> args = call.args();
  if (!args[5].isStatic() || !args[5].example.toBool() ||
      args[3].kind != Abstract::Kind::Dynamic)
    return HandlerResult::Declined;
  const Abstract &input = args[0];
  const Abstract &runningMean = args[3];
  const Abstract &runningVar = args[4];
  if (!runningMean.isBuffer || !runningVar.isBuffer) {
    call.error() << "batch_norm in training mode with running statistics "
                    "that are not module buffers";
    return HandlerResult::Failed;
  }
  // input, weight, bias, running_mean, running_var, training, momentum, eps
  // (cudnn_enabled is not an argument of the functional form).
  SmallVector<Value> operands;
  for (const Abstract &a : args.take_front(8))
    operands.push_back(call.materialize(a));
  if (isa<ds::NoneType>(operands[6].getType())) {
    call.error() << "batch_norm in training mode without a momentum";
    return HandlerResult::Failed;
  }
  Type statType = runningMean.value.getType();
  Operation *bn = call.emitAten(
      "aten::_native_batch_norm_legit_functional", operands,
      {input.value.getType(), statType, statType, statType, statType});
  Location l = call.loc();
  SetBufferOp::create(call.builder(), l, runningMean.path, bn->getResult(3));
  SetBufferOp::create(call.builder(), l, runningVar.path, bn->getResult(4));

  // The example: the real operator on the examples.
  Abstract result;
  result.kind = Abstract::Kind::Dynamic;
  result.value = bn->getResult(0);
  result.dynamicDims = input.dynamicDims;
  std::vector<c10::IValue> outs;
  std::string message;
  if (call.runOnExamples(outs, message)) {
    result.example = outs[0];
  } else if (!call.speculative()) {
    call.error() << "'aten::batch_norm' fails on the example inputs: "
                 << message;
    return HandlerResult::Failed;
  }
  call.setResult(0, result);
  return HandlerResult::Handled;
}

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

static const llvm::StringMap<OpHandler> &opHandlers() {
  static const llvm::StringMap<OpHandler> table = [] {
    llvm::StringMap<OpHandler> t;
    t["aten::is_grad_enabled"] = foldGradEnabled;
    t["aten::is_autocast_enabled"] = foldAutocastEnabled;
    t["aten::is_autocast_cpu_enabled"] = foldAutocastEnabled;
    t["aten::warn"] = dropStatement;
    t["prim::Print"] = dropStatement;
    t["aten::detach_"] = identity;
    t["aten::format"] = placeholderMessage;
    t["aten::str"] = placeholderMessage;
    for (const char *query : {"prim::device",     "prim::dtype",
                              "prim::is_cuda",    "prim::is_xpu",
                              "prim::is_sparse",  "prim::is_sparse_csr",
                              "prim::is_mkldnn",  "prim::is_quantized",
                              "prim::is_meta",    "prim::is_nested",
                              "prim::is_vulkan",  "prim::is_ipu",
                              "prim::is_mps",     "prim::is_ort",
                              "prim::layout",     "prim::requires_grad",
                              "aten::dim",        "aten::is_floating_point",
                              "aten::is_complex", "prim::is_cpu",
                              "aten::__is__",     "aten::__isnot__",
                              "prim::name"})
      t[query] = metadataQuery;
    t["aten::size"] = sizeQuery;
    t["aten::numel"] = shapeQuery;
    t["prim::shape"] = shapeQuery;
    t["aten::len"] = lenQuery;
    t["aten::__getitem__"] = listGetItem;
    t["aten::append"] = listAppend;
    t["aten::dropout"] = trainingDropout;
    t["aten::batch_norm"] = trainingBatchNorm;
    return t;
  }();
  return table;
}

OpHandler mlir::ds::import::lookupOpHandler(StringRef schemaName) {
  const auto &table = opHandlers();
  auto it = table.find(schemaName);
  if (it != table.end())
    return it->second;
  // The operator's name without the overload: a handler of every overload.
  size_t ns = schemaName.find("::");
  size_t dot = schemaName.find('.', ns == StringRef::npos ? 0 : ns);
  if (dot == StringRef::npos)
    return nullptr;
  it = table.find(schemaName.take_front(dot));
  return it == table.end() ? nullptr : it->second;
}
