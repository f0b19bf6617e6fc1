//===- Trainer.h - The training side of the executor -----------*- C++ -*-===//
//
// Implements the training op kinds of a plan (docs/plan-format.md): `grad`
// ops of programs.train, and the collectives, waits, releases and optimizer
// steps of programs.train and programs.step; at stage 3 also the gathers and
// releases of sharded buckets in every program, eval included (evalOps()).
// Each engine's buffers are a ZeroEngineState, the transient bytes a
// MemoryLedger; the Trainer dispatches the ops and keeps the collectives in
// flight. Engine (EngineTraining.cpp) drives it. Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_TRAINER_H
#define DS_LIB_RUNTIME_TRAINER_H

#include "MemoryLedger.h"
#include "ZeroEngineState.h"

#include "ds/Runtime/Communicator.h"
#include "ds/Runtime/Device.h"
#include "ds/Runtime/Engine.h"
#include "ds/Runtime/Executor.h"
#include "ds/Runtime/GradientBuffers.h"
#include "ds/TensorIO/Safetensors.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ds::runtime {
class TimedCommunicator;
} // namespace ds::runtime

namespace ds::runtime::detail {

class Trainer final : public TrainingOps {
public:
  /// Reads the plan's optimizers and partitions and lays out the gradient
  /// and optimizer buffers. RuntimeError for what this runtime cannot train
  /// (trainable parameters that are not float32 or float64 outside a native
  /// bf16 / fp16 engine, a ZeRO stage 1-3 engine of a plan for several ranks
  /// without their communicator); PlanError naming engines[i].seed for
  /// engines whose seeds differ. `seedOverride` replaces the engines' seed.
  /// `communicator` (null: one rank, `rank`) carries the collectives.
  /// `device` (null: the CPU) holds every buffer.
  Trainer(const plan::Plan &plan, const std::string &origin,
          std::optional<int64_t> seedOverride,
          std::shared_ptr<Communicator> communicator, int64_t rank,
          std::shared_ptr<Device> device = nullptr,
          std::optional<OptimizerKernel> kernel = std::nullopt);

  ~Trainer() override;

  /// After the weights are loaded (and broadcast): every engine binds its
  /// parameters (ZeroEngineState::bindParameters), then fills its float32
  /// master. `state` must outlive the trainer.
  void bindParameters(StateStore &state);

  // TrainingOps.
  bool hasGradient(int64_t stateIndex) const override;
  void accumulateGradient(int64_t stateIndex, const at::Tensor &value) override;
  c10::IValue startCollective(plan::OpKind kind, size_t engine,
                              int64_t bucket) override;
  void wait(const c10::IValue &token) override;
  void optimizerStep(size_t engine) override;
  void release(size_t engine, int64_t bucket) override;
  at::Tensor lossScale(size_t engine) override;
  void liveBytesChanged(int64_t bytes) override;

  /// What programs.eval runs through: stage 3's gathers, waits and
  /// releases (its live values are not the train program's).
  TrainingOps &evalOps();

  /// Every state entry whole, in plan order (--save-params): stage 3
  /// gathers each sharded bucket into a fresh buffer, a collective every
  /// rank must call at the same point, between programs. Other entries are
  /// the state's own tensors.
  NamedTensors gatherState() const;
  /// Whether an engine is at ZeRO stage 3 (gatherState() communicates).
  bool hasStage3() const;

  /// The training collectives' timing since load or resetTiming().
  plan::OverlapReport timing() const;
  void resetTiming();

  /// The boundary: Engine runs programs.step between the two. endStep()
  /// reports every trainable engine's update in plan order.
  void beginStep();
  StepReport endStep();
  /// After a program failed part-way: waits for the collectives still in
  /// flight (ignoring their errors), forgets their tokens, releases the
  /// transient buffers and stage 3's gathered buckets. The gradients
  /// accumulated so far stay.
  void abandon();
  /// After the eval program failed part-way: the same for its gathers.
  void abandonGathers();

  uint64_t seed() const { return seed_; }
  void setSeed(uint64_t seed) { seed_ = seed; }
  int64_t gradientAccumulationSteps() const { return accumulation_; }

  /// Plan engine `engine`'s buffers, optimizer and update progress.
  const ZeroEngineState &engine(size_t engine) const {
    return engines_[engine];
  }
  ZeroEngineState &engine(size_t engine) { return engines_[engine]; }
  /// The LR the engine's next update uses; nullopt for frozen engines.
  std::optional<double> nextLr(size_t engine) const;
  /// The current loss scale of an engine with a loss scaler (fp16);
  /// nullopt for others.
  std::optional<double> currentLossScale(size_t engine) const;
  /// The full gradient buffer's view of a parameter; undefined when the
  /// parameter has none or the buffer is not allocated (stage 2 outside
  /// backward).
  at::Tensor gradient(int64_t stateIndex) const {
    return gradients_->grad(stateIndex);
  }
  /// Whether state entry `stateIndex` lives in a flat parameter buffer.
  bool inFlatParameters(int64_t stateIndex) const;

  // Memory (MemoryStats). With `engine`: that engine's.
  int64_t flatParameterBytes() const;
  int64_t flatParameterBytes(size_t engine) const {
    return engines_[engine].flatParameterBytes();
  }
  int64_t heldGradientBytes() const;
  int64_t heldGradientBytes(size_t engine) const {
    return engines_[engine].heldGradientBytes(*gradients_);
  }
  int64_t optimizerBytes() const;
  int64_t optimizerBytes(size_t engine) const {
    return engines_[engine].optimizerBytes();
  }
  /// ZeRO-Offload's master and optimizer state in host memory.
  int64_t hostBytes() const;
  int64_t hostBytes(size_t engine) const {
    return engines_[engine].hostBytes();
  }
  /// The transient buffers' bytes and peaks.
  const MemoryLedger &ledger() const { return ledger_; }
  void resetPeaks() { ledger_.resetPeaks(); }
  /// The volume of the engine's collectives since load (its reductions,
  /// gathers and the clipping norm's all-reduce), counted as the
  /// communicator counts.
  const plan::CommVolume &volume(size_t engine) const {
    return engines_[engine].volume();
  }

private:
  struct Pending {
    CommHandle handle;
    plan::OpKind kind;
    size_t engine;
    int64_t bucket;
    /// A collective in another dtype than its buffers (a bucket's dtype):
    /// `received` (its output, in that dtype) is copied (cast) into
    /// `target` at the wait; `sent` keeps its cast input alive until then.
    at::Tensor sent;
    at::Tensor received;
    at::Tensor target;
  };

  class EvalOps;

  /// Starts the collective of `pending` (its kind, engine and bucket).
  void startAllGather(Pending &pending);
  /// fp16: unscales `grads` (float32) in place and returns whether any rank
  /// found an inf / NaN in them (one MAX all-reduce over the ranks).
  bool unscaleAndCheckOverflow(size_t engine, const at::Tensor &grads);
  /// The same unscaling, the check left on the device: a 0-dim float32
  /// found_inf (1 on overflow) for the fused kernels. One rank only.
  at::Tensor unscaleOnDevice(size_t engine, const at::Tensor &grads);
  /// Adds the communicator's volume since `before` to the engine's.
  void chargeVolume(size_t engine, const plan::CommVolume &before);
  [[noreturn]] void internalError(const std::string &detail) const;

  std::string origin_;
  /// The ranks' communicator, and the timed view of it that the training
  /// collectives go through.
  std::shared_ptr<Communicator> communicator_;
  /// Where the flat buffers and the collectives' staging buffers live.
  std::shared_ptr<Device> device_;
  std::shared_ptr<TimedCommunicator> timed_;
  std::unique_ptr<EvalOps> evalOps_;
  int64_t rank_ = 0;
  std::vector<ZeroEngineState> engines_;
  std::unique_ptr<GradientBuffers> gradients_;
  MemoryLedger ledger_;
  StateStore *state_ = nullptr;
  std::vector<bool> inFlat_;
  std::map<int64_t, Pending> pending_;
  int64_t nextToken_ = 0;
  uint64_t seed_ = 0;
  int64_t accumulation_ = 1;
};

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_TRAINER_H
