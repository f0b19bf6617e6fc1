//===- WeightsArchive.h - State tensors of a TorchScript archive -*- C++
//-*-===//
//
// Kept apart from StateStore so that only this file includes the TorchScript
// loader. Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_WEIGHTSARCHIVE_H
#define DS_LIB_RUNTIME_WEIGHTSARCHIVE_H

#include "ds/TensorIO/Safetensors.h"

#include <string>

namespace ds::runtime::detail {

/// named_parameters() and named_buffers() of the archive's root module,
/// recursively, detached. Throws RuntimeError naming the file.
void readTorchScriptState(const std::string &path, NamedTensors &params,
                          NamedTensors &buffers);

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_WEIGHTSARCHIVE_H
