//===- Passes.h - ds dialect passes -----------------------------*- C++ -*-===//

#ifndef DS_DIALECT_DS_TRANSFORMS_PASSES_H
#define DS_DIALECT_DS_TRANSFORMS_PASSES_H

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "mlir/Pass/Pass.h"

namespace mlir::ds {

#define GEN_PASS_DECL
#include "ds/Dialect/DS/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ds/Dialect/DS/Transforms/Passes.h.inc"

} // namespace mlir::ds

#endif // DS_DIALECT_DS_TRANSFORMS_PASSES_H
