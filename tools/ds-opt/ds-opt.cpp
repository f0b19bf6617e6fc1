//===- ds-opt.cpp - the ds optimizer driver -------------------------------===//
//
// mlir-opt for the ds dialect: reads `.mlir` and runs any registered pass. Given
// a TorchScript archive instead, it imports it first by running `ds-import`
// (next to this binary) in a child process, so that LibTorch, whose start-up
// costs most of a second, stays off the path of tools that only run passes.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace mlir;
namespace cl = llvm::cl;

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
static cl::opt<bool> evalMode(
    "eval", cl::desc("Import as after module.eval() (training flags false)"),
    cl::init(false), cl::cat(importCategory));

/// Whether `path` is a TorchScript archive (a zip file) rather than MLIR text.
static bool isTorchScriptArchive(StringRef path) {
  if (path.ends_with(".pt") || path.ends_with(".pth"))
    return true;
  auto buffer = llvm::MemoryBuffer::getFileSlice(path, 4, 0, false);
  return buffer && (*buffer)->getBuffer() == StringRef("PK\x03\x04", 4);
}

/// Runs ds-import on `model` and returns its output (MLIR with locations).
static FailureOr<std::unique_ptr<llvm::MemoryBuffer>>
importTorchScript(StringRef argv0, StringRef model) {
  std::string self = llvm::sys::fs::getMainExecutable(
      argv0.str().c_str(), reinterpret_cast<void *>(&isTorchScriptArchive));
  SmallString<256> importer(llvm::sys::path::parent_path(self));
  llvm::sys::path::append(importer, "ds-import");

  SmallString<128> outPath;
  if (llvm::sys::fs::createTemporaryFile("ds-import", "mlir", outPath)) {
    llvm::WithColor::error() << "cannot create a temporary file\n";
    return failure();
  }
  llvm::FileRemover removeOut(outPath);

  SmallVector<std::string> args = {importer.str().str(), model.str(), "-o",
                                   outPath.str().str(),
                                   "--world-size=" + std::to_string(worldSize)};
  if (!exampleInputs.empty())
    args.push_back("--example-inputs=" + exampleInputs);
  for (const std::string &name : unbatched)
    args.push_back("--unbatched=" + name);
  if (evalMode)
    args.push_back("--eval");
  SmallVector<StringRef> argRefs(args.begin(), args.end());
  std::string errMsg;
  int rc = llvm::sys::ExecuteAndWait(importer, argRefs, std::nullopt, {}, 0, 0,
                                     &errMsg);
  if (rc != 0) {
    if (!errMsg.empty())
      llvm::WithColor::error() << "cannot run " << importer << ": " << errMsg
                               << "\n";
    return failure(); // ds-import printed its own diagnostic
  }
  auto buffer = llvm::MemoryBuffer::getFile(outPath);
  if (!buffer) {
    llvm::WithColor::error() << "cannot read the import of " << model << "\n";
    return failure();
  }
  return std::move(*buffer);
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  mlir::registerTransformsPasses();
  mlir::ds::registerDSPasses();

  DialectRegistry registry;
  registry.insert<ds::DSDialect, func::FuncDialect>();

  auto [inputFilename, outputFilename] =
      registerAndParseCLIOptions(argc, argv, "ds optimizer driver", registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();

  std::unique_ptr<llvm::MemoryBuffer> input;
  if (inputFilename != "-" && isTorchScriptArchive(inputFilename)) {
    auto imported = importTorchScript(argv[0], inputFilename);
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
