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
#include "ds/Plan/PlanFormat.h"
#include "ds/Target/Plan/EmitPlan.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

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

/// One shape to compile: a data file, and the micro-step of it whose
/// shapes the import takes.
struct ExampleShape {
  std::string path;
  int64_t microStep = 0;

  /// "B.pt" or "B.pt (micro-step 3)" for messages.
  std::string describe() const {
    return microStep == 0
               ? path
               : path + " (micro-step " + std::to_string(microStep) + ")";
  }
};

/// The pipeline for one shape; a failure sets `error` and returns nullopt.
/// MLIR diagnostics reach `error` through the collector of the caller's
/// context. `dataMicroBatch`: -ds-assign-engines' (0: from the shape).
/// Fills `result`'s IR snapshots when asked to.
std::optional<plan::Plan>
compileShape(MLIRContext &context, detail::DiagnosticCollector &diagnostics,
             const CompileOptions &options, const ExampleShape &shape,
             int64_t dataMicroBatch, bool keepIR, CompileResult &result,
             std::string &error) {
  auto fail = [&](const std::string &fallback) -> std::optional<plan::Plan> {
    error = diagnostics.errorText(fallback);
    return std::nullopt;
  };

  mlir::ds::ImportOptions importOptions;
  importOptions.modelPath = options.modelPath;
  importOptions.exampleInputsPath = shape.path;
  importOptions.exampleMicroStep = shape.microStep;
  importOptions.worldSize = options.worldSize;
  importOptions.unbatched = options.unbatched;
  importOptions.importTrain = true;
  importOptions.importEval = true;
  OwningOpRef<ModuleOp> module =
      mlir::ds::importModel(&context, importOptions);
  if (!module)
    return fail(options.modelPath + ": import failed");
  if (keepIR && options.keepIR)
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
  pipeline.dataMicroBatch = dataMicroBatch;
  pipeline.device = options.device;
  PassManager pm(&context);
  if (keepIR && options.keepIR)
    pm.addInstrumentation(std::make_unique<IRSnapshots>(result.irAfterPass));
  mlir::ds::buildCompilePipeline(pm, pipeline);
  if (failed(pm.run(*module)))
    return fail("the pass pipeline failed");

  if (keepIR && (options.keepIR || options.keepFinalIR))
    result.irAfterPass.emplace_back("final", printIR(*module));

  mlir::ds::EmitPlanOptions emitOptions;
  emitOptions.producer = options.producer;
  emitOptions.torchVersion = DS_TORCH_VERSION;
  auto plan = mlir::ds::emitPlan(*module, emitOptions);
  if (failed(plan))
    return fail("the plan cannot be emitted");
  // The weights path is stored absolute so the plan can move.
  if (plan->weights)
    plan->weights->path = absolutePath(plan->weights->path);
  return std::move(*plan);
}

/// Adds `other`, compiled for another shape, to `plan` as a variant: unless
/// its inputs are a shape `plan` has already, it must differ from `plan`
/// only in its inputs, micro-batch and eval / train programs. Returns the
/// error otherwise.
std::optional<std::string> addShape(plan::Plan &plan, plan::Plan other,
                                    const std::string &what) {
  for (size_t index = 0; index < plan.numShapes(); ++index) {
    const std::vector<plan::InputDesc> &inputs = plan.shapeInputs(index);
    bool same = inputs.size() == other.inputs.size();
    for (size_t i = 0; same && i < inputs.size(); ++i)
      same = inputs[i].shape == other.inputs[i].shape;
    if (same)
      return std::nullopt;
  }
  for (size_t i = 0; i < plan.inputs.size() && i < other.inputs.size(); ++i) {
    const plan::InputDesc &a = plan.inputs[i], &b = other.inputs[i];
    if (a.dtype != b.dtype || a.batched != b.batched)
      return what + ": forward argument '" + b.name + "' is " +
             plan::dtypeName(b.dtype) + (b.batched ? "" : " (unbatched)") +
             " there, " + plan::dtypeName(a.dtype) +
             (a.batched ? "" : " (unbatched)") +
             " in the first shape; the shapes of one plan differ in their "
             "sizes only";
  }
  plan::ordered_json first = plan::toJson(plan), second = plan::toJson(other);
  for (const char *key :
       {"weights", "world_size", "gradient_accumulation_steps", "engines",
        "state", "outputs"})
    if (first.value(key, plan::ordered_json()) !=
        second.value(key, plan::ordered_json()))
      return what + ": compiled for these shapes, the plan's \"" + key +
             "\" differ from the first shape's; the shapes of one plan share "
             "its state, engines and optimizer step (compile a plan per shape "
             "instead)";
  if (first["programs"].value("step", plan::ordered_json()) !=
      second["programs"].value("step", plan::ordered_json()))
    return what + ": compiled for these shapes, programs.step differs from "
                  "the first shape's; the shapes of one plan share the "
                  "optimizer step (compile a plan per shape instead)";
  plan::ShapeVariant variant;
  variant.microBatchPerRank = other.microBatchPerRank;
  variant.inputs = std::move(other.inputs);
  other.programs.erase("step");
  variant.programs = std::move(other.programs);
  plan.variants.push_back(std::move(variant));
  return std::nullopt;
}

/// Every shape of the example inputs, first to last: one per stacked file,
/// one per distinct set of shapes in a list of micro-step dicts.
std::optional<std::string> exampleShapes(const CompileOptions &options,
                                         std::vector<ExampleShape> &shapes) {
  if (options.exampleInputsPaths.empty())
    return std::string("no example inputs given (a data file whose shapes "
                       "the plan is specialised on)");
  for (const std::string &path : options.exampleInputsPaths) {
    std::vector<int64_t> steps;
    if (auto failure = mlir::ds::distinctExampleSteps(path, steps))
      return failure;
    for (int64_t step : steps)
      shapes.push_back({path, step});
  }
  return std::nullopt;
}

std::optional<CompileResult> run(MLIRContext &context,
                                 detail::DiagnosticCollector &diagnostics,
                                 const CompileOptions &options,
                                 std::string &error) {
  std::vector<ExampleShape> shapes;
  if (auto failure = exampleShapes(options, shapes)) {
    error = *failure;
    return std::nullopt;
  }
  CompileResult result;
  std::optional<plan::Plan> plan =
      compileShape(context, diagnostics, options, shapes.front(), 0,
                   /*keepIR=*/true, result, error);
  if (!plan)
    return std::nullopt;
  // The first shape's global micro-batch resolves the batch sizes of every
  // shape: a short last batch keeps the configured micro-batch.
  const int64_t dataMicroBatch = plan->microBatchPerRank * plan->worldSize;
  for (size_t i = 1; i < shapes.size(); ++i) {
    std::optional<plan::Plan> other =
        compileShape(context, diagnostics, options, shapes[i], dataMicroBatch,
                     /*keepIR=*/false, result, error);
    if (!other) {
      error = "example inputs " + shapes[i].describe() + ": " + error;
      return std::nullopt;
    }
    if (auto failure = addShape(*plan, std::move(*other),
                                "example inputs " + shapes[i].describe())) {
      error = *failure;
      return std::nullopt;
    }
  }
  result.plan = std::move(*plan);
  // Each shape compiles the same model: the same warnings once.
  for (const std::string &warning : diagnostics.warnings())
    if (std::find(result.warnings.begin(), result.warnings.end(), warning) ==
        result.warnings.end())
      result.warnings.push_back(warning);
  for (const std::string &remark : diagnostics.remarks())
    if (std::find(result.remarks.begin(), result.remarks.end(), remark) ==
        result.remarks.end())
      result.remarks.push_back(remark);
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
