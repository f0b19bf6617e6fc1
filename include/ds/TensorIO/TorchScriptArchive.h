//===- TorchScriptArchive.h - Checks a TorchScript archive's pickles -*- C++ -*-===//
//
// torch::jit::load trusts the pickles of a TorchScript archive more than a
// reader of damaged files can:
// - its Unpickler reserves a string's declared length before it checks the
//   bytes are there (a 4 GB allocation from a 5-byte opcode);
// - the `code/**/*.debug_pkl` records, which map code back to the Python
//   source, are unpickled lazily, the first time a node's source line is
//   asked for, and indexed without bounds checks
//   (ConcreteSourceRangeUnpickler: a text-table index or a tuple's field out
//   of range is a crash, not an error). The importer asks for every node's
//   line.
// So every `.pkl` record's length-prefixed opcodes are checked against the
// record's size, and each debug record's structure as LibTorch 2.15 reads
// it, before torch::jit::load is handed the file.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TENSORIO_TORCHSCRIPTARCHIVE_H
#define DS_TENSORIO_TORCHSCRIPTARCHIVE_H

#include <string>

namespace ds::runtime {

/// Checks the pickles of the TorchScript archive at `path`. Throws
/// RuntimeError naming the file, the record and what is wrong; does nothing
/// for a file LibTorch's zip reader does not open (torch::jit::load reports
/// that in its own words).
void checkTorchScriptArchive(const std::string &path);

} // namespace ds::runtime

#endif // DS_TENSORIO_TORCHSCRIPTARCHIVE_H
