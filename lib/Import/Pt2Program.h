//===- Pt2Program.h - a torch.export program as a TorchScript module -*- C++ -*-===//
//
// The torch.export front door. A `.pt2` file from torch.export.save holds a
// versioned JSON graph of ATen calls, its signature (which placeholders are
// parameters, buffers, constants and user inputs) and the weights. The reader
// turns it into what the rest of lib/Import walks: a torch::jit::Module whose
// state is the program's and whose `forward` graph calls the same ATen
// operators, each node tagged with the module that called it
// (`nn_module_stack`) and its source line (`stack_trace`). The op-handler
// table, in-place handling, examples and typing are then shared with the
// TorchScript path.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_IMPORT_PT2PROGRAM_H
#define DS_LIB_IMPORT_PT2PROGRAM_H

#include "ImportInternal.h"

#include <torch/csrc/jit/ir/ir.h>

namespace mlir::ds::import {

/// What a model file is, from its zip layout (not its extension).
enum class ModelFileKind {
  TorchScript,    // torch.jit.save: <top>/data.pkl, <top>/code/
  TracedTorchScript, // the same from torch.jit.trace, which also stores
                     // <top>/traced_inputs.pkl
  ExportedProgram, // torch.export.save: <top>/archive_format "pt2",
                   // <top>/models/*.json
  AOTInductor,    // torch._inductor.aoti_compile_and_package: a .pt2 of
                  // compiled kernels, no graph
  Unknown,
};

/// Reads the zip directory of `path`. Unknown for anything else (a missing
/// file, not a zip).
ModelFileKind sniffModelFile(const std::string &path);

struct Pt2Model {
  torch::jit::Module module;
  /// The module of every operator node of `forward`'s graph.
  NodeModules nodeModules;
  /// The user inputs of the program, in order, and the shapes it was
  /// exported for (the import specialises on the data's shapes, which must
  /// be these).
  std::vector<std::string> inputNames;
  std::vector<std::optional<std::vector<int64_t>>> inputShapes;
  /// The serialisation schema version (major.minor) and the exporting torch.
  std::string schemaVersion;
  std::string torchVersion;
};

/// Reads a torch.export.save file. On failure returns a message (the caller
/// names the file).
std::optional<std::string> loadExportedProgram(const std::string &path,
                                               Pt2Model &out);

} // namespace mlir::ds::import

#endif // DS_LIB_IMPORT_PT2PROGRAM_H
