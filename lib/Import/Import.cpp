//===- Import.cpp - model file -> ds driver -------------------------------===//
//
// Loads the model (a TorchScript archive or a torch.export program, told
// apart by the zip's layout), reads the example shapes, declares the state and imports
// `forward` once per requested mode, then removes what the specialisation made
// dead (shape checks, unused constants).
//
//===----------------------------------------------------------------------===//

#include "ds/Import/Import.h"
#include "ImportInternal.h"
#include "Pt2Program.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Plan/Plan.h"
#include "ds/TensorIO/RuntimeError.h"
#include "ds/TensorIO/TorchScriptArchive.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::import;

/// Loads a TorchScript archive and the names of its forward's arguments.
static LogicalResult loadTorchScript(const std::string &path, Location fileLoc,
                                     torch::jit::Module &model,
                                     std::vector<std::string> &argNames) {
  try {
    // LibTorch reads the debug info lazily and unchecked; the import asks
    // for every node's source line.
    ::ds::runtime::checkTorchScriptArchive(path);
  } catch (const ::ds::runtime::RuntimeError &e) {
    emitError(fileLoc) << "cannot load TorchScript model: " << e.what();
    return failure();
  }
  try {
    model = torch::jit::load(path);
  } catch (const c10::Error &e) {
    std::string why = e.what_without_backtrace();
    // LibTorch's zip reader explains in its own words; say what it means.
    if (why.find("central directory") != std::string::npos ||
        why.find("constants.pkl") != std::string::npos ||
        why.find("PytorchStreamReader") != std::string::npos)
      why = "not a TorchScript archive (torch.jit.script/trace, then save) "
            "nor a torch.export program (torch.export.save): " +
            why.substr(0, why.find('\n'));
    emitError(fileLoc) << "cannot load TorchScript model: " << why;
    return failure();
  } catch (const std::exception &e) {
    emitError(fileLoc) << "cannot load TorchScript model: " << e.what();
    return failure();
  }
  if (!model.find_method("forward")) {
    emitError(fileLoc) << "the TorchScript module has no forward method";
    return failure();
  }
  const auto &schema = model.get_method("forward").function().getSchema();
  for (size_t i = 1; i < schema.arguments().size(); ++i) {
    const auto &arg = schema.arguments()[i];
    if (arg.type()->kind() != c10::TypeKind::TensorType) {
      emitError(fileLoc) << "forward argument '" << arg.name() << "' has type "
                         << arg.type()->str()
                         << "; only tensor arguments can come from the data "
                            "file";
      return failure();
    }
    argNames.push_back(arg.name());
  }
  return success();
}

OwningOpRef<ModuleOp>
mlir::ds::importModel(MLIRContext *context, const ImportOptions &options) {
  context->loadDialect<DSDialect, func::FuncDialect>();
  Location fileLoc = FileLineColLoc::get(context, options.modelPath, 0, 0);

  if (!llvm::sys::fs::exists(options.modelPath)) {
    emitError(fileLoc) << "cannot open the model: no such file";
    return nullptr;
  }
  // The front door is chosen by the zip's layout, not the file's name.
  torch::jit::Module model;
  std::vector<std::string> argNames;
  Pt2Model exported;
  const char *frontend = "torchscript";
  ModelFileKind kind = sniffModelFile(options.modelPath);
  switch (kind) {
  case ModelFileKind::AOTInductor:
    emitError(fileLoc) << "an AOTInductor package (compiled kernels, no "
                          "graph to train): save the program with "
                          "torch.export.save(torch.export.export(model, "
                          "args), path) instead";
    return nullptr;
  case ModelFileKind::ExportedProgram:
    if (auto err = loadExportedProgram(options.modelPath, exported)) {
      emitError(fileLoc) << "cannot load the torch.export program: " << *err;
      return nullptr;
    }
    model = exported.module;
    argNames = exported.inputNames;
    frontend = "torch.export";
    break;
  case ModelFileKind::TorchScript:
  case ModelFileKind::TracedTorchScript:
  case ModelFileKind::Unknown:
    if (failed(loadTorchScript(options.modelPath, fileLoc, model, argNames)))
      return nullptr;
    break;
  }

  if (options.exampleInputsPath.empty()) {
    emitError(fileLoc) << "--example-inputs DATA is required: the import "
                          "specialises on one micro-step's shapes";
    return nullptr;
  }
  if (options.worldSize == 0) {
    emitError(fileLoc) << "--world-size must be at least 1";
    return nullptr;
  }
  std::vector<ExampleInput> inputs;
  if (auto err = loadExampleInputs(
          options.exampleInputsPath, options.exampleMicroStep, argNames,
          options.unbatched, options.worldSize, inputs)) {
    emitError(FileLineColLoc::get(context, options.exampleInputsPath, 0, 0))
        << *err;
    return nullptr;
  }

  // A program is specialised on the shapes it was exported with: the data's
  // (one rank's rows) must be those.
  for (size_t i = 0; i < exported.inputShapes.size() && i < inputs.size();
       ++i) {
    auto given = inputs[i].example.sizes();
    if (!exported.inputShapes[i]) // no metadata: nothing to check against
      continue;
    const std::vector<int64_t> &want = *exported.inputShapes[i];
    if (std::vector<int64_t>(given.begin(), given.end()) == want)
      continue;
    std::vector<int64_t> have(given.begin(), given.end());
    InFlightDiagnostic diag = emitError(fileLoc);
    diag << "the program was exported for input '" << inputs[i].name
         << "' of shape " << ::ds::plan::formatShape(want)
         << ", but one rank's micro-step of the data has "
         << ::ds::plan::formatShape(have) << " (world size " << options.worldSize
         << ")";
    // Only the rows differ: the program was exported for another world size
    // (or the whole micro-batch). Otherwise the data has another shape than
    // the one the program was exported with (several shapes per plan).
    if (have.size() == want.size() && !want.empty() &&
        std::equal(want.begin() + 1, want.end(), have.begin() + 1))
      diag << ": export with one rank's micro-batch (" << have[0]
           << " rows at world size " << options.worldSize << ")";
    else
      diag << ": a .pt2 program takes only the shapes it was exported with; "
              "export one program for this shape, or use the TorchScript "
              "front door, whose models compute shapes from their inputs";
    return nullptr;
  }

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  OpBuilder builder(context);
  builder.setInsertionPointToStart(module->getBody());
  module->getOperation()->setAttr("ds.source",
                                  builder.getStringAttr(options.modelPath));
  module->getOperation()->setAttr("ds.frontend",
                                  builder.getStringAttr(frontend));
  // A trace keeps only the path its example took (-ds-check-parameter-use).
  if (kind == ModelFileKind::TracedTorchScript)
    module->getOperation()->setAttr("ds.traced", builder.getUnitAttr());
  setWorldSize(*module, options.worldSize);
  StateTable state = declareState(builder, fileLoc, model);
  noteEvalModules(*module, model, fileLoc);

  const NodeModules *nodeModules =
      std::string(frontend) == "torch.export" ? &exported.nodeModules : nullptr;
  try {
    if (options.importTrain &&
        failed(importForward(builder, model, state, "forward", true, inputs,
                             options.modelPath, "forward", nodeModules,
                             options.growExamples)))
      return nullptr;
    builder.setInsertionPointToEnd(module->getBody());
    // A program exported once holds one mode's graph; its eval twin is made
    // by the reader (Pt2Program.cpp) as `forward_eval`.
    if (options.importEval &&
        failed(importForward(builder, model, state, "forward_eval", false,
                             inputs, options.modelPath,
                             nodeModules ? "forward_eval" : "forward",
                             nodeModules, options.growExamples)))
      return nullptr;
  } catch (const c10::Error &e) {
    emitError(fileLoc) << "import failed: " << e.what_without_backtrace();
    return nullptr;
  }

  decomposeImportedOps(*module);
  // Shape checks the specialisation decided leave dead ops behind.
  PassManager pm(context);
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (failed(pm.run(*module)))
    return nullptr;
  if (failed(verify(*module)))
    return nullptr;
  return module;
}
