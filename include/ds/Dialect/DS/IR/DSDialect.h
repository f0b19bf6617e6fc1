//===- DSDialect.h - the ds dialect -----------------------------*- C++ -*-===//

#ifndef DS_DIALECT_DS_IR_DSDIALECT_H
#define DS_DIALECT_DS_IR_DSDIALECT_H

#include "mlir/IR/Dialect.h"

#include "ds/Dialect/DS/IR/DSOpsDialect.h.inc"

#include <cstdint>
#include <optional>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace mlir::ds {

/// The number of data-parallel ranks `module` is compiled for: its
/// `ds.world_size` (the dialect verifier checks it is an i64 >= 1), if set.
std::optional<int64_t> getWorldSize(ModuleOp module);

/// Sets `module`'s `ds.world_size` to `worldSize` (>= 1).
void setWorldSize(ModuleOp module, int64_t worldSize);

} // namespace mlir::ds

#endif // DS_DIALECT_DS_IR_DSDIALECT_H
