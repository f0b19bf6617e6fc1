//===- ds-opt.cpp - the ds optimizer driver -------------------------------===//
//
// mlir-opt for the ds dialect: reads `.mlir` and runs any registered pass or
// pipeline (`ds-compile-pipeline`). Given a TorchScript archive instead, it
// imports it first (lib/Import), as `ds-import` would write it.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/Transforms/CompilePipeline.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "ds/Import/Import.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace mlir;
namespace cl = llvm::cl;

namespace mlir::ds {
// lib/Dialect/DS/TestPasses: lit-only passes, registered here alone.
void registerTestShapeBoundsPass();
} // namespace mlir::ds

static cl::OptionCategory importCategory("TorchScript import options");
static cl::opt<std::string>
    exampleInputs("example-inputs",
                  cl::desc("Data file whose shapes the import specialises on "
                           "(torch.save dict or .safetensors)"),
                  cl::value_desc("DATA"), cl::cat(importCategory));
static cl::opt<unsigned>
    worldSize("world-size",
              cl::desc("Data-parallel ranks the batch is divided among"),
              cl::init(1), cl::cat(importCategory));
static cl::list<std::string>
    unbatched("unbatched", cl::desc("Forward argument that is not batched"),
              cl::value_desc("NAME"), cl::cat(importCategory));
static cl::opt<bool>
    evalMode("eval",
             cl::desc("Import as after module.eval() (training flags false)"),
             cl::init(false), cl::cat(importCategory));
static cl::opt<bool> trainAndEval(
    "train-and-eval",
    cl::desc("Import @forward and @forward_eval (as ds-compile does)"),
    cl::init(false), cl::cat(importCategory));

/// Whether `path` is a model file (a zip: TorchScript or torch.export) rather
/// than MLIR text.
static bool isZipArchive(StringRef path) {
  if (path.ends_with(".pt") || path.ends_with(".pth"))
    return true;
  auto buffer = llvm::MemoryBuffer::getFileSlice(path, 4, 0, false);
  return buffer && (*buffer)->getBuffer() == StringRef("PK\x03\x04", 4);
}

/// Imports `model` and returns it as text with locations, the input
/// MlirOptMain then parses. Diagnostics are printed as ds-import prints them.
static FailureOr<std::unique_ptr<llvm::MemoryBuffer>>
importModelFile(StringRef model) {
  MLIRContext context;
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  ds::ImportOptions options;
  options.modelPath = model.str();
  options.exampleInputsPath = exampleInputs;
  options.worldSize = worldSize;
  options.unbatched = unbatched;
  options.importTrain = !evalMode || trainAndEval;
  options.importEval = evalMode || trainAndEval;
  OwningOpRef<ModuleOp> module = ds::importModel(&context, options);
  if (!module)
    return failure();
  std::string text;
  llvm::raw_string_ostream os(text);
  OpPrintingFlags flags;
  flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  module->print(os, flags);
  os << "\n";
  return llvm::MemoryBuffer::getMemBufferCopy(text, model);
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  mlir::registerTransformsPasses();
  mlir::ds::registerDSPasses();
  mlir::ds::registerCompilePipeline();
  mlir::ds::registerTestShapeBoundsPass();

  DialectRegistry registry;
  registry.insert<ds::DSDialect, func::FuncDialect>();

  auto [inputFilename, outputFilename] =
      registerAndParseCLIOptions(argc, argv, "ds optimizer driver", registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();

  std::unique_ptr<llvm::MemoryBuffer> input;
  if (inputFilename != "-" && isZipArchive(inputFilename)) {
    auto imported = importModelFile(inputFilename);
    if (failed(imported))
      return EXIT_FAILURE;
    input = std::move(*imported);
  } else {
    std::string errorMessage;
    input = openInputFile(inputFilename, &errorMessage);
    if (!input) {
      llvm::WithColor::error() << errorMessage << "\n";
      return EXIT_FAILURE;
    }
  }

  std::string errorMessage;
  auto output = openOutputFile(outputFilename, &errorMessage);
  if (!output) {
    llvm::WithColor::error() << errorMessage << "\n";
    return EXIT_FAILURE;
  }
  if (failed(MlirOptMain(output->os(), std::move(input), registry, config)))
    return EXIT_FAILURE;
  output->keep();
  return EXIT_SUCCESS;
}
