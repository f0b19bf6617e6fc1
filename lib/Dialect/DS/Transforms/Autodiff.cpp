//===- Autodiff.cpp - forward -> joint forward + backward -----------------===//

#include "ds/Dialect/DS/IR/AtenRegistry.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Transforms/GradientRules.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSAUTODIFF
#include "ds/Dialect/DS/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

static bool isFloatTensor(Type type) {
  auto tensor = dyn_cast<TensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType());
}

class Differentiator {
public:
  Differentiator(OpBuilder &builder, const llvm::StringSet<> &trainable)
      : b(builder), trainable(trainable) {}

  /// Marks the values of `block` (and nested regions) that vary with a
  /// trainable parameter.
  void markVarying(Block &block);

  /// Differentiates `block` in reverse; `grads` holds the gradients of its
  /// values (seeded by the caller) and receives those of outer values.
  LogicalResult backprop(Block &block);

  void addGrad(Value v, Value g);

  llvm::DenseMap<Value, Value> grads;
  llvm::DenseMap<Value, SmallVector<Value>> listGrads;
  /// The elements a list result was unpacked into (ds.list_unpack).
  llvm::DenseMap<Value, SmallVector<Value>> unpackedElements;
  llvm::DenseSet<Value> varying;

private:
  LogicalResult backpropAten(AtenOp op);
  LogicalResult backpropIf(IfOp op);

  OpBuilder &b;
  const llvm::StringSet<> &trainable;
};

} // namespace

void Differentiator::markVarying(Block &block) {
  for (Operation &op : block) {
    if (auto get = dyn_cast<GetParamOp>(op)) {
      if (trainable.contains(get.getName()))
        varying.insert(get.getResult());
      continue;
    }
    if (auto ifOp = dyn_cast<IfOp>(op)) {
      markVarying(ifOp.getThenRegion().front());
      markVarying(ifOp.getElseRegion().front());
      for (Region *region : {&ifOp.getThenRegion(), &ifOp.getElseRegion()}) {
        auto yield = cast<YieldOp>(region->front().getTerminator());
        for (auto [i, v] : llvm::enumerate(yield.getValues()))
          if (varying.contains(v))
            varying.insert(ifOp.getResult(i));
      }
      continue;
    }
    if (auto aten = dyn_cast<AtenOp>(op))
      if (isNonDifferentiable(aten.getOp()))
        continue;
    if (!isa<AtenOp, ListConstructOp, ListUnpackOp>(op))
      continue;
    bool anyVarying = llvm::any_of(
        op.getOperands(), [&](Value v) { return varying.contains(v); });
    if (!anyVarying)
      continue;
    for (Value r : op.getResults())
      if (isFloatTensor(r.getType()) || isa<ListType>(r.getType()))
        varying.insert(r);
  }
}

void Differentiator::addGrad(Value v, Value g) {
  if (!g)
    return;
  auto it = grads.find(v);
  if (it == grads.end()) {
    grads[v] = g;
    return;
  }
  Location loc = g.getLoc();
  Value one =
      ConstantOp::create(b, loc, b.getI64Type(), b.getI64IntegerAttr(1));
  OperationState st(loc, AtenOp::getOperationName());
  st.addOperands({it->second, g, one});
  st.addTypes(v.getType());
  st.addAttribute("op", b.getStringAttr("aten::add.Tensor"));
  if (auto def = v.getDefiningOp<AtenOp>()) {
    st.addAttribute("module", def.getModuleAttr());
    st.addAttribute("module_class", def.getModuleClassAttr());
  }
  it->second = b.create(st)->getResult(0);
}

LogicalResult Differentiator::backpropAten(AtenOp op) {
  SmallVector<Value> resultGrads;
  bool any = false;
  for (Value r : op.getResults()) {
    Value g = grads.lookup(r);
    resultGrads.push_back(g);
    any |= static_cast<bool>(g);
  }
  // A list-returning operator whose list was not unpacked at import.
  if (!any && op.getNumResults() == 1)
    if (auto it = listGrads.find(op.getResult(0)); it != listGrads.end())
      any = true;
  if (!any || isNonDifferentiable(op.getOp()))
    return success();
  SmallVector<bool> needs;
  SmallVector<SmallVector<Value>> elements;
  bool anyNeeds = false;
  for (Value v : op.getArgs()) {
    bool n = varying.contains(v) &&
             (isFloatTensor(v.getType()) || isa<ListType>(v.getType()));
    needs.push_back(n);
    anyNeeds |= n;
    SmallVector<Value> items;
    if (auto list = v.getDefiningOp<ListConstructOp>())
      items.assign(list.getElements().begin(), list.getElements().end());
    elements.push_back(items);
  }
  if (!anyNeeds)
    return success();
  const GradientRule *rule = lookupGradientRule(op.getOp());
  if (!rule) {
    InFlightDiagnostic diag = op.emitOpError()
                              << "operator '" << op.getOp()
                              << "' has no gradient rule, but a trainable "
                                 "parameter's gradient flows through it";
    if (!op.getModuleClass().empty())
      diag.attachNote() << describeModule(op.getModule(), op.getModuleClass());
    return diag;
  }
  GradientBuilder gb(b, op, resultGrads, needs, elements);
  if (op.getNumResults() == 1)
    if (auto it = listGrads.find(op.getResult(0)); it != listGrads.end())
      gb.setResultListGrads(it->second, unpackedElements[op.getResult(0)]);
  if (failed((*rule)(gb)))
    return failure();
  for (auto &[i, g] : gb.grads)
    if (needs[i])
      addGrad(op.getArgs()[i], g);
  for (auto &[i, gs] : gb.listGrads) {
    if (!needs[i])
      continue;
    for (auto [e, g] : llvm::zip(elements[i], gs))
      if (g && varying.contains(e))
        addGrad(e, g);
  }
  return success();
}

/// Outer values that `op`'s regions read and that vary.
static llvm::SetVector<Value>
outerVaryingUses(Operation *op, const llvm::DenseSet<Value> &varying) {
  llvm::SetVector<Value> uses;
  op->walk([&](Operation *inner) {
    if (inner == op)
      return;
    for (Value v : inner->getOperands())
      if (!op->isAncestor(v.getParentRegion()->getParentOp()) &&
          varying.contains(v) && isFloatTensor(v.getType()))
        uses.insert(v);
  });
  return uses;
}

LogicalResult Differentiator::backpropIf(IfOp op) {
  SmallVector<Value> resultGrads;
  for (Value r : op.getResults())
    resultGrads.push_back(grads.lookup(r));
  bool anyGrad = llvm::any_of(resultGrads, [](Value g) { return bool(g); });
  if (!anyGrad)
    return success(); // nothing the losses need flows out of the branch

  // The branches are recomputed for the backward: a random draw inside
  // would not repeat the forward's.
  Operation *random = nullptr;
  op->walk([&](AtenOp inner) {
    if (auto info = lookupAtenOp(inner.getOp());
        info && info->effect == AtenEffect::Random)
      random = inner;
  });
  if (random)
    return random->emitOpError()
           << "random operator inside a data-dependent branch cannot be "
              "differentiated (the branch is recomputed for the backward)";

  llvm::SetVector<Value> outer = outerVaryingUses(op, varying);
  SmallVector<Type> types;
  for (Value v : outer)
    types.push_back(v.getType());
  auto backIf = IfOp::create(b, op.getLoc(), types, op.getCondition());

  Region *forward[2] = {&op.getThenRegion(), &op.getElseRegion()};
  Region *backward[2] = {&backIf.getThenRegion(), &backIf.getElseRegion()};
  for (int br = 0; br < 2; ++br) {
    Block *block = new Block();
    backward[br]->push_back(block);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(block);

    // Recompute the branch (its pure ops; buffer writes happened once).
    IRMapping map;
    Block &fwd = forward[br]->front();
    for (Operation &inner : fwd.without_terminator()) {
      if (isa<SetBufferOp, GradOp>(inner))
        continue;
      b.clone(inner, map);
    }
    Differentiator inner(b, trainable);
    inner.varying = varying;
    inner.markVarying(*block);
    auto yield = cast<YieldOp>(fwd.getTerminator());
    for (auto [i, v] : llvm::enumerate(yield.getValues()))
      if (resultGrads[i])
        inner.addGrad(map.lookupOrDefault(v), resultGrads[i]);
    if (failed(inner.backprop(*block)))
      return failure();

    SmallVector<Value> yields;
    for (Value v : outer) {
      Value g = inner.grads.lookup(v);
      if (!g) {
        Location loc = op.getLoc();
        Value none = ConstantOp::create(
            b, loc, ds::NoneType::get(b.getContext()), b.getUnitAttr());
        OperationState st(loc, AtenOp::getOperationName());
        st.addOperands({v, none, none, none, none, none});
        st.addTypes(v.getType());
        st.addAttribute("op", b.getStringAttr("aten::zeros_like"));
        g = b.create(st)->getResult(0);
      }
      yields.push_back(g);
    }
    YieldOp::create(b, op.getLoc(), yields);
  }
  for (auto [v, g] : llvm::zip(outer, backIf.getResults()))
    addGrad(v, g);
  return success();
}

LogicalResult Differentiator::backprop(Block &block) {
  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops)) {
    if (auto get = dyn_cast<GetParamOp>(op)) {
      if (Value g = grads.lookup(get.getResult()))
        GradOp::create(b, get.getLoc(), get.getName(), g);
      continue;
    }
    if (auto aten = dyn_cast<AtenOp>(op)) {
      if (failed(backpropAten(aten)))
        return failure();
      continue;
    }
    if (auto list = dyn_cast<ListConstructOp>(op)) {
      auto it = listGrads.find(list.getResult());
      if (it == listGrads.end())
        continue;
      for (auto [e, g] : llvm::zip(list.getElements(), it->second))
        if (g && varying.contains(e))
          addGrad(e, g);
      continue;
    }
    if (auto unpack = dyn_cast<ListUnpackOp>(op)) {
      SmallVector<Value> gs;
      bool any = false;
      for (Value r : unpack.getResults()) {
        gs.push_back(grads.lookup(r));
        any |= static_cast<bool>(gs.back());
      }
      if (any) {
        listGrads[unpack.getList()] = gs;
        unpackedElements[unpack.getList()].assign(unpack.getResults().begin(),
                                                  unpack.getResults().end());
      }
      continue;
    }
    if (auto ifOp = dyn_cast<IfOp>(op)) {
      if (failed(backpropIf(ifOp)))
        return failure();
      continue;
    }
  }
  return success();
}

namespace {

struct AutodiffPass : public ds::impl::DSAutodiffBase<AutodiffPass> {
  using DSAutodiffBase::DSAutodiffBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>(funcName);
    if (!func) {
      module.emitError() << "no function @" << funcName << " to differentiate";
      return signalPassFailure();
    }
    if (!func.getBody().hasOneBlock()) {
      func.emitError() << "expects a single-block function";
      return signalPassFailure();
    }

    // Trainable: requires_grad, and not in a frozen engine.
    llvm::StringSet<> frozenEngines;
    for (auto engine : module.getOps<EngineOp>())
      if (engine.getFrozen())
        frozenEngines.insert(engine.getSymName());
    llvm::StringSet<> trainable;
    for (auto param : module.getOps<ParamOp>())
      if (param.getRequiresGrad() &&
          !(param.getEngine() && frozenEngines.contains(*param.getEngine())))
        trainable.insert(param.getSymName());

    FailureOr<double> scale = seedScale(module);
    if (failed(scale))
      return signalPassFailure();

    Block &body = func.getBody().front();
    Operation *ret = body.getTerminator();
    OpBuilder builder(ret);
    Differentiator diff(builder, trainable);
    diff.markVarying(body);

    BackwardBeginOp::create(builder, ret->getLoc());
    // Each result the backward reaches is seeded with its cotangent (what
    // the caller gives backward(): 1 for a scalar loss under ds-run, the
    // gradient PyTorch computed for the output under dsopt) times the seed
    // scale; a scalar loss is the special case.
    bool anyScalar = false;
    for (auto [index, result] : llvm::enumerate(ret->getOperands())) {
      if (!diff.varying.contains(result))
        continue;
      auto type = cast<RankedTensorType>(result.getType());
      auto elem = dyn_cast<FloatType>(type.getElementType());
      if (!elem)
        continue;
      anyScalar |= type.getRank() == 0;
      // The result's own location: the seeding reads as the loss's.
      Location loc = result.getLoc();
      Value cotangent =
          CotangentOp::create(builder, loc, type, int64_t(index)).getResult();
      auto scalarType = RankedTensorType::get({}, elem);
      auto seed = DenseElementsAttr::get(scalarType,
                                         builder.getFloatAttr(elem, *scale));
      auto seedOp = ConstantOp::create(builder, loc, scalarType, seed);
      // -ds-scale-loss finds the seeds by this mark (fp16 loss scaling).
      seedOp->setAttr("ds.backward_seed", builder.getUnitAttr());
      Value grad = AtenOp::create(builder, loc, TypeRange{type},
                                  builder.getStringAttr("aten::mul.Tensor"),
                                  ValueRange{cotangent, seedOp})
                       .getResult(0);
      diff.addGrad(result, grad);
    }
    if (!anyScalar && !ret->getOperands().empty())
      func.emitRemark()
          << "@" << funcName
          << " returns no scalar loss that reaches a trainable parameter: "
             "ds-run seeds every result with zeros, so only a caller that "
             "gives the results' gradients (dsopt, from PyTorch's autograd) "
             "trains it";
    if (failed(diff.backprop(body)))
      return signalPassFailure();
  }

  /// `grad-scale`, else 1 / the gradient_accumulation_steps the engines'
  /// configs agree on (DeepSpeed divides every gradient by it), else 1.
  FailureOr<double> seedScale(ModuleOp module) {
    if (gradScale != 0.0)
      return static_cast<double>(gradScale);
    EngineOp first;
    for (EngineOp engine : module.getOps<EngineOp>()) {
      EngineConfigAttr config = engine.getDeepspeedAttr();
      if (!config)
        continue;
      if (!first) {
        first = engine;
        continue;
      }
      int64_t steps = config.getGradientAccumulationSteps();
      int64_t firstSteps =
          first.getDeepspeedAttr().getGradientAccumulationSteps();
      if (steps != firstSteps)
        return engine.emitError()
               << "engine @" << engine.getSymName()
               << " has gradient_accumulation_steps " << steps
               << " but engine @" << first.getSymName() << " has " << firstSteps
               << "; the one backward's seed divides by one";
    }
    if (!first)
      return 1.0;
    return 1.0 / static_cast<double>(
                     first.getDeepspeedAttr().getGradientAccumulationSteps());
  }
};

} // namespace
