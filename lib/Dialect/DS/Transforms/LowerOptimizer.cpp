//===- LowerOptimizer.cpp - engine configs -> ds.optimizer_step -----------===//
//
// Makes the update at the gradient accumulation boundary explicit: a new
// `func.func @step()` holds one `ds.optimizer_step` per trainable engine, in
// engine order, whose attributes are the engine's optimizer, gradient
// clipping and LR schedule with every default resolved. After this pass
// nothing downstream (partitioning, the plan, the runtime) needs to read
// those sections of the config.
//
// Assumes engines are declared (-ds-assign-engines) and carry their config;
// frozen engines are skipped. The resolution mirrors what the runtime did
// from the config (lib/Config: Optimizer.cpp, Scheduler.cpp, EngineConfig.cpp).
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Transforms/EngineConfig.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSLOWEROPTIMIZER
#include "ds/Dialect/DS/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
namespace config = ::ds::config;

namespace {

/// "adamw" when weight decay is decoupled (AdamW, and Adam in adam_w_mode),
/// "adam" for L2 decay (torch.optim.Adam), "sgd".
StringRef optimizerTypeName(const config::OptimizerConfig &optimizer) {
  if (optimizer.type == config::OptimizerType::SGD)
    return "sgd";
  return optimizer.decoupledWeightDecay() ? "adamw" : "adam";
}

DictionaryAttr schedulerAttr(Builder &b, const config::SchedulerConfig &s,
                             double lr) {
  NamedAttrList entries;
  entries.append("type", b.getStringAttr(config::schedulerTypeName(s.type)));
  entries.append("warmup_min_lr", b.getF64FloatAttr(s.warmupMinLr));
  // WarmupLR without warmup_max_lr warms up to the optimizer's lr; the
  // cosine schedule scales the lr and has no maximum.
  if (s.type != config::SchedulerType::WarmupCosineLR)
    entries.append("warmup_max_lr",
                   b.getF64FloatAttr(s.warmupMaxLr.value_or(lr)));
  entries.append("warmup_num_steps", b.getI64IntegerAttr(s.warmupNumSteps));
  entries.append("warmup_type",
                 b.getStringAttr(s.warmupType == config::WarmupType::Log
                                     ? "log"
                                     : "linear"));
  if (s.totalNumSteps)
    entries.append("total_num_steps", b.getI64IntegerAttr(*s.totalNumSteps));
  entries.append("warmup_min_ratio", b.getF64FloatAttr(s.warmupMinRatio));
  entries.append("cos_min_ratio", b.getF64FloatAttr(s.cosMinRatio));
  return entries.getDictionary(b.getContext());
}

struct LowerOptimizerPass
    : public mlir::ds::impl::DSLowerOptimizerBase<LowerOptimizerPass> {
  using DSLowerOptimizerBase::DSLowerOptimizerBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<int64_t> world = resolveWorldSize(module, worldSize);
    if (failed(world))
      return signalPassFailure();

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
      failedAny |= failed(lowerEngine(builder, engine, *world));
    func::ReturnOp::create(builder, loc);
    if (failedAny) {
      step.erase();
      return signalPassFailure();
    }
  }

  LogicalResult lowerEngine(OpBuilder &b, EngineOp engine, int64_t world) {
    FailureOr<config::EngineConfig> parsed = parseEngineConfig(engine, world);
    if (failed(parsed))
      return failure();
    if (!parsed->optimizer)
      return engine.emitError()
             << "config of engine @" << engine.getSymName()
             << ": optimizer: missing; an engine without an \"optimizer\" "
                "section is frozen (mark it `frozen`, or give an optimizer)";
    const config::OptimizerConfig &opt = *parsed->optimizer;
    StringRef type = optimizerTypeName(opt);
    if (type != "sgd" && !(opt.eps > 0.0))
      return engine.emitError()
             << "config of engine @" << engine.getSymName()
             << ": optimizer.params.eps: must be > 0 for Adam (it divides by "
                "sqrt(v) + eps), got "
             << opt.eps;

    OperationState state(engine.getLoc(), OptimizerStepOp::getOperationName());
    state.addAttribute("engine",
                       FlatSymbolRefAttr::get(engine.getSymNameAttr()));
    state.addAttribute("type", b.getStringAttr(type));
    state.addAttribute("lr", b.getF64FloatAttr(opt.lr));
    state.addAttribute("betas",
                       b.getDenseF64ArrayAttr({opt.betas[0], opt.betas[1]}));
    state.addAttribute("eps", b.getF64FloatAttr(opt.eps));
    state.addAttribute("weight_decay", b.getF64FloatAttr(opt.weightDecay));
    state.addAttribute("momentum", b.getF64FloatAttr(opt.momentum));
    state.addAttribute("dampening", b.getF64FloatAttr(opt.dampening));
    state.addAttribute("nesterov", b.getBoolAttr(opt.nesterov));
    state.addAttribute("gradient_clipping",
                       b.getF64FloatAttr(parsed->gradientClipping));
    if (parsed->scheduler)
      state.addAttribute("scheduler",
                         schedulerAttr(b, *parsed->scheduler, opt.lr));
    b.create(state);
    return success();
  }
};

} // namespace
