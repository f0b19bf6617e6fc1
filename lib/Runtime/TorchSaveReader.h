//===- TorchSaveReader.h - Files written by Python's torch.save --*- C++
//-*-===//
//
// torch::pickle_load of LibTorch 1.13 cannot read a dict with exactly one
// key or a list with one element as Python writes them (its unpickler lacks
// the SETITEM and APPEND opcodes), so this reader unpickles the zip archive
// itself and rewrites those into the equivalent SETITEMS / APPENDS forms. Private to
// lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_TORCHSAVEREADER_H
#define DS_LIB_RUNTIME_TORCHSAVEREADER_H

#include <ATen/core/ivalue.h>

#include <string>

namespace ds::runtime::detail {

/// The object saved in `path` by torch.save (zip format, the default since
/// PyTorch 1.6) or torch::pickle_save. Throws c10::Error on bad files.
c10::IValue readTorchSave(const std::string &path);

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_TORCHSAVEREADER_H
