//===- TorchSave.cpp - The file format of Python's torch.save -------------===//

#include "ds/TensorIO/TorchSave.h"

#include "Pickle.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>

namespace ds::runtime::detail {

c10::IValue readTorchSave(const std::string &path) {
  caffe2::serialize::PyTorchStreamReader archive(path);
  at::DataPtr data;
  size_t size = 0;
  std::tie(data, size) = archive.getRecord("data.pkl");
  std::string pickle(static_cast<const char *>(data.get()), size);
  auto readStorage = [&](const std::string &key, size_t bytes) {
    at::DataPtr record;
    size_t recordSize = 0;
    if (bytes > 0)
      std::tie(record, recordSize) = archive.getRecord("data/" + key);
    TORCH_CHECK(recordSize == bytes, "record data/", key, " holds ", recordSize,
                " bytes, its tensor needs ", bytes);
    return c10::Storage(c10::Storage::use_byte_size_t(), bytes,
                        std::move(record), /*allocator=*/nullptr,
                        /*resizable=*/false);
  };
  return unpickleValue(pickle, readStorage);
}

std::vector<char> writeTorchSave(const c10::IValue &value) {
  std::vector<at::Tensor> storages;
  std::string pickle = pickleValue(value, storages);
  std::vector<char> archive;
  archive.reserve(pickle.size());
  caffe2::serialize::PyTorchStreamWriter writer(
      [&](const void *bytes, size_t size) {
        const char *begin = static_cast<const char *>(bytes);
        archive.insert(archive.end(), begin, begin + size);
        return size;
      });
  torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(),
                                     storages, writer);
  writer.writeEndOfFile();
  return archive;
}

c10::IValue pythonCall(const std::string &qualifiedName,
                       std::vector<c10::IValue> args) {
  return c10::ivalue::Tuple::create(
      {c10::IValue(kPythonCallTag), c10::IValue(qualifiedName),
       c10::ivalue::Tuple::create(std::move(args))});
}

c10::IValue torchSize(const std::vector<int64_t> &shape) {
  c10::List<int64_t> sizes(shape);
  return pythonCall("torch.Size", {c10::IValue(sizes)});
}

c10::IValue orderedDict(const c10::impl::GenericDict &dict) {
  c10::List<c10::IValue> items(c10::AnyType::get());
  for (const auto &entry : dict)
    items.push_back(c10::ivalue::Tuple::create(entry.key(), entry.value()));
  return pythonCall("collections.OrderedDict", {c10::IValue(items)});
}

} // namespace ds::runtime::detail
