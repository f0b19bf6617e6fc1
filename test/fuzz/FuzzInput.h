//===- FuzzInput.h - Turning fuzz bytes into the files readers take -*- C++ -*-===//
//
// Most readers take a path, so a fuzz input becomes files in a scratch
// folder of the process's own (removed at exit). An input that stands for
// several files (a checkpoint, a model and its example inputs) is a sequence
// of records, each [u8 name length][name][u32 little-endian size][bytes];
// test/fuzz/make_corpus.py packs real files into it. A name is kept only
// when it is a plain relative path (letters, digits, `_.-`, at most one
// `/`, no `..`, no part starting with `.`), so a mutated name never writes
// outside the folder.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TEST_FUZZ_FUZZINPUT_H
#define DS_TEST_FUZZ_FUZZINPUT_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ds::fuzz {

/// One named file of a record sequence.
using Record = std::pair<std::string, std::string_view>;

/// The records in `data`; a size that runs past the end takes what is left.
/// Records with unsafe names are dropped.
std::vector<Record> splitRecords(const uint8_t *data, size_t size);

/// The process's scratch folder, emptied: files a previous input left are
/// removed.
std::string freshScratchFolder();

/// Writes `bytes` to `folder/name` (creating one level of subfolder) and
/// returns the path; "" when it cannot (a name that clashes with an earlier
/// record's, "a" then "a/b").
std::string writeFile(const std::string &folder, const std::string &name,
                      std::string_view bytes);

/// Whether DS_FUZZ_VERBOSE is set: targets then print the errors they
/// accept (diagnostics, exceptions), to check what a seed reaches.
bool verbose();

} // namespace ds::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif // DS_TEST_FUZZ_FUZZINPUT_H
