//===- DataFile.cpp - Training data for ds-run ----------------------------===//

#include "ds/TensorIO/DataFile.h"

#include "ds/TensorIO/TorchSave.h"

#include "ds/TensorIO/DTypes.h"
#include "ds/TensorIO/RuntimeError.h"
#include "ds/TensorIO/Safetensors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>

namespace ds::runtime {

namespace {

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string quote(const std::string &text) { return "\"" + text + "\""; }

/// The value a torch.save file holds.
c10::IValue readTorchSaveValue(const std::string &path) {
  if (!std::ifstream(path))
    throw RuntimeError("data file " + path + ": cannot open it");
  try {
    return detail::readTorchSave(path);
  } catch (const c10::Error &error) {
    std::string message = error.what_without_backtrace();
    throw RuntimeError("data file " + path +
                       ": not a torch.save file or a .safetensors file: " +
                       message.substr(0, message.find('\n')));
  }
}

/// `value` as a dict of str -> Tensor, in its key order; `what` names it in
/// errors ("data file d.pt", "data file d.pt: micro-step 3").
NamedTensors namedTensorsOf(const c10::IValue &value, const std::string &what,
                            const std::string &expected) {
  if (!value.isGenericDict())
    throw RuntimeError(what + ": expected " + expected + ", found " +
                       value.tagKind());
  NamedTensors tensors;
  for (const auto &entry : value.toGenericDict()) {
    if (!entry.key().isString())
      throw RuntimeError(what + ": a key of the dict is " +
                         entry.key().tagKind() + ", expected str");
    const std::string &key = entry.key().toStringRef();
    if (!entry.value().isTensor())
      throw RuntimeError(what + ": key " + quote(key) + " holds " +
                         entry.value().tagKind() + ", expected a tensor");
    tensors.emplace_back(key, entry.value().toTensor());
  }
  return tensors;
}

const char *kDictOrList =
    "a dict of str -> Tensor (torch.save({...})) or a list of such dicts, "
    "one per micro-step";

/// A torch.save'd dict of str -> Tensor, in the file's key order.
NamedTensors readTorchSave(const std::string &path) {
  return namedTensorsOf(readTorchSaveValue(path), "data file " + path,
                        kDictOrList);
}

/// The forward argument names for messages: "x (or in0), table (or in1)".
std::string inputNamesOf(const plan::Plan &plan) {
  std::string names;
  for (size_t i = 0; i < plan.inputs.size(); ++i)
    names += (i ? ", " : "") + plan.inputs[i].name + " (or in" +
             std::to_string(i) + ")";
  return names;
}

/// `entries` in the plan's input order, each found by the argument's name or
/// position; an entry no argument takes is an error.
NamedTensors inPlanOrder(const NamedTensors &entries, const plan::Plan &plan,
                         const std::string &file) {
  std::map<std::string, at::Tensor> byKey(entries.begin(), entries.end());
  NamedTensors ordered;
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const plan::InputDesc &input = plan.inputs[i];
    std::string positional = "in" + std::to_string(i);
    auto named = byKey.find(input.name);
    auto indexed = byKey.find(positional);
    if (named != byKey.end() && indexed != byKey.end() &&
        input.name != positional)
      throw RuntimeError(file + ": keys " + quote(input.name) + " and " +
                         quote(positional) + " both name forward argument " +
                         std::to_string(i) + "; keep one");
    if (named == byKey.end() && indexed == byKey.end())
      throw RuntimeError(file + ": missing forward argument " +
                         std::to_string(i) + " (no key " + quote(input.name) +
                         " or " + quote(positional) + ")");
    auto found = named != byKey.end() ? named : indexed;
    ordered.emplace_back(found->first, found->second);
    byKey.erase(found);
  }
  if (!byKey.empty()) {
    std::string names = inputNamesOf(plan);
    throw RuntimeError(
        file + ": unknown key " + quote(byKey.begin()->first) +
        " (forward arguments: " + (names.empty() ? "none" : names) + ")");
  }
  return ordered;
}

void checkDType(const at::Tensor &tensor, const plan::InputDesc &input,
                const std::string &what) {
  if (tensor.scalar_type() != toScalarType(input.dtype))
    throw RuntimeError(what + " is " + scalarTypeName(tensor.scalar_type()) +
                       ", the plan's argument " + quote(input.name) + " is " +
                       plan::dtypeName(input.dtype));
}

/// "[S, B, 8]" / "[S, 8]": what the file must hold for `input`.
std::string expectedShape(const plan::InputDesc &input) {
  std::string text = input.batched ? "[S, B" : "[S";
  for (size_t i = input.batched ? 1 : 0; i < input.shape.size(); ++i)
    text += ", " + (input.shape[i] == plan::kDynamicDim
                        ? std::string("*")
                        : std::to_string(input.shape[i]));
  return text + "]";
}

} // namespace

NamedTensors readTensorFile(const std::string &path) {
  if (!endsWith(path, ".safetensors"))
    return readTorchSave(path);
  try {
    return readSafetensors(path);
  } catch (const RuntimeError &error) {
    throw RuntimeError("data file " + std::string(error.what()));
  }
}

std::optional<std::vector<NamedTensors>>
readMicroStepDicts(const std::string &path) {
  if (endsWith(path, ".safetensors"))
    return std::nullopt;
  c10::IValue value = readTorchSaveValue(path);
  if (!value.isList())
    return std::nullopt;
  std::vector<NamedTensors> steps;
  const auto &list = value.toListRef();
  for (size_t step = 0; step < list.size(); ++step)
    steps.push_back(namedTensorsOf(list[step],
                                   "data file " + path + ": micro-step " +
                                       std::to_string(step),
                                   "a dict of str -> Tensor"));
  return steps;
}

DataFile DataFile::load(const std::string &path, const plan::Plan &plan,
                        const DataOptions &options) {
  const std::string file = "data file " + path;
  const std::string inputNames = inputNamesOf(plan);
  for (const std::string &name : options.unbatched) {
    auto it =
        std::find_if(plan.inputs.begin(), plan.inputs.end(),
                     [&](const auto &input) { return input.name == name; });
    if (it == plan.inputs.end())
      throw RuntimeError("--unbatched " + name +
                         ": the plan has no forward argument of that name "
                         "(arguments: " +
                         inputNames + ")");
    if (it->batched)
      throw RuntimeError("--unbatched " + name +
                         ": the plan was compiled with " + quote(name) +
                         " batched; compile it with the argument unbatched "
                         "too");
  }

  NamedTensors entries;
  if (!endsWith(path, ".safetensors")) {
    c10::IValue value = readTorchSaveValue(path);
    if (value.isList())
      return loadMicroStepList(path, value.toListRef().vec(), plan);
    entries = namedTensorsOf(value, file, kDictOrList);
  } else {
    entries = readTensorFile(path);
  }
  // Every micro-step of the stacked form has one shape: the first compiled
  // shape it fits; the error names the plan's first shape.
  std::optional<RuntimeError> firstError;
  for (size_t shape = 0; shape < plan.numShapes(); ++shape) {
    try {
      return loadStacked(path, entries, plan, shape);
    } catch (const RuntimeError &error) {
      if (!firstError)
        firstError = error;
    }
  }
  throw *firstError;
}

DataFile DataFile::loadStacked(const std::string &path,
                               const NamedTensors &entries,
                               const plan::Plan &plan, size_t shape) {
  const std::string file = "data file " + path;
  const std::vector<plan::InputDesc> &inputs = plan.shapeInputs(shape);
  const int64_t microBatchPerRank =
      shape == 0 ? plan.microBatchPerRank
                 : plan.variants[shape - 1].microBatchPerRank;
  DataFile data;
  data.path_ = path;
  data.microBatchPerRank_ = microBatchPerRank;
  data.numMicroSteps_ = std::numeric_limits<int64_t>::max();
  std::string stepsKey;
  const int64_t globalBatch = microBatchPerRank * plan.worldSize;

  NamedTensors ordered = inPlanOrder(entries, plan, file);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const plan::InputDesc &input = inputs[i];
    const auto &[key, tensor] = ordered[i];
    std::string what = file + ": key " + quote(key);
    checkDType(tensor, input, what);
    // [S, B, rest...] for batched arguments, [S, rest...] otherwise; the
    // plan's shape is [b, rest...] or [rest...].
    size_t rank = input.shape.size() + 1;
    size_t restFile = input.batched ? 2 : 1;
    size_t restPlan = input.batched ? 1 : 0;
    bool shapeOk = size_t(tensor.dim()) == rank;
    for (size_t d = 0; shapeOk && restPlan + d < input.shape.size(); ++d) {
      int64_t want = input.shape[restPlan + d];
      shapeOk = want == plan::kDynamicDim || tensor.size(restFile + d) == want;
    }
    if (!shapeOk)
      throw RuntimeError(what + " has shape " +
                         plan::formatShape(tensor.sizes().vec()) +
                         ", expected " + expectedShape(input) +
                         " (the plan's argument " + quote(input.name) + " is " +
                         describeTensor(input.dtype, input.shape) +
                         (input.batched ? " per rank)" : ", unbatched)"));
    if (input.batched && tensor.size(1) != globalBatch)
      throw RuntimeError(what + " has B = " + std::to_string(tensor.size(1)) +
                         " rows per micro-step (shape " +
                         plan::formatShape(tensor.sizes().vec()) +
                         "), but micro_batch_per_rank * world_size = " +
                         std::to_string(microBatchPerRank) + " * " +
                         std::to_string(plan.worldSize) + " = " +
                         std::to_string(globalBatch));
    int64_t steps = tensor.size(0);
    if (!stepsKey.empty() && steps != data.numMicroSteps_)
      throw RuntimeError(what + " has S = " + std::to_string(steps) +
                         " micro-steps, key " + quote(stepsKey) + " has " +
                         std::to_string(data.numMicroSteps_));
    stepsKey = key;
    data.numMicroSteps_ = steps;
    data.tensors_.push_back(tensor);
    data.batched_.push_back(input.batched);
  }
  return data;
}

DataFile DataFile::loadMicroStepList(const std::string &path,
                                     const std::vector<c10::IValue> &list,
                                     const plan::Plan &plan) {
  DataFile data;
  data.path_ = path;
  data.microBatchPerRank_ = plan.microBatchPerRank;
  data.numMicroSteps_ = int64_t(list.size());
  for (const plan::InputDesc &input : plan.inputs)
    data.batched_.push_back(input.batched);

  for (size_t step = 0; step < list.size(); ++step) {
    const std::string what =
        "data file " + path + ": micro-step " + std::to_string(step);
    NamedTensors ordered =
        inPlanOrder(namedTensorsOf(list[step], what, "a dict of str -> Tensor"),
                    plan, what);
    std::vector<at::Tensor> tensors;
    std::vector<std::vector<int64_t>> given, perRank;
    bool matches = true;
    for (size_t i = 0; i < plan.inputs.size(); ++i) {
      const plan::InputDesc &input = plan.inputs[i];
      const at::Tensor &tensor = ordered[i].second;
      checkDType(tensor, input, what + ": key " + quote(ordered[i].first));
      // A batched argument holds every rank's rows: [B, rest...].
      std::vector<int64_t> shape = tensor.sizes().vec();
      given.push_back(shape);
      if (input.batched && !shape.empty()) {
        matches = matches && shape[0] % plan.worldSize == 0;
        shape[0] /= plan.worldSize;
      }
      perRank.push_back(shape);
      tensors.push_back(tensor);
    }
    if (!matches || !plan.matchShape(perRank))
      throw RuntimeError(
          what + " has shapes " + plan::formatInputShapes(plan.inputs, given) +
          (plan.worldSize > 1
               ? " (per rank of " + std::to_string(plan.worldSize) + ": " +
                     plan::formatInputShapes(plan.inputs, perRank) + ")"
               : std::string()) +
          ", which match no compiled program (compiled, per rank: " +
          plan.describeShapes() + ")");
    data.steps_.push_back(std::move(tensors));
  }
  return data;
}

void DataFile::requireMicroSteps(int64_t needed, const std::string &why) const {
  if (numMicroSteps_ < needed)
    throw RuntimeError("data file " + path_ + " has S = " +
                       std::to_string(numMicroSteps_) + " micro-steps, but " +
                       std::to_string(needed) + " are needed (" + why + ")");
}

std::vector<at::Tensor> DataFile::sliceMicroStep(int64_t step, int64_t rank,
                                                 int64_t worldSize) const {
  if (step < 0 || step >= numMicroSteps_)
    throw RuntimeError(
        "data file " + path_ + ": micro-step " + std::to_string(step) +
        " is out of range (S = " + std::to_string(numMicroSteps_) + ")");
  if (rank < 0 || rank >= worldSize)
    throw RuntimeError("rank " + std::to_string(rank) +
                       " is out of range for world size " +
                       std::to_string(worldSize));
  std::vector<at::Tensor> inputs;
  if (!steps_.empty()) {
    // The list form: each micro-step's B rows split evenly over the ranks.
    for (size_t i = 0; i < steps_[size_t(step)].size(); ++i) {
      const at::Tensor &micro = steps_[size_t(step)][i];
      if (!batched_[i]) {
        inputs.push_back(micro);
        continue;
      }
      int64_t rows = micro.size(0) / worldSize;
      inputs.push_back(micro.narrow(0, rank * rows, rows));
    }
    return inputs;
  }
  inputs.reserve(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    at::Tensor micro = tensors_[i].select(0, step);
    if (batched_[i]) {
      int64_t rows = micro.size(0);
      if (rows != microBatchPerRank_ * worldSize)
        throw RuntimeError(
            "data file " + path_ + ": B = " + std::to_string(rows) +
            " rows do not split into " + std::to_string(worldSize) +
            " rank(s) of " + std::to_string(microBatchPerRank_));
      micro = micro.narrow(0, rank * microBatchPerRank_, microBatchPerRank_);
    }
    inputs.push_back(micro);
  }
  return inputs;
}

} // namespace ds::runtime
