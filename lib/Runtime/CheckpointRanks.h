//===- CheckpointRanks.h - What the ranks of a checkpoint share -*- C++ -*-===//
//
// A checkpoint is saved and loaded by every rank at once, each with its own
// files. The ranks exchange little: each rank's file sizes and hashes reach
// rank 0, which writes the manifest, and an error on any rank becomes every
// rank's error, so that each names the file at fault (not "another rank
// failed"). Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_CHECKPOINTRANKS_H
#define DS_LIB_RUNTIME_CHECKPOINTRANKS_H

#include <string>
#include <vector>

namespace ds::runtime {
class Communicator;
} // namespace ds::runtime

namespace ds::runtime::detail {

/// Every rank's `mine`, in rank order: a collective (two all-gathers) that
/// every rank must reach. Without a communicator (one rank): {mine}.
std::vector<std::string> gatherText(Communicator *communicator,
                                    const std::string &mine);

/// A collective: "" when `mine` is "" on every rank; else this rank's own
/// error, or the first other rank's as "on rank R: ERROR".
std::string firstError(Communicator *communicator, const std::string &mine);

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_CHECKPOINTRANKS_H
