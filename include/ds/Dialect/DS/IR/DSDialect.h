//===- DSDialect.h - the ds dialect -----------------------------*- C++ -*-===//

#ifndef DS_DIALECT_DS_IR_DSDIALECT_H
#define DS_DIALECT_DS_IR_DSDIALECT_H

#include "mlir/IR/Dialect.h"

#include "ds/Dialect/DS/IR/DSOpsDialect.h.inc"

#endif // DS_DIALECT_DS_IR_DSDIALECT_H
