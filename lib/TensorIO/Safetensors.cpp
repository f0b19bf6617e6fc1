//===- Safetensors.cpp - The .safetensors tensor file format --------------===//

#include "ds/TensorIO/Safetensors.h"

#include "ds/Plan/AtomicFile.h"
#include "ds/TensorIO/DTypes.h"
#include "ds/Support/JsonPath.h"
#include "ds/TensorIO/RuntimeError.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace ds::runtime {

using ordered_json = nlohmann::ordered_json;

namespace {

constexpr std::array<std::pair<const char *, at::ScalarType>, 10> kDTypes = {{
    {"F64", at::kDouble},
    {"F32", at::kFloat},
    {"F16", at::kHalf},
    {"BF16", at::kBFloat16},
    {"I64", at::kLong},
    {"I32", at::kInt},
    {"I16", at::kShort},
    {"I8", at::kChar},
    {"U8", at::kByte},
    {"BOOL", at::kBool},
}};

/// Header lengths above this are certainly not a safetensors header.
constexpr uint64_t kMaxHeaderBytes = uint64_t(100) << 20;

[[noreturn]] void fail(const std::string &path, const std::string &detail) {
  throw RuntimeError(path + ": " + detail);
}

at::ScalarType parseDType(const std::string &path, const std::string &key,
                          const ordered_json &value) {
  if (value.is_string())
    for (const auto &[name, type] : kDTypes)
      if (value.get<std::string>() == name)
        return type;
  fail(path, "tensor \"" + key + "\": unsupported dtype " + value.dump() +
                 " (expected F64, F32, F16, BF16, I64, I32, I16, I8, U8 or "
                 "BOOL)");
}

std::vector<int64_t> parseIntArray(const std::string &path,
                                   const std::string &key, const char *field,
                                   const ordered_json &entry) {
  auto it = entry.find(field);
  bool ok = it != entry.end() && it->is_array();
  std::vector<int64_t> values;
  if (ok)
    for (const ordered_json &item : *it) {
      if (!item.is_number_integer() || item.get<int64_t>() < 0) {
        ok = false;
        break;
      }
      values.push_back(item.get<int64_t>());
    }
  if (!ok)
    fail(path, "tensor \"" + key + "\": \"" + field +
                   "\" must be an array of non-negative integers");
  return values;
}

uint64_t readHeaderLength(std::ifstream &file) {
  unsigned char bytes[8];
  file.read(reinterpret_cast<char *>(bytes), 8);
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length = (length << 8) | bytes[i];
  return length;
}

} // namespace

NamedTensors readSafetensors(const std::string &path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file)
    fail(path, std::string("cannot open: ") + std::strerror(errno));
  uint64_t fileSize = uint64_t(file.tellg());
  file.seekg(0);
  if (fileSize < 8)
    fail(path, "not a safetensors file: " + std::to_string(fileSize) +
                   " bytes, shorter than the 8-byte header length");
  uint64_t headerLength = readHeaderLength(file);
  if (headerLength > kMaxHeaderBytes || headerLength > fileSize - 8)
    fail(path, "not a safetensors file: header length " +
                   std::to_string(headerLength) + " exceeds the file size (" +
                   std::to_string(fileSize) + " bytes)");
  std::string headerText(headerLength, '\0');
  file.read(headerText.data(), std::streamsize(headerLength));

  ordered_json header;
  try {
    header = ordered_json::parse(headerText);
  } catch (const ordered_json::exception &error) {
    // A syntax error, or a number no double holds (out_of_range 406).
    fail(path, "not a safetensors file: the header is not valid JSON (" +
                   ds::json::parseFailure(error) + ")");
  }
  if (!header.is_object())
    fail(path, "not a safetensors file: the header is not a JSON object");

  uint64_t dataStart = 8 + headerLength;
  uint64_t dataSize = fileSize - dataStart;
  NamedTensors tensors;
  for (const auto &[key, entry] : header.items()) {
    if (key == "__metadata__")
      continue;
    if (!entry.is_object() || !entry.contains("dtype"))
      fail(path, "tensor \"" + key +
                     "\": expected {\"dtype\", \"shape\", "
                     "\"data_offsets\"}");
    at::ScalarType type = parseDType(path, key, entry["dtype"]);
    std::vector<int64_t> shape = parseIntArray(path, key, "shape", entry);
    std::vector<int64_t> offsets =
        parseIntArray(path, key, "data_offsets", entry);
    if (offsets.size() != 2 || offsets[0] > offsets[1] ||
        uint64_t(offsets[1]) > dataSize)
      fail(path, "tensor \"" + key + "\": data_offsets " +
                     plan::formatShape(offsets) +
                     " do not lie within the data section (" +
                     std::to_string(dataSize) + " bytes)");
    at::Tensor tensor = at::empty(shape, at::TensorOptions().dtype(type));
    int64_t bytes = int64_t(tensor.nbytes());
    if (offsets[1] - offsets[0] != bytes)
      fail(path, "tensor \"" + key + "\": " + describeTensor(tensor) +
                     " needs " + std::to_string(bytes) +
                     " bytes, data_offsets span " +
                     std::to_string(offsets[1] - offsets[0]));
    file.seekg(std::streamoff(dataStart + uint64_t(offsets[0])));
    file.read(static_cast<char *>(tensor.data_ptr()), std::streamsize(bytes));
    if (!file)
      fail(path, "tensor \"" + key + "\": cannot read its bytes");
    tensors.emplace_back(key, std::move(tensor));
  }
  return tensors;
}

void writeSafetensors(const std::string &path, const NamedTensors &tensors) {
  ordered_json header = ordered_json::object();
  std::vector<at::Tensor> contiguous;
  int64_t offset = 0;
  for (const auto &[name, tensor] : tensors) {
    const char *dtype = nullptr;
    for (const auto &[spelling, type] : kDTypes)
      if (type == tensor.scalar_type())
        dtype = spelling;
    if (!dtype)
      fail(path, "tensor \"" + name + "\": safetensors cannot store " +
                     describeTensor(tensor));
    at::Tensor data = tensor.detach().to(at::kCPU).contiguous();
    int64_t bytes = int64_t(data.nbytes());
    header[name] = {{"dtype", dtype},
                    {"shape", data.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    contiguous.push_back(std::move(data));
  }
  std::string headerText = header.dump();
  // Readers may map the data section; keep it 8-byte aligned.
  headerText.append((8 - headerText.size() % 8) % 8, ' ');

  std::string contents;
  contents.reserve(8 + headerText.size() + size_t(offset));
  uint64_t length = headerText.size();
  for (int i = 0; i < 8; ++i)
    contents += char((length >> (8 * i)) & 0xff);
  contents += headerText;
  for (const at::Tensor &data : contiguous)
    if (data.nbytes())
      contents.append(static_cast<const char *>(data.data_ptr()),
                      data.nbytes());
  try {
    plan::writeFileAtomic(path, contents);
  } catch (const std::runtime_error &error) {
    throw RuntimeError(error.what());
  }
}

} // namespace ds::runtime
