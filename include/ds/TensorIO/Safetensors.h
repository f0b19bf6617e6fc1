//===- Safetensors.h - The .safetensors tensor file format ------*- C++ -*-===//
//
// safetensors (Hugging Face): an 8-byte little-endian header length N, N
// bytes of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}}
// (plus an optional "__metadata__" object of strings), then the raw
// little-endian, row-major tensor bytes; offsets are relative to the end of
// the header.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TENSORIO_SAFETENSORS_H
#define DS_TENSORIO_SAFETENSORS_H

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace ds::runtime {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

/// Reads every tensor of the file, in the order of the header. Each tensor
/// owns its memory (the file is not kept mapped). Throws RuntimeError naming
/// the file and, where it applies, the tensor.
NamedTensors readSafetensors(const std::string &path);

/// Writes the tensors (CPU, any dtype safetensors names) atomically, in the
/// given order. Throws RuntimeError.
void writeSafetensors(const std::string &path, const NamedTensors &tensors);

} // namespace ds::runtime

#endif // DS_TENSORIO_SAFETENSORS_H
