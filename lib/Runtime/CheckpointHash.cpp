//===- CheckpointHash.cpp - XXH64, the checkpoint manifest's hash ---------===//
//
// The algorithm as xxHash's specification (doc/xxhash_spec.md) gives it:
// four lanes over 32-byte stripes, then the tail in 8-, 4- and 1-byte steps,
// then the avalanche. unittests/Runtime/CheckpointManifestTest.cpp checks
// it against xxhsum's own sanity vectors.
//
//===----------------------------------------------------------------------===//

#include "CheckpointHash.h"

#include <cstring>

namespace ds::runtime::detail {

namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ULL;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Little-endian loads: the hash is defined on the bytes, not on the host.
uint64_t read64(const unsigned char *p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}

uint32_t read32(const unsigned char *p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap32(v);
#endif
  return v;
}

uint64_t round(uint64_t acc, uint64_t input) {
  acc += input * kPrime2;
  return rotl(acc, 31) * kPrime1;
}

uint64_t mergeRound(uint64_t acc, uint64_t lane) {
  acc ^= round(0, lane);
  return acc * kPrime1 + kPrime4;
}

void stripe(uint64_t lanes[4], const unsigned char *p) {
  for (int i = 0; i < 4; ++i)
    lanes[i] = round(lanes[i], read64(p + 8 * i));
}

} // namespace

Xxh64::Xxh64(uint64_t seed)
    : seed_(seed), lanes_{seed + kPrime1 + kPrime2, seed + kPrime2, seed,
                          seed - kPrime1} {}

void Xxh64::update(const void *data, size_t size) {
  const auto *p = static_cast<const unsigned char *>(data);
  total_ += size;
  if (pendingSize_ + size < 32) {
    if (size)
      std::memcpy(pending_ + pendingSize_, p, size);
    pendingSize_ += size;
    return;
  }
  if (pendingSize_) {
    size_t fill = 32 - pendingSize_;
    std::memcpy(pending_ + pendingSize_, p, fill);
    stripe(lanes_, pending_);
    p += fill;
    size -= fill;
    pendingSize_ = 0;
  }
  for (; size >= 32; p += 32, size -= 32)
    stripe(lanes_, p);
  if (size)
    std::memcpy(pending_, p, size);
  pendingSize_ = size;
}

uint64_t Xxh64::digest() const {
  uint64_t h;
  if (total_ >= 32) {
    h = rotl(lanes_[0], 1) + rotl(lanes_[1], 7) + rotl(lanes_[2], 12) +
        rotl(lanes_[3], 18);
    for (uint64_t lane : lanes_)
      h = mergeRound(h, lane);
  } else {
    h = seed_ + kPrime5;
  }
  h += total_;
  const unsigned char *p = pending_;
  size_t left = pendingSize_;
  for (; left >= 8; p += 8, left -= 8)
    h = rotl(h ^ round(0, read64(p)), 27) * kPrime1 + kPrime4;
  if (left >= 4) {
    h = rotl(h ^ (uint64_t(read32(p)) * kPrime1), 23) * kPrime2 + kPrime3;
    p += 4;
    left -= 4;
  }
  for (; left > 0; ++p, --left)
    h = rotl(h ^ (uint64_t(*p) * kPrime5), 11) * kPrime1;
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

uint64_t xxh64(std::string_view bytes, uint64_t seed) {
  Xxh64 hash(seed);
  hash.update(bytes);
  return hash.digest();
}

std::string hexDigest(uint64_t hash) {
  static const char digits[] = "0123456789abcdef";
  std::string text(16, '0');
  for (int i = 15; i >= 0; --i, hash >>= 4)
    text[size_t(i)] = digits[hash & 15];
  return text;
}

} // namespace ds::runtime::detail
