//===- Report.h - Memory and traffic reports, predicted or measured -*- C++
//-*-//
//
// `ds-compile --report` predicts and `ds-run --report` measures the same
// numbers in one JSON shape (docs/runtime.md, "Reports"):
//
//   {"kind": "predicted" | "measured", "world_size": W, ...,
//    "ranks": [{"rank": 0, "param_bytes": .., "grad_bytes": ..,
//               "optimizer_state_bytes": .., "peak_bytes": ..,
//               "comm_volume_elements": {"all_reduce": .., "reduce_scatter":
//                 .., "all_gather": .., "broadcast": .., "total": ..}}, ...]}
//
// Communication volume is per optimizer step, counted as the ZeRO paper
// counts it: a collective over a full (unsharded) buffer of n elements is n
// for reduce-scatter, all-gather and broadcast, and 2n for all-reduce; one
// rank has no traffic. Load-time broadcasts are not part of it.
//
// Plain C++ (no MLIR, no LibTorch): both tools use it.
//
//===----------------------------------------------------------------------===//

#ifndef DS_PLAN_REPORT_H
#define DS_PLAN_REPORT_H

#include "ds/Plan/Plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ds::plan {

/// Elements moved by collectives, by kind, counted as the ZeRO paper counts:
/// a collective over a full (unsharded) buffer of n elements is 2n for
/// all-reduce and n for reduce-scatter, all-gather and broadcast. Reports
/// hold it per optimizer step; the runtime's communicators count with it.
struct CommVolume {
  int64_t allReduce = 0;
  int64_t reduceScatter = 0;
  int64_t allGather = 0;
  int64_t broadcast = 0;

  int64_t total() const {
    return allReduce + reduceScatter + allGather + broadcast;
  }
  /// Per-kind difference (the volume between two snapshots).
  CommVolume operator-(const CommVolume &other) const {
    return {allReduce - other.allReduce, reduceScatter - other.reduceScatter,
            allGather - other.allGather, broadcast - other.broadcast};
  }
  CommVolume &operator+=(const CommVolume &other) {
    allReduce += other.allReduce;
    reduceScatter += other.reduceScatter;
    allGather += other.allGather;
    broadcast += other.broadcast;
    return *this;
  }
};

struct RankReport {
  int64_t rank = 0;
  /// Bytes held between optimizer steps.
  int64_t paramBytes = 0;
  int64_t gradBytes = 0;
  int64_t optimizerStateBytes = 0;
  /// Buffers (BatchNorm statistics); part of peak, not of the three above.
  int64_t bufferBytes = 0;
  /// Live-value bytes of the program at its peak (train, else eval).
  int64_t activationPeakBytes = 0;
  /// activationPeakBytes + param + buffer + grad + optimizer state bytes.
  int64_t peakBytes = 0;
  CommVolume comm;
};

struct Report {
  /// "predicted" (ds-compile) or "measured" (ds-run).
  std::string kind = "predicted";
  int64_t worldSize = 1;
  /// ZeRO stage the numbers are for (only 0 today).
  int64_t zeroStage = 0;
  int64_t gradientAccumulationSteps = 1;
  /// Measured reports: optimizer steps the volume is averaged over.
  int64_t steps = 0;
  /// Elements broadcast once at load (rank 0's state to the others,
  /// counted n per element; 0 on one rank). Not in the per-step volume.
  int64_t loadBroadcastElements = 0;
  std::vector<RankReport> ranks;
};

/// Bytes of optimizer state per trainable element for an engine config
/// (DeepSpeed JSON): 2 x element size for Adam/AdamW (m, v), 1 x for SGD
/// with momentum > 0, 0 for SGD without momentum and frozen engines (no
/// "optimizer" section). `elementBytes` is the parameters' element size.
int64_t optimizerStateBytesPerElement(const ordered_json &engineConfig,
                                      int64_t elementBytes);

/// Whether the engine config has no optimizer (a frozen engine).
bool engineFrozen(const ordered_json &engineConfig);

/// ZeRO stage 0 prediction for every rank of `plan` (all ranks hold the
/// same numbers): params, gradients of trainable parameters of non-frozen
/// engines, optimizer state, predictPeakBytes of programs.train (else
/// eval) plus all state, gradients and optimizer state; all-reduce 2 x the
/// trainable elements per optimizer step when world_size > 1.
Report predictReport(const Plan &plan);

ordered_json reportToJson(const Report &report);
/// Throws std::runtime_error on a malformed report.
Report reportFromJson(const ordered_json &json);

/// Writes the report as indented JSON, atomically. Throws
/// std::runtime_error.
void writeReport(const Report &report, const std::string &path);

} // namespace ds::plan

#endif // DS_PLAN_REPORT_H
