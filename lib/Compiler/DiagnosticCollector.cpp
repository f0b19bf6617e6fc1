//===- DiagnosticCollector.cpp - MLIR diagnostics into text ---------------===//

#include "DiagnosticCollector.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace ds::compiler::detail {

std::string formatLocation(Location loc) {
  auto file = loc->findInstanceOf<FileLineColLoc>();
  if (!file)
    return "";
  std::string text = file.getFilename().str();
  if (file.getLine() != 0)
    text += ":" + std::to_string(file.getLine()) + ":" +
            std::to_string(file.getColumn());
  return text;
}

namespace {

/// One line: "<loc>: <prefix><message>", without the location when unknown.
std::string formatLine(Location loc, const std::string &prefix,
                       const Diagnostic &diagnostic) {
  std::string where = formatLocation(loc);
  std::string message = diagnostic.str();
  // Messages about a whole file often name it already.
  if (where.empty() || message.rfind(where + ":", 0) == 0)
    return prefix + message;
  return where + ": " + prefix + message;
}

} // namespace

DiagnosticCollector::DiagnosticCollector(MLIRContext *context)
    : handler_(context, [this](Diagnostic &diagnostic) {
        record(diagnostic);
        return success();
      }) {}

void DiagnosticCollector::record(Diagnostic &diagnostic) {
  switch (diagnostic.getSeverity()) {
  case DiagnosticSeverity::Error: {
    std::string text = formatLine(diagnostic.getLocation(), "", diagnostic);
    for (const Diagnostic &note : diagnostic.getNotes())
      text += "\n" + formatLine(note.getLocation(), "note: ", note);
    errors_.push_back(std::move(text));
    break;
  }
  case DiagnosticSeverity::Warning:
    warnings_.push_back(formatLine(diagnostic.getLocation(), "", diagnostic));
    break;
  case DiagnosticSeverity::Remark:
    remarks_.push_back(formatLine(diagnostic.getLocation(), "", diagnostic));
    break;
  case DiagnosticSeverity::Note:
    break;
  }
}

std::string DiagnosticCollector::errorText(const std::string &fallback) const {
  if (errors_.empty())
    return fallback;
  std::string text;
  for (const std::string &error : errors_)
    text += (text.empty() ? "" : "\n") + error;
  return text;
}

} // namespace ds::compiler::detail
