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
#include <optional>
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

/// Time spent on the collectives of one kind (measured reports only).
struct CollectiveTiming {
  /// Collectives started (and waited).
  int64_t count = 0;
  /// Sum over them of the time from the call that started each one to its
  /// completion (as the backend saw it: MPI's communication thread notes
  /// when MPI completed it; a backend that cannot tell counts until the
  /// end of wait()).
  double collectiveSeconds = 0.0;
  /// Sum of the time the calling (compute) thread was blocked on them: in
  /// the call that started each one and in its wait().
  double waitSeconds = 0.0;

  CollectiveTiming &operator+=(const CollectiveTiming &other) {
    count += other.count;
    collectiveSeconds += other.collectiveSeconds;
    waitSeconds += other.waitSeconds;
    return *this;
  }
};

/// How much of the engine's communication overlapped its computation
/// (ds-run's measured report; docs/runtime.md, "Reports").
struct OverlapReport {
  CollectiveTiming allReduce;
  CollectiveTiming reduceScatter;
  CollectiveTiming allGather;
  CollectiveTiming broadcast;
  /// Wall time of the training micro-steps (forward, backward, step) the
  /// timings were taken over.
  double trainSeconds = 0.0;

  CollectiveTiming total() const {
    CollectiveTiming sum = allReduce;
    sum += reduceScatter;
    sum += allGather;
    sum += broadcast;
    return sum;
  }
};

/// One engine's share of a rank's state bytes and traffic (a multi-engine
/// report's "engines"; present for every plan). The rank's totals are the
/// sums over its engines, plus buffers and anything outside every engine.
struct EngineReport {
  std::string name;
  /// No optimizer: no gradients, no optimizer state, never updated.
  bool frozen = false;
  /// The engine's ZeRO stage as its config says (a frozen engine at stages
  /// 0-2 has nothing to shard).
  int64_t zeroStage = 0;
  int64_t paramBytes = 0;
  int64_t gradBytes = 0;
  /// On the run's device; an offloading engine's is in hostBytes.
  int64_t optimizerStateBytes = 0;
  /// ZeRO-Offload: the optimizer state and master in host memory (unset:
  /// not reported).
  std::optional<int64_t> hostBytes;
  /// Elements moved per optimizer step by the engine's collectives.
  CommVolume comm;
};

struct RankReport {
  int64_t rank = 0;
  /// Bytes held between optimizer steps.
  int64_t paramBytes = 0;
  int64_t gradBytes = 0;
  int64_t optimizerStateBytes = 0;
  /// ZeRO-Offload: the optimizer state and masters held in host memory;
  /// every other figure is the run device's (unset: not reported).
  std::optional<int64_t> hostBytes;
  /// Buffers (BatchNorm statistics); part of peak, not of the three above.
  int64_t bufferBytes = 0;
  /// Live-value bytes of the program at its peak (train, else eval).
  int64_t activationPeakBytes = 0;
  /// Predicted: activationPeakBytes (and so peakBytes) counts a dynamic
  /// tensor at its bound, an upper bound the run may stay below ("<= N").
  bool activationPeakIsBound = false;
  /// Predicted: dynamic tensors without a bound, counted 0; when nonzero
  /// activationPeakBytes and peakBytes are not upper bounds.
  int64_t unboundedValues = 0;
  /// Training buffers that exist only for part of a step: stage 2's full
  /// gradient buffer and reduce-scatter receive buffer (from the first
  /// gradient of a micro-step's backward to its end), stage 1's shard
  /// gradient (at the boundary). Predicted: the most held at once;
  /// measured: the most seen.
  int64_t transientBytes = 0;
  /// param + buffer + grad + optimizer state bytes, plus the most held at
  /// once of live values and transient buffers. Predicted: the larger of
  /// activationPeakBytes + stage 2's transient buffers (backward) and stage
  /// 1's (the boundary, when no value is live); measured: the peak of live
  /// values + transient buffers over the run.
  int64_t peakBytes = 0;
  CommVolume comm;
  /// Measured reports: the time collectives were in flight and the time
  /// compute was blocked on them.
  std::optional<OverlapReport> overlap;
  /// Per engine, in plan order.
  std::vector<EngineReport> engines;
};

struct Report {
  /// "predicted" (ds-compile) or "measured" (ds-run).
  std::string kind = "predicted";
  int64_t worldSize = 1;
  /// The highest ZeRO stage of the plan's trainable engines.
  int64_t zeroStage = 0;
  int64_t gradientAccumulationSteps = 1;
  /// Measured reports: optimizer steps the volume is averaged over.
  int64_t steps = 0;
  /// Elements broadcast once at load (rank 0's state to the others,
  /// counted n per element; 0 on one rank). Not in the per-step volume.
  int64_t loadBroadcastElements = 0;
  std::vector<RankReport> ranks;
};

/// Optimizer state tensors per trainable element: 2 for adam/adamw (m, v),
/// 1 for sgd with momentum != 0, 0 for plain sgd.
int64_t optimizerStatesPerElement(const OptimizerDesc &optimizer);

/// The prediction for every rank of `plan` from its engines' optimizer and
/// partition (all ranks hold the same numbers; docs/runtime.md, "Reports"):
///  - param_bytes: every parameter, except that a stage 1-2 engine's
///    trainable ones count as its flat parameter buffer (partition.numel
///    elements, padding included), and a stage 3 engine's as its
///    persistent buckets whole plus this rank's block of each sharded one;
///  - grad_bytes (held between optimizer steps): stages 0-1 the full flat
///    buffer (numel), stages 2-3 the shard (shardNumel);
///  - optimizer_state_bytes: states per element x shard elements (stage 0:
///    numel) x element size (native bf16 / fp16: + the float32 master), on
///    the device; 0 for an engine with ZeRO-Offload, whose state and
///    master (float32 engines too) are host_bytes instead;
///  - transient_bytes, peak_bytes: see RankReport;
///  - comm volume per optimizer step, when world_size > 1: the collectives
///    of programs.train times gradient_accumulation_steps plus those of
///    programs.step (all_reduce 2n, reduce_scatter and all_gather n, n the
///    bucket's numel; stage 3's gathers in programs.train included), plus
///    the scalar all-reduce (2) of the global norm of each stage 1-3
///    engine's optimizer_step.
///  - engines: the same numbers per engine (their sums are the rank's
///    param, grad and optimizer bytes and traffic).
/// Plans without programs.train hold parameters and buffers only.
Report predictReport(const Plan &plan);

ordered_json reportToJson(const Report &report);
/// The report for people: one line per rank; a predicted figure that
/// rests on bounds of dynamic tensors prints as "<= N", one that leaves
/// unbounded tensors out says so.
std::string reportToText(const Report &report);
/// Throws std::runtime_error on a malformed report.
Report reportFromJson(const ordered_json &json);

/// Writes the report as indented JSON, atomically. Throws
/// std::runtime_error.
void writeReport(const Report &report, const std::string &path);

} // namespace ds::plan

#endif // DS_PLAN_REPORT_H
