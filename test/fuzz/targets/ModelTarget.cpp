//===- ModelTarget.cpp - Fuzzes the model importers -----------------------===//
//
// The input packs a model file and its example inputs as records
// (FuzzInput.h): `model.pt` (a TorchScript archive) or `model.pt2` (a
// torch.export program) and `data.pt` / `data.safetensors`. The model is
// imported as ds-compile imports it (training and eval forwards); whatever
// the importer returns must verify, and nothing may escape it (it reports
// through diagnostics). A `.pt2`'s weights are also read as the
// runtime reads them in place. Built twice, as the `torchscript` and `pt2`
// targets, which differ in their seed corpora only: the importer tells the
// formats apart by the zip's layout, not by the name.
//
//===----------------------------------------------------------------------===//

#include "../ExpectedErrors.h"
#include "../FuzzInput.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Import/Import.h"
#include "ds/TensorIO/Pt2Weights.h"
#include "ds/TensorIO/RuntimeError.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <c10/util/Exception.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string folder = ds::fuzz::freshScratchFolder();
  mlir::ds::ImportOptions options;
  for (const auto &[name, bytes] : ds::fuzz::splitRecords(data, size)) {
    std::string path = ds::fuzz::writeFile(folder, name, bytes);
    if (path.empty())
      continue;
    if (name.rfind("model", 0) == 0 && options.modelPath.empty())
      options.modelPath = path;
    else if (name.rfind("data", 0) == 0 && options.exampleInputsPath.empty())
      options.exampleInputsPath = path;
  }
  if (options.modelPath.empty())
    return 0;
  options.importTrain = true;
  options.importEval = true;

  mlir::MLIRContext context;
  context.loadDialect<mlir::ds::DSDialect, mlir::func::FuncDialect>();
  // Diagnostics are the expected outcome of bad bytes; keep them quiet.
  mlir::ScopedDiagnosticHandler quiet(
      &context, [](mlir::Diagnostic &diagnostic) {
        if (ds::fuzz::verbose())
          llvm::errs() << "fuzz: diagnostic: " << diagnostic << "\n";
        return mlir::success();
      });
  // Unguarded: an exception escaping importModel ends ds-import too
  // (std::terminate names it).
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ds::importModel(&context, options);
  if (module && mlir::failed(mlir::verify(*module)))
    ds::fuzz::unexpectedError("the imported module does not verify",
                              "verifier");
  DS_FUZZ_GUARD(
      {
        if (ds::runtime::isPt2Archive(options.modelPath))
          ds::runtime::readPt2State(options.modelPath);
      },
      DS_FUZZ_ACCEPT(ds::runtime::RuntimeError) DS_FUZZ_ACCEPT(c10::Error))
  return 0;
}
