//===- TorchScriptDebugInfo.h - Checks a TorchScript archive's debug info -*- C++ -*-===//
//
// A TorchScript archive maps its code back to the Python source in
// `code/**/*.debug_pkl` records, which LibTorch unpickles lazily, the first
// time a node's source line is asked for, and indexes without bounds checks
// (ConcreteSourceRangeUnpickler: a text-table index, a tuple's fields, a
// range past its text end in a crash). The importer asks for every node's
// line, so a damaged record must be refused before torch::jit::load: this
// checks each record's structure as LibTorch 2.15 reads it.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TENSORIO_TORCHSCRIPTDEBUGINFO_H
#define DS_TENSORIO_TORCHSCRIPTDEBUGINFO_H

#include <string>

namespace ds::runtime {

/// Checks every `*.debug_pkl` record of the TorchScript archive at `path`.
/// Throws RuntimeError naming the file, the record and what is wrong; does
/// nothing for a file that is not a zip archive (torch::jit::load reports
/// that in its own words).
void checkTorchScriptDebugInfo(const std::string &path);

} // namespace ds::runtime

#endif // DS_TENSORIO_TORCHSCRIPTDEBUGINFO_H
