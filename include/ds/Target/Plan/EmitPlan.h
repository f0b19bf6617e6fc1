//===- EmitPlan.h - ds IR -> plan -------------------------------*- C++ -*-===//
//
// Lowers a module of the ds dialect (state, engines, `@forward_eval`, and once
// -ds-autodiff, -ds-lower-optimizer and -ds-zero-partition have run, the
// training step `@forward` and the accumulation boundary `@step` with each
// trainable engine's optimizer and partition) to the plan the runtime
// executes. The compiler side of the plan format; the runtime only reads
// plans (ds/Plan/PlanFormat.h).
//
//===----------------------------------------------------------------------===//

#ifndef DS_TARGET_PLAN_EMITPLAN_H
#define DS_TARGET_PLAN_EMITPLAN_H

#include "ds/Plan/Plan.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::ds {

struct EmitPlanOptions {
  std::string producer = "ds-compile";
  /// The plan's `torch_version`: the compiling LibTorch's version (empty:
  /// unknown). The plan's `device` is the module's ds.target_device.
  std::string torchVersion;
};

/// Builds the plan of `module`. Emits a diagnostic on the offending op and
/// returns failure for IR the plan cannot carry: a training step without
/// `@step`, a trainable engine without its ds.optimizer_step or partition,
/// a collective or update in a program it does not belong to, engines
/// whose typed configs disagree on gradient_accumulation_steps.
FailureOr<::ds::plan::Plan> emitPlan(ModuleOp module,
                                     const EmitPlanOptions &options);

} // namespace mlir::ds

#endif // DS_TARGET_PLAN_EMITPLAN_H
