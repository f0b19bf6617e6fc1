//===- DSTypes.cpp - ds dialect types -------------------------------------===//

#include "ds/Dialect/DS/IR/DSTypes.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::ds;

#define GET_TYPEDEF_CLASSES
#include "ds/Dialect/DS/IR/DSOpsTypes.cpp.inc"

void DSDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "ds/Dialect/DS/IR/DSOpsTypes.cpp.inc"
      >();
}
