//===- MlirTarget.cpp - Fuzzes .mlir parsing, verification and the passes ===//
//
// The input is `.mlir` text as ds-opt reads it. A module that parses and
// verifies is run through ds-compile-pipeline, as `ds-opt
// --pass-pipeline='builtin.module(ds-compile-pipeline{...})'` runs it, with
// the DeepSpeed config of the text's first line when it is
// `// CONFIG: {json}` (test/fuzz/make_corpus.py writes seeds with ZeRO
// stages 0-3 and bf16), else a stage-0 SGD config. Errors are diagnostics;
// a crash, a hang, or a pipeline that succeeds with IR that does not verify
// is a finding.
//
//===----------------------------------------------------------------------===//

#include "../FuzzInput.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/Transforms/CompilePipeline.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

constexpr std::string_view kConfigPrefix = "// CONFIG: ";
constexpr const char *kDefaultConfig =
    R"({"train_micro_batch_size_per_gpu": "auto", "optimizer": )"
    R"({"type": "SGD", "params": {"lr": 0.1}}})";

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // MLIR's lexer relies on a NUL after the buffer, as ds-opt's file buffers
  // have (llvm::MemoryBuffer); a std::string keeps one after its bytes.
  const std::string bytes(reinterpret_cast<const char *>(data), size);
  std::string_view text = bytes;
  std::string config = kDefaultConfig;
  if (text.substr(0, kConfigPrefix.size()) == kConfigPrefix) {
    size_t end = text.find('\n');
    config = std::string(text.substr(kConfigPrefix.size(),
                                     end == std::string_view::npos
                                         ? std::string_view::npos
                                         : end - kConfigPrefix.size()));
  }

  mlir::DialectRegistry registry;
  registry.insert<mlir::ds::DSDialect, mlir::func::FuncDialect>();
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  mlir::ScopedDiagnosticHandler quiet(
      &context, [](mlir::Diagnostic &diagnostic) {
        if (ds::fuzz::verbose())
          llvm::errs() << "fuzz: diagnostic: " << diagnostic << "\n";
        return mlir::success();
      });
  mlir::ParserConfig parserConfig(&context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, parserConfig, "fuzz.mlir");
  if (!module || mlir::failed(mlir::verify(*module)))
    return 0;

  mlir::PassManager pm(&context);
  mlir::ds::CompilePipelineOptions options;
  options.configJson = config;
  options.configName = "fuzz-config";
  options.configBaseDir = ds::fuzz::freshScratchFolder();
  mlir::ds::buildCompilePipeline(pm, options);
  // Verified once at the end, so that a pass leaving bad IR is told apart
  // from a diagnostic about a bad input.
  pm.enableVerifier(false);
  if (mlir::succeeded(pm.run(*module)) && mlir::failed(mlir::verify(*module))) {
    std::fprintf(stderr, "fuzz: ds-compile-pipeline succeeded with IR that "
                         "does not verify\n");
    std::abort();
  }
  return 0;
}
