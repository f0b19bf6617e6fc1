//===- TorchScriptDebugInfo.cpp - Checks a TorchScript archive's debug info ===//
//
// The layout LibTorch 2.15 writes and reads (source_range_serialization.cpp):
//   (FORMAT_WITH_STRING_TABLE, (str, ...), ((offset, range, tag), ...))
// or, from older writers, the records' tuple alone. A range is
// (source, start, end); a source is ([text index, ...], filename index,
// line) with the string table, else (text, filename or None, line).
//
//===----------------------------------------------------------------------===//

#include "ds/TensorIO/TorchScriptDebugInfo.h"

#include "Pickle.h"
#include "ds/TensorIO/RuntimeError.h"

#include <caffe2/serialize/inline_container.h>
#include <c10/util/Exception.h>

#include <fstream>
#include <optional>

namespace ds::runtime {
namespace {

constexpr const char *kStringTableTag = "FORMAT_WITH_STRING_TABLE";

class DebugRecordChecker {
public:
  DebugRecordChecker(std::string where) : where_(std::move(where)) {}

  void check(const c10::IValue &top) {
    std::vector<c10::IValue> items = tupleOf(top, "the record", 1);
    if (items[0].isString() && items[0].toStringRef() == kStringTableTag) {
      if (items.size() < 3)
        fail("the string table form has " + std::to_string(items.size()) +
             " fields, not 3");
      for (const c10::IValue &text : tupleOf(items[1], "the string table", 0)) {
        if (!text.isString())
          fail("a string table entry is a " + text.tagKind());
        ++tableSize_;
      }
      checkLines(items[2]);
    } else {
      checkLines(top);
    }
  }

private:
  [[noreturn]] void fail(const std::string &problem) const {
    throw RuntimeError(where_ + ": damaged debug info (" + problem +
                       "); save the model again with torch.jit.save");
  }

  std::vector<c10::IValue> tupleOf(const c10::IValue &value, const char *what,
                                   size_t atLeast) const {
    if (!value.isTuple())
      fail(std::string(what) + " is a " + value.tagKind() + ", not a tuple");
    std::vector<c10::IValue> items = value.toTupleRef().elements().vec();
    if (items.size() < atLeast)
      fail(std::string(what) + " has " + std::to_string(items.size()) +
           " fields, fewer than " + std::to_string(atLeast));
    return items;
  }

  int64_t intOf(const c10::IValue &value, const char *what) const {
    if (!value.isInt())
      fail(std::string(what) + " is a " + value.tagKind() + ", not an int");
    return value.toInt();
  }

  /// The index into the string table, checked.
  size_t tableIndex(const c10::IValue &value, const char *what) const {
    int64_t index = intOf(value, what);
    if (index < 0 || size_t(index) >= tableSize_)
      fail(std::string(what) + " " + std::to_string(index) +
           " is outside the string table of " + std::to_string(tableSize_));
    return size_t(index);
  }

  void checkLines(const c10::IValue &lines) {
    for (const c10::IValue &line : tupleOf(lines, "the records", 0)) {
      std::vector<c10::IValue> fields = tupleOf(line, "a record", 2);
      intOf(fields[0], "a byte offset");
      checkRange(fields[1]);
    }
  }

  void checkRange(const c10::IValue &range) {
    std::vector<c10::IValue> fields = tupleOf(range, "a source range", 3);
    if (fields.size() != 3)
      fail("a source range has " + std::to_string(fields.size()) +
           " fields, not 3");
    checkSource(fields[0]);
    // Ranges past their text's end are not checked: torch.jit.save writes
    // [0, 1) over an empty text for builtin code, and LibTorch copes.
    intOf(fields[1], "a range start");
    intOf(fields[2], "a range end");
  }

  void checkSource(const c10::IValue &source) {
    std::vector<c10::IValue> fields = tupleOf(source, "a source", 3);
    if (fields.size() != 3)
      fail("a source has " + std::to_string(fields.size()) + " fields, not 3");
    intOf(fields[2], "a starting line");
    if (tableSize_ == 0) {
      if (!fields[0].isString())
        fail("a source text is a " + fields[0].tagKind());
      if (!fields[1].isNone() && !fields[1].isString())
        fail("a file name is a " + fields[1].tagKind());
      return;
    }
    // torch.jit._pickle.build_intlist: an int list (a generic list of ints
    // from this project's unpickler).
    if (!fields[0].isList())
      fail("a source's text pieces are a " + fields[0].tagKind() +
           ", not a list of ints");
    tableIndex(fields[1], "a file name index");
    for (const c10::IValue &piece : fields[0].toListRef())
      tableIndex(piece, "a text piece index");
  }

  std::string where_;
  /// The string table's size (0: the form without one).
  size_t tableSize_ = 0;
};

bool isZipFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in && magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 &&
         magic[3] == 4;
}

} // namespace

void checkTorchScriptDebugInfo(const std::string &path) {
  if (!isZipFile(path))
    return;
  std::optional<caffe2::serialize::PyTorchStreamReader> archive;
  try {
    archive.emplace(path);
  } catch (const c10::Error &) {
    return; // Not an archive LibTorch reads; torch::jit::load says why.
  }
  for (const std::string &record : archive->getAllRecords()) {
    if (record.size() < 10 ||
        record.compare(record.size() - 10, 10, ".debug_pkl") != 0)
      continue;
    std::string where = path + ": " + record;
    c10::IValue value;
    try {
      auto [data, size] = archive->getRecord(record);
      std::string pickle(static_cast<const char *>(data.get()), size);
      value = detail::unpickleValue(
          pickle, [&](const std::string &, size_t) -> c10::Storage {
            TORCH_CHECK(false, "debug info holds no tensors");
          });
    } catch (const c10::Error &error) {
      throw RuntimeError(where + ": damaged debug info (" +
                         error.what_without_backtrace() +
                         "); save the model again with torch.jit.save");
    }
    DebugRecordChecker(where).check(value);
  }
}

} // namespace ds::runtime
