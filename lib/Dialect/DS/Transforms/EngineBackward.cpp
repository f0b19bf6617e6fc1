//===- EngineBackward.cpp - each engine's share of the joint backward -----===//

#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSENGINEBACKWARD
#include "ds/Dialect/DS/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// The top-level ops that hold the first and the last ds.grad of an engine.
struct GradSpan {
  Operation *first = nullptr;
  Operation *last = nullptr;
};

struct EngineBackwardPass
    : public mlir::ds::impl::DSEngineBackwardBase<EngineBackwardPass> {
  using DSEngineBackwardBase::DSEngineBackwardBase;

  void runOnOperation() override;

private:
  void mark(Block &body, EngineOp engine, GradSpan span,
            ArrayRef<ReduceScatterOp> reductions);
};

} // namespace

/// Places E's markers around `span` and ends E's reductions before the
/// epilogue.
void EngineBackwardPass::mark(Block &body, EngineOp engine, GradSpan span,
                              ArrayRef<ReduceScatterOp> reductions) {
  auto ref = FlatSymbolRefAttr::get(engine.getSymNameAttr());
  OpBuilder builder(span.first);
  BackwardPrologueOp::create(builder, span.first->getLoc(), ref);

  // Reductions started after the last gradient move up behind it, in
  // order: no gradient of E follows, so they may start there.
  Operation *end = span.last;
  for (ReduceScatterOp reduction : reductions) {
    if (reduction->getBlock() != &body || !end->isBeforeInBlock(reduction))
      continue;
    reduction->moveAfter(end);
    end = reduction;
  }
  builder.setInsertionPointAfter(end);
  auto epilogue = BackwardEpilogueOp::create(builder, end->getLoc(), ref);
  for (ReduceScatterOp reduction : reductions) {
    Value token = reduction.getToken();
    if (!token.hasOneUse())
      continue; // The verifiers report it.
    Operation *wait = *token.getUsers().begin();
    if (wait->getBlock() == &body && epilogue->isBeforeInBlock(wait))
      wait->moveBefore(epilogue);
  }
  ++numMarked;
}

void EngineBackwardPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto func = module.lookupSymbol<func::FuncOp>(funcName);
  if (!func || func.isExternal())
    return;
  Block &body = func.getBody().front();
  Operation *backwardBegin = nullptr;
  for (Operation &op : body) {
    if (isa<BackwardBeginOp>(op) && !backwardBegin)
      backwardBegin = &op;
    if (isa<BackwardPrologueOp, BackwardEpilogueOp>(op)) {
      op.emitError() << "@" << funcName
                     << " already has backward markers; -ds-engine-backward "
                        "places them once";
      return signalPassFailure();
    }
  }
  if (!backwardBegin)
    return;

  // Trainable engines in declaration order; each parameter's engine.
  llvm::MapVector<StringRef, EngineOp> trainable;
  for (EngineOp engine : module.getOps<EngineOp>())
    if (!engine.getFrozen())
      trainable[engine.getSymName()] = engine;
  llvm::StringMap<StringRef> engineOfParam;
  for (ParamOp param : module.getOps<ParamOp>())
    if (param.getEngine() && trainable.count(*param.getEngine()))
      engineOfParam[param.getSymName()] = *param.getEngine();

  llvm::StringMap<GradSpan> spans;
  llvm::StringMap<SmallVector<ReduceScatterOp>> reductions;
  for (Operation *op = backwardBegin->getNextNode(); op;
       op = op->getNextNode()) {
    op->walk([&](GradOp grad) {
      auto it = engineOfParam.find(grad.getParam());
      if (it == engineOfParam.end())
        return;
      GradSpan &span = spans[it->second];
      if (!span.first)
        span.first = op;
      span.last = op;
    });
    if (auto reduction = dyn_cast<ReduceScatterOp>(op))
      if (auto bucket = module.lookupSymbol<BucketOp>(
              reduction.getBucketAttr().getAttr()))
        reductions[bucket.getEngine()].push_back(reduction);
  }
  for (auto &[name, engine] : trainable) {
    auto it = spans.find(name);
    if (it != spans.end())
      mark(body, engine, it->second, reductions.lookup(name));
  }
}
