//===- DSDialect.cpp - the ds dialect -------------------------------------===//

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSAttrs.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/DSTypes.h"

using namespace mlir;
using namespace mlir::ds;

#include "ds/Dialect/DS/IR/DSOpsDialect.cpp.inc"

void DSDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ds/Dialect/DS/IR/DSOps.cpp.inc"
      >();
  registerTypes();
  registerAttributes();
}

Operation *DSDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  if (!ConstantOp::isValidConstant(value, type))
    return nullptr;
  return ConstantOp::create(builder, loc, type, value);
}
