//===- LowerOptimizer.cpp - engine configs -> ds.optimizer_step -----------===//

#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSLOWEROPTIMIZER
#include "ds/Dialect/DS/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// The config's schedule with its maximum resolved: WarmupLR without
/// warmup_max_lr warms up to the optimizer's lr; the cosine schedule scales
/// the lr and has no maximum.
SchedulerAttr resolvedSchedule(SchedulerAttr s, double lr) {
  std::optional<F64> maxLr;
  if (s.getKind() != SchedulerKind::WarmupCosineLR)
    maxLr = s.getWarmupMaxLr().value_or(F64(lr));
  return SchedulerAttr::get(s.getContext(), s.getKind(), s.getWarmupMinLr(),
                            maxLr, s.getWarmupNumSteps(), s.getWarmupType(),
                            s.getTotalNumSteps(), s.getWarmupMinRatio(),
                            s.getCosMinRatio());
}

struct LowerOptimizerPass
    : public mlir::ds::impl::DSLowerOptimizerBase<LowerOptimizerPass> {
  using DSLowerOptimizerBase::DSLowerOptimizerBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<EngineOp> trainable;
    for (EngineOp engine : module.getOps<EngineOp>())
      if (!engine.getFrozen())
        trainable.push_back(engine);
    if (trainable.empty())
      return; // Nothing to update: no boundary work.
    if (Operation *existing = SymbolTable::lookupSymbolIn(module, "step")) {
      existing->emitError() << "the module already has a @step; "
                               "-ds-lower-optimizer creates it";
      return signalPassFailure();
    }

    OpBuilder builder(module.getBodyRegion());
    builder.setInsertionPointToEnd(module.getBody());
    Location loc = module.getLoc();
    auto step = func::FuncOp::create(builder, loc, "step",
                                     builder.getFunctionType({}, {}));
    Block *body = step.addEntryBlock();
    builder.setInsertionPointToStart(body);
    bool failedAny = false;
    for (EngineOp engine : trainable)
      failedAny |= failed(lowerEngine(builder, engine));
    func::ReturnOp::create(builder, loc);
    if (failedAny) {
      step.erase();
      return signalPassFailure();
    }
  }

  LogicalResult lowerEngine(OpBuilder &b, EngineOp engine) {
    FailureOr<EngineConfigAttr> config =
        engine.requireConfig("-ds-lower-optimizer");
    if (failed(config))
      return failure();
    OptimizerAttr opt = config->getOptimizer();
    if (!opt)
      return engine.emitError()
             << "config of engine @" << engine.getSymName()
             << ": optimizer: missing; an engine without an \"optimizer\" "
                "section is frozen (mark it `frozen`, or give an optimizer)";
    if (opt.getKind() != OptimizerKind::SGD && !(opt.getEps() > 0.0))
      return engine.emitError()
             << "config of engine @" << engine.getSymName()
             << ": optimizer.params.eps: must be > 0 for Adam (it divides by "
                "sqrt(v) + eps), got "
             << double(opt.getEps());

    OperationState state(engine.getLoc(), OptimizerStepOp::getOperationName());
    state.addAttribute("engine",
                       FlatSymbolRefAttr::get(engine.getSymNameAttr()));
    state.addAttribute("type",
                       OptimizerKindAttr::get(b.getContext(), opt.getKind()));
    state.addAttribute("lr", b.getF64FloatAttr(opt.getLr()));
    state.addAttribute(
        "betas", b.getDenseF64ArrayAttr({opt.getBeta1(), opt.getBeta2()}));
    state.addAttribute("eps", b.getF64FloatAttr(opt.getEps()));
    state.addAttribute("weight_decay", b.getF64FloatAttr(opt.getWeightDecay()));
    state.addAttribute("momentum", b.getF64FloatAttr(opt.getMomentum()));
    state.addAttribute("dampening", b.getF64FloatAttr(opt.getDampening()));
    state.addAttribute("nesterov", b.getBoolAttr(opt.getNesterov()));
    state.addAttribute("gradient_clipping",
                       b.getF64FloatAttr(config->getGradientClipping()));
    if (SchedulerAttr scheduler = config->getScheduler())
      state.addAttribute("scheduler", resolvedSchedule(scheduler, opt.getLr()));
    b.create(state);
    return success();
  }
};

} // namespace
