//===- ExampleInputs.cpp - the shapes the import specialises on -----------===//
//
// The import specialises on one micro-step of one rank: the data file holds
// `[S, B, ...]` per forward argument (`[S, ...]` when unbatched); rank 0 of
// micro-step 0 sees rows [0, B / W).
//
//===----------------------------------------------------------------------===//

#include "ImportInternal.h"
#include <nlohmann/json.hpp>
#include <fstream>

using namespace mlir::ds::import;

static at::ScalarType safetensorsDtype(const std::string &name) {
  static const std::map<std::string, at::ScalarType> table = {
      {"F32", at::kFloat}, {"F64", at::kDouble}, {"F16", at::kHalf},
      {"BF16", at::kBFloat16}, {"I64", at::kLong}, {"I32", at::kInt},
      {"I16", at::kShort}, {"I8", at::kChar}, {"U8", at::kByte},
      {"BOOL", at::kBool}};
  auto it = table.find(name);
  if (it == table.end())
    throw std::runtime_error("unsupported safetensors dtype '" + name + "'");
  return it->second;
}

/// Reads a torch.save'd dict of tensors or a .safetensors file.
static std::map<std::string, at::Tensor> readTensorFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error(path + ": cannot open the data file");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  std::map<std::string, at::Tensor> out;
  if (llvm::StringRef(path).ends_with(".safetensors")) {
    uint64_t headerLen = 0;
    if (bytes.size() < 8)
      throw std::runtime_error(path + ": truncated safetensors file");
    std::memcpy(&headerLen, bytes.data(), 8);
    if (8 + headerLen > bytes.size())
      throw std::runtime_error(path + ": truncated safetensors header");
    auto header = nlohmann::json::parse(
        std::string(bytes.data() + 8, headerLen), nullptr, false);
    if (header.is_discarded() || !header.is_object())
      throw std::runtime_error(path + ": malformed safetensors header");
    const char *data = bytes.data() + 8 + headerLen;
    size_t dataLen = bytes.size() - 8 - headerLen;
    for (auto &[key, desc] : header.items()) {
      if (key == "__metadata__")
        continue;
      std::vector<int64_t> shape = desc.at("shape").get<std::vector<int64_t>>();
      auto offsets = desc.at("data_offsets").get<std::vector<size_t>>();
      if (offsets.size() != 2 || offsets[1] > dataLen || offsets[0] > offsets[1])
        throw std::runtime_error(path + ": bad data_offsets for '" + key + "'");
      at::Tensor t = at::empty(shape, at::TensorOptions().dtype(
                                          safetensorsDtype(desc.at("dtype"))));
      if (static_cast<size_t>(t.nbytes()) != offsets[1] - offsets[0])
        throw std::runtime_error(path + ": size of '" + key +
                                 "' does not match its shape");
      std::memcpy(t.data_ptr(), data + offsets[0], t.nbytes());
      out[key] = t;
    }
    return out;
  }
  c10::IValue loaded;
  try {
    loaded = torch::jit::pickle_load(bytes);
  } catch (const c10::Error &e) {
    throw std::runtime_error(path +
                             ": not a torch.save file or .safetensors file (" +
                             e.what_without_backtrace() + ")");
  }
  if (!loaded.isGenericDict())
    throw std::runtime_error(path + ": expected a dict of tensors");
  for (const auto &entry : loaded.toGenericDict()) {
    if (!entry.key().isString() || !entry.value().isTensor())
      throw std::runtime_error(path + ": expected a dict of str -> Tensor");
    out[entry.key().toStringRef()] = entry.value().toTensor();
  }
  return out;
}

std::optional<std::string> mlir::ds::import::loadExampleInputs(
    const std::string &path, const std::vector<std::string> &argNames,
    const std::vector<std::string> &unbatched, unsigned worldSize,
    std::vector<ExampleInput> &out) {
  std::map<std::string, at::Tensor> tensors;
  try {
    tensors = readTensorFile(path);
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
    if (it == tensors.end())
      return path + ": no tensor for forward argument '" + name +
             "' (expected key '" + name + "' or '" + positional + "')";
    used[std::distance(tensors.begin(), it)] = true;

    at::Tensor all = it->second;
    bool batched = std::find(unbatched.begin(), unbatched.end(), name) ==
                   unbatched.end();
    int64_t needRank = batched ? 2 : 1;
    if (all.dim() < needRank)
      return path + ": '" + it->first + "' has shape " +
             c10::str(all.sizes()) + ", but a " +
             (batched ? "batched argument needs [S, B, ...]"
                      : "unbatched argument needs [S, ...]");
    at::Tensor step = all[0];
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
