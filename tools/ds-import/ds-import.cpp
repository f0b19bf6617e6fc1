//===- ds-import.cpp - TorchScript archive -> ds IR -----------------------===//
//
// Prints the ds IR of a TorchScript model, with locations, so that `ds-opt`
// (which runs this tool for `.pt` inputs) keeps TorchScript source lines in
// its diagnostics.
//
//===----------------------------------------------------------------------===//

#include "ds/Import/Import.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

namespace cl = llvm::cl;

// --help lists these, not the options LLVM's libraries register.
static cl::OptionCategory toolCategory("ds-import options");

static cl::opt<std::string> modelPath(cl::Positional, cl::desc("<model.pt>"),
                                      cl::Required, cl::cat(toolCategory));
static cl::opt<std::string> outputPath("o", cl::desc("Output file"),
                                       cl::value_desc("FILE"), cl::init("-"),
                                       cl::cat(toolCategory));
static cl::opt<std::string>
    exampleInputs("example-inputs",
                  cl::desc("Data file whose shapes the import specialises on"),
                  cl::value_desc("DATA"), cl::cat(toolCategory));
static cl::opt<unsigned> worldSize("world-size",
                                   cl::desc("Data-parallel ranks"), cl::init(1),
                                   cl::cat(toolCategory));
static cl::list<std::string> unbatched("unbatched",
                                       cl::desc("Forward argument that is not "
                                                "batched"),
                                       cl::value_desc("NAME"),
                                       cl::cat(toolCategory));
static cl::opt<bool> evalMode("eval", cl::desc("Import as after module.eval()"),
                              cl::init(false), cl::cat(toolCategory));
static cl::opt<bool> both("train-and-eval",
                          cl::desc("Import @forward and @forward_eval"),
                          cl::init(false), cl::cat(toolCategory));

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  cl::HideUnrelatedOptions(toolCategory);
  cl::ParseCommandLineOptions(argc, argv, "TorchScript -> ds importer\n");

  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);

  mlir::ds::ImportOptions options;
  options.modelPath = modelPath;
  options.exampleInputsPath = exampleInputs;
  options.worldSize = worldSize;
  options.unbatched = unbatched;
  options.importTrain = !evalMode || both;
  options.importEval = evalMode || both;
  auto module = mlir::ds::importModel(&context, options);
  if (!module)
    return 1;

  std::string error;
  auto output = mlir::openOutputFile(outputPath, &error);
  if (!output) {
    llvm::WithColor::error() << error << "\n";
    return 1;
  }
  mlir::OpPrintingFlags flags;
  flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  module->print(output->os(), flags);
  output->os() << "\n";
  output->keep();
  return 0;
}
