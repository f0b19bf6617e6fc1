//===- ExampleInputs.cpp - the shapes the import specialises on -----------===//
//
// The import specialises on one micro-step of one rank: the data file holds
// `[S, B, ...]` per forward argument (`[S, ...]` when unbatched), or a list
// of per-micro-step dicts (`[B, ...]`); rank 0 of the chosen micro-step sees
// rows [0, B / W).
//
//===----------------------------------------------------------------------===//

#include "ImportInternal.h"
#include "ds/TensorIO/DataFile.h"

#include "ds/Import/Import.h"

#include <set>

using namespace mlir::ds::import;

std::optional<std::string>
mlir::ds::distinctExampleSteps(const std::string &path,
                               std::vector<int64_t> &steps) {
  try {
    auto list = ::ds::runtime::readMicroStepDicts(path);
    if (!list) {
      steps = {0};
      return std::nullopt;
    }
    if (list->empty())
      return "data file " + path + ": the list of micro-steps is empty";
    std::set<std::map<std::string, std::vector<int64_t>>> seen;
    for (size_t step = 0; step < list->size(); ++step) {
      std::map<std::string, std::vector<int64_t>> shapes;
      for (const auto &[key, tensor] : (*list)[step])
        shapes[key] = tensor.sizes().vec();
      if (seen.insert(std::move(shapes)).second)
        steps.push_back(int64_t(step));
    }
  } catch (const std::exception &e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

std::optional<std::string>
mlir::ds::import::loadExampleInputs(const std::string &path, int64_t microStep,
                                    const std::vector<std::string> &argNames,
                                    const std::vector<std::string> &unbatched,
                                    unsigned worldSize,
                                    std::vector<ExampleInput> &out) {
  std::map<std::string, at::Tensor> tensors;
  // The list form holds micro-step tensors without the S dimension.
  bool listForm = false;
  try {
    auto list = ::ds::runtime::readMicroStepDicts(path);
    listForm = list.has_value();
    if (listForm && (microStep < 0 || microStep >= int64_t(list->size())))
      return "data file " + path + ": no micro-step " +
             std::to_string(microStep) + " (the list has " +
             std::to_string(list->size()) + ")";
    for (auto &[key, tensor] : listForm ? (*list)[size_t(microStep)]
                                        : ::ds::runtime::readTensorFile(path))
      tensors[key] = tensor;
  } catch (const std::exception &e) {
    return std::string(e.what());
  }

  for (const std::string &name : unbatched)
    if (std::find(argNames.begin(), argNames.end(), name) == argNames.end())
      return "--unbatched " + name + ": forward has no argument named '" +
             name + "'";

  std::vector<bool> used(tensors.size(), false);
  for (size_t i = 0; i < argNames.size(); ++i) {
    const std::string &name = argNames[i];
    std::string positional = "in" + std::to_string(i);
    auto it = tensors.find(name);
    if (it == tensors.end())
      it = tensors.find(positional);
    if (it == tensors.end()) {
      std::vector<std::string> keys;
      for (const auto &entry : tensors)
        keys.push_back("'" + entry.first + "'");
      return path + ": no tensor for forward argument '" + name +
             "' (expected key '" + name + "' or '" + positional +
             "'; the file has " + c10::Join(", ", keys) + ")";
    }
    used[std::distance(tensors.begin(), it)] = true;

    at::Tensor all = it->second;
    bool batched =
        std::find(unbatched.begin(), unbatched.end(), name) == unbatched.end();
    int64_t needRank = (batched ? 1 : 0) + (listForm ? 0 : 1);
    if (all.dim() < needRank)
      return path + ": '" + it->first + "' has shape " + c10::str(all.sizes()) +
             ", but a " +
             (batched ? (listForm ? "batched argument needs [B, ...]"
                                  : "batched argument needs [S, B, ...]")
                      : "unbatched argument needs [S, ...]");
    at::Tensor step = listForm ? all : all[0];
    if (batched) {
      int64_t b = step.size(0);
      if (b % worldSize != 0)
        return path + ": '" + it->first + "' has a global micro-batch of " +
               std::to_string(b) + " rows, not divisible by --world-size " +
               std::to_string(worldSize);
      step = step.narrow(0, 0, b / worldSize);
    }
    out.push_back({name, step.contiguous(), batched});
  }
  size_t index = 0;
  for (const auto &[key, tensor] : tensors) {
    if (!used[index++])
      return path + ": key '" + key +
             "' matches no forward argument (forward takes " +
             c10::Join(", ", argNames) + ")";
  }
  return std::nullopt;
}
