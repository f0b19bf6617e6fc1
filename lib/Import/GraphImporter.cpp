//===- GraphImporter.cpp - TorchScript graph -> ds ops --------------------===//
//
// Walks the inlined TorchScript graph of `forward` once, in order, and emits ds
// ops. Every value is tracked abstractly (see `Abstract`): a value the example
// shapes decide (an int from `x.size(1)`, a bool from `self.training`, a list
// of such) is static and never becomes IR unless an emitted op needs it as an
// argument; tensors and values computed from tensor data are dynamic and have
// an IR value. Each op also runs on example values (rank 0's rows of
// micro-step 0), which gives result shapes and decides shape checks
// (ControlFlow.cpp). This file holds the values, the examples, IR emission,
// the structural nodes (constants, attributes, tuples, lists) and calls;
// operators go through OperatorImport.cpp.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"
#include "ds/Dialect/DS/IR/DSOps.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::import;
namespace jit = torch::jit;

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

Abstract *GraphImporter::find(jit::Value *v) {
  for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
    auto found = it->map.find(v);
    if (found != it->map.end())
      return &found->second;
  }
  return nullptr;
}

void GraphImporter::assignStorage(Abstract &a) {
  for (Abstract &e : a.elements)
    assignStorage(e);
  if (a.kind == Abstract::Kind::Dynamic && a.storage == 0)
    a.storage = ++lastStorage;
}

bool GraphImporter::isDefinedOutside(jit::Value *v) const {
  return !scopes.back().map.count(v);
}

void GraphImporter::rebind(jit::Value *v, Abstract a) {
  if (isDefinedOutside(v))
    scopes.back().rebound.push_back(v);
  bind(v, std::move(a));
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

const std::pair<std::string, std::string> &
GraphImporter::moduleOf(jit::Node *node) const {
  if (nodeModules) {
    auto it = nodeModules->find(node);
    if (it != nodeModules->end())
      return it->second;
  }
  return moduleStack.back();
}

InFlightDiagnostic GraphImporter::error(jit::Node *node) {
  InFlightDiagnostic diag = emitError(loc(node));
  if (!moduleStack.empty()) {
    const auto &[path, className] = moduleOf(node);
    diag.attachNote() << describeModule(path, className);
  }
  return diag;
}

//===----------------------------------------------------------------------===//
// Examples
//===----------------------------------------------------------------------===//

c10::IValue mlir::ds::import::exampleOf(const Abstract &a) {
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
  for (auto [i, a] : llvm::enumerate(args)) {
    c10::IValue ex = exampleOf(a);
    if (a.kind == Abstract::Kind::Dynamic && !ex.isTensor() && ex.isNone() &&
        !isa<ds::NoneType>(a.value.getType())) {
      errorMessage = "argument #" + std::to_string(i) +
                     " is data-dependent (computed from tensor data in a "
                     "branch the example inputs do not take), so the "
                     "compiler cannot specialise on it";
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
    for (const c10::IValue &item : v.toListRef()) {
      items.push_back(materializeConstant(item, l));
      if (!items.back())
        return {};
    }
    auto listType = cast<ds::ListType>(typeOfExample(v, {}, nullptr));
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
  const auto &[path, className] = moduleOf(node);
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
  if (failed(refreshInputs(block->return_node())))
    return failure();
  for (jit::Value *out : block->outputs())
    results.push_back(lookup(out));
  return success();
}

LogicalResult GraphImporter::importNode(jit::Node *node) {
  namespace prim = c10::prim;
  namespace attr = c10::attr;
  c10::Symbol kind = node->kind();
  auto outputs = node->outputs();
  // Views read after their base was written in place see the write.
  if (failed(refreshInputs(node)))
    return failure();

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
    // A list whose length only the run time knows (a split by sizes the
    // data decides). Where the examples gave one of this length, each
    // element keeps its example (later ops run on it) and its rank, every
    // dim dynamic.
    SmallVector<Type> types;
    Type elem = cast<ds::ListType>(seq.value.getType()).getElementType();
    std::optional<c10::ArrayRef<c10::IValue>> items;
    if (seq.example.isList() && seq.example.toListRef().size() == outputs.size())
      items = seq.example.toListRef();
    for (size_t i = 0; i < outputs.size(); ++i) {
      Type type = elem;
      if (items && (*items)[i].isTensor() && isa<UnrankedTensorType>(elem))
        type = RankedTensorType::get(
            SmallVector<int64_t>((*items)[i].toTensor().dim(),
                                 ShapedType::kDynamic),
            cast<UnrankedTensorType>(elem).getElementType());
      types.push_back(type);
    }
    auto unpack = ListUnpackOp::create(builder, loc(node), types, seq.value);
    for (auto [i, out, res] :
         llvm::enumerate(outputs, unpack.getResults())) {
      Abstract a;
      a.kind = Abstract::Kind::Dynamic;
      a.value = res;
      if (items)
        a.example = (*items)[i];
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
  if (kind == prim::unchecked_cast) {
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
  if (kind == prim::CreateObject || kind == prim::Enter || kind == prim::Exit ||
      (kind == prim::CallMethod && gradModeOf(node->input(0)->type())))
    return importGradMode(node);
  if (kind == prim::CallMethod || kind == prim::CallFunction)
    return importCall(node);
  return importOperator(node);
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
  // Views the callee returns or updated, of its arguments, are views of the
  // caller's values from here on.
  llvm::DenseMap<jit::Value *, jit::Value *> callerNames;
  for (size_t i = 0; i < args.size(); ++i)
    callerNames[callee->inputs()[i]] = node->input(i + firstArg);
  for (auto &[i, value] : updatedArgs)
    renameViewRoots(value, callerNames);
  for (Abstract &value : outs)
    renameViewRoots(value, callerNames);
  for (auto &[i, value] : updatedArgs)
    rebind(node->input(i + firstArg), value);
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
  // The training step keeps each module's mode as saved (a teacher saved
  // after .eval() runs without dropout, BatchNorm on running statistics);
  // the eval forward has every module in eval mode.
  if (name == "training" && attr.isBool())
    attr = c10::IValue(training && attr.toBool());
  bind(node->output(), Abstract::makeStatic(attr));
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
  if (failed(refreshInputs(graph.return_node())))
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
    const std::vector<ExampleInput> &inputs, const std::string &modelPath,
    const std::string &method, const NodeModules *nodeModules,
    bool growExamples) {
  MLIRContext *ctx = builder.getContext();
  const torch::jit::Module &module = model;
  // The importer inlines calls, propagates constants and folds branches as
  // it walks (see GraphImporter); dead code is removed from the IR after.
  std::shared_ptr<jit::Graph> graph = module.get_method(method).graph();

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
  GraphImporter importer(builder, module, state, training, modelPath,
                         nodeModules, growExamples);
  return importer.run(*graph, func, inputs);
}
