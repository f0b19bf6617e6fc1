//===- DiagnosticCollector.h - MLIR diagnostics into text -------*- C++ -*-===//
//
// Collects the diagnostics of an MLIRContext as text instead of printing
// them, so that the compile library can hand them to its caller (a command
// line tool prints them; Python raises them as the exception's message).
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_COMPILER_DIAGNOSTICCOLLECTOR_H
#define DS_LIB_COMPILER_DIAGNOSTICCOLLECTOR_H

#include "mlir/IR/Diagnostics.h"

#include <string>
#include <vector>

namespace ds::compiler::detail {

/// While alive, takes every diagnostic of `context`. Errors (with their
/// notes) go to errors(), warnings to warnings(), remarks (the passes'
/// decisions: precision, buckets, leaf modules) to remarks().
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(mlir::MLIRContext *context);

  /// The error lines, joined with newlines; `fallback` when there is none
  /// (a failure that emitted nothing should still say what failed).
  std::string errorText(const std::string &fallback) const;
  const std::vector<std::string> &warnings() const { return warnings_; }
  const std::vector<std::string> &remarks() const { return remarks_; }

private:
  void record(mlir::Diagnostic &diagnostic);

  std::vector<std::string> errors_;
  std::vector<std::string> warnings_;
  std::vector<std::string> remarks_;
  mlir::ScopedDiagnosticHandler handler_;
};

/// "<file>:<line>:<col>" of the first file location inside `loc` ("<file>"
/// when the line is 0, as the importer uses for whole files); "" for none.
std::string formatLocation(mlir::Location loc);

} // namespace ds::compiler::detail

#endif // DS_LIB_COMPILER_DIAGNOSTICCOLLECTOR_H
