//===- Pt2Weights.h - State tensors of a torch.export archive ---*- C++ -*-===//
//
// Reads the parameters and buffers of a .pt2 written by torch.export.save,
// in place from its zip (kept apart so that only Pt2Weights.cpp includes
// torch's ~4000-line serialization schema). The runtime loads a plan's
// weights with it, the importer a program's state.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TENSORIO_PT2WEIGHTS_H
#define DS_TENSORIO_PT2WEIGHTS_H

#include "ds/TensorIO/Safetensors.h"

#include <optional>
#include <string>
#include <vector>

namespace caffe2::serialize {
class PyTorchStreamReader;
} // namespace caffe2::serialize

namespace ds::runtime {

/// The name of the archive's one program, NAME of its `models/NAME.json`
/// ("model" as torch.export.save writes it); the weights and constants
/// configs are named after it. Throws RuntimeError (without the path) when
/// the archive has none or several.
std::string pt2ProgramName(caffe2::serialize::PyTorchStreamReader &reader);

/// Whether `path` is a zip whose `<top>/archive_format` says "pt2" (an
/// AOTInductor package says so too; readPt2State refuses it, naming it).
/// Never throws.
bool isPt2Archive(const std::string &path);

struct Pt2State {
  /// The weights config's entries by is_param, and the constants config's
  /// entries that the program's signature calls non-persistent buffers
  /// (tensor constants are left out: they are not module state). Each is
  /// an owning contiguous CPU tensor.
  NamedTensors params, buffers;
  /// The program's tensor constants (lifted `torch.tensor(...)` values of
  /// its forward), which are not module state.
  NamedTensors constants;
  /// Parameters saved with requires_grad false (frozen).
  std::vector<std::string> frozen;
  /// Names that are the same tensor (one storage record, dtype, sizes,
  /// strides and offset: tied weights), groups of two or more only.
  std::vector<std::vector<std::string>> ties;
};

/// The ATen dtype of the export schema's dtype code (its ScalarType enum,
/// numbered otherwise than at::ScalarType); nullopt for codes it lacks.
std::optional<at::ScalarType> dtypeOfExportCode(int code);

/// Throws RuntimeError naming the file (and the entry) when `path` is not a
/// torch.export archive or any entry cannot be read.
Pt2State readPt2State(const std::string &path);

} // namespace ds::runtime

#endif // DS_TENSORIO_PT2WEIGHTS_H
