//===- DSOps.h - ds dialect operations --------------------------*- C++ -*-===//

#ifndef DS_DIALECT_DS_IR_DSOPS_H
#define DS_DIALECT_DS_IR_DSOPS_H

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

#endif // DS_DIALECT_DS_IR_DSOPS_H
