//===- TorchSave.h - The file format of Python's torch.save ----*- C++ -*-===//
//
// Reads and writes the zip archives of torch.save (the default format since
// PyTorch 1.6). Files written here load with Python's torch.load under its
// default weights_only=True: dicts and lists are pickled without the
// TorchScript type tags (torch.jit._pickle.restore_type_tag) that
// torch::pickle_save adds and weights_only refuses.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TENSORIO_TORCHSAVE_H
#define DS_TENSORIO_TORCHSAVE_H

#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

namespace ds::runtime::detail {

/// The object saved in `path` by torch.save or writeTorchSave; each tensor
/// record is read from the file when the unpickler asks for it (the whole
/// file is never in memory at once). Throws c10::Error on bad files.
c10::IValue readTorchSave(const std::string &path);

/// The bytes of a torch.save archive holding `value` (tensors, numbers,
/// strings, and dicts / lists / tuples of them). Throws c10::Error for a
/// value torch.save cannot hold.
std::vector<char> writeTorchSave(const c10::IValue &value);

} // namespace ds::runtime::detail

#endif // DS_TENSORIO_TORCHSAVE_H
