//===- CheckpointHash.h - XXH64, the checkpoint manifest's hash -*- C++ -*-===//
//
// XXH64 (Yann Collet's xxHash, 64-bit variant): fast (several GB/s on one
// core, well above disk speed) and good at catching flipped bits, cut or
// shuffled bytes. Not cryptographic: it guards against disks, copies and
// truncation, not against someone forging a checkpoint. Written here (about
// 60 lines) rather than taken from a library: the runtime must build where
// only LibTorch is installed. `xxhsum -H64 FILE` (or `xxh64sum`) prints the
// same value as hexDigest(). Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_CHECKPOINTHASH_H
#define DS_LIB_RUNTIME_CHECKPOINTHASH_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ds::runtime::detail {

/// XXH64 over bytes given in pieces of any size: update() as they are
/// written, digest() at the end (the value equals the one-shot hash).
class Xxh64 {
public:
  explicit Xxh64(uint64_t seed = 0);
  void update(const void *data, size_t size);
  void update(std::string_view bytes) { update(bytes.data(), bytes.size()); }
  /// The hash of everything given so far (does not end the stream).
  uint64_t digest() const;
  /// Bytes given so far.
  uint64_t size() const { return total_; }

private:
  uint64_t seed_;
  uint64_t lanes_[4];
  uint64_t total_ = 0;
  /// The start of a 32-byte stripe that update() has not completed.
  unsigned char pending_[32];
  size_t pendingSize_ = 0;
};

/// XXH64 of `bytes` in one call.
uint64_t xxh64(std::string_view bytes, uint64_t seed = 0);

/// The 16 lowercase hex digits xxhsum prints ("ef46db3751d8e999").
std::string hexDigest(uint64_t hash);

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_CHECKPOINTHASH_H
