//===- StateStore.cpp - Parameters and buffers of a plan ------------------===//

#include "ds/Runtime/StateStore.h"

#include "ds/TensorIO/Pt2Weights.h"
#include "WeightsArchive.h"

#include "ds/TensorIO/DTypes.h"
#include "ds/TensorIO/RuntimeError.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <map>
#include <set>

namespace ds::runtime {

using plan::StateDesc;
using plan::StateKind;

StateStore::StateStore(const plan::Plan &plan, c10::Device device)
    : plan_(plan), device_(device), tensors_(plan.state.size()),
      bound_(plan.state.size(), false), homes_(plan.state.size()),
      stores_(plan.state.size()) {
  for (size_t i = 0; i < plan.state.size(); ++i)
    index_.emplace(plan.state[i].name, int64_t(i));
}

void StateStore::load(const std::string &kind, const std::string &path,
                      bool keepMissingBuffers) {
  if (kind == "safetensors")
    loadSafetensors(path, keepMissingBuffers);
  else if (kind == "pt2")
    loadPt2(path, keepMissingBuffers);
  else
    loadTorchScript(path, keepMissingBuffers);
}

std::string weightsKindOf(const std::string &path) {
  if (isPt2Archive(path))
    return "pt2";
  if (path.size() >= 12 &&
      path.compare(path.size() - 12, 12, ".safetensors") == 0)
    return "safetensors";
  return "torchscript";
}

void StateStore::loadTorchScript(const std::string &path,
                                 bool keepMissingBuffers) {
  NamedTensors params, buffers;
  detail::readTorchScriptState(path, params, buffers);
  install(params, buffers, {}, "TorchScript archive " + path,
          keepMissingBuffers);
}

void StateStore::loadSafetensors(const std::string &path,
                                 bool keepMissingBuffers) {
  NamedTensors tensors;
  try {
    tensors = readSafetensors(path);
  } catch (const RuntimeError &error) {
    throw RuntimeError(std::string("cannot load weights: ") + error.what());
  }
  std::vector<std::string> names;
  for (const StateDesc &desc : plan_.state)
    names.push_back(desc.name);
  detail::prefixWrappedNames(names, tensors, "weights file " + path);
  install({}, {}, tensors, "weights file " + path, keepMissingBuffers);
}

void StateStore::loadPt2(const std::string &path, bool keepMissingBuffers) {
  Pt2State state = readPt2State(path);
  // Tied names: the plan declares one piece of state under one of them (the
  // compiler's first name); the others are the same tensor, not strays.
  std::set<std::string> aliases;
  for (const std::vector<std::string> &group : state.ties) {
    std::vector<std::string> known, unknown;
    for (const std::string &name : group)
      (index_.count(name) ? known : unknown).push_back(name);
    if (!known.empty())
      aliases.insert(unknown.begin(), unknown.end());
  }
  auto dropAliases = [&](NamedTensors &tensors) {
    NamedTensors kept;
    for (auto &item : tensors)
      if (!aliases.count(item.first))
        kept.push_back(std::move(item));
    tensors = std::move(kept);
  };
  dropAliases(state.params);
  dropAliases(state.buffers);
  install(state.params, state.buffers, {}, ".pt2 archive " + path,
          keepMissingBuffers);
}

namespace {

/// Collects mismatches so that one error lists them all (up to a limit).
class Problems {
public:
  void add(std::string problem) { problems_.push_back(std::move(problem)); }
  bool empty() const { return problems_.empty(); }
  std::string join() const {
    constexpr size_t kShown = 8;
    std::string text;
    for (size_t i = 0; i < problems_.size() && i < kShown; ++i)
      text += (i ? "; " : "") + problems_[i];
    if (problems_.size() > kShown)
      text += "; and " + std::to_string(problems_.size() - kShown) + " more";
    return text;
  }

private:
  std::vector<std::string> problems_;
};

struct Found {
  at::Tensor tensor;
  /// "parameter", "buffer", or "" when the file does not say.
  const char *kind;
};

const char *kindName(StateKind kind) {
  return kind == StateKind::Param ? "parameter" : "buffer";
}

} // namespace

void StateStore::install(const NamedTensors &params,
                         const NamedTensors &buffers,
                         const NamedTensors &unkinded,
                         const std::string &source, bool keepMissingBuffers) {
  std::map<std::string, Found> found;
  for (const auto &[name, tensor] : params)
    found[name] = {tensor, "parameter"};
  for (const auto &[name, tensor] : buffers)
    found[name] = {tensor, "buffer"};
  for (const auto &[name, tensor] : unkinded)
    found[name] = {tensor, ""};

  Problems problems;
  std::vector<std::string> kept;
  std::vector<at::Tensor> tensors(plan_.state.size());
  for (size_t i = 0; i < plan_.state.size(); ++i) {
    const StateDesc &desc = plan_.state[i];
    auto it = found.find(desc.name);
    if (it == found.end() && keepMissingBuffers && loaded_ &&
        desc.kind == StateKind::Buffer) {
      kept.push_back(desc.name);
      continue;
    }
    if (it == found.end()) {
      problems.add(std::string("missing ") + kindName(desc.kind) + " \"" +
                   desc.name + "\"");
      continue;
    }
    const Found &item = it->second;
    std::string wanted = kindName(desc.kind);
    if (*item.kind && wanted != item.kind)
      problems.add("\"" + desc.name + "\" is a " + item.kind +
                   " in the file, the plan says " + wanted);
    at::Tensor tensor = item.tensor;
    // Native bf16 / fp16 engines: the plan stores them in the low dtype, the
    // weights file has the model's float32 values (DeepSpeed casts the
    // module with .half() / .bfloat16()). Only float32 -> float16 /
    // bfloat16 converts; any other mismatch is an error.
    if (tensor.scalar_type() == at::kFloat &&
        (desc.dtype == plan::DType::BFloat16 ||
         desc.dtype == plan::DType::Float16) &&
        tensor.sizes().vec() == desc.shape)
      tensor = tensor.to(toScalarType(desc.dtype));
    if (tensor.scalar_type() != toScalarType(desc.dtype) ||
        tensor.sizes().vec() != desc.shape)
      problems.add("\"" + desc.name + "\": the plan says " +
                   describeTensor(desc.dtype, desc.shape) + ", the file has " +
                   describeTensor(tensor));
    tensors[i] = tensor.contiguous();
    found.erase(it);
  }
  for (const auto &[name, item] : found)
    problems.add(std::string("\"") + name + "\" (" +
                 (*item.kind ? item.kind : "tensor") + ") is not in the plan");
  if (!problems.empty())
    throw RuntimeError(source +
                       " does not match the plan's state: " + problems.join());
  at::NoGradGuard noGrad;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined())
      continue; // A kept buffer.
    if (!homes_[i].empty()) {
      // Stage 3: the rank keeps its block; a gathered view sees it too.
      stores_[i](tensors[i]);
      if (tensors_[i].defined())
        tensors_[i].copy_(tensors[i]);
    } else if (bound_[i]) {
      tensors_[i].copy_(tensors[i]); // Stays in its flat buffer.
    } else {
      tensors_[i] = tensors[i].to(device_);
    }
  }
  loaded_ = true;
  keptBuffers_ = std::move(kept);
}

void StateStore::shard(int64_t index, std::string home,
                       std::function<void(const at::Tensor &whole)> store) {
  homes_[size_t(index)] = std::move(home);
  stores_[size_t(index)] = std::move(store);
  tensors_[size_t(index)] = at::Tensor();
  bound_[size_t(index)] = false;
}

void StateStore::attach(int64_t index, const at::Tensor &view) {
  const StateDesc &state = desc(index);
  if (view.scalar_type() != toScalarType(state.dtype) ||
      view.sizes().vec() != state.shape)
    throw RuntimeError("internal error: attaching \"" + state.name + "\" (" +
                       describeTensor(state.dtype, state.shape) + ") to " +
                       describeTensor(view));
  tensors_[size_t(index)] = view;
}

void StateStore::detach(int64_t index) {
  tensors_[size_t(index)] = at::Tensor();
}

const at::Tensor &StateStore::read(int64_t index) const {
  const at::Tensor &tensor = tensors_[size_t(index)];
  if (!tensor.defined() && !homes_[size_t(index)].empty())
    throw RuntimeError(
        "parameter \"" + desc(index).name + "\" is not gathered: it lies in " +
        homes_[size_t(index)] +
        ", which ZeRO stage 3 shards across the ranks, and the bucket is not "
        "all_gather'ed (and waited) at this point of the program (a valid "
        "plan gathers it before reading it)");
  return tensor;
}

void StateStore::bind(int64_t index, const at::Tensor &storage) {
  const StateDesc &state = desc(index);
  if (storage.scalar_type() != toScalarType(state.dtype) ||
      storage.sizes().vec() != state.shape)
    throw RuntimeError("internal error: binding \"" + state.name + "\" (" +
                       describeTensor(state.dtype, state.shape) + ") to " +
                       describeTensor(storage));
  at::NoGradGuard noGrad;
  if (tensors_[size_t(index)].defined())
    storage.copy_(tensors_[size_t(index)]);
  tensors_[size_t(index)] = storage;
  bound_[size_t(index)] = true;
}

int64_t StateStore::indexOf(const std::string &name) const {
  auto it = index_.find(name);
  return it == index_.end() ? -1 : it->second;
}

const StateDesc &StateStore::desc(int64_t index) const {
  return plan_.state[index];
}

void StateStore::assign(int64_t index, const at::Tensor &value) {
  const StateDesc &state = desc(index);
  if (value.scalar_type() != toScalarType(state.dtype) ||
      value.sizes().vec() != state.shape)
    throw RuntimeError("set_state \"" + state.name + "\": the plan says " +
                       describeTensor(state.dtype, state.shape) + ", got " +
                       describeTensor(value));
  at::NoGradGuard noGrad;
  tensors_[index].copy_(value);
}

int64_t StateStore::bytes() const {
  int64_t total = 0;
  for (const at::Tensor &tensor : tensors_)
    if (tensor.defined())
      total += int64_t(tensor.nbytes());
  return total;
}

NamedTensors StateStore::named() const {
  NamedTensors items;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (!tensors_[i].defined() && !homes_[i].empty())
      throw RuntimeError("parameter \"" + plan_.state[i].name +
                         "\" is sharded (ZeRO stage 3: it lies in " +
                         homes_[i] +
                         "); gather the parameters with "
                         "Engine::gatherState(), which every rank calls");
    items.emplace_back(plan_.state[i].name, tensors_[i]);
  }
  return items;
}

} // namespace ds::runtime
