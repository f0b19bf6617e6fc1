//===- AtomicFile.h - Replace a file in one step ----------------*- C++ -*-===//
//
// Output files (plans, losses, weights) are written to a temporary file in
// the target's folder and renamed over the target, so that a reader never
// sees half a file and a crash leaves the old file intact.
//
//===----------------------------------------------------------------------===//

#ifndef DS_PLAN_ATOMICFILE_H
#define DS_PLAN_ATOMICFILE_H

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ds::plan {

/// What a caller of writeFileAtomic sees of the bytes going out.
struct WriteTap {
  /// Called with each run of bytes write() accepted, in file order: a hash
  /// is computed while writing (checkpoint manifests), not by reading the
  /// file back.
  std::function<void(std::string_view)> written;
  /// Test hook: once this many bytes have gone out, write() fails with
  /// `failErrno` as a full disk fails part-way through a file (the error
  /// path is then the real one; the simulated failure is final, even
  /// EINTR). SIZE_MAX: never.
  size_t failAfter = SIZE_MAX;
  int failErrno = ENOSPC;
};

/// Writes `contents` to `path` atomically. Throws std::runtime_error
/// ("cannot write <path>: <reason>", e.g. "write failed: No space left on
/// device") and leaves no temporary file or open descriptor behind, also
/// when `tap.written` throws (its exception passes through).
void writeFileAtomic(const std::string &path, std::string_view contents,
                     const WriteTap &tap = {});

} // namespace ds::plan

#endif // DS_PLAN_ATOMICFILE_H
