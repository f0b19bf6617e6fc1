//===- Import.h - TorchScript -> ds import ----------------------*- C++ -*-===//
//
// Imports a TorchScript archive into the ds dialect, specialised on the shapes
// of one micro-step of one rank. The only public entry point of lib/Import;
// LibTorch types stay behind it.
//
//===----------------------------------------------------------------------===//

#ifndef DS_IMPORT_IMPORT_H
#define DS_IMPORT_IMPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include <string>
#include <vector>

namespace mlir::ds {

struct ImportOptions {
  /// The TorchScript archive (torch.jit.script / torch.jit.trace, then save).
  std::string modelPath;
  /// Data file (torch.save dict or .safetensors) with one `[S, B, ...]` tensor
  /// per forward argument. Without it, import fails (shapes are required).
  std::string exampleInputsPath;
  /// Data-parallel ranks: the import specialises on B / worldSize rows.
  unsigned worldSize = 1;
  /// Forward arguments that are not batched (`[S, ...]` in the data file).
  std::vector<std::string> unbatched;
  /// Which forward functions to import: `@forward` (training flags true)
  /// and/or `@forward_eval` (as after module.eval()).
  bool importTrain = true;
  bool importEval = false;
};

/// Imports the model. On failure, diagnostics have been emitted to `context`
/// (with the TorchScript source line where one applies) and null is returned.
OwningOpRef<ModuleOp> importTorchScript(MLIRContext *context,
                                        const ImportOptions &options);

} // namespace mlir::ds

#endif // DS_IMPORT_IMPORT_H
