//===- WeightsArchive.h - State tensors of a weights file -------*- C++ -*-===//
//
// Reads a TorchScript archive's state (kept apart from StateStore so that
// only this file includes the TorchScript loader), and maps the names of a
// weights file saved from a wrapped module onto the plan's. Private to
// lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_WEIGHTSARCHIVE_H
#define DS_LIB_RUNTIME_WEIGHTSARCHIVE_H

#include "ds/TensorIO/Safetensors.h"

#include <string>
#include <vector>

namespace ds::runtime::detail {

/// named_parameters() and named_buffers() of the archive's root module,
/// recursively, detached. Throws RuntimeError naming the file.
void readTorchScriptState(const std::string &path, NamedTensors &params,
                          NamedTensors &buffers);

/// A file saved from the module that the plan's root holds as a submodule
/// (Hugging Face's save_pretrained of `model` in a loss wrapper's
/// `self.model`): when the file's names that are not plan names all become
/// plan names under one prefix `P.` (and no file name is already P.name),
/// they are renamed so. Several such prefixes are a RuntimeError naming
/// them; none leaves the names as they are (the load then names what does
/// not match).
void prefixWrappedNames(const std::vector<std::string> &planNames,
                        NamedTensors &tensors, const std::string &source);

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_WEIGHTSARCHIVE_H
