//===- Compile.cpp - TorchScript model + DeepSpeed config -> plan ---------===//
//
// The pipeline ds-compile used to run in its main(), unchanged in what it
// does; it now reports failures as text (DiagnosticCollector) and can keep
// the IR after every stage for Plan.mlir(stage) in Python.
//
//===----------------------------------------------------------------------===//

#include "ds/Compiler/Compile.h"

#include "DiagnosticCollector.h"

#include "ds/Config/Config.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "ds/Import/Import.h"
#include "ds/Plan/EmitPlan.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <filesystem>

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
/// ("ds-autodiff", "cse"): the names users give Plan.mlir(stage).
class IRSnapshots : public PassInstrumentation {
public:
  explicit IRSnapshots(std::vector<std::pair<std::string, std::string>> &out)
      : out_(out) {}
  void runAfterPass(Pass *pass, Operation *op) override {
    out_.emplace_back(pass->getArgument().str(), printIR(op));
  }

private:
  std::vector<std::pair<std::string, std::string>> &out_;
};

/// The global micro-batch of the data (first batched argument's rows times
/// the world size), for the config's batch-size checks; unset when every
/// argument is unbatched.
std::optional<int64_t> globalMicroBatch(ModuleOp module, unsigned worldSize) {
  auto eval = module.lookupSymbol<func::FuncOp>("forward_eval");
  if (!eval)
    return std::nullopt;
  for (unsigned i = 0; i < eval.getNumArguments(); ++i)
    if (!eval.getArgAttr(i, "ds.unbatched")) {
      auto type = dyn_cast<RankedTensorType>(eval.getArgument(i).getType());
      if (!type || type.isDynamicDim(0))
        return std::nullopt;
      return type.getDimSize(0) * worldSize;
    }
  return std::nullopt;
}

/// The session config from a file or from JSON text. Throws ConfigError.
config::SessionConfig loadConfig(const CompileOptions &options,
                                 const config::ParseContext &context) {
  if (!options.configPath.empty())
    return config::loadSessionConfig(options.configPath, context);
  if (options.configJson.empty())
    throw config::ConfigError("", "no DeepSpeed config given (a JSON file "
                                  "path or the JSON text)");
  config::ordered_json json =
      config::parseJsonText(options.configJson, options.configSourceName);
  std::string baseDir = options.configBaseDir.empty()
                            ? std::filesystem::current_path().string()
                            : options.configBaseDir;
  try {
    return config::parseSessionConfig(json, context, baseDir);
  } catch (const config::ConfigError &error) {
    throw error.withFile(options.configSourceName);
  }
}

/// One engine per config entry, named by its submodule key ("model" for a
/// single-engine config; dots become underscores to make symbol names).
mlir::ds::DSAssignEnginesOptions
engineOptions(const config::SessionConfig &session) {
  mlir::ds::DSAssignEnginesOptions options;
  for (const auto &entry : session.engines) {
    std::string name = session.multiEngine
                           ? (entry.key.empty() ? "root" : entry.key)
                           : "model";
    for (char &c : name)
      if (c == '.')
        c = '_';
    options.engines.push_back(name + "=" + entry.key);
    if (entry.config.frozen())
      options.frozen.push_back(name);
  }
  return options;
}

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

  config::ParseContext parseContext;
  parseContext.worldSize = options.worldSize;
  parseContext.dataMicroBatch = globalMicroBatch(*module, options.worldSize);
  config::SessionConfig session;
  try {
    session = loadConfig(options, parseContext);
  } catch (const std::exception &e) {
    error = e.what();
    return std::nullopt;
  }

  // Engines first: the passes after them read each engine's config, which
  // is attached (as given) as soon as the engines exist.
  PassManager engines(&context);
  if (options.keepIR)
    engines.addInstrumentation(
        std::make_unique<IRSnapshots>(result.irAfterPass));
  engines.addPass(mlir::ds::createDSAssignEngines(engineOptions(session)));
  if (failed(engines.run(*module)))
    return fail("the pass pipeline failed");
  size_t index = 0;
  for (auto engine : module->getOps<mlir::ds::EngineOp>())
    engine.setConfig(session.engines[index++].config.source.dump());

  PassManager pm(&context);
  if (options.keepIR)
    pm.addInstrumentation(std::make_unique<IRSnapshots>(result.irAfterPass));
  // Mixed precision (fp16 / bf16 / torch_autocast) as casts and dtypes, in
  // the forward the backward is then derived from (no change in fp32).
  mlir::ds::DSAssignPrecisionOptions precisionOptions;
  precisionOptions.worldSize = options.worldSize;
  pm.addPass(mlir::ds::createDSAssignPrecision(precisionOptions));
  // The training step: DeepSpeed divides every gradient by the accumulation
  // steps; the backward's seed does it once for all paths.
  const int64_t accumulation =
      session.engines.front().config.gradientAccumulationSteps;
  bool anyTrainable = llvm::any_of(session.engines, [](const auto &entry) {
    return !entry.config.frozen();
  });
  if (anyTrainable) {
    mlir::ds::DSAutodiffOptions autodiffOptions;
    autodiffOptions.gradScale = 1.0 / static_cast<double>(accumulation);
    pm.addPass(mlir::ds::createDSAutodiff(autodiffOptions));
    // An fp16 engine's loss scale multiplies the seed, before
    // canonicalization merges the seed with other constants.
    mlir::ds::DSScaleLossOptions scaleOptions;
    scaleOptions.worldSize = options.worldSize;
    pm.addPass(mlir::ds::createDSScaleLoss(scaleOptions));
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    // The accumulation boundary: each engine's update, then the flat
    // buffers, buckets and collectives of its ZeRO stage around it.
    mlir::ds::DSLowerOptimizerOptions optimizerOptions;
    optimizerOptions.worldSize = options.worldSize;
    pm.addPass(mlir::ds::createDSLowerOptimizer(optimizerOptions));
    mlir::ds::DSZeroPartitionOptions zeroOptions;
    zeroOptions.worldSize = options.worldSize;
    pm.addPass(mlir::ds::createDSZeroPartition(zeroOptions));
    // Each trainable engine's share of the joint backward: its prologue
    // before its first gradient, its epilogue after its last gradient and
    // reductions (DeepSpeed's _backward_prologue / _backward_epilogue).
    pm.addPass(mlir::ds::createDSEngineBackward());
    // Where the waits go (overlap_comm, stage 3 prefetch), then the proof
    // that every rank issues the same collectives and reads only gathered
    // parameters.
    mlir::ds::DSScheduleCollectivesOptions scheduleOptions;
    scheduleOptions.worldSize = options.worldSize;
    pm.addPass(mlir::ds::createDSScheduleCollectives(scheduleOptions));
    pm.addPass(mlir::ds::createDSVerifyCollectives());
  }
  if (failed(pm.run(*module)))
    return fail("the pass pipeline failed");

  if (options.keepIR || options.keepFinalIR)
    result.irAfterPass.emplace_back("final", printIR(*module));

  mlir::ds::EmitPlanOptions emitOptions;
  emitOptions.gradientAccumulationSteps = accumulation;
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
