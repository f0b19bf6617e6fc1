//===- Import.h - model file -> ds import -----------------------*- C++ -*-===//
//
// Imports a TorchScript archive or a torch.export program into the ds dialect, specialised on the shapes
// of one micro-step of one rank. The only public entry point of lib/Import;
// LibTorch types stay behind it.
//
//===----------------------------------------------------------------------===//

#ifndef DS_IMPORT_IMPORT_H
#define DS_IMPORT_IMPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlir::ds {

struct ImportOptions {
  /// The model: a TorchScript archive (torch.jit.script / trace, then save)
  /// or a torch.export program (torch.export.save).
  std::string modelPath;
  /// Data file (torch.save dict or .safetensors) with one `[S, B, ...]` tensor
  /// per forward argument. Without it, import fails (shapes are required).
  std::string exampleInputsPath;
  /// A data file holding a list of per-micro-step dicts: the micro-step
  /// whose shapes the import specialises on.
  int64_t exampleMicroStep = 0;
  /// Data-parallel ranks: the import specialises on B / worldSize rows.
  unsigned worldSize = 1;
  /// Forward arguments that are not batched (`[S, ...]` in the data file).
  std::vector<std::string> unbatched;
  /// Which forward functions to import: `@forward` (training flags true)
  /// and/or `@forward_eval` (as after module.eval()).
  bool importTrain = true;
  bool importEval = false;
  /// Which result dims of an operator vary: found by running it again on
  /// grown and refilled examples (OperatorImport.cpp), else decided by the
  /// per-operator rules alone (false: what the registry check compares the
  /// mechanism with).
  bool growExamples = true;
};

/// The micro-steps of a data file to import once each: {0} for the stacked
/// form (its micro-steps share one shape), else the first micro-step of each
/// distinct set of shapes in the list. On error returns a message naming the
/// file.
std::optional<std::string> distinctExampleSteps(const std::string &path,
                                                std::vector<int64_t> &steps);

/// Imports the model: a TorchScript archive (torch.jit.save) or a
/// torch.export program (torch.export.save, a `.pt2`), told apart by the
/// zip's layout. The module's `ds.frontend` says which ("torchscript" or
/// "torch.export"). On failure, diagnostics have been emitted to `context`
/// (with the model's source line where one applies) and null is returned.
OwningOpRef<ModuleOp> importModel(MLIRContext *context,
                                  const ImportOptions &options);

} // namespace mlir::ds

#endif // DS_IMPORT_IMPORT_H
