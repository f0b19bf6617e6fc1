//===- WeightsArchive.cpp - State tensors of a TorchScript archive --------===//

#include "WeightsArchive.h"
#include <set>

#include "ds/TensorIO/RuntimeError.h"

#include <torch/script.h>

#include <fstream>
#include <set>

namespace ds::runtime::detail {

/// The first line of a c10 message: the rest is a C++ or TorchScript trace.
static std::string firstLine(const std::string &message) {
  return message.substr(0, message.find('\n'));
}

void readTorchScriptState(const std::string &path, NamedTensors &params,
                          NamedTensors &buffers) {
  if (!std::ifstream(path))
    throw RuntimeError(path + ": cannot open the TorchScript archive");
  torch::jit::Module module;
  try {
    module = torch::jit::load(path, c10::Device(c10::kCPU));
  } catch (const c10::Error &error) {
    throw RuntimeError(path + ": not a TorchScript archive (torch.jit.save): " +
                       firstLine(error.what_without_backtrace()));
  }
  // A tensor reachable under several names (tied weights) is one piece of
  // state under its first name, as the compiler declares it.
  std::set<const void *> seen;
  for (const auto &item : module.named_parameters(/*recurse=*/true))
    if (seen.insert(item.value.unsafeGetTensorImpl()).second)
      params.emplace_back(item.name, item.value.detach());
  for (const auto &item : module.named_buffers(/*recurse=*/true))
    if (seen.insert(item.value.unsafeGetTensorImpl()).second)
      buffers.emplace_back(item.name, item.value.detach());
}

} // namespace ds::runtime::detail
