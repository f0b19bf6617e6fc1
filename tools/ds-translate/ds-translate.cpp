//===- ds-translate.cpp - ds IR -> plan text ------------------------------===//
//
// mlir-translate for the ds dialect: `--ds-mlir-to-plan` lowers a module
// (state, `@forward_eval`, and `@forward` once autodiff has run) to the plan
// and prints it, so plan emission is testable on small hand-written graphs
// with FileCheck.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Plan/PlanFormat.h"
#include "ds/Target/Plan/EmitPlan.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"

using namespace mlir;

static LogicalResult emitPlanText(ModuleOp module, llvm::raw_ostream &os) {
  mlir::ds::EmitPlanOptions options;
  options.producer = "ds-translate";
  auto plan = mlir::ds::emitPlan(module, options);
  if (failed(plan))
    return failure();
  try {
    ::ds::plan::validatePlan(*plan, "<ds-translate>");
    os << ::ds::plan::printPlan(*plan);
  } catch (const std::exception &e) {
    return module.emitError() << "the emitted plan is invalid: " << e.what();
  }
  return success();
}

int main(int argc, char **argv) {
  TranslateFromMLIRRegistration toPlan(
      "ds-mlir-to-plan", "lower ds IR to the plan the runtime executes",
      emitPlanText, [](DialectRegistry &registry) {
        registry.insert<mlir::ds::DSDialect, func::FuncDialect>();
      });
  return failed(mlirTranslateMain(argc, argv, "ds IR -> plan translation"));
}
