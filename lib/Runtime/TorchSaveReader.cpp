//===- TorchSaveReader.cpp - Files written by Python's torch.save ---------===//

#include "TorchSaveReader.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include <cstring>

namespace ds::runtime::detail {

namespace {

/// Python pickles a one-item dict as EMPTY_DICT [memo] key value SETITEM;
/// rewrite it to EMPTY_DICT [memo] MARK key value SETITEMS, which means the
/// same and which LibTorch's unpickler understands. Anything else is left
/// as it is.
std::string rewriteSingleItemDict(std::string pickle) {
  // PROTO 2, EMPTY_DICT, ..., SETITEM, STOP.
  if (pickle.size() < 6 || pickle[0] != '\x80' || pickle[2] != '}' ||
      pickle[pickle.size() - 2] != 's' || pickle.back() != '.')
    return pickle;
  size_t afterDict = 3;
  if (pickle[afterDict] == 'q') // BINPUT: 1-byte memo index.
    afterDict += 2;
  else if (pickle[afterDict] == 'r') // LONG_BINPUT: 4-byte memo index.
    afterDict += 5;
  else if (pickle[afterDict] == '\x94') // MEMOIZE.
    afterDict += 1;
  pickle.insert(afterDict, 1, '(');
  pickle[pickle.size() - 2] = 'u';
  return pickle;
}

} // namespace

c10::IValue readTorchSave(const std::string &path) {
  caffe2::serialize::PyTorchStreamReader archive(path);
  at::DataPtr data;
  size_t size = 0;
  std::tie(data, size) = archive.getRecord("data.pkl");
  std::string pickle = rewriteSingleItemDict(
      std::string(static_cast<const char *>(data.get()), size));

  size_t offset = 0;
  auto reader = [&](char *buffer, size_t length) -> size_t {
    length = std::min(length, pickle.size() - offset);
    std::memcpy(buffer, pickle.data() + offset, length);
    offset += length;
    return length;
  };
  auto readRecord = [&](const std::string &name) {
    return std::get<0>(archive.getRecord("data/" + name));
  };
  torch::jit::Unpickler unpickler(reader, /*type_resolver=*/nullptr,
                                  /*obj_loader=*/nullptr, readRecord,
                                  /*device=*/c10::nullopt);
  unpickler.set_version(archive.version());
  return unpickler.parse_ivalue();
}

} // namespace ds::runtime::detail
