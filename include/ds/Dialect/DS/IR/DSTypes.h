//===- DSTypes.h - ds dialect types -----------------------------*- C++ -*-===//

#ifndef DS_DIALECT_DS_IR_DSTYPES_H
#define DS_DIALECT_DS_IR_DSTYPES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"

#define GET_TYPEDEF_CLASSES
#include "ds/Dialect/DS/IR/DSOpsTypes.h.inc"

#endif // DS_DIALECT_DS_IR_DSTYPES_H
