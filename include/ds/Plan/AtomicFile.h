//===- AtomicFile.h - Replace a file in one step ----------------*- C++ -*-===//
//
// Output files (plans, losses, weights) are written to a temporary file in
// the target's folder and renamed over the target, so that a reader never
// sees half a file and a crash leaves the old file intact.
//
//===----------------------------------------------------------------------===//

#ifndef DS_PLAN_ATOMICFILE_H
#define DS_PLAN_ATOMICFILE_H

#include <stdexcept>
#include <string>
#include <string_view>

namespace ds::plan {

/// Writes `contents` to `path` atomically. Throws std::runtime_error
/// ("cannot write <path>: <reason>") and leaves no temporary file behind.
void writeFileAtomic(const std::string &path, std::string_view contents);

} // namespace ds::plan

#endif // DS_PLAN_ATOMICFILE_H
