//===- CheckpointEngine.h - One plan engine's checkpoint files --*- C++ -*-===//
//
// What one plan engine (a DeepSpeed engine of the config) writes into its
// checkpoint folder and reads back: the model states dict (module, shapes,
// LR schedule, counters, config; at stage 0 also the optimizer) and, at
// ZeRO stages 1-3, each rank's optim states dict (its fp32 partition and
// optimizer shard, the loss scaler): built in CheckpointSave.cpp, read,
// checked against the plan and then applied in CheckpointLoad.cpp. Engine's
// saveCheckpoint / loadCheckpoint (EngineCheckpoint.cpp) drive it over the
// engines and the ranks. Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_CHECKPOINTENGINE_H
#define DS_LIB_RUNTIME_CHECKPOINTENGINE_H

#include "ds/Plan/Plan.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include "ds/Runtime/LossScaler.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ds::runtime {
class Communicator;
class Optimizer;
class StateStore;
} // namespace ds::runtime

namespace ds::runtime::detail {

class Trainer;
class UpdateProgress;
class ZeroEngineState;

/// The run's counters that every engine's model states carry.
struct RunCounters {
  int64_t globalSteps = 0;
  int64_t microSteps = 0;
  uint64_t seed = 0;
};

/// One plan engine of a loaded runtime Engine, as a checkpoint sees it.
struct EngineContext {
  const plan::Plan &plan;
  size_t engine;
  StateStore &state;
  /// Null for plans without training.
  Trainer *trainer;
  int64_t rank;
  int64_t worldSize;
  /// Saving at stages 1-3 gathers the flat buffers into DeepSpeed's
  /// partitions through it (null: one rank).
  Communicator *communicator = nullptr;

  const plan::EngineDesc &desc() const { return plan.engines[engine]; }
  /// Whether the engine has an optimizer (and a trainer to run it).
  bool trains() const;
  /// The engine's buffers in the trainer (`trainer` set).
  ZeroEngineState &zeroState() const;
  /// A trainable engine's applied updates, skipped steps, last gradient
  /// norm and loss scaler (trains()).
  UpdateProgress &progress() const;
  /// The engine's loss scaler (fp16, fp16 autocast); nullptr without one.
  const LossScaler *lossScaler() const;
  /// ZeRO stage; 0 for frozen engines without a partition.
  int64_t stage() const;
  /// The engine's state entries, in plan order.
  std::vector<int64_t> stateIndices() const;
  /// The name in the engine's module: the plan's qualified name without
  /// the engine's submodule path ("student.fc1.weight" -> "fc1.weight").
  std::string localName(const std::string &qualified) const;
};

/// The optimizer's state buffers by torch.optim's key names: exp_avg and
/// exp_avg_sq (Adam, AdamW), momentum_buffer (SGD with momentum), none.
std::vector<std::pair<const char *, at::Tensor *>>
optimizerBuffers(Optimizer &optimizer);
/// Stage 0: one view of `flat` (a buffer of the engine's flat layout) per
/// trainable parameter, in partition order.
std::vector<at::Tensor> parameterViews(const EngineContext &context,
                                       const at::Tensor &flat);

/// The model states dict (every rank builds it; rank 0 writes it at stages
/// 0-2, every rank its own at stage 3).
c10::IValue buildModelStates(const EngineContext &context,
                             const RunCounters &counters);
/// This rank's optim states dict (stages 1-3 of trainable engines).
c10::IValue buildOptimStates(const EngineContext &context,
                             const RunCounters &counters);

/// A checkpoint read and checked, ready to apply.
struct LoadedEngine {
  /// (destination, value): parameters, buffers, optimizer state.
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;
  int64_t optimizerSteps = 0;
  int64_t appliedUpdates = 0;
  int64_t skippedSteps = 0;
  double lastGradNorm = 0.0;
  /// fp16 engines: the loss scaler's state (cur_scale, cur_iter,
  /// last_overflow_iter, cur_hysteresis).
  std::optional<LossScaler::State> scaler;
  RunCounters counters;
  /// False for DeepSpeed's own checkpoints (no ds_seed): the run keeps its
  /// seed.
  bool seedSaved = true;
};

/// Reads `folder` (DIR/<tag> of this engine) as this rank and checks it
/// against the plan: world size, stage, flat layout, names, shapes and
/// dtypes. Throws RuntimeError naming the file, the key and what differs.
LoadedEngine readEngineCheckpoint(const EngineContext &context,
                                  const std::string &folder);
/// Copies a read checkpoint into the engine's state and optimizer.
void applyEngineCheckpoint(const EngineContext &context,
                           const LoadedEngine &loaded);

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_CHECKPOINTENGINE_H
