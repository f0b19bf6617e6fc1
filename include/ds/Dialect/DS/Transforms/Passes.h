//===- Passes.h - ds dialect passes -----------------------------*- C++ -*-===//

#ifndef DS_DIALECT_DS_TRANSFORMS_PASSES_H
#define DS_DIALECT_DS_TRANSFORMS_PASSES_H

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::ds {

#define GEN_PASS_DECL
#include "ds/Dialect/DS/Transforms/Passes.h.inc"

/// -ds-if-training running `pipeline`, whose passes need not be registered.
std::unique_ptr<Pass> createDSIfTraining(OpPassManager pipeline);

#define GEN_PASS_REGISTRATION
#include "ds/Dialect/DS/Transforms/Passes.h.inc"

} // namespace mlir::ds

#endif // DS_DIALECT_DS_TRANSFORMS_PASSES_H
