//===- DSAttrs.h - ds dialect attributes ------------------------*- C++ -*-===//

#ifndef DS_DIALECT_DS_IR_DSATTRS_H
#define DS_DIALECT_DS_IR_DSATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/bit.h"

#include <optional>

#include "ds/Dialect/DS/IR/DSEnums.h.inc"

namespace mlir::ds {

/// A double parameter of an attribute: hashable, equal when bitwise equal.
struct F64 {
  F64(double value = 0.0) : value(value) {}
  operator double() const { return value; }
  bool operator==(const F64 &other) const {
    return llvm::bit_cast<uint64_t>(value) ==
           llvm::bit_cast<uint64_t>(other.value);
  }
  double value;
};

inline llvm::hash_code hash_value(F64 value) {
  return llvm::hash_value(llvm::bit_cast<uint64_t>(value.value));
}

/// Parameter parsers and printers of the attributes (DSAttrs.td).
FailureOr<F64> parseF64(AsmParser &parser);
FailureOr<std::optional<F64>> parseOptionalF64(AsmParser &parser);
FailureOr<bool> parseBool(AsmParser &parser);
/// The shortest text that reads back as `value`, always with a dot or an
/// exponent so that it parses as a float ("0.001", "1.0", "1.0e-08").
void printF64(AsmPrinter &printer, double value);

} // namespace mlir::ds

#define GET_ATTRDEF_CLASSES
#include "ds/Dialect/DS/IR/DSAttrs.h.inc"

#endif // DS_DIALECT_DS_IR_DSATTRS_H
