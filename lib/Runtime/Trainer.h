//===- Trainer.h - The training side of the executor -----------*- C++ -*-===//
//
// Implements the training op kinds of a plan (docs/plan-format.md): `grad`
// ops of programs.train, and the collectives, waits and optimizer steps of
// programs.train and programs.step, on each trainable engine's buffers as
// its `partition` lays them out and its ZeRO stage shards them
// (docs/runtime.md, "ZeRO stages"). It builds the optimizer, LR schedule
// and clipping from the plan's EngineDesc::optimizer; of the engines'
// configs it reads only "seed" and what it refuses (fp16 / bf16 training).
// Engine (EngineTraining.cpp) drives it. Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_TRAINER_H
#define DS_LIB_RUNTIME_TRAINER_H

#include "ds/Config/Config.h"
#include "ds/Runtime/Communicator.h"
#include "ds/Runtime/Engine.h"
#include "ds/Runtime/Executor.h"
#include "ds/Runtime/GradientBuffers.h"
#include "ds/Runtime/Optimizer.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ds::runtime::detail {

class Trainer final : public TrainingOps {
public:
  /// Reads the plan's optimizers and partitions and lays out the gradient
  /// and optimizer buffers. RuntimeError for what this runtime cannot train
  /// (fp16 / bf16 engines, trainable parameters that are not float32 or
  /// float64, a ZeRO stage 1-2 engine of a plan for several ranks without
  /// their communicator); PlanError naming engines[i].config.seed for a
  /// seed that is not an integer or differs between engines.
  /// `seedOverride` replaces the configs' "seed". `communicator` (null: one
  /// rank, `rank`) carries the collectives.
  Trainer(const plan::Plan &plan, const std::string &origin,
          std::optional<int64_t> seedOverride,
          std::shared_ptr<Communicator> communicator, int64_t rank);

  /// After the weights are loaded (and broadcast): stage 1-2 engines move
  /// their trainable parameters into one flat buffer each, and `state`'s
  /// entries become views of it (StateStore::bind). `state` must outlive
  /// the trainer.
  void bindParameters(StateStore &state);

  // TrainingOps.
  bool hasGradient(int64_t stateIndex) const override;
  void accumulateGradient(int64_t stateIndex, const at::Tensor &value) override;
  c10::IValue startCollective(plan::OpKind kind, size_t engine,
                              int64_t bucket) override;
  void wait(const c10::IValue &token) override;
  void optimizerStep(size_t engine) override;
  void liveBytesChanged(int64_t bytes) override;

  /// The boundary: Engine runs programs.step between the two. endStep()
  /// reports every trainable engine's update in plan order.
  void beginStep();
  StepReport endStep();
  /// After a program failed part-way: waits for the collectives still in
  /// flight (ignoring their errors), forgets their tokens, releases the
  /// transient buffers. The gradients accumulated so far stay.
  void abandon();

  uint64_t seed() const { return seed_; }
  int64_t gradientAccumulationSteps() const { return accumulation_; }
  /// The LR the engine's next update uses; nullopt for frozen engines.
  std::optional<double> nextLr(size_t engine) const;
  /// nullptr for frozen engines.
  const Optimizer *optimizer(size_t engine) const {
    return engines_[engine].optimizer.get();
  }
  /// The full gradient buffer's view of a parameter; undefined when the
  /// parameter has none or the buffer is not allocated (stage 2 outside
  /// backward).
  at::Tensor gradient(int64_t stateIndex) const {
    return gradients_->grad(stateIndex);
  }
  /// Whether state entry `stateIndex` lives in a flat parameter buffer.
  bool inFlatParameters(int64_t stateIndex) const;

  // Memory (MemoryStats).
  /// Flat parameter buffers of stage 1-2 engines.
  int64_t flatParameterBytes() const;
  /// Gradients held between steps: full buffers (stages 0-1), shard
  /// gradients (stage 2).
  int64_t heldGradientBytes() const;
  int64_t optimizerBytes() const;
  int64_t transientBytes() const { return transient_; }
  int64_t transientPeakBytes() const { return transientPeak_; }
  int64_t jointPeakBytes() const { return jointPeak_; }
  void resetPeaks();

private:
  struct EngineState {
    std::string name;
    /// Set for trainable engines (an optimizer and a partition).
    const plan::OptimizerDesc *desc = nullptr;
    const plan::PartitionDesc *partition = nullptr;
    int64_t stage = 0;
    config::OptimizerConfig optimizerConfig;
    std::optional<config::SchedulerConfig> scheduler;
    std::unique_ptr<Optimizer> optimizer;
    /// Updates applied (the scheduler advances after each one).
    int64_t appliedUpdates = 0;
    /// Element size of the flat buffers.
    int64_t elementBytes = 4;
    at::ScalarType dtype = at::kFloat;

    // Stages 1-2.
    /// The flat parameter buffer (partition.numel elements).
    at::Tensor parameters;
    /// This rank's block of each bucket: views of `parameters`.
    std::vector<at::Tensor> parameterBlocks;
    /// The shard gradient (shardNumel elements): stage 1 allocates it at
    /// the boundary and frees it after the update, stage 2 keeps it.
    at::Tensor shardGradient;
    /// Stage 2: the reduce-scatter results before they are added into
    /// `shardGradient` (allocated with the full gradient buffer).
    at::Tensor receive;
    /// Stage 2: reduce-scatters waited in the current micro-step.
    int64_t reduceScattersWaited = 0;

    /// This step's update, for endStep().
    std::optional<EngineStepReport> stepped;
  };
  struct Pending {
    CommHandle handle;
    plan::OpKind kind;
    size_t engine;
    int64_t bucket;
  };

  /// The bucket's block of this rank: [offset + rank * n / W, ...).
  int64_t blockNumel(const EngineState &engine, int64_t bucket) const;
  int64_t shardNumel(const EngineState &engine) const;
  /// Allocates the engine's full gradient buffer (and stage 2's receive
  /// buffer) unless it exists.
  void ensureFullGradient(size_t engine);
  void releaseFullGradient(size_t engine);
  void ensureShardGradient(size_t engine);
  void releaseShardGradient(size_t engine);
  void addTransient(int64_t bytes);
  [[noreturn]] void internalError(const std::string &detail) const;

  const plan::Plan &plan_;
  std::string origin_;
  std::shared_ptr<Communicator> communicator_;
  int64_t rank_ = 0;
  int64_t worldSize_ = 1;
  std::vector<EngineState> engines_;
  std::unique_ptr<GradientBuffers> gradients_;
  StateStore *state_ = nullptr;
  std::vector<bool> inFlat_;
  std::map<int64_t, Pending> pending_;
  int64_t nextToken_ = 0;
  uint64_t seed_ = 0;
  int64_t accumulation_ = 1;

  int64_t transient_ = 0;
  int64_t transientPeak_ = 0;
  int64_t live_ = 0;
  int64_t jointPeak_ = 0;
};

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_TRAINER_H
