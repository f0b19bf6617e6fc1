//===- TorchScriptArchive.cpp - Checks a TorchScript archive's pickles ----===//
//
// The debug records' layout, as LibTorch 2.15 writes and reads it
// (source_range_serialization.cpp):
//   (FORMAT_WITH_STRING_TABLE, (str, ...), ((offset, range, tag), ...))
// or, from older writers, the records' tuple alone. A range is
// (source, start, end); a source is ([text index, ...], filename index,
// line) with the string table, else (text, filename or None, line).
//
//===----------------------------------------------------------------------===//

#include "ds/TensorIO/TorchScriptArchive.h"

#include "Pickle.h"
#include "ds/TensorIO/RuntimeError.h"

#include <caffe2/serialize/inline_container.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <set>

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
    // Records share their source tuple (pickle memo): check each once, as
    // LibTorch caches it.
    if (source.isTuple() &&
        !checkedSources_.insert(&source.toTupleRef()).second)
      return;
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
  std::set<const void *> checkedSources_;
  /// The string table's size (0: the form without one).
  size_t tableSize_ = 0;
};


/// Walks the opcodes of a pickle (protocols 0-5) and checks that every
/// length-prefixed argument lies within it. Stops at STOP or at an opcode it
/// does not know (the unpickler reports those). Returns the problem, or "".
std::string checkPickleLengths(const char *data, size_t size) {
  size_t at = 0;
  auto take = [&](size_t bytes) {
    if (bytes > size - at)
      return false;
    at += bytes;
    return true;
  };
  // The little-endian number in the `bytes` bytes just taken.
  auto little = [&](size_t bytes) {
    uint64_t value = 0;
    for (size_t i = 0; i < bytes; ++i)
      value |= uint64_t(static_cast<unsigned char>(data[at - bytes + i]))
               << (8 * i);
    return value;
  };
  auto line = [&] {
    const void *end = std::memchr(data + at, '\n', size - at);
    if (!end)
      return false;
    at = size_t(static_cast<const char *>(end) - data) + 1;
    return true;
  };
  while (at < size) {
    size_t opcodeAt = at;
    unsigned char opcode = static_cast<unsigned char>(data[at++]);
    size_t fixed = 0, prefix = 0, lines = 0;
    switch (opcode) {
    case '.':
      return "";
    case 0x80: case 'K': case 'q': case 'h':
      fixed = 1; break;
    case 'M':
      fixed = 2; break;
    case 'J': case 'r': case 'j':
      fixed = 4; break;
    case 'G': case 0x95:
      fixed = 8; break;
    case 0x8a: case 0x8c: case 'C': case 'U':
      prefix = 1; break;
    case 0x8b: case 'X': case 'B': case 'T':
      prefix = 4; break;
    case 0x8d: case 0x8e: case 0x96:
      prefix = 8; break;
    case 'c':
      lines = 2; break;
    case 'P': case 'I': case 'L': case 'F': case 'S': case 'V': case 'p':
    case 'g':
      lines = 1; break;
    case '(': case ')': case ']': case '}': case 't': case 0x85: case 0x86:
    case 0x87: case 'e': case 'a': case 's': case 'u': case 'b': case 'R':
    case 'N': case 0x88: case 0x89: case '0': case '1': case '2': case 0x81:
    case 'Q': case 0x93: case 0x94: case 0x97: case 0x98: case 0x8f:
    case 0x90: case 0x91: case 0x92: case 'l': case 'd': case 'o': case 'i':
      break;
    default:
      return "";
    }
    bool fits = take(fixed);
    if (fits && prefix) {
      fits = take(prefix);
      if (fits)
        fits = take(size_t(std::min<uint64_t>(little(prefix), SIZE_MAX)));
    }
    for (size_t i = 0; fits && i < lines; ++i)
      fits = line();
    if (!fits)
      return "the opcode at byte " + std::to_string(opcodeAt) +
             " runs past the end of the record";
  }
  return "";
}

} // namespace

void checkTorchScriptArchive(const std::string &path) {
  std::optional<caffe2::serialize::PyTorchStreamReader> archive;
  std::vector<std::string> records;
  try {
    archive.emplace(path);
    records = archive->getAllRecords();
  } catch (const c10::Error &) {
    return; // Not an archive LibTorch reads; torch::jit::load says why.
  }
  auto endsWith = [](const std::string &name, const char *tail) {
    size_t n = std::strlen(tail);
    return name.size() >= n && name.compare(name.size() - n, n, tail) == 0;
  };
  for (const std::string &record : records) {
    bool debug = endsWith(record, ".debug_pkl");
    if (!debug && !endsWith(record, ".pkl"))
      continue;
    std::string where = path + ": " + record;
    std::string pickle;
    try {
      auto [data, size] = archive->getRecord(record);
      pickle.assign(static_cast<const char *>(data.get()), size);
    } catch (const c10::Error &error) {
      throw RuntimeError(where + ": cannot read the record (" +
                         error.what_without_backtrace() + ")");
    }
    std::string problem = checkPickleLengths(pickle.data(), pickle.size());
    if (!problem.empty())
      throw RuntimeError(where + ": damaged pickle (" + problem +
                         "); save the model again with torch.jit.save");
    if (!debug)
      continue;
    c10::IValue value;
    try {
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
