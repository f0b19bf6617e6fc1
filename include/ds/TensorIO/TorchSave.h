//===- TorchSave.h - The file format of Python's torch.save ----*- C++ -*-===//
//
// Reads and writes the zip archives of torch.save (the default format since
// PyTorch 1.6) with a pickler and an unpickler of our own: LibTorch's jit
// pickler cannot write Python objects such as torch.Size (DeepSpeed's
// zero_to_fp32 calls shape.numel()) and its unpickler refuses them. Files
// written here load with Python's torch.load under its default
// weights_only=True (only torch.Size, OrderedDict and tensors are written
// as Python globals, all on its allow list).
//
// Python objects in values: a call of a Python global (`torch.Size([2, 3])`,
// `collections.OrderedDict([...])`) is a value made by pythonCall() (a
// tagged tuple); torchSize() and orderedDict() build the two that
// checkpoints need. Reading gives plain values back: torch.Size as a tuple of
// ints, OrderedDict as a dict, a set as a list, a torch.dtype or torch.device
// as its name ("torch.float32"), an enum member as its name
// ("module.Class.member"; pickled as Class(value): the value), and any other
// object as a dict of its state plus "__class__" (the global's
// "module.name").
//
//===----------------------------------------------------------------------===//

#ifndef DS_TENSORIO_TORCHSAVE_H
#define DS_TENSORIO_TORCHSAVE_H

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ds::runtime::detail {

/// The object saved in `path` by torch.save or writeTorchSave; each tensor
/// record is read from the file when the unpickler asks for it (the whole
/// file is never in memory at once). Throws c10::Error on bad files.
c10::IValue readTorchSave(const std::string &path);

/// The bytes of a torch.save archive holding `value` (tensors, numbers,
/// strings, None, dicts / lists / tuples of them, and the Python calls
/// above). Tensors are written contiguous, each with its own storage.
/// Throws c10::Error for a value it cannot write.
std::vector<char> writeTorchSave(const c10::IValue &value);

/// `module.name(args...)` in a written pickle.
c10::IValue pythonCall(const std::string &qualifiedName,
                       std::vector<c10::IValue> args);
/// torch.Size(shape).
c10::IValue torchSize(const std::vector<int64_t> &shape);
/// collections.OrderedDict of the dict's items, in order.
c10::IValue orderedDict(const c10::impl::GenericDict &dict);

} // namespace ds::runtime::detail

#endif // DS_TENSORIO_TORCHSAVE_H
