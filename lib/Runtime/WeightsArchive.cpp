//===- WeightsArchive.cpp - State tensors of a weights file ---------------===//

#include "WeightsArchive.h"

#include "ds/TensorIO/RuntimeError.h"
#include "ds/TensorIO/TorchScriptArchive.h"

#include <torch/script.h>

#include <fstream>
#include <set>
#include <unordered_set>

namespace ds::runtime::detail {

/// The first line of a c10 message: the rest is a C++ or TorchScript trace.
static std::string firstLine(const std::string &message) {
  return message.substr(0, message.find('\n'));
}

void readTorchScriptState(const std::string &path, NamedTensors &params,
                          NamedTensors &buffers) {
  if (!std::ifstream(path))
    throw RuntimeError(path + ": cannot open the TorchScript archive");
  checkTorchScriptArchive(path);
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

void prefixWrappedNames(const std::vector<std::string> &planNames,
                        NamedTensors &tensors, const std::string &source) {
  std::unordered_set<std::string> plan(planNames.begin(), planNames.end());
  std::unordered_set<std::string> file;
  std::vector<std::string *> strays;
  for (auto &[name, tensor] : tensors) {
    file.insert(name);
    if (!plan.count(name))
      strays.push_back(&name);
  }
  if (strays.empty())
    return;
  // The candidates come from the first stray: plan names ending in ".name".
  const std::string &first = *strays.front();
  std::vector<std::string> prefixes;
  for (const std::string &planName : planNames) {
    size_t cut = planName.size() - first.size();
    if (planName.size() <= first.size() + 1 || planName[cut - 1] != '.' ||
        planName.compare(cut, std::string::npos, first) != 0)
      continue;
    std::string prefix = planName.substr(0, cut);
    bool fits = true;
    for (const std::string *stray : strays)
      fits =
          fits && plan.count(prefix + *stray) && !file.count(prefix + *stray);
    if (fits)
      prefixes.push_back(prefix);
  }
  if (prefixes.size() > 1) {
    std::string list;
    for (const std::string &prefix : prefixes)
      list += (list.empty() ? "\"" : ", \"") + prefix + "\"";
    throw RuntimeError(source +
                       ": its names match the plan's under several "
                       "prefixes (" +
                       list + "); rename them to the plan's");
  }
  if (prefixes.empty())
    return;
  for (std::string *stray : strays)
    *stray = prefixes.front() + *stray;
}

} // namespace ds::runtime::detail
