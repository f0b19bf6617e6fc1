//===- Compile.cpp - TorchScript model + DeepSpeed config -> plan ---------===//
//
// Import, ds-compile-pipeline (CompilePipeline.h) and plan emission, with
// failures reported as text (DiagnosticCollector) and, on request, the IR
// after every pass for Plan.mlir(stage) in Python.
//
//===----------------------------------------------------------------------===//

#include "ds/Compiler/Compile.h"

#include "DiagnosticCollector.h"

#include "ds/Config/Config.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Transforms/CompilePipeline.h"
#include "ds/Import/Import.h"
#include "ds/Target/Plan/EmitPlan.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace ds::compiler {

const std::string *CompileResult::findIR(const std::string &stage) const {
  for (const auto &[name, text] : irAfterPass)
    if (name == stage)
      return &text;
  return nullptr;
}

namespace {

std::string printIR(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(os);
  return text;
}

/// Records the module after each pass, named by the pass's argument
/// ("ds-autodiff", "cse"): the names users give Plan.mlir(stage). The
/// training gate's passes are recorded one by one, the gate itself not.
class IRSnapshots : public PassInstrumentation {
public:
  explicit IRSnapshots(std::vector<std::pair<std::string, std::string>> &out)
      : out_(out) {}
  void runAfterPass(Pass *pass, Operation *op) override {
    if (pass->getArgument() != "ds-if-training")
      out_.emplace_back(pass->getArgument().str(), printIR(op));
  }

private:
  std::vector<std::pair<std::string, std::string>> &out_;
};

std::string absolutePath(const std::string &path) {
  llvm::SmallString<256> abs(path);
  if (llvm::sys::path::is_absolute(abs))
    return path;
  llvm::SmallString<256> cwd;
  llvm::sys::fs::current_path(cwd);
  llvm::sys::path::make_absolute(cwd, abs);
  return abs.str().str();
}

/// The pipeline; a failure sets `error` and returns nullopt. MLIR
/// diagnostics reach `error` through the collector of the caller's context.
std::optional<CompileResult> run(MLIRContext &context,
                                 detail::DiagnosticCollector &diagnostics,
                                 const CompileOptions &options,
                                 std::string &error) {
  CompileResult result;
  auto fail = [&](const std::string &fallback) -> std::optional<CompileResult> {
    error = diagnostics.errorText(fallback);
    return std::nullopt;
  };

  mlir::ds::ImportOptions importOptions;
  importOptions.modelPath = options.modelPath;
  importOptions.exampleInputsPath = options.exampleInputsPath;
  importOptions.worldSize = options.worldSize;
  importOptions.unbatched = options.unbatched;
  importOptions.importTrain = true;
  importOptions.importEval = true;
  OwningOpRef<ModuleOp> module =
      mlir::ds::importTorchScript(&context, importOptions);
  if (!module)
    return fail(options.modelPath + ": import failed");
  if (options.keepIR)
    result.irAfterPass.emplace_back("import", printIR(*module));

  mlir::ds::CompilePipelineOptions pipeline;
  pipeline.config = options.configPath;
  pipeline.configJson = options.configJson;
  pipeline.configName = options.configSourceName;
  pipeline.configBaseDir = options.configBaseDir;
  if (options.configPath.empty() && options.configJson.empty()) {
    if (options.engineConfigFiles.empty()) {
      error = "no DeepSpeed config given (a JSON file path or the JSON text)";
      return std::nullopt;
    }
    try {
      pipeline.configJson =
          ::ds::config::engineFilesDocument(options.engineConfigFiles).dump();
    } catch (const ::ds::config::ConfigError &configError) {
      error = configError.what();
      return std::nullopt;
    }
    pipeline.configName = "--config";
  }
  pipeline.worldSize = options.worldSize;
  pipeline.mixedPrecision = options.mixedPrecision;
  pipeline.configOverrides = options.configOverrides;
  PassManager pm(&context);
  if (options.keepIR)
    pm.addInstrumentation(std::make_unique<IRSnapshots>(result.irAfterPass));
  mlir::ds::buildCompilePipeline(pm, pipeline);
  if (failed(pm.run(*module)))
    return fail("the pass pipeline failed");

  if (options.keepIR || options.keepFinalIR)
    result.irAfterPass.emplace_back("final", printIR(*module));

  mlir::ds::EmitPlanOptions emitOptions;
  emitOptions.producer = options.producer;
  auto plan = mlir::ds::emitPlan(*module, emitOptions);
  if (failed(plan))
    return fail("the plan cannot be emitted");
  // The weights path is stored absolute so the plan can move.
  if (plan->weights)
    plan->weights->path = absolutePath(plan->weights->path);
  result.plan = std::move(*plan);
  result.warnings = diagnostics.warnings();
  result.remarks = diagnostics.remarks();
  return result;
}

} // namespace

std::optional<CompileResult> compile(const CompileOptions &options,
                                     std::string &error) noexcept {
  try {
    MLIRContext context;
    // Errors name the config key, the module path or the TorchScript line;
    // a dump of the op they are about (the whole module, for errors on it)
    // would bury them.
    context.printOpOnDiagnostic(false);
    detail::DiagnosticCollector diagnostics(&context);
    return run(context, diagnostics, options, error);
  } catch (const std::exception &e) {
    // LibTorch (c10::Error) and the JSON library report with exceptions;
    // none may escape into a host that cannot catch them.
    error = std::string("internal error while compiling: ") + e.what();
  } catch (...) {
    error = "internal error while compiling: unknown exception";
  }
  return std::nullopt;
}

} // namespace ds::compiler
