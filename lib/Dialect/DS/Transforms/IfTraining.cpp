//===- IfTraining.cpp - a pipeline that runs when an engine trains --------===//

#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSIFTRAINING
#include "ds/Dialect/DS/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

struct IfTrainingPass
    : public mlir::ds::impl::DSIfTrainingBase<IfTrainingPass> {
  using DSIfTrainingBase::DSIfTrainingBase;

  /// From C++ (CompilePipeline.cpp): the passes need not be registered.
  explicit IfTrainingPass(OpPassManager passes) : pipeline(std::move(passes)) {
    llvm::raw_string_ostream text(pipelineText);
    pipeline.printAsTextualPipeline(text);
  }

  void getDependentDialects(DialectRegistry &registry) const override {
    if (pipeline.size()) {
      pipeline.getDependentDialects(registry);
      return;
    }
    // The textual form names its anchor: builtin.module(...).
    std::string errors;
    llvm::raw_string_ostream os(errors);
    if (FailureOr<OpPassManager> passes = parsePassPipeline(pipelineText, os);
        succeeded(passes))
      passes->getDependentDialects(registry);
  }

  LogicalResult initialize(MLIRContext *) override {
    if (pipeline.size() || pipelineText.empty())
      return success();
    FailureOr<OpPassManager> passes =
        parsePassPipeline(pipelineText, llvm::errs());
    if (failed(passes))
      return failure();
    pipeline = std::move(*passes);
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    bool trains = llvm::any_of(module.getOps<EngineOp>(), [](EngineOp engine) {
      return !engine.getFrozen();
    });
    if (trains && failed(runPipeline(pipeline, module)))
      signalPassFailure();
  }

private:
  OpPassManager pipeline{ModuleOp::getOperationName()};
};

} // namespace

std::unique_ptr<Pass> mlir::ds::createDSIfTraining(OpPassManager pipeline) {
  return std::make_unique<IfTrainingPass>(std::move(pipeline));
}
