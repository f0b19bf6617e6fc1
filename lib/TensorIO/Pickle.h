//===- Pickle.h - Python's pickle protocol 2, for torch.save ----*- C++ -*-===//
//
// The pickler and unpickler behind TorchSave.h: values <-> the bytes of an
// archive's data.pkl, with tensors as persistent storage ids whose data are
// the archive's records. Private to lib/TensorIO.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_TENSORIO_PICKLE_H
#define DS_LIB_TENSORIO_PICKLE_H

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Storage.h>

#include <functional>
#include <string>
#include <vector>

namespace ds::runtime::detail {

/// pythonCall(name, args) is the tuple (kPythonCallTag, name, args): named
/// tuples cannot hold values of any type.
inline constexpr const char *kPythonCallTag = "__ds_python_call__";

/// data.pkl of `value`; `storages` receives each tensor's data (contiguous,
/// its own storage), in the order of their record names "0", "1", ...
std::string pickleValue(const c10::IValue &value,
                        std::vector<at::Tensor> &storages);

/// The storage named `key` (a record "data/<key>") of `bytes` bytes.
using StorageReader =
    std::function<c10::Storage(const std::string &key, size_t bytes)>;

/// The value pickled in `pickle`. Throws c10::Error naming the problem.
c10::IValue unpickleValue(const std::string &pickle,
                          const StorageReader &readStorage);

} // namespace ds::runtime::detail

#endif // DS_LIB_TENSORIO_PICKLE_H
