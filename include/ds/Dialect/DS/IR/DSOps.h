//===- DSOps.h - ds dialect operations --------------------------*- C++ -*-===//

#ifndef DS_DIALECT_DS_IR_DSOPS_H
#define DS_DIALECT_DS_IR_DSOPS_H

#include "ds/Dialect/DS/IR/DSAttrs.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSTypes.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "ds/Dialect/DS/IR/DSOps.h.inc"

#include "llvm/ADT/StringMap.h"

namespace mlir::ds {

/// Each engine's ds.bucket ops (keyed by engine name), sorted by offset: a
/// bucket's position is its index in the plan's partition.buckets.
llvm::StringMap<SmallVector<BucketOp>> bucketsByEngine(ModuleOp module);

/// ds.all_reduce, ds.reduce_scatter or ds.all_gather.
inline bool isCollective(Operation *op) {
  return isa<AllReduceOp, ReduceScatterOp, AllGatherOp>(op);
}

} // namespace mlir::ds

#endif // DS_DIALECT_DS_IR_DSOPS_H
