//===- World.h - This process's rank and the number of ranks ----*- C++ -*-===//
//
// The one place ds-run learns its rank and world size, and the one place
// that combines per-rank numbers. Single-rank for now; MPI replaces the
// body of these functions later.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TOOLS_DSRUN_WORLD_H
#define DS_TOOLS_DSRUN_WORLD_H

#include <cstdint>
#include <vector>

namespace ds::run {

struct World {
  int64_t rank = 0;
  int64_t size = 1;

  /// Throws std::runtime_error when launched with several ranks (mpirun),
  /// which this build does not support yet.
  static World detect();

  /// Element-wise sum over all ranks, in place (identity for one rank).
  void sumAcrossRanks(std::vector<double> &values) const;

  bool isLeader() const { return rank == 0; }
};

} // namespace ds::run

#endif // DS_TOOLS_DSRUN_WORLD_H
