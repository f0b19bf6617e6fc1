//===- Base64.cpp - Base64 for inline constant tensors --------------------===//

#include "Base64.h"

#include <array>
#include <cstdint>

namespace ds::plan::detail {

static constexpr char kAlphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string encodeBase64(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t chunk = (uint32_t(uint8_t(bytes[i])) << 16) |
                     (uint32_t(uint8_t(bytes[i + 1])) << 8) |
                     uint32_t(uint8_t(bytes[i + 2]));
    for (int shift = 18; shift >= 0; shift -= 6)
      out += kAlphabet[(chunk >> shift) & 63];
  }
  size_t rest = bytes.size() - i;
  if (rest) {
    uint32_t chunk = uint32_t(uint8_t(bytes[i])) << 16;
    if (rest == 2)
      chunk |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += kAlphabet[(chunk >> 18) & 63];
    out += kAlphabet[(chunk >> 12) & 63];
    out += rest == 2 ? kAlphabet[(chunk >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> decodeBase64(std::string_view text) {
  static const std::array<int8_t, 256> table = [] {
    std::array<int8_t, 256> t{};
    t.fill(-1);
    for (int i = 0; i < 64; ++i)
      t[uint8_t(kAlphabet[i])] = int8_t(i);
    return t;
  }();
  if (text.size() % 4 != 0)
    return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    bool last = i + 4 == text.size();
    int pad = 0;
    uint32_t chunk = 0;
    for (size_t k = 0; k < 4; ++k) {
      char c = text[i + k];
      if (c == '=' && last && k >= 2) {
        ++pad;
        chunk <<= 6;
        continue;
      }
      int8_t v = table[uint8_t(c)];
      if (v < 0 || pad) // A data character after padding is invalid too.
        return std::nullopt;
      chunk = (chunk << 6) | uint32_t(v);
    }
    out += char((chunk >> 16) & 0xff);
    if (pad < 2)
      out += char((chunk >> 8) & 0xff);
    if (pad < 1)
      out += char(chunk & 0xff);
  }
  return out;
}

} // namespace ds::plan::detail
