//===- GraphImporter.cpp - TorchScript graph -> ds ops --------------------===//
//
// Walks the inlined TorchScript graph of `forward` once, in order, and emits ds
// ops. Every value is tracked abstractly (see `Abstract`): a value the example
// shapes decide (an int from `x.size(1)`, a bool from `self.training`, a list
// of such) is static and never becomes IR unless an emitted op needs it as an
// argument; tensors and values computed from tensor data are dynamic and have
// an IR value. Each op also runs on example values (rank 0's rows of
// micro-step 0), which gives result shapes, decides shape checks
// (`prim::If` on static conditions is inlined, static loops are unrolled) and
// leaves only data-dependent control flow as `ds.if`.
//
// In-place operators are made functional: `x.add_(y)` becomes `aten::add` and
// later uses of `x` see the result; on a buffer it also writes the buffer with
// `ds.set_buffer`; inside a data-dependent branch the new value leaves the
// `ds.if` as an extra result.
//
//===----------------------------------------------------------------------===//

#include "ImportInternal.h"
#include "ds/Dialect/DS/IR/AtenRegistry.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"

#include <torch/csrc/jit/ir/ir.h>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::import;
namespace jit = torch::jit;

namespace {

/// What the importer knows about one TorchScript value.
struct Abstract {
  enum class Kind { Static, Dynamic, Module, Tuple, List };
  Kind kind = Kind::Static;
  /// Static: the value. Dynamic: an example of it (undefined when the op
  /// could not run on examples, which only happens in a data-dependent branch).
  c10::IValue example;
  /// Dynamic: its IR value.
  Value value;
  /// Dynamic tensors: which dims vary at run time.
  std::vector<bool> dynamicDims;
  /// Tuple and structural list elements.
  std::vector<Abstract> elements;
  /// List element type (TorchScript), for building lists and examples.
  c10::TypePtr elementType;
  /// Module: qualified path; Dynamic tensors read from state: state name.
  std::string path;
  bool isBuffer = false;
  bool isParam = false;
  /// Produced by a view operator (shares storage with another value).
  bool isView = false;

  static Abstract makeStatic(c10::IValue v) {
    Abstract a;
    a.kind = Kind::Static;
    a.example = std::move(v);
    return a;
  }
  bool isStatic() const {
    if (kind == Kind::Static)
      return true;
    if (kind == Kind::List || kind == Kind::Tuple)
      return llvm::all_of(elements,
                          [](const Abstract &e) { return e.isStatic(); });
    return false;
  }
};

/// Operators whose result shape depends on tensor data.
const llvm::StringSet<> &dataDependentShapeOps() {
  static const llvm::StringSet<> ops = {
      "aten::nonzero",       "aten::masked_select", "aten::unique",
      "aten::_unique",       "aten::_unique2",      "aten::unique_consecutive",
      "aten::nonzero_numpy", "aten::unique_dim"};
  return ops;
}

/// Operators whose result aliases their first argument (for rejecting
/// in-place updates of views, which would also change the base).
const llvm::StringSet<> &viewOps() {
  static const llvm::StringSet<> ops = {
      "aten::view",       "aten::reshape",   "aten::select", "aten::slice",
      "aten::transpose",  "aten::permute",   "aten::expand", "aten::squeeze",
      "aten::unsqueeze",  "aten::split",     "aten::chunk",  "aten::narrow",
      "aten::t",          "aten::flatten",   "aten::unbind", "aten::detach",
      "aten::as_strided", "aten::expand_as", "aten::alias",  "aten::diagonal",
      "aten::unflatten"};
  return ops;
}

/// Operators whose result has the shape of their first argument whatever
/// the others are (they write into a copy of it).
const llvm::StringSet<> &resultShapedLikeSelf() {
  static const llvm::StringSet<> ops = {
      "aten::index_add",   "aten::index_copy",     "aten::index_fill",
      "aten::scatter",     "aten::scatter_add",    "aten::scatter_reduce",
      "aten::masked_fill", "aten::masked_scatter", "aten::index_put"};
  return ops;
}

/// Tensor metadata queries: static when the queried facts are.
const llvm::StringSet<> &metadataQueries() {
  static const llvm::StringSet<> ops = {
      "prim::device",        "prim::dtype",        "prim::is_cuda",
      "prim::is_xpu",        "prim::is_sparse",    "prim::is_sparse_csr",
      "prim::is_mkldnn",     "prim::is_quantized", "prim::is_meta",
      "prim::is_nested",     "prim::is_vulkan",    "prim::is_ipu",
      "prim::is_mps",        "prim::is_ort",       "prim::layout",
      "prim::requires_grad", "aten::dim",          "aten::is_floating_point",
      "aten::is_complex",    "prim::is_cpu",       "aten::__is__",
      "aten::__isnot__",     "prim::name"};
  return ops;
}

class GraphImporter {
public:
  GraphImporter(OpBuilder &builder, const torch::jit::Module &model,
                const StateTable &state, bool training,
                const std::string &modelPath)
      : builder(builder), ctx(builder.getContext()), model(model), state(state),
        training(training), modelPath(modelPath),
        unknownLoc(FileLineColLoc::get(ctx, modelPath, 0, 0)) {}

  LogicalResult run(jit::Graph &graph, func::FuncOp func,
                    const std::vector<ExampleInput> &inputs);

private:
  // Values and scopes.
  Abstract &lookup(jit::Value *v);
  bool isDefinedOutside(jit::Value *v) const;
  void bind(jit::Value *v, Abstract a) { scopes.back().map[v] = std::move(a); }

  // Nodes.
  LogicalResult importBlock(jit::Block *block, ArrayRef<Abstract> args,
                            SmallVectorImpl<Abstract> &results);
  LogicalResult importNode(jit::Node *node);
  LogicalResult importGetAttr(jit::Node *node);
  LogicalResult importIf(jit::Node *node);
  LogicalResult importLoop(jit::Node *node);
  LogicalResult importOperator(jit::Node *node);
  LogicalResult importCall(jit::Node *node);
  LogicalResult importBatchNormTraining(jit::Node *node,
                                        ArrayRef<Abstract> args);
  LogicalResult evaluateStatic(jit::Node *node);

  // IR emission.
  Value materialize(const Abstract &a, Location loc);
  Value materializeConstant(const c10::IValue &v, Location loc);
  Type typeOfExample(const c10::IValue &v, const std::vector<bool> &dyn,
                     const c10::TypePtr &jitType);
  Type listElementType(const Abstract &list);
  Operation *emitAten(StringRef name, ArrayRef<Value> args,
                      TypeRange resultTypes, jit::Node *node);

  // Examples.
  bool runOnExamples(jit::Node *node, ArrayRef<Abstract> args,
                     std::vector<c10::IValue> &outputs, std::string &error);
  c10::IValue exampleOf(const Abstract &a);

  // Diagnostics and tags.
  Location loc(jit::Node *node);
  std::pair<std::string, std::string> moduleOf(jit::Node *node);
  InFlightDiagnostic error(jit::Node *node) { return emitError(loc(node)); }

  struct Scope {
    llvm::DenseMap<jit::Value *, Abstract> map;
    /// Outer values rebound in this scope (in-place updates), in order.
    llvm::SmallVector<jit::Value *> rebound;
  };

  OpBuilder &builder;
  MLIRContext *ctx;
  const torch::jit::Module &model;
  const StateTable &state;
  bool training;
  std::string modelPath;
  Location unknownLoc;
  std::vector<Scope> scopes;
  /// Walking a branch the example does not take: ops may fail on examples.
  int speculative = 0;
  /// (path, class) of the module whose method is being imported.
  std::vector<std::pair<std::string, std::string>> moduleStack;
  /// The calls, ifs and loops being imported, outermost first.
  std::vector<jit::Node *> enclosing;
  /// Open `with torch.no_grad()` / `torch.enable_grad()` blocks: their
  /// prim::Enter and whether they enable grad (GradMode.cpp).
  struct GradModeBlock {
    jit::Node *enter;
    bool enabled;
    /// Outer values the block uses, as they were at prim::Enter.
    llvm::SmallVector<std::pair<jit::Value *, Value>> before;
  };
  std::vector<GradModeBlock> gradModes;
  /// The output of an in-place operator -> the value it updated (its alias).
  llvm::DenseMap<jit::Value *, jit::Value *> inplaceResultOf;
  bool gradEnabled() const {
    return training && (gradModes.empty() || gradModes.back().enabled);
  }
  LogicalResult importGradMode(jit::Node *node);

  /// Keeps `node` on `enclosing` while its blocks are imported.
  struct Enclosing {
    Enclosing(GraphImporter &gi, jit::Node *node) : gi(gi) {
      gi.enclosing.push_back(node);
    }
    ~Enclosing() { gi.enclosing.pop_back(); }
    GraphImporter &gi;
  };
};

} // namespace

//===----------------------------------------------------------------------===//
// Scopes
//===----------------------------------------------------------------------===//

Abstract &GraphImporter::lookup(jit::Value *v) {
  for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
    auto found = it->map.find(v);
    if (found != it->map.end())
      return found->second;
  }
  llvm::report_fatal_error("ds-import: TorchScript value used before "
                           "definition: %" +
                           llvm::Twine(v->debugName()));
}

bool GraphImporter::isDefinedOutside(jit::Value *v) const {
  return !scopes.back().map.count(v);
}

//===----------------------------------------------------------------------===//
// Locations and module tags
//===----------------------------------------------------------------------===//

Location GraphImporter::loc(jit::Node *node) {
  // Nodes TorchScript makes without a source range (prim::DictConstruct)
  // take the line of what computes their inputs (the same statement), else
  // that of the innermost call, if or loop around them.
  Location l = locationOf(ctx, node->sourceRange(), unknownLoc);
  for (jit::Value *in : node->inputs()) {
    if (l != unknownLoc)
      break;
    l = locationOf(ctx, in->node()->sourceRange(), unknownLoc);
  }
  for (auto it = enclosing.rbegin(); l == unknownLoc && it != enclosing.rend();
       ++it)
    l = locationOf(ctx, (*it)->sourceRange(), unknownLoc);
  return l;
}

std::pair<std::string, std::string> GraphImporter::moduleOf(jit::Node *) {
  return moduleStack.back();
}

//===----------------------------------------------------------------------===//
// Examples
//===----------------------------------------------------------------------===//

c10::IValue GraphImporter::exampleOf(const Abstract &a) {
  switch (a.kind) {
  case Abstract::Kind::Static:
  case Abstract::Kind::Dynamic:
  case Abstract::Kind::Module:
    return a.example;
  case Abstract::Kind::Tuple: {
    std::vector<c10::IValue> items;
    for (const Abstract &e : a.elements)
      items.push_back(exampleOf(e));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  case Abstract::Kind::List: {
    c10::impl::GenericList list(a.elementType ? a.elementType
                                              : c10::AnyType::get());
    for (const Abstract &e : a.elements)
      list.push_back(exampleOf(e));
    return list;
  }
  }
  return {};
}

bool GraphImporter::runOnExamples(jit::Node *node, ArrayRef<Abstract> args,
                                  std::vector<c10::IValue> &outputs,
                                  std::string &errorMessage) {
  jit::Stack stack;
  for (const Abstract &a : args) {
    c10::IValue ex = exampleOf(a);
    if (a.kind == Abstract::Kind::Dynamic && !ex.isTensor() && ex.isNone() &&
        !isa<ds::NoneType>(a.value.getType())) {
      errorMessage = "an argument has no example value";
      return false;
    }
    stack.push_back(ex);
  }
  try {
    torch::NoGradGuard noGrad;
    // Run in-place operators on copies: examples may be shared state.
    if (node->maybeSchema() && node->schema().is_mutable())
      for (auto &v : stack)
        if (v.isTensor())
          v = v.toTensor().clone();
    jit::Operation op = node->getOperation();
    op(stack);
  } catch (const c10::Error &e) {
    errorMessage = e.what_without_backtrace();
    return false;
  } catch (const std::exception &e) {
    errorMessage = e.what();
    return false;
  }
  if (stack.size() != node->outputs().size()) {
    errorMessage = "operator left " + std::to_string(stack.size()) +
                   " values, expected " +
                   std::to_string(node->outputs().size());
    return false;
  }
  outputs.assign(stack.begin(), stack.end());
  return true;
}

//===----------------------------------------------------------------------===//
// IR emission
//===----------------------------------------------------------------------===//

Type GraphImporter::typeOfExample(const c10::IValue &v,
                                  const std::vector<bool> &dyn,
                                  const c10::TypePtr &jitType) {
  if (v.isTensor()) {
    const at::Tensor &t = v.toTensor();
    // An undefined tensor (a result the kernel did not compute, e.g. the
    // attention weights of _native_multi_head_attention without
    // need_weights) has no sizes: its dims are dynamic (rank 1 unless
    // TorchScript's type knows it). The runtime passes it on unchecked; a
    // consumer would fail in its kernel.
    if (!t.defined()) {
      Type elem = builder.getF32Type();
      int64_t rank = 1;
      if (auto tensor = jitType ? jitType->cast<c10::TensorType>() : nullptr) {
        if (auto st = tensor->scalarType())
          elem = elementTypeOf(ctx, *st);
        if (auto r = tensor->dim())
          rank = *r;
      }
      if (!elem)
        return {};
      return RankedTensorType::get(
          SmallVector<int64_t>(rank, ShapedType::kDynamic), elem);
    }
    if (!elementTypeOf(ctx, t.scalar_type()))
      return {};
    return tensorTypeOf(ctx, t, dyn);
  }
  if (v.isInt())
    return builder.getI64Type();
  if (v.isDouble())
    return builder.getF64Type();
  if (v.isBool())
    return builder.getI1Type();
  if (v.isString())
    return ds::StrType::get(ctx);
  if (v.isDevice())
    return ds::DeviceType::get(ctx);
  if (v.isNone())
    return ds::NoneType::get(ctx);
  if (v.isList()) {
    c10::TypePtr elem = v.type()->containedType(0);
    if (elem->kind() == c10::TypeKind::IntType)
      return ds::ListType::get(ctx, builder.getI64Type());
    if (elem->kind() == c10::TypeKind::FloatType)
      return ds::ListType::get(ctx, builder.getF64Type());
    if (elem->kind() == c10::TypeKind::BoolType)
      return ds::ListType::get(ctx, builder.getI1Type());
    return ds::ListType::get(ctx,
                             UnrankedTensorType::get(builder.getF32Type()));
  }
  // No example (an op that could not run in a branch the example does not
  // take): fall back to what TorchScript's type says.
  if (jitType) {
    if (auto tensor = jitType->cast<c10::TensorType>()) {
      Type elem = builder.getF32Type();
      if (auto st = tensor->scalarType())
        elem = elementTypeOf(ctx, *st);
      if (auto rank = tensor->dim())
        return RankedTensorType::get(
            SmallVector<int64_t>(*rank, ShapedType::kDynamic), elem);
      return UnrankedTensorType::get(elem);
    }
    switch (jitType->kind()) {
    case c10::TypeKind::IntType:
      return builder.getI64Type();
    case c10::TypeKind::FloatType:
      return builder.getF64Type();
    case c10::TypeKind::BoolType:
      return builder.getI1Type();
    default:
      break;
    }
  }
  return {};
}

Value GraphImporter::materializeConstant(const c10::IValue &v, Location l) {
  if (v.isInt())
    return ConstantOp::create(builder, l, builder.getI64Type(),
                              builder.getI64IntegerAttr(v.toInt()));
  if (v.isDouble())
    return ConstantOp::create(builder, l, builder.getF64Type(),
                              builder.getF64FloatAttr(v.toDouble()));
  if (v.isBool())
    return ConstantOp::create(builder, l, builder.getI1Type(),
                              builder.getBoolAttr(v.toBool()));
  if (v.isNone())
    return ConstantOp::create(builder, l, ds::NoneType::get(ctx),
                              builder.getUnitAttr());
  if (v.isString())
    return ConstantOp::create(builder, l, ds::StrType::get(ctx),
                              builder.getStringAttr(v.toStringRef()));
  if (v.isDevice())
    return ConstantOp::create(builder, l, ds::DeviceType::get(ctx),
                              builder.getStringAttr(v.toDevice().str()));
  if (v.isTensor()) {
    at::Tensor t = v.toTensor().contiguous();
    auto type = tensorTypeOf(ctx, t);
    DenseElementsAttr attr;
    if (t.scalar_type() == at::kBool) {
      SmallVector<bool> bits;
      auto *p = t.data_ptr<bool>();
      bits.assign(p, p + t.numel());
      attr = DenseElementsAttr::get(type, ArrayRef<bool>(bits));
    } else {
      ArrayRef<char> raw(static_cast<const char *>(t.data_ptr()), t.nbytes());
      attr = DenseElementsAttr::getFromRawBuffer(type, raw);
    }
    return ConstantOp::create(builder, l, type, attr);
  }
  if (v.isList()) {
    SmallVector<Value> items;
    Type elem;
    for (const c10::IValue &item : v.toListRef()) {
      items.push_back(materializeConstant(item, l));
      if (!items.back())
        return {};
    }
    auto listType = cast<ds::ListType>(typeOfExample(v, {}, nullptr));
    (void)elem;
    return ListConstructOp::create(builder, l, listType, items);
  }
  return {};
}

Type GraphImporter::listElementType(const Abstract &list) {
  c10::TypePtr elem = list.elementType;
  if (elem) {
    if (elem->kind() == c10::TypeKind::IntType)
      return builder.getI64Type();
    if (elem->kind() == c10::TypeKind::FloatType)
      return builder.getF64Type();
    if (elem->kind() == c10::TypeKind::BoolType)
      return builder.getI1Type();
  }
  for (const Abstract &e : list.elements) {
    c10::IValue ex = exampleOf(e);
    if (ex.isTensor())
      return UnrankedTensorType::get(
          elementTypeOf(ctx, ex.toTensor().scalar_type()));
    if (e.kind == Abstract::Kind::Dynamic)
      if (auto t = dyn_cast<TensorType>(e.value.getType()))
        return UnrankedTensorType::get(t.getElementType());
  }
  return UnrankedTensorType::get(builder.getF32Type());
}

Value GraphImporter::materialize(const Abstract &a, Location l) {
  switch (a.kind) {
  case Abstract::Kind::Dynamic:
    return a.value;
  case Abstract::Kind::Static:
    return materializeConstant(a.example, l);
  case Abstract::Kind::List: {
    SmallVector<Value> items;
    for (const Abstract &e : a.elements) {
      items.push_back(materialize(e, l));
      if (!items.back())
        return {};
    }
    return ListConstructOp::create(
        builder, l, ds::ListType::get(ctx, listElementType(a)), items);
  }
  case Abstract::Kind::Module:
  case Abstract::Kind::Tuple:
    return {};
  }
  return {};
}

Operation *GraphImporter::emitAten(StringRef name, ArrayRef<Value> args,
                                   TypeRange resultTypes, jit::Node *node) {
  auto [path, className] = moduleOf(node);
  OperationState st(loc(node), AtenOp::getOperationName());
  st.addOperands(args);
  st.addTypes(resultTypes);
  st.addAttribute("op", builder.getStringAttr(name));
  st.addAttribute("module", builder.getStringAttr(path));
  st.addAttribute("module_class", builder.getStringAttr(className));
  return builder.create(st);
}

//===----------------------------------------------------------------------===//
// Blocks and nodes
//===----------------------------------------------------------------------===//

LogicalResult GraphImporter::importBlock(jit::Block *block,
                                         ArrayRef<Abstract> args,
                                         SmallVectorImpl<Abstract> &results) {
  for (auto [input, arg] : llvm::zip(block->inputs(), args))
    bind(input, arg);
  for (jit::Node *node : block->nodes())
    if (failed(importNode(node)))
      return failure();
  for (jit::Value *out : block->outputs())
    results.push_back(lookup(out));
  return success();
}

LogicalResult GraphImporter::importNode(jit::Node *node) {
  namespace prim = c10::prim;
  namespace aten = c10::aten;
  namespace attr = c10::attr;
  c10::Symbol kind = node->kind();
  auto outputs = node->outputs();

  if (kind == prim::Constant) {
    // Function constants (the callee of prim::CallFunction) have no IValue;
    // importCall reads the function from the type.
    std::optional<c10::IValue> value = jit::toIValue(node->output());
    bind(node->output(), Abstract::makeStatic(value ? *value : c10::IValue()));
    return success();
  }
  if (kind == prim::GetAttr)
    return importGetAttr(node);
  if (kind == prim::SetAttr) {
    Abstract &obj = lookup(node->input(0));
    std::string name = node->s(attr::name);
    std::string full = obj.path.empty() ? name : obj.path + "." + name;
    auto it = state.isParam.find(full);
    if (it == state.isParam.end() || it->second)
      return error(node) << "assignment to module attribute '" << full
                         << "' is not supported (only buffers may be updated)";
    Abstract &value = lookup(node->input(1));
    Value v = materialize(value, loc(node));
    SetBufferOp::create(builder, loc(node), full, v);
    return success();
  }
  if (kind == prim::If)
    return importIf(node);
  if (kind == prim::Loop)
    return importLoop(node);
  if (kind == prim::ListConstruct) {
    Abstract list;
    list.kind = Abstract::Kind::List;
    list.elementType = node->output()->type()->containedType(0);
    for (jit::Value *in : node->inputs())
      list.elements.push_back(lookup(in));
    bind(node->output(), list);
    return success();
  }
  if (kind == prim::TupleConstruct) {
    Abstract tuple;
    tuple.kind = Abstract::Kind::Tuple;
    for (jit::Value *in : node->inputs())
      tuple.elements.push_back(lookup(in));
    bind(node->output(), tuple);
    return success();
  }
  if (kind == prim::DictConstruct) {
    // torch 2.x's fast-path checks build empty dicts
    // (`getattr(m, "_forward_hooks", {})`); only their length is read.
    auto dictType = node->output()->type()->cast<c10::DictType>();
    if (!dictType)
      return error(node) << "prim::DictConstruct without a dict type";
    c10::impl::GenericDict dict(dictType->getKeyType(),
                                dictType->getValueType());
    for (size_t i = 0; i + 1 < node->inputs().size(); i += 2) {
      Abstract &key = lookup(node->input(i));
      Abstract &value = lookup(node->input(i + 1));
      if (!key.isStatic() || !value.isStatic())
        return error(node) << "unsupported operator 'prim::DictConstruct': "
                              "a dict of tensors or of values computed from "
                              "tensor data";
      dict.insert_or_assign(key.example, value.example);
    }
    bind(node->output(), Abstract::makeStatic(c10::IValue(dict)));
    return success();
  }
  if (kind == prim::ListUnpack || kind == prim::TupleUnpack) {
    Abstract seq = lookup(node->input());
    if (seq.kind == Abstract::Kind::List || seq.kind == Abstract::Kind::Tuple) {
      if (seq.elements.size() != outputs.size())
        return error(node) << "unpacking " << seq.elements.size()
                           << " values into " << outputs.size();
      for (auto [out, e] : llvm::zip(outputs, seq.elements))
        bind(out, e);
      return success();
    }
    if (seq.kind == Abstract::Kind::Static && seq.example.isList()) {
      auto items = seq.example.toListRef();
      if (items.size() != outputs.size())
        return error(node) << "unpacking " << items.size() << " values into "
                           << outputs.size();
      for (size_t i = 0; i < outputs.size(); ++i)
        bind(outputs[i], Abstract::makeStatic(items[i]));
      return success();
    }
    // A list whose length only the run time knows.
    SmallVector<Type> types;
    Type elem = cast<ds::ListType>(seq.value.getType()).getElementType();
    for (size_t i = 0; i < outputs.size(); ++i)
      types.push_back(elem);
    auto unpack = ListUnpackOp::create(builder, loc(node), types, seq.value);
    for (auto [out, res] : llvm::zip(outputs, unpack.getResults())) {
      Abstract a;
      a.kind = Abstract::Kind::Dynamic;
      a.value = res;
      if (auto t = dyn_cast<RankedTensorType>(res.getType()))
        a.dynamicDims.assign(t.getRank(), true);
      bind(out, a);
    }
    return success();
  }
  if (kind == prim::TupleIndex) {
    Abstract tuple = lookup(node->input(0));
    Abstract index = lookup(node->input(1));
    if (tuple.kind != Abstract::Kind::Tuple || !index.isStatic())
      return error(node) << "tuple index must be a constant";
    int64_t i = index.example.toInt();
    if (i < 0)
      i += tuple.elements.size();
    bind(node->output(), tuple.elements.at(i));
    return success();
  }
  if (kind == prim::unchecked_cast || kind == aten::detach_ ||
      kind == prim::TupleIndex) {
    bind(node->output(), lookup(node->input(0)));
    return success();
  }
  if (kind == prim::RaiseException) {
    if (speculative)
      return success();
    std::string message;
    if (node->inputs().size() > 0) {
      Abstract &m = lookup(node->input(0));
      if (m.isStatic() && m.example.isString())
        message = m.example.toStringRef();
    }
    return error(node) << "the model raises an exception for these example "
                          "shapes: "
                       << message;
  }
  if (kind == prim::Uninitialized) {
    bind(node->output(), Abstract::makeStatic(c10::IValue()));
    return success();
  }
  if (kind == aten::warn || kind == prim::Print)
    return success();
  // Training runs with grad mode on; the eval forward as under
  // torch.no_grad(), so fused inference paths (nn.MultiheadAttention's fast
  // path) are taken exactly where PyTorch takes them.
  if (node->kind().toQualString() == std::string("aten::is_grad_enabled")) {
    bind(node->output(), Abstract::makeStatic(gradEnabled()));
    return success();
  }
  if (node->kind().toQualString() == std::string("aten::is_autocast_enabled") ||
      node->kind().toQualString() ==
          std::string("aten::is_autocast_cpu_enabled")) {
    bind(node->output(), Abstract::makeStatic(false));
    return success();
  }
  if (kind == prim::CreateObject || kind == prim::Enter || kind == prim::Exit ||
      (kind == prim::CallMethod && gradModeOf(node->input(0)->type())))
    return importGradMode(node);
  if (kind == prim::CallMethod || kind == prim::CallFunction)
    return importCall(node);
  return importOperator(node);
}

/// `with torch.no_grad():` (see GradMode.cpp): the grad-mode object folds
/// away; at prim::Exit of a no_grad block, what the block produces for
/// later statements becomes `aten::detach` of it.
LogicalResult GraphImporter::importGradMode(jit::Node *node) {
  c10::Symbol kind = node->kind();
  jit::Value *object =
      kind == c10::prim::CreateObject ? node->output() : node->input(0);
  std::optional<bool> mode = gradModeOf(object->type());
  if (!mode) {
    std::string typeName = object->type()->repr_str();
    if (auto cls = object->type()->cast<c10::ClassType>())
      if (cls->name())
        typeName = demangleClassName(cls->name()->qualifiedName());
    return error(node) << "unsupported operator '" << kind.toQualString()
                       << "' on " << typeName
                       << " (only `with torch.no_grad()` and "
                          "`torch.enable_grad()` blocks are supported)";
  }
  auto none = Abstract::makeStatic(c10::IValue());
  if (kind == c10::prim::Enter) {
    GradModeBlock block{node, *mode, {}};
    jit::Node *exit = node;
    while (exit->kind() != c10::prim::Exit || exit->input(0) != object) {
      exit = exit->next();
      if (exit->kind() == c10::prim::Return)
        return error(node) << "'prim::Enter' without its prim::Exit";
    }
    for (jit::Value *v : valuesEnteringBlock(node, exit)) {
      const Abstract &a = lookup(v);
      if (a.kind == Abstract::Kind::Dynamic && a.value)
        block.before.emplace_back(v, a.value);
    }
    gradModes.push_back(std::move(block));
  }
  if (kind == c10::prim::Exit) {
    if (gradModes.empty() || gradModes.back().enter->input(0) != object)
      return error(node) << "'prim::Exit' without its prim::Enter";
    GradModeBlock block = std::move(gradModes.back());
    gradModes.pop_back();
    if (!*mode) {
      std::function<void(Abstract &)> detach = [&](Abstract &a) {
        if (a.kind == Abstract::Kind::Tuple || a.kind == Abstract::Kind::List) {
          for (Abstract &e : a.elements)
            detach(e);
          return;
        }
        if (a.kind != Abstract::Kind::Dynamic || !a.value ||
            !isa<TensorType>(a.value.getType()))
          return;
        a.value = emitAten("aten::detach", {a.value}, a.value.getType(), node)
                      ->getResult(0);
        a.isView = true;
        a.isParam = a.isBuffer = false;
        a.path.clear();
      };
      for (jit::Value *v : valuesLeavingBlock(block.enter, node)) {
        Abstract a = lookup(v);
        detach(a);
        bind(v, a);
      }
      // Outer tensors updated in place inside the block.
      for (auto &[v, old] : block.before) {
        Abstract a = lookup(v);
        if (a.kind != Abstract::Kind::Dynamic || a.value == old)
          continue;
        std::string path = a.path;
        bool isBuffer = a.isBuffer;
        detach(a);
        a.path = path;
        a.isBuffer = isBuffer;
        a.isView = false;
        if (isDefinedOutside(v))
          scopes.back().rebound.push_back(v);
        bind(v, a);
      }
    }
  }
  for (jit::Value *out : node->outputs())
    bind(out, none);
  return success();
}

/// Calls are inlined here rather than by TorchScript's Inline pass: its
/// call stacks name a module by its last attribute only (`0` for
/// `blocks.0`), while the GetAttr chain that reaches the callee's `self`
/// gives the full path.
LogicalResult GraphImporter::importCall(jit::Node *node) {
  Enclosing inside(*this, node);
  SmallVector<Abstract> args;
  std::shared_ptr<jit::Graph> callee;
  bool isMethod = node->kind() == c10::prim::CallMethod;
  size_t firstArg = 0;
  if (isMethod) {
    Abstract self = lookup(node->input(0));
    if (self.kind != Abstract::Kind::Module)
      return error(node) << "method call on a value that is not a module";
    torch::jit::Module sub(self.example.toObject());
    callee = sub.get_method(node->s(c10::attr::name)).graph();
    moduleStack.emplace_back(
        self.path, demangleClassName(sub.type()->name()->qualifiedName()));
    auto known = state.moduleClass.find(self.path);
    if (known != state.moduleClass.end())
      moduleStack.back().second = known->second;
  } else {
    auto fnType = node->input(0)->type()->cast<c10::FunctionType>();
    if (!fnType)
      return error(node) << "call of a value that is not a function";
    callee = jit::toGraphFunction(*fnType->function()).graph();
    auto caller = moduleStack.back(); // copy: push_back may reallocate
    moduleStack.push_back(caller);
    firstArg = 1;
  }
  for (size_t i = firstArg; i < node->inputs().size(); ++i)
    args.push_back(lookup(node->input(i)));

  scopes.emplace_back();
  SmallVector<Abstract> outs;
  LogicalResult result = importBlock(callee->block(), args, outs);
  // In-place updates of arguments inside the callee (ReLU(inplace=True))
  // are visible to the caller.
  SmallVector<std::pair<size_t, Abstract>> updatedArgs;
  if (succeeded(result))
    for (size_t i = 0; i < args.size(); ++i) {
      Abstract &now = lookup(callee->inputs()[i]);
      if (now.kind == Abstract::Kind::Dynamic &&
          args[i].kind == Abstract::Kind::Dynamic && now.value != args[i].value)
        updatedArgs.emplace_back(i, now);
    }
  scopes.pop_back();
  moduleStack.pop_back();
  if (failed(result))
    return failure();
  for (auto &[i, value] : updatedArgs) {
    jit::Value *target = node->input(i + firstArg);
    if (isDefinedOutside(target))
      scopes.back().rebound.push_back(target);
    bind(target, value);
  }
  for (auto [out, value] : llvm::zip(node->outputs(), outs))
    bind(out, value);
  return success();
}

LogicalResult GraphImporter::importGetAttr(jit::Node *node) {
  Abstract &obj = lookup(node->input());
  std::string name = node->s(c10::attr::name);
  if (obj.kind != Abstract::Kind::Module)
    return error(node) << "attribute '" << name << "' of a non-module value";
  std::string full =
      state.canonical(obj.path.empty() ? name : obj.path + "." + name);
  auto stateIt = state.isParam.find(full);
  if (stateIt != state.isParam.end()) {
    auto object = obj.example.toObject();
    at::Tensor t = object->getAttr(name).toTensor();
    Abstract a;
    a.kind = Abstract::Kind::Dynamic;
    a.example = t;
    a.path = full;
    a.dynamicDims.assign(t.dim(), false);
    auto type = tensorTypeOf(ctx, t);
    if (stateIt->second) {
      a.isParam = true;
      a.value = GetParamOp::create(builder, loc(node), type, full);
    } else {
      a.isBuffer = true;
      a.value = GetBufferOp::create(builder, loc(node), type, full);
    }
    bind(node->output(), a);
    return success();
  }
  c10::IValue attr = obj.example.toObject()->getAttr(name);
  if (attr.isObject() && attr.toObject()->type()->is_module()) {
    Abstract a;
    a.kind = Abstract::Kind::Module;
    a.example = attr;
    a.path = full;
    bind(node->output(), a);
    return success();
  }
  if (name == "training" && attr.isBool())
    attr = c10::IValue(training);
  bind(node->output(), Abstract::makeStatic(attr));
  return success();
}

LogicalResult GraphImporter::importLoop(jit::Node *node) {
  Enclosing inside(*this, node);
  // prim::Loop(max_trip_count, initial_condition, carried...)
  Abstract maxTrip = lookup(node->input(0));
  Abstract cond = lookup(node->input(1));
  if (!maxTrip.isStatic() || !cond.isStatic())
    return error(node) << "loop whose trip count depends on tensor data is "
                          "not supported (the import unrolls loops with a "
                          "static trip count)";
  SmallVector<Abstract> carried;
  for (size_t i = 2; i < node->inputs().size(); ++i)
    carried.push_back(lookup(node->input(i)));
  int64_t trips = maxTrip.example.toInt();
  bool keepGoing = cond.example.toBool();
  constexpr int64_t kMaxUnroll = 100000;
  jit::Block *body = node->blocks()[0];
  for (int64_t i = 0; keepGoing && i < trips; ++i) {
    if (i >= kMaxUnroll)
      return error(node) << "loop runs more than " << kMaxUnroll
                         << " iterations; refusing to unroll it";
    SmallVector<Abstract> args;
    args.push_back(Abstract::makeStatic(i));
    args.append(carried.begin(), carried.end());
    SmallVector<Abstract> outs;
    if (failed(importBlock(body, args, outs)))
      return failure();
    if (!outs[0].isStatic())
      return error(node) << "loop whose continuation depends on tensor data "
                            "is not supported (a `while` on a tensor value "
                            "cannot be unrolled)";
    keepGoing = outs[0].example.toBool();
    carried.assign(outs.begin() + 1, outs.end());
  }
  for (auto [out, value] : llvm::zip(node->outputs(), carried))
    bind(out, value);
  return success();
}

/// Result type of a `ds.if` whose branches yield `a` and `b`: dims on which
/// they disagree become dynamic.
static Type mergeBranchTypes(Type a, Type b) {
  if (a == b)
    return a;
  auto ta = dyn_cast<RankedTensorType>(a);
  auto tb = dyn_cast<RankedTensorType>(b);
  if (ta && tb && ta.getRank() == tb.getRank() &&
      ta.getElementType() == tb.getElementType()) {
    SmallVector<int64_t> shape;
    for (int64_t d = 0; d < ta.getRank(); ++d)
      shape.push_back(ta.getDimSize(d) == tb.getDimSize(d)
                          ? ta.getDimSize(d)
                          : ShapedType::kDynamic);
    return RankedTensorType::get(shape, ta.getElementType());
  }
  return {};
}

LogicalResult GraphImporter::importIf(jit::Node *node) {
  Enclosing inside(*this, node);
  Abstract cond = lookup(node->input());
  if (cond.isStatic()) {
    // Decided by the example shapes: inline the branch that is taken.
    jit::Block *taken = node->blocks()[cond.example.toBool() ? 0 : 1];
    SmallVector<Abstract> outs;
    if (failed(importBlock(taken, {}, outs)))
      return failure();
    for (auto [out, value] : llvm::zip(node->outputs(), outs))
      bind(out, value);
    return success();
  }

  // Data-dependent: both branches become regions of a ds.if.
  Location l = loc(node);
  bool exampleTaken = cond.example.isBool() ? cond.example.toBool() : true;
  auto placeholder = IfOp::create(builder, l, TypeRange{}, cond.value);
  struct BranchResult {
    SmallVector<Abstract> outs;
    llvm::MapVector<jit::Value *, Abstract> rebound;
    Block *block;
  } branches[2];
  for (int b = 0; b < 2; ++b) {
    Region &region =
        b == 0 ? placeholder.getThenRegion() : placeholder.getElseRegion();
    Block *block = new Block();
    region.push_back(block);
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(block);
    scopes.emplace_back();
    bool isTaken = (b == 0) == exampleTaken;
    if (!isTaken)
      ++speculative;
    LogicalResult r = importBlock(node->blocks()[b], {}, branches[b].outs);
    if (!isTaken)
      --speculative;
    for (jit::Value *v : scopes.back().rebound)
      branches[b].rebound[v] = scopes.back().map[v];
    scopes.pop_back();
    branches[b].block = block;
    if (failed(r))
      return failure();
  }

  // Values the branches rebound (in-place updates of outer values) leave the
  // ds.if as extra results after the branch outputs.
  llvm::SmallVector<jit::Value *> reboundKeys;
  for (auto &br : branches)
    for (auto &kv : br.rebound)
      if (!llvm::is_contained(reboundKeys, kv.first))
        reboundKeys.push_back(kv.first);

  SmallVector<Abstract> yields[2];
  for (int b = 0; b < 2; ++b) {
    yields[b] = branches[b].outs;
    for (jit::Value *key : reboundKeys) {
      auto it = branches[b].rebound.find(key);
      yields[b].push_back(it != branches[b].rebound.end() ? it->second
                                                          : lookup(key));
    }
  }

  SmallVector<Type> resultTypes;
  SmallVector<Value> yieldValues[2];
  for (size_t i = 0; i < yields[0].size(); ++i) {
    for (int b = 0; b < 2; ++b) {
      OpBuilder::InsertionGuard guard(builder);
      builder.setInsertionPointToEnd(branches[b].block);
      yieldValues[b].push_back(materialize(yields[b][i], l));
      if (!yieldValues[b].back())
        return error(node) << "branch result #" << i
                           << " is not a value the IR can carry";
    }
    Type merged = mergeBranchTypes(yieldValues[0][i].getType(),
                                   yieldValues[1][i].getType());
    if (!merged)
      return error(node) << "branches of a data-dependent if yield different "
                            "types for result #"
                         << i << ": " << yieldValues[0][i].getType() << " and "
                         << yieldValues[1][i].getType();
    resultTypes.push_back(merged);
  }
  for (int b = 0; b < 2; ++b) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToEnd(branches[b].block);
    YieldOp::create(builder, l, yieldValues[b]);
  }
  auto ifOp = IfOp::create(builder, l, resultTypes, cond.value);
  ifOp.getThenRegion().takeBody(placeholder.getThenRegion());
  ifOp.getElseRegion().takeBody(placeholder.getElseRegion());
  placeholder.erase();

  auto takenYields = yields[exampleTaken ? 0 : 1];
  auto makeResult = [&](size_t i) {
    Abstract a;
    a.kind = Abstract::Kind::Dynamic;
    a.value = ifOp.getResult(i);
    a.example = exampleOf(takenYields[i]);
    if (auto t = dyn_cast<RankedTensorType>(resultTypes[i]))
      for (int64_t d = 0; d < t.getRank(); ++d)
        a.dynamicDims.push_back(t.isDynamicDim(d));
    return a;
  };
  size_t numOuts = branches[0].outs.size();
  for (size_t i = 0; i < numOuts; ++i)
    bind(node->outputs()[i], makeResult(i));
  for (size_t k = 0; k < reboundKeys.size(); ++k) {
    Abstract a = makeResult(numOuts + k);
    Abstract &old = lookup(reboundKeys[k]);
    a.path = old.path;
    a.isBuffer = old.isBuffer;
    if (isDefinedOutside(reboundKeys[k]))
      scopes.back().rebound.push_back(reboundKeys[k]);
    bind(reboundKeys[k], a);
  }
  return success();
}

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
  return success();
}

LogicalResult GraphImporter::importOperator(jit::Node *node) {
  const c10::FunctionSchema *schema = node->maybeSchema();
  std::string qualName = node->kind().toQualString();
  if (!schema)
    return error(node) << "unsupported operator '" << qualName
                       << "' (no schema)";
  std::string name = schema->name();
  if (!schema->overload_name().empty())
    name += "." + schema->overload_name();

  SmallVector<Abstract> args;
  for (jit::Value *in : node->inputs())
    args.push_back(lookup(in));

  bool producesTensor = llvm::any_of(node->outputs(), [](jit::Value *v) {
    return v->type()->kind() == c10::TypeKind::TensorType ||
           (v->type()->kind() == c10::TypeKind::ListType &&
            v->type()->containedType(0)->kind() == c10::TypeKind::TensorType);
  });
  bool allStatic = llvm::all_of(args, [](const Abstract &a) {
    return a.isStatic() || a.kind == Abstract::Kind::Module;
  });

  // Traced shape arithmetic on 0-dim tensors (ShapeEvaluation.cpp).
  if (allStatic && producesTensor && isShapeArithmetic(qualName)) {
    std::vector<c10::IValue> outs;
    std::string message;
    if (runOnExamples(node, args, outs, message) && isStaticShapeValue(outs)) {
      for (auto [out, v] : llvm::zip(node->outputs(), outs))
        bind(out, Abstract::makeStatic(v));
      return success();
    }
  }

  // Metadata queries on tensors: static when what they ask is.
  if (metadataQueries().contains(qualName))
    return evaluateStatic(node);
  if (qualName == "aten::size" || qualName == "aten::numel" ||
      qualName == "aten::len" || qualName == "prim::shape") {
    const Abstract &t = args[0];
    bool known = t.kind != Abstract::Kind::Dynamic ||
                 llvm::none_of(t.dynamicDims, [](bool d) { return d; });
    if (qualName == "aten::size" && args.size() == 2 && args[1].isStatic() &&
        t.kind == Abstract::Kind::Dynamic) {
      int64_t d = args[1].example.toInt();
      if (d < 0)
        d += t.dynamicDims.size();
      known = d >= 0 && d < static_cast<int64_t>(t.dynamicDims.size()) &&
              !t.dynamicDims[d];
    }
    if (qualName == "aten::len" && t.kind == Abstract::Kind::Dynamic &&
        !t.dynamicDims.empty())
      known = !t.dynamicDims[0];
    if (qualName == "aten::len" && t.kind == Abstract::Kind::List) {
      bind(node->output(),
           Abstract::makeStatic(static_cast<int64_t>(t.elements.size())));
      return success();
    }
    if (known && args.size() == 1 ? true : known && args[1].isStatic())
      return evaluateStatic(node);
  } else if (allStatic && !producesTensor) {
    return evaluateStatic(node);
  }

  // Messages of warnings and exceptions on paths that are dropped anyway.
  if (qualName == "aten::format" || qualName == "aten::str") {
    bind(node->output(), Abstract::makeStatic(std::string("<message>")));
    return success();
  }

  // Structural list operations on lists whose elements the importer tracks.
  if (qualName == "aten::__getitem__" && args[0].kind == Abstract::Kind::List &&
      args[1].isStatic()) {
    int64_t i = args[1].example.toInt();
    int64_t n = args[0].elements.size();
    if (i < 0)
      i += n;
    if (i < 0 || i >= n)
      return error(node) << "list index " << args[1].example.toInt()
                         << " out of range for a list of " << n;
    bind(node->output(), args[0].elements[i]);
    return success();
  }
  if (qualName == "aten::append" && args[0].kind == Abstract::Kind::List) {
    Abstract list = args[0];
    list.elements.push_back(args[1]);
    if (isDefinedOutside(node->input(0)))
      scopes.back().rebound.push_back(node->input(0));
    bind(node->input(0), list);
    bind(node->output(), list);
    return success();
  }

  // Training-mode dropout keeps its mask as a value, so that the backward
  // uses the forward's mask. Decomposed as ATen's CPU dropout computes it
  // (noise = bernoulli(1 - p) / (1 - p); out = x * noise), which gives
  // PyTorch's numbers and random draws exactly.
  if (name == "aten::dropout" && args[1].isStatic() && args[2].isStatic() &&
      args[2].example.toBool() && args[1].example.toDouble() > 0.0 &&
      args[1].example.toDouble() < 1.0) {
    Location l = loc(node);
    Value x = materialize(args[0], l);
    double keep = 1.0 - args[1].example.toDouble();
    Value keepValue = materializeConstant(c10::IValue(keep), l);
    Value none = materializeConstant(c10::IValue(), l);
    Type type = x.getType();
    Value bits = emitAten("aten::bernoulli.p", {x, keepValue, none}, type, node)
                     ->getResult(0);
    Value noise = emitAten("aten::div.Scalar", {bits, keepValue}, type, node)
                      ->getResult(0);
    Value out =
        emitAten("aten::mul.Tensor", {x, noise}, type, node)->getResult(0);
    Abstract result = args[0];
    result.value = out;
    result.isView = false;
    result.isParam = result.isBuffer = false;
    result.path.clear();
    bind(node->output(), result);
    return success();
  }

  // Training-mode batch norm updates its running statistics in place.
  if (name == "aten::batch_norm" && args[5].isStatic() &&
      args[5].example.toBool() && args[3].kind == Abstract::Kind::Dynamic)
    return importBatchNormTraining(node, args);

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
    if (target.isView)
      return error(node) << "in-place '" << name
                         << "' on a view of another tensor is not supported";
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
  const Abstract *sameShapeInput = nullptr;
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
  auto dynamicDimsFor = [&](const at::Tensor &t) {
    std::vector<bool> dims(t.dim(), false);
    if (dataDependentShapeOps().contains(schema->name())) {
      if (schema->name() == "aten::nonzero" && t.dim() == 2)
        dims[0] = true;
      else
        dims.assign(t.dim(), true);
      return dims;
    }
    if (!dynamicInputs)
      return dims;
    // Same shape as a dynamic-shaped input: same dynamic dims (elementwise
    // ops). A static input of the same shape proves nothing: the dynamic
    // one (an index) may still change the result's shape.
    for (const Abstract &a : args)
      if (a.kind == Abstract::Kind::Dynamic && a.example.isTensor() &&
          llvm::is_contained(a.dynamicDims, true) &&
          a.example.toTensor().sizes() == t.sizes() &&
          a.dynamicDims.size() == static_cast<size_t>(t.dim()))
        return a.dynamicDims;
    // Operators whose result is shaped like `self` (scatters into it).
    if (resultShapedLikeSelf().contains(schema->name()) && !args.empty() &&
        args[0].kind == Abstract::Kind::Dynamic && args[0].example.isTensor() &&
        args[0].example.toTensor().sizes() == t.sizes())
      return args[0].dynamicDims;
    dims.assign(t.dim(), true);
    return dims;
  };
  (void)sameShapeInput;

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
    for (const c10::IValue &t : outs[0].toListRef()) {
      resultDyn.push_back(dynamicDimsFor(t.toTensor()));
      resultTypes.push_back(tensorTypeOf(ctx, t.toTensor(), resultDyn.back()));
    }
  } else {
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      c10::IValue ex = ran ? outs[i] : c10::IValue();
      std::vector<bool> dyn;
      if (ex.isTensor())
        dyn = dynamicDimsFor(ex.toTensor());
      Type type = typeOfExample(ex, dyn, node->outputs()[i]->type());
      if (!type)
        return error(node) << "cannot type result #" << i << " of '" << name
                           << "'";
      resultTypes.push_back(type);
      resultDyn.push_back(dyn);
    }
  }
  Operation *op = emitAten(emitName, operands, resultTypes, node);

  auto makeDynamic = [&](Value v, c10::IValue ex, std::vector<bool> dyn) {
    Abstract a;
    a.kind = Abstract::Kind::Dynamic;
    a.value = v;
    a.example = std::move(ex);
    a.dynamicDims = std::move(dyn);
    a.isView = viewOps().contains(schema->name());
    return a;
  };
  if (unpackList) {
    Abstract list;
    list.kind = Abstract::Kind::List;
    list.elementType = c10::TensorType::get();
    auto items = outs[0].toListRef();
    for (unsigned i = 0; i < op->getNumResults(); ++i)
      list.elements.push_back(
          makeDynamic(op->getResult(i), items[i], resultDyn[i]));
    bind(node->output(), list);
    return success();
  }
  SmallVector<Abstract> results;
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    results.push_back(makeDynamic(op->getResult(i),
                                  ran ? outs[i] : c10::IValue(), resultDyn[i]));

  if (mutatedArg >= 0) {
    // Later uses of the mutated value see the result.
    Abstract updated = results[0];
    updated.path = args[0].path;
    updated.isBuffer = args[0].isBuffer;
    jit::Value *target = node->input(mutatedArg);
    if (args[0].isBuffer)
      SetBufferOp::create(builder, l, args[0].path, updated.value);
    // The result of an in-place op is its target: in `x.mul_(a).add_(b)`
    // the second op updates x too.
    SmallVector<jit::Value *> targets = {target};
    for (auto it = inplaceResultOf.find(target); it != inplaceResultOf.end();
         it = inplaceResultOf.find(it->second))
      targets.push_back(it->second);
    for (jit::Value *t : targets) {
      if (isDefinedOutside(t))
        scopes.back().rebound.push_back(t);
      bind(t, updated);
    }
    results[0] = updated;
    inplaceResultOf[node->output(0)] = target;
  }
  for (auto [out, a] : llvm::zip(node->outputs(), results))
    bind(out, a);
  return success();
}

/// aten::batch_norm in training mode normalises with the batch statistics
/// and updates the running statistics in place. Emitted as a pure
/// batch_norm without running statistics plus explicit updates:
///   running = lerp(running, batch_stat, momentum)
/// with the unbiased batch variance, as PyTorch updates them.
LogicalResult GraphImporter::importBatchNormTraining(jit::Node *node,
                                                     ArrayRef<Abstract> args) {
  Location l = loc(node);
  const Abstract &input = args[0];
  const Abstract &runningMean = args[3];
  const Abstract &runningVar = args[4];
  if (!runningMean.isBuffer || !runningVar.isBuffer)
    return error(node) << "batch_norm in training mode with running "
                          "statistics that are not module buffers";
  auto none = Abstract::makeStatic(c10::IValue());
  SmallVector<Abstract> pureArgs(args.begin(), args.end());
  pureArgs[3] = none;
  pureArgs[4] = none;

  SmallVector<Value> operands;
  for (const Abstract &a : pureArgs)
    operands.push_back(materialize(a, l));
  Type resultType = input.value.getType();
  Operation *bn = emitAten("aten::batch_norm", operands, resultType, node);

  // Batch statistics over every dim but the channel dim (1).
  int64_t rank = input.dynamicDims.size();
  c10::List<int64_t> dims;
  dims.push_back(0);
  for (int64_t d = 2; d < rank; ++d)
    dims.push_back(d);
  Value dimList = materializeConstant(c10::IValue(dims), l);
  Value correction = materializeConstant(c10::IValue(int64_t(1)), l);
  Value keepDim = materializeConstant(c10::IValue(false), l);
  auto statType = cast<RankedTensorType>(runningMean.value.getType());
  Operation *varMean = emitAten("aten::var_mean.correction",
                                {input.value, dimList, correction, keepDim},
                                {statType, statType}, node);
  Value momentum = materialize(args[6], l);
  if (isa<ds::NoneType>(momentum.getType()))
    return error(node) << "batch_norm in training mode without a momentum";
  Value newMean = emitAten("aten::lerp.Scalar",
                           {runningMean.value, varMean->getResult(1), momentum},
                           statType, node)
                      ->getResult(0);
  Value newVar = emitAten("aten::lerp.Scalar",
                          {runningVar.value, varMean->getResult(0), momentum},
                          statType, node)
                     ->getResult(0);
  SetBufferOp::create(builder, l, runningMean.path, newMean);
  SetBufferOp::create(builder, l, runningVar.path, newVar);

  // The example: run the real operator on copies of the statistics.
  Abstract result;
  result.kind = Abstract::Kind::Dynamic;
  result.value = bn->getResult(0);
  result.dynamicDims = input.dynamicDims;
  std::vector<c10::IValue> outs;
  std::string message;
  SmallVector<Abstract> exampleArgs(args.begin(), args.end());
  if (runOnExamples(node, exampleArgs, outs, message))
    result.example = outs[0];
  else if (!speculative)
    return error(node) << "'aten::batch_norm' fails on the example inputs: "
                       << message;
  bind(node->output(), result);
  return success();
}

//===----------------------------------------------------------------------===//
// Entry
//===----------------------------------------------------------------------===//

LogicalResult GraphImporter::run(jit::Graph &graph, func::FuncOp func,
                                 const std::vector<ExampleInput> &inputs) {
  scopes.emplace_back();
  moduleStack.emplace_back("", state.moduleClass.at(""));
  Block *entry = func.addEntryBlock();
  builder.setInsertionPointToStart(entry);

  // graph inputs: self, then the forward arguments.
  Abstract self;
  self.kind = Abstract::Kind::Module;
  self.example = model._ivalue();
  bind(graph.inputs()[0], self);
  for (size_t i = 0; i < inputs.size(); ++i) {
    Abstract a;
    a.kind = Abstract::Kind::Dynamic;
    a.example = inputs[i].example;
    a.value = entry->getArgument(i);
    a.dynamicDims.assign(inputs[i].example.dim(), false);
    bind(graph.inputs()[i + 1], a);
  }

  for (jit::Node *node : graph.nodes())
    if (failed(importNode(node)))
      return failure();

  // Outputs: one scalar loss, or a tuple of them.
  Abstract out = lookup(graph.outputs()[0]);
  SmallVector<Abstract> results;
  if (out.kind == Abstract::Kind::Tuple)
    results = SmallVector<Abstract>(out.elements.begin(), out.elements.end());
  else
    results.push_back(out);
  SmallVector<Value> values;
  Location l = func.getLoc();
  for (const Abstract &r : results) {
    Value v = materialize(r, l);
    if (!v || !isa<TensorType>(v.getType()))
      return emitError(l) << "forward must return a tensor (the loss) or a "
                             "tuple of tensors";
    values.push_back(v);
  }
  func::ReturnOp::create(builder, l, values);
  func.setFunctionType(FunctionType::get(
      ctx, func.getFunctionType().getInputs(), ValueRange(values).getTypes()));
  return success();
}

LogicalResult mlir::ds::import::importForward(
    OpBuilder &builder, const torch::jit::Module &model,
    const StateTable &state, StringRef funcName, bool training,
    const std::vector<ExampleInput> &inputs, const std::string &modelPath) {
  MLIRContext *ctx = builder.getContext();
  const torch::jit::Module &module = model;
  // The importer inlines calls, propagates constants and folds branches as
  // it walks (see GraphImporter); dead code is removed from the IR after.
  std::shared_ptr<jit::Graph> graph = module.get_method("forward").graph();

  SmallVector<Type> argTypes;
  for (const ExampleInput &in : inputs)
    argTypes.push_back(tensorTypeOf(ctx, in.example));
  Location l = FileLineColLoc::get(ctx, modelPath, 0, 0);
  auto func = func::FuncOp::create(builder, l, funcName,
                                   FunctionType::get(ctx, argTypes, {}));
  for (size_t i = 0; i < inputs.size(); ++i) {
    func.setArgAttr(i, "ds.name", builder.getStringAttr(inputs[i].name));
    if (!inputs[i].batched)
      func.setArgAttr(i, "ds.unbatched", builder.getUnitAttr());
  }
  OpBuilder::InsertionGuard guard(builder);
  GraphImporter importer(builder, module, state, training, modelPath);
  return importer.run(*graph, func, inputs);
}
