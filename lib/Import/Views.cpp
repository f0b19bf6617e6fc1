//===- Views.cpp - views, and in-place writes through them ----------------===//
//
// PyTorch's views share memory with their base: writing into `h[0]` changes
// `h`, and writing into `h` changes every view of it. The IR has values, not
// memory, so the importer keeps for each view the steps that took it from
// its root (a tensor that is not itself a view), in a form that can be
// taken again and written back:
//
//   - a write into a view becomes the functional form of each step from the
//     view back to the root (`slice_scatter`, `select_scatter`, a reshape, a
//     transpose or permute back), and the root's name is bound to the result;
//   - a view used after its root was written (through another view, or
//     directly) is taken again from the root's current value first.
//
// Whether an operator's result is a view comes from running it on the
// examples (its result shares the argument's memory), as eager PyTorch
// decides it: `reshape` of a contiguous tensor is a view, of a transposed one
// a copy. Views taken by operators that cannot be inverted (`expand`,
// `as_strided`, `diagonal`, ...) are taken again but never written through.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::import;
namespace jit = torch::jit;

/// Operators whose result is a view of their first argument, for calls that
/// did not run on the examples (in a branch the examples do not take).
static const llvm::StringSet<> &viewOps() {
  static const llvm::StringSet<> ops = {"aten::view",
                                        "aten::reshape",
                                        "aten::select",
                                        "aten::slice",
                                        "aten::transpose",
                                        "aten::permute",
                                        "aten::expand",
                                        "aten::squeeze",
                                        "aten::unsqueeze",
                                        "aten::split",
                                        "aten::chunk",
                                        "aten::narrow",
                                        "aten::t",
                                        "aten::flatten",
                                        "aten::unbind",
                                        "aten::detach",
                                        "aten::as_strided",
                                        "aten::expand_as",
                                        "aten::alias",
                                        "aten::diagonal",
                                        "aten::unflatten",
                                        "aten::view_as",
                                        "aten::reshape_as",
                                        "aten::split_with_sizes",
                                        "aten::_reshape_alias",
                                        "aten::_unsafe_view"};
  return ops;
}

/// Operators whose view is its input with other sizes.
static const llvm::StringSet<> &reshapeOps() {
  static const llvm::StringSet<> ops = {
      "aten::view",         "aten::reshape",   "aten::_reshape_alias",
      "aten::_unsafe_view", "aten::flatten",   "aten::unflatten",
      "aten::squeeze",      "aten::unsqueeze", "aten::view_as",
      "aten::reshape_as"};
  return ops;
}

static int64_t normalizeDim(int64_t d, int64_t rank) {
  return d < 0 ? d + rank : d;
}

static std::vector<bool> dynamicDimsOf(Type type) {
  std::vector<bool> dims;
  if (auto t = dyn_cast<RankedTensorType>(type))
    for (int64_t d = 0; d < t.getRank(); ++d)
      dims.push_back(t.isDynamicDim(d));
  return dims;
}

static std::optional<int64_t> optionalInt(const c10::IValue &v) {
  if (v.isNone())
    return std::nullopt;
  return v.toInt();
}

//===----------------------------------------------------------------------===//
// Which results are views, and how they were taken
//===----------------------------------------------------------------------===//

std::optional<ViewStep>
GraphImporter::viewStepOf(jit::Node *node, ArrayRef<Abstract> args,
                          const Abstract &result, unsigned index,
                          bool listElement, StringRef emittedName) {
  const c10::FunctionSchema *schema = node->maybeSchema();
  if (!schema || schema->is_mutable() || args.empty() || !result.value ||
      !isa<TensorType>(result.value.getType()))
    return std::nullopt;
  if (args[0].kind != Abstract::Kind::Dynamic &&
      !(args[0].kind == Abstract::Kind::Static && args[0].example.isTensor()))
    return std::nullopt;
  StringRef name = schema->name();
  StringRef overload = schema->overload_name();
  const c10::IValue &parentEx = args[0].example;
  const c10::IValue &ex = result.example;
  bool ran = parentEx.isTensor() && ex.isTensor() &&
             parentEx.toTensor().defined() && ex.toTensor().defined();
  if (ran && !ex.toTensor().is_alias_of(parentEx.toTensor()))
    return std::nullopt;
  if (!ran && !viewOps().contains(name))
    return std::nullopt;

  ViewStep step;
  step.type = result.value.getType();
  auto staticArg = [&](size_t i) -> std::optional<c10::IValue> {
    if (i >= args.size() || !args[i].isStatic())
      return std::nullopt;
    return exampleOf(args[i]); // a list's elements hold its values
  };
  auto opaque = [&]() {
    step.kind = ViewStep::Kind::Opaque;
    step.node = node;
    step.opName = emittedName.str();
    step.opArgs.assign(args.begin() + 1, args.end());
    step.replayable = llvm::all_of(
        step.opArgs, [](const Abstract &a) { return a.isStatic(); });
    step.resultIndex = index;
    step.listElement = listElement;
    for (Value v : result.value.getDefiningOp()->getResults())
      step.opResultTypes.push_back(v.getType());
    return step;
  };
  if (!ran)
    return opaque();
  at::Tensor parent = parentEx.toTensor(), view = ex.toTensor();
  int64_t rank = parent.dim();

  // The same tensor under another name (contiguous() of a contiguous tensor,
  // to() without a change, alias, dropout in eval mode); detach too, whose
  // write changes the base's values but not its gradient.
  if (view.sizes() == parent.sizes() && view.strides() == parent.strides() &&
      view.storage_offset() == parent.storage_offset() &&
      view.scalar_type() == parent.scalar_type()) {
    step.kind = name == "aten::detach" ? ViewStep::Kind::Detach
                                       : ViewStep::Kind::Identity;
    return step;
  }
  if (name == "aten::slice" && overload == "Tensor") {
    auto dim = staticArg(1), start = staticArg(2), end = staticArg(3),
         stride = staticArg(4);
    if (dim && start && end && stride) {
      step.kind = ViewStep::Kind::Slice;
      step.args = {normalizeDim(dim->toInt(), rank), *start, *end, *stride};
      return step;
    }
  }
  if (name == "aten::narrow") {
    auto dim = staticArg(1), start = staticArg(2), length = staticArg(3);
    if (dim && start && length && start->isInt() && length->isInt()) {
      int64_t d = normalizeDim(dim->toInt(), rank);
      int64_t s = start->toInt();
      if (s < 0)
        s += parent.size(d);
      step.kind = ViewStep::Kind::Slice;
      step.args = {d, s, s + length->toInt(), int64_t(1)};
      return step;
    }
  }
  if (name == "aten::select" && overload == "int") {
    auto dim = staticArg(1), i = staticArg(2);
    if (dim && i) {
      step.kind = ViewStep::Kind::Select;
      step.args = {normalizeDim(dim->toInt(), rank), *i};
      return step;
    }
  }
  // A piece of split / split_with_sizes / chunk: a slice at the piece's
  // offset along the dim (its distance from the base in memory).
  if (listElement && (name == "aten::split" || name == "aten::chunk" ||
                      name == "aten::split_with_sizes")) {
    auto dim = staticArg(2);
    if (dim) {
      int64_t d = normalizeDim(dim->toInt(), rank);
      int64_t stride = parent.stride(d);
      int64_t offset = view.storage_offset() - parent.storage_offset();
      if (stride > 0 && offset % stride == 0) {
        int64_t start = offset / stride;
        step.kind = ViewStep::Kind::Slice;
        step.args = {d, start, start + view.size(d), int64_t(1)};
        return step;
      }
    }
  }
  if (listElement && name == "aten::unbind") {
    if (auto dim = staticArg(1)) {
      step.kind = ViewStep::Kind::Select;
      step.args = {normalizeDim(dim->toInt(), rank),
                   static_cast<int64_t>(index)};
      return step;
    }
  }
  // view and reshape agree on values whatever the strides (both reflow the
  // elements in row-major order), so the view is taken again by reshape.
  if (reshapeOps().contains(name) && overload != "dtype" &&
      cast<RankedTensorType>(step.type).hasStaticShape()) {
    step.kind = ViewStep::Kind::Reshape;
    step.args = {c10::IValue(view.sizes().vec())};
    return step;
  }
  if (name == "aten::transpose" && overload == "int") {
    auto d0 = staticArg(1), d1 = staticArg(2);
    if (d0 && d1) {
      step.kind = ViewStep::Kind::Transpose;
      step.args = {normalizeDim(d0->toInt(), rank),
                   normalizeDim(d1->toInt(), rank)};
      return step;
    }
  }
  if (name == "aten::t" && rank == 2) {
    step.kind = ViewStep::Kind::Transpose;
    step.args = {int64_t(0), int64_t(1)};
    return step;
  }
  if (name == "aten::permute") {
    if (auto dims = staticArg(1)) {
      std::vector<int64_t> ds;
      for (int64_t d : dims->toIntVector())
        ds.push_back(normalizeDim(d, rank));
      step.kind = ViewStep::Kind::Permute;
      step.args = {c10::IValue(ds)};
      return step;
    }
  }
  return opaque();
}

void GraphImporter::recordView(Abstract &result, const Abstract &parent,
                               jit::Value *parentName, ViewStep step) {
  result.isView = true;
  result.storage = parent.storage;
  result.view = nullptr;
  if (parent.view) {
    auto record = std::make_shared<ViewRecord>(*parent.view);
    record->steps.push_back(std::move(step));
    result.view = std::move(record);
  } else if (!parent.isView && parentName &&
             parent.kind == Abstract::Kind::Dynamic) {
    auto record = std::make_shared<ViewRecord>();
    record->root = parentName;
    record->rootValue = parent.value;
    record->steps.push_back(std::move(step));
    result.view = std::move(record);
  }
}

//===----------------------------------------------------------------------===//
// Taking a view again
//===----------------------------------------------------------------------===//

bool GraphImporter::isStale(const Abstract &a) {
  if (a.kind == Abstract::Kind::Tuple || a.kind == Abstract::Kind::List)
    return llvm::any_of(a.elements,
                        [&](const Abstract &e) { return isStale(e); });
  if (a.kind != Abstract::Kind::Dynamic || !a.view || !a.view->root)
    return false;
  Abstract *root = find(a.view->root);
  return root && root->kind == Abstract::Kind::Dynamic &&
         root->storage == a.storage && root->value != a.view->rootValue;
}

LogicalResult GraphImporter::refreshView(Abstract &a, jit::Node *at) {
  if (a.kind == Abstract::Kind::Tuple || a.kind == Abstract::Kind::List) {
    for (Abstract &e : a.elements)
      if (failed(refreshView(e, at)))
        return failure();
    return success();
  }
  if (!isStale(a))
    return success();
  Abstract current = *find(a.view->root);
  for (const ViewStep &step : a.view->steps) {
    if (!step.replayable)
      return error(at) << "a view made by '" << step.opName
                       << "' is used after its base was written in place, "
                          "and its arguments are computed at run time, so it "
                          "cannot be taken again";
    FailureOr<Abstract> next = replayStep(step, current, at);
    if (failed(next))
      return failure();
    current = std::move(*next);
  }
  auto record = std::make_shared<ViewRecord>(*a.view);
  record->rootValue = find(a.view->root)->value;
  a.value = current.value;
  a.example = current.example;
  a.dynamicDims = current.dynamicDims;
  a.view = std::move(record);
  return success();
}

LogicalResult GraphImporter::refreshInputs(jit::Node *node) {
  for (jit::Value *in : node->inputs()) {
    Abstract *bound = find(in);
    if (!bound || !isStale(*bound))
      continue;
    Abstract fresh = *bound;
    if (failed(refreshView(fresh, node)))
      return failure();
    bind(in, std::move(fresh));
  }
  return success();
}

FailureOr<Abstract> GraphImporter::replayStep(const ViewStep &step,
                                              const Abstract &parent,
                                              jit::Node *at) {
  Location l = loc(at);
  Value p = parent.value;
  auto c = [&](const c10::IValue &v) { return materializeConstant(v, l); };
  at::Tensor t =
      parent.example.isTensor() ? parent.example.toTensor() : at::Tensor();
  Abstract out;
  out.kind = Abstract::Kind::Dynamic;
  out.storage = parent.storage;
  out.isView = true;
  const auto &a = step.args;
  auto emit = [&](StringRef name, ArrayRef<Value> operands) {
    out.value = emitAten(name, operands, TypeRange{step.type}, at)->getResult(0);
  };
  torch::NoGradGuard noGrad;
  switch (step.kind) {
  case ViewStep::Kind::Identity:
    out.value = p;
    out.example = parent.example;
    break;
  case ViewStep::Kind::Detach:
    emit("aten::detach", {p});
    out.example = parent.example;
    break;
  case ViewStep::Kind::Slice:
    emit("aten::slice.Tensor", {p, c(a[0]), c(a[1]), c(a[2]), c(a[3])});
    if (t.defined())
      out.example = at::slice(t, a[0].toInt(), optionalInt(a[1]),
                              optionalInt(a[2]), a[3].toInt());
    break;
  case ViewStep::Kind::Select:
    emit("aten::select.int", {p, c(a[0]), c(a[1])});
    if (t.defined())
      out.example = at::select(t, a[0].toInt(), a[1].toInt());
    break;
  case ViewStep::Kind::Reshape:
    emit("aten::reshape", {p, c(a[0])});
    if (t.defined())
      out.example = at::reshape(t, a[0].toIntVector());
    break;
  case ViewStep::Kind::Transpose:
    emit("aten::transpose.int", {p, c(a[0]), c(a[1])});
    if (t.defined())
      out.example = at::transpose(t, a[0].toInt(), a[1].toInt());
    break;
  case ViewStep::Kind::Permute:
    emit("aten::permute", {p, c(a[0])});
    if (t.defined())
      out.example = at::permute(t, a[0].toIntVector());
    break;
  case ViewStep::Kind::Opaque: {
    SmallVector<Value> operands = {p};
    std::vector<Abstract> runArgs = {parent};
    for (const Abstract &arg : step.opArgs) {
      operands.push_back(materialize(arg, l));
      runArgs.push_back(arg);
    }
    Operation *op = emitAten(step.opName, operands, step.opResultTypes, at);
    out.value = op->getResult(step.resultIndex);
    std::vector<c10::IValue> outs;
    std::string message;
    if (runOnExamples(step.node, runArgs, outs, message)) {
      c10::IValue r = step.listElement ? outs[0].toListRef()[step.resultIndex]
                                       : outs[step.resultIndex];
      out.example = r;
    }
    break;
  }
  }
  out.dynamicDims = dynamicDimsOf(out.value.getType());
  return out;
}

//===----------------------------------------------------------------------===//
// Writing through a view
//===----------------------------------------------------------------------===//

FailureOr<Abstract> GraphImporter::writeBackStep(const ViewStep &step,
                                                 const Abstract &parent,
                                                 const Abstract &src,
                                                 jit::Node *at) {
  Location l = loc(at);
  Value p = parent.value, s = src.value;
  Type type = p.getType();
  auto c = [&](const c10::IValue &v) { return materializeConstant(v, l); };
  at::Tensor pt =
      parent.example.isTensor() ? parent.example.toTensor() : at::Tensor();
  at::Tensor st = src.example.isTensor() ? src.example.toTensor() : at::Tensor();
  bool examples = pt.defined() && st.defined();
  Abstract out = parent;
  out.example = c10::IValue();
  const auto &a = step.args;
  auto emit = [&](StringRef name, ArrayRef<Value> operands) {
    out.value = emitAten(name, operands, TypeRange{type}, at)->getResult(0);
  };
  torch::NoGradGuard noGrad;
  switch (step.kind) {
  case ViewStep::Kind::Identity:
    out.value = s;
    if (st.defined())
      out.example = st;
    break;
  case ViewStep::Kind::Detach: {
    // The base holds the written values, and its gradient flows on to the
    // base as before the write (autograd's view of a write through a
    // detached alias): base + detach(written - base).
    Value one = c(c10::IValue(int64_t(1)));
    Value delta = emitAten("aten::sub.Tensor", {s, p, one}, TypeRange{type}, at)
                      ->getResult(0);
    Value frozen =
        emitAten("aten::detach", {delta}, TypeRange{type}, at)->getResult(0);
    emit("aten::add.Tensor", {p, frozen, one});
    if (st.defined())
      out.example = st;
    break;
  }
  case ViewStep::Kind::Slice:
    emit("aten::slice_scatter", {p, s, c(a[0]), c(a[1]), c(a[2]), c(a[3])});
    if (examples)
      out.example = at::slice_scatter(pt, st, a[0].toInt(), optionalInt(a[1]),
                                      optionalInt(a[2]), a[3].toInt());
    break;
  case ViewStep::Kind::Select:
    emit("aten::select_scatter", {p, s, c(a[0]), c(a[1])});
    if (examples)
      out.example = at::select_scatter(pt, st, a[0].toInt(), a[1].toInt());
    break;
  case ViewStep::Kind::Reshape: {
    auto pType = cast<RankedTensorType>(type);
    Value sizes =
        pType.hasStaticShape()
            ? c(c10::IValue(std::vector<int64_t>(pType.getShape())))
            : emitAten("aten::size", {p},
                       TypeRange{ds::ListType::get(ctx, builder.getI64Type())},
                       at)
                  ->getResult(0);
    emit("aten::reshape", {s, sizes});
    if (examples)
      out.example = at::reshape(st, pt.sizes());
    break;
  }
  case ViewStep::Kind::Transpose:
    emit("aten::transpose.int", {s, c(a[0]), c(a[1])});
    if (examples)
      out.example = at::transpose(st, a[0].toInt(), a[1].toInt());
    break;
  case ViewStep::Kind::Permute: {
    std::vector<int64_t> dims = a[0].toIntVector(), inverse(dims.size());
    for (size_t i = 0; i < dims.size(); ++i)
      inverse[dims[i]] = i;
    emit("aten::permute", {s, c(c10::IValue(inverse))});
    if (examples)
      out.example = at::permute(st, inverse);
    break;
  }
  case ViewStep::Kind::Opaque:
    return error(at) << "in-place write into a view made by '" << step.opName
                     << "' cannot be written into its base";
  }
  return out;
}

std::string GraphImporter::unwritableViewReason(const Abstract &view) {
  if (!view.isView)
    return "";
  if (!view.view)
    return "a view of another tensor that the importer cannot follow is not "
           "supported (a view chosen by a data-dependent branch, or a tensor "
           "detached by a `with torch.no_grad()` block)";
  for (const ViewStep &step : view.view->steps)
    if (step.kind == ViewStep::Kind::Opaque)
      return "a view made by '" + step.opName +
             "' is not supported (writes reach the base through slice, "
             "select, narrow, split, chunk, unbind, view, reshape, squeeze, "
             "unsqueeze, flatten, unflatten, transpose, t, permute, detach and "
             "operators that return their input)";
  Abstract *root = view.view->root ? find(view.view->root) : nullptr;
  if (!root || root->storage != view.storage)
    return "a view of a tensor that is out of scope here is not supported (a "
           "view returned by a called function, or taken in an earlier loop "
           "iteration)";
  if (root->isParam)
    return "a view of parameter '" + root->path + "' is not supported";
  return "";
}

LogicalResult GraphImporter::writeIntoBase(jit::Node *node,
                                           const Abstract &view,
                                           const Abstract &updated) {
  const ViewRecord &record = *view.view;
  // The values from the root down to the view's parent, as they are now.
  std::vector<Abstract> chain = {*find(record.root)};
  for (size_t i = 0; i + 1 < record.steps.size(); ++i) {
    FailureOr<Abstract> next = replayStep(record.steps[i], chain.back(), node);
    if (failed(next))
      return failure();
    chain.push_back(std::move(*next));
  }
  Abstract written = updated;
  for (size_t i = record.steps.size(); i-- > 0;) {
    FailureOr<Abstract> up =
        writeBackStep(record.steps[i], chain[i], written, node);
    if (failed(up))
      return failure();
    written = std::move(*up);
  }
  const Abstract &root = chain.front();
  written.isView = false;
  written.view = nullptr;
  written.path = root.path;
  written.isBuffer = root.isBuffer;
  written.storage = root.storage;
  if (root.isBuffer)
    SetBufferOp::create(builder, loc(node), root.path, written.value);
  rebindUpdated(record.root, written);
  return success();
}

void GraphImporter::renameViewRoots(
    Abstract &a, const llvm::DenseMap<jit::Value *, jit::Value *> &names) {
  for (Abstract &e : a.elements)
    renameViewRoots(e, names);
  if (!a.view || !a.view->root)
    return;
  auto record = std::make_shared<ViewRecord>(*a.view);
  auto it = names.find(record->root);
  record->root = it == names.end() ? nullptr : it->second;
  a.view = std::move(record);
}
