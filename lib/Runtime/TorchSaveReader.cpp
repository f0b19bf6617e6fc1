//===- TorchSaveReader.cpp - Files written by Python's torch.save ---------===//

#include "TorchSaveReader.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

namespace ds::runtime::detail {

namespace {

/// Python pickles a one-element list with APPEND and a one-item dict with
/// SETITEM, which LibTorch 1.13's unpickler lacks; it knows APPENDS and
/// SETITEMS, which mean the same after a MARK below the element. This walks
/// the opcodes of a protocol 2 pickle (torch.save's), tracking where each
/// stack value's opcodes begin, and rewrites every APPEND / SETITEM into a
/// MARK at the start of its value (key) plus APPENDS / SETITEMS. A pickle
/// it does not understand is returned unchanged for the unpickler to judge.
std::string rewriteSingleItemOps(const std::string &pickle) {
  struct Entry {
    size_t start;
    bool mark;
  };
  std::vector<Entry> stack;
  std::vector<size_t> marks;    // Offsets that get a MARK inserted.
  std::vector<size_t> replaced; // Offsets of APPEND / SETITEM.
  auto popToMark = [&]() -> std::optional<size_t> {
    while (!stack.empty() && !stack.back().mark)
      stack.pop_back();
    if (stack.empty())
      return std::nullopt;
    size_t start = stack.back().start;
    stack.pop_back();
    return start;
  };
  auto pop = [&](size_t count) -> std::optional<size_t> {
    if (stack.size() < count)
      return std::nullopt;
    size_t start = stack[stack.size() - count].start;
    stack.resize(stack.size() - count);
    return start;
  };
  auto length = [&](size_t at, int bytes) -> std::optional<size_t> {
    if (at + size_t(bytes) > pickle.size())
      return std::nullopt;
    uint64_t n = 0;
    for (int i = bytes - 1; i >= 0; --i)
      n = (n << 8) | uint8_t(pickle[at + size_t(i)]);
    return size_t(n);
  };
  size_t at = 0;
  while (at < pickle.size()) {
    const size_t op = at++;
    std::optional<size_t> n = 0;
    size_t skip = 0;
    bool pushes = false;
    switch (pickle[op]) {
    case '\x80': // PROTO
      skip = 1;
      break;
    case '.': // STOP
      if (marks.empty())
        return pickle;
      {
        std::string out;
        out.reserve(pickle.size() + marks.size());
        std::sort(marks.begin(), marks.end());
        size_t m = 0, r = 0;
        for (size_t i = 0; i < pickle.size(); ++i) {
          while (m < marks.size() && marks[m] == i) {
            out += '(';
            ++m;
          }
          bool swap = r < replaced.size() && replaced[r] == i;
          out += swap ? (pickle[i] == 'a' ? 'e' : 'u') : pickle[i];
          r += swap;
        }
        return out;
      }
    case '(': // MARK
      stack.push_back({op, true});
      break;
    case 'N':
    case '\x88':
    case '\x89':
    case '}':
    case ']':
    case ')':
      pushes = true;
      break;
    case 'K':
      skip = 1;
      pushes = true;
      break; // BININT1
    case 'M':
      skip = 2;
      pushes = true;
      break; // BININT2
    case 'J':
      skip = 4;
      pushes = true;
      break; // BININT
    case 'G':
      skip = 8;
      pushes = true;
      break; // BINFLOAT
    case 'h':
      skip = 1;
      pushes = true;
      break; // BINGET
    case 'j':
      skip = 4;
      pushes = true;
      break; // LONG_BINGET
    case '\x8a':
    case 'C':
    case 'U':
    case '\x8c': // LONG1, SHORT_BIN*
      n = length(at, 1);
      skip = 1 + n.value_or(0);
      pushes = true;
      break;
    case '\x8b':
    case 'X':
    case 'B':
    case 'T': // LONG4, BINUNICODE, ...
      n = length(at, 4);
      skip = 4 + n.value_or(0);
      pushes = true;
      break;
    case 'c': { // GLOBAL module\nname\n
      size_t first = pickle.find('\n', at);
      size_t second =
          first == std::string::npos ? first : pickle.find('\n', first + 1);
      if (second == std::string::npos)
        return pickle;
      skip = second + 1 - at;
      pushes = true;
      break;
    }
    case 'q':
      skip = 1;
      break; // BINPUT
    case 'r':
      skip = 4;
      break; // LONG_BINPUT
    case '\x94':
      break; // MEMOIZE
    case '\x95':
      skip = 8;
      break; // FRAME
    case 't':
    case 'd':
    case 'l': // TUPLE, DICT, LIST
      n = popToMark();
      if (n)
        stack.push_back({*n, false});
      break;
    case 'e':
    case 'u':
    case '1': // APPENDS, SETITEMS, POP_MARK
      n = popToMark();
      break;
    case '\x85':
    case '\x86':
    case '\x87': // TUPLE1-3
      n = pop(size_t(uint8_t(pickle[op]) - 0x84));
      if (n)
        stack.push_back({*n, false});
      break;
    case 'R':
    case '\x81': // REDUCE, NEWOBJ
      n = pop(2);
      if (n)
        stack.push_back({*n, false});
      break;
    case 'Q': // BINPERSID
      n = pop(1);
      if (n)
        stack.push_back({*n, false});
      break;
    case 'b':
    case '0': // BUILD, POP
      n = pop(1);
      break;
    case '2': // DUP: a MARK here lands between the original and the copy.
      pushes = true;
      break;
    case 'a': // APPEND: list value
      n = pop(1);
      if (n) {
        marks.push_back(*n);
        replaced.push_back(op);
      }
      break;
    case 's': // SETITEM: dict key value
      n = pop(2);
      if (n) {
        marks.push_back(*n);
        replaced.push_back(op);
      }
      break;
    default:
      return pickle;
    }
    if (!n)
      return pickle;
    if (pushes)
      stack.push_back({op, false});
    at += skip;
  }
  return pickle;
}

} // namespace

c10::IValue readTorchSave(const std::string &path) {
  caffe2::serialize::PyTorchStreamReader archive(path);
  at::DataPtr data;
  size_t size = 0;
  std::tie(data, size) = archive.getRecord("data.pkl");
  std::string pickle = rewriteSingleItemOps(
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
