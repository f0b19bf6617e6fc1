//===- TorchSave.cpp - The file format of Python's torch.save -------------===//

#include "ds/TensorIO/TorchSave.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include <algorithm>
#include <cstring>

namespace ds::runtime::detail {

c10::IValue readTorchSave(const std::string &path) {
  caffe2::serialize::PyTorchStreamReader archive(path);
  at::DataPtr data;
  size_t size = 0;
  std::tie(data, size) = archive.getRecord("data.pkl");
  const char *pickle = static_cast<const char *>(data.get());

  size_t offset = 0;
  auto reader = [&](char *buffer, size_t length) -> size_t {
    length = std::min(length, size - offset);
    std::memcpy(buffer, pickle + offset, length);
    offset += length;
    return length;
  };
  auto readRecord = [&](const std::string &name) {
    return std::get<0>(archive.getRecord("data/" + name));
  };
  torch::jit::Unpickler unpickler(reader, /*type_resolver=*/nullptr,
                                  /*obj_loader=*/nullptr, readRecord,
                                  /*device=*/std::nullopt);
  unpickler.set_version(archive.version());
  return unpickler.parse_ivalue();
}

std::vector<char> writeTorchSave(const c10::IValue &value) {
  // torch::jit::pickle_save, but with tag_aggregates off (see the header).
  std::vector<char> pickle;
  torch::jit::Pickler pickler(
      [&](const char *bytes, size_t size) {
        pickle.insert(pickle.end(), bytes, bytes + size);
      },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr,
      /*memoized_class_types=*/nullptr, /*get_tensor_id=*/nullptr,
      /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();

  std::vector<char> archive;
  archive.reserve(pickle.size());
  caffe2::serialize::PyTorchStreamWriter writer(
      [&](const void *bytes, size_t size) {
        const char *begin = static_cast<const char *>(bytes);
        archive.insert(archive.end(), begin, begin + size);
        return size;
      });
  torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(),
                                     pickler.tensorData(), writer);
  writer.writeEndOfFile();
  return archive;
}

} // namespace ds::runtime::detail
