//===- Import.cpp - TorchScript -> ds driver ------------------------------===//
//
// Loads the archive, reads the example shapes, declares the state and imports
// `forward` once per requested mode, then removes what the specialisation made
// dead (shape checks, unused constants).
//
//===----------------------------------------------------------------------===//

#include "ds/Import/Import.h"
#include "ImportInternal.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::import;

OwningOpRef<ModuleOp>
mlir::ds::importTorchScript(MLIRContext *context,
                            const ImportOptions &options) {
  context->loadDialect<DSDialect, func::FuncDialect>();
  Location fileLoc = FileLineColLoc::get(context, options.modelPath, 0, 0);

  if (!llvm::sys::fs::exists(options.modelPath)) {
    emitError(fileLoc) << "cannot open the model: no such file";
    return nullptr;
  }
  torch::jit::Module model;
  try {
    model = torch::jit::load(options.modelPath);
  } catch (const c10::Error &e) {
    std::string why = e.what_without_backtrace();
    // LibTorch's zip reader explains in its own words; say what it means.
    if (why.find("central directory") != std::string::npos ||
        why.find("constants.pkl") != std::string::npos ||
        why.find("PytorchStreamReader") != std::string::npos)
      why = "not a TorchScript archive (torch.jit.script/trace, then save): " +
            why.substr(0, why.find('\n'));
    emitError(fileLoc) << "cannot load TorchScript model: " << why;
    return nullptr;
  } catch (const std::exception &e) {
    emitError(fileLoc) << "cannot load TorchScript model: " << e.what();
    return nullptr;
  }
  if (!model.find_method("forward")) {
    emitError(fileLoc) << "the TorchScript module has no forward method";
    return nullptr;
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
  std::vector<std::string> argNames;
  const auto &schema = model.get_method("forward").function().getSchema();
  for (size_t i = 1; i < schema.arguments().size(); ++i) {
    const auto &arg = schema.arguments()[i];
    if (arg.type()->kind() != c10::TypeKind::TensorType) {
      emitError(fileLoc) << "forward argument '" << arg.name() << "' has type "
                         << arg.type()->str()
                         << "; only tensor arguments can come from the data "
                            "file";
      return nullptr;
    }
    argNames.push_back(arg.name());
  }
  std::vector<ExampleInput> inputs;
  if (auto err = loadExampleInputs(
          options.exampleInputsPath, options.exampleMicroStep, argNames,
          options.unbatched, options.worldSize, inputs)) {
    emitError(FileLineColLoc::get(context, options.exampleInputsPath, 0, 0))
        << *err;
    return nullptr;
  }

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  OpBuilder builder(context);
  builder.setInsertionPointToStart(module->getBody());
  module->getOperation()->setAttr("ds.source",
                                  builder.getStringAttr(options.modelPath));
  setWorldSize(*module, options.worldSize);
  StateTable state = declareState(builder, fileLoc, model);
  noteEvalModules(*module, model, fileLoc);

  try {
    if (options.importTrain &&
        failed(importForward(builder, model, state, "forward", true, inputs,
                             options.modelPath)))
      return nullptr;
    builder.setInsertionPointToEnd(module->getBody());
    if (options.importEval &&
        failed(importForward(builder, model, state, "forward_eval", false,
                             inputs, options.modelPath)))
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
