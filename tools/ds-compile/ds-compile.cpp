//===- ds-compile.cpp - TorchScript model + DeepSpeed config -> plan ------===//
//
// The compiler driver: imports the model (training and eval forwards),
// applies the DeepSpeed config (engines, batch sizes), runs the pass pipeline
// and writes the plan that ds-run executes.
//
//===----------------------------------------------------------------------===//

#include "ds/Config/Config.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "ds/Import/Import.h"
#include "ds/Plan/EmitPlan.h"
#include "ds/Plan/PlanError.h"
#include "ds/Plan/PlanFormat.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::opt<std::string> modelPath(cl::Positional, cl::desc("<model.pt>"),
                                      cl::Required);
static cl::opt<std::string> configPath("config",
                                       cl::desc("DeepSpeed config (JSON)"),
                                       cl::value_desc("CFG.json"), cl::Required);
static cl::opt<std::string>
    exampleInputs("example-inputs",
                  cl::desc("Data file whose shapes the plan is specialised on"),
                  cl::value_desc("DATA"), cl::Required);
static cl::opt<unsigned> worldSize("world-size", cl::desc("Data-parallel ranks"),
                                   cl::init(1));
static cl::list<std::string> unbatched("unbatched",
                                       cl::desc("Forward argument that is not "
                                                "batched"),
                                       cl::value_desc("NAME"));
static cl::opt<std::string> outputPath("o", cl::desc("Plan file to write"),
                                       cl::value_desc("PLAN"), cl::Required);
static cl::opt<std::string>
    dumpIR("dump-ir", cl::desc("Also write the final IR to this file"),
           cl::value_desc("FILE"));

static int fail(const std::string &message) {
  llvm::WithColor::error(llvm::errs(), "ds-compile") << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  cl::ParseCommandLineOptions(argc, argv,
                              "TorchScript model + DeepSpeed config -> plan\n");

  MLIRContext context;
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);

  mlir::ds::ImportOptions importOptions;
  importOptions.modelPath = modelPath;
  importOptions.exampleInputsPath = exampleInputs;
  importOptions.worldSize = worldSize;
  importOptions.unbatched = unbatched;
  importOptions.importTrain = true;
  importOptions.importEval = true;
  OwningOpRef<ModuleOp> module = mlir::ds::importTorchScript(&context, importOptions);
  if (!module)
    return 1;

  // The data's global micro-batch, for the config's batch-size checks.
  auto eval = module->lookupSymbol<func::FuncOp>("forward_eval");
  std::optional<int64_t> globalBatch;
  for (unsigned i = 0; i < eval.getNumArguments(); ++i)
    if (!eval.getArgAttr(i, "ds.unbatched")) {
      auto type = cast<RankedTensorType>(eval.getArgument(i).getType());
      globalBatch = type.getDimSize(0) * worldSize;
      break;
    }

  ::ds::config::ParseContext parseContext;
  parseContext.worldSize = worldSize;
  parseContext.dataMicroBatch = globalBatch;
  std::string configError;
  auto session = ::ds::config::tryLoadSessionConfig(configPath, parseContext,
                                                    configError);
  if (!session)
    return fail(configError);

  // Engines: one per config entry, named by its submodule key.
  mlir::ds::DSAssignEnginesOptions engineOptions;
  for (const auto &entry : session->engines) {
    std::string name = session->multiEngine
                           ? (entry.key.empty() ? "root" : entry.key)
                           : "model";
    for (char &c : name)
      if (c == '.')
        c = '_';
    engineOptions.engines.push_back(name + "=" + entry.key);
    if (entry.config.frozen())
      engineOptions.frozen.push_back(name);
  }
  PassManager pm(&context);
  pm.addPass(mlir::ds::createDSAssignEngines(engineOptions));
  // The training step: DeepSpeed divides every gradient by the accumulation
  // steps; the backward's seed does it once for all paths.
  bool anyTrainable = llvm::any_of(session->engines, [](const auto &entry) {
    return !entry.config.frozen();
  });
  if (anyTrainable) {
    mlir::ds::DSAutodiffOptions autodiffOptions;
    autodiffOptions.gradScale =
        1.0 / static_cast<double>(
                  session->engines.front().config.gradientAccumulationSteps);
    pm.addPass(mlir::ds::createDSAutodiff(autodiffOptions));
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
  if (failed(pm.run(*module)))
    return 1;

  // Each engine carries its DeepSpeed config as given.
  size_t index = 0;
  for (auto engine : module->getOps<mlir::ds::EngineOp>()) {
    const auto &entry = session->engines[index++];
    engine.setConfig(entry.config.source.dump());
  }

  if (!dumpIR.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream out(dumpIR, ec);
    if (ec)
      return fail("cannot write " + dumpIR + ": " + ec.message());
    module->print(out);
  }

  mlir::ds::EmitPlanOptions emitOptions;
  emitOptions.gradientAccumulationSteps =
      session->engines.front().config.gradientAccumulationSteps;
  auto plan = mlir::ds::emitPlan(*module, emitOptions);
  if (failed(plan))
    return 1;
  // The weights path is stored absolute so the plan can move.
  if (plan->weights) {
    llvm::SmallString<256> abs(plan->weights->path);
    if (!llvm::sys::path::is_absolute(abs)) {
      llvm::SmallString<256> cwd;
      llvm::sys::fs::current_path(cwd);
      llvm::sys::path::make_absolute(cwd, abs);
    }
    plan->weights->path = abs.str().str();
  }
  try {
    ::ds::plan::writePlan(*plan, outputPath);
  } catch (const std::exception &e) {
    return fail(e.what());
  }
  return 0;
}
