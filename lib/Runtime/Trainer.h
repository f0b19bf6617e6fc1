//===- Trainer.h - The training side of the executor -----------*- C++ -*-===//
//
// Implements the training op kinds of a plan (docs/plan-format.md): `grad`
// ops of programs.train, and the collectives, waits, releases and optimizer
// steps of programs.train and programs.step, on each trainable engine's
// buffers as its `partition` lays them out and its ZeRO stage shards them
// (docs/runtime.md, "ZeRO stages"); and, at stage 3, the parameter shards:
// the gathers and releases of sharded buckets in every program, eval
// included (evalOps()). It builds the optimizer, LR schedule and clipping
// from the plan's EngineDesc::optimizer and the seed from the engines'
// `seed`; it reads no DeepSpeed config key. Mixed precision (docs/runtime.md, "Mixed precision"):
// native bf16 / fp16 engines keep an fp32 master copy of the rank's shard
// for the optimizer, gradient buffers in precision.grad_accum_dtype,
// reductions in each bucket's dtype, and fp16 loss scaling. Engine
// (EngineTraining.cpp) drives it. Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_TRAINER_H
#define DS_LIB_RUNTIME_TRAINER_H

#include "ds/Config/Config.h"
#include "ds/Runtime/Communicator.h"
#include "ds/Runtime/Engine.h"
#include "ds/Runtime/Executor.h"
#include "ds/Runtime/GradientBuffers.h"
#include "ds/Runtime/LossScaler.h"
#include "ds/Runtime/Optimizer.h"
#include "ds/TensorIO/Safetensors.h"

#include <chrono>
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
  /// (an fp16 / bf16 config without the plan's `precision`, trainable
  /// parameters that are not float32 or float64 outside a native bf16 /
  /// fp16 engine, a ZeRO stage 1-3 engine of a plan for several ranks
  /// without their communicator); PlanError naming engines[i].config.seed for a
  /// seed that is not an integer or differs between engines.
  /// `seedOverride` replaces the configs' "seed". `communicator` (null: one
  /// rank, `rank`) carries the collectives.
  Trainer(const plan::Plan &plan, const std::string &origin,
          std::optional<int64_t> seedOverride,
          std::shared_ptr<Communicator> communicator, int64_t rank);

  ~Trainer() override;

  /// After the weights are loaded (and broadcast): stage 1-2 engines move
  /// their trainable parameters into one flat buffer each, and `state`'s
  /// entries become views of it (StateStore::bind). Stage 3 engines keep
  /// each persistent bucket whole (bound the same way) and this rank's
  /// block of each sharded bucket (StateStore::shard: the whole tensors
  /// go). Then every trainable native bf16 / fp16 engine copies this rank's
  /// shard of its parameters (stage 0: all of them) into its float32
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
  /// The current loss scale of an engine with a loss scaler (fp16);
  /// nullopt for others.
  std::optional<double> currentLossScale(size_t engine) const;
  /// The engine's fp16 loss scaler; nullptr without one.
  const LossScaler *lossScaler(size_t engine) const {
    return engines_[engine].scaler.get();
  }
  /// Native bf16 / fp16: the float32 master copy of this rank's shard
  /// (stage 0: the whole flat layout) that the optimizer updates; undefined
  /// for other engines and before bindParameters().
  const at::Tensor &master(size_t engine) const {
    return engines_[engine].master;
  }
  /// Whether the engine keeps a float32 master (a trainable native bf16 /
  /// fp16 engine).
  bool hasMaster(size_t engine) const {
    return engines_[engine].optimizer && engines_[engine].native;
  }
  /// Whether state entry `stateIndex` lives in a flat parameter buffer.
  bool inFlatParameters(int64_t stateIndex) const;

  // Checkpoints (CheckpointSave.cpp, CheckpointLoad.cpp): what an engine's
  // next updates depend on.
  /// Stages 1-3: this rank's block of each bucket (views of the flat or
  /// shard parameter buffers; writing them changes the parameters). Empty
  /// at stage 0 and before bindParameters().
  const std::vector<at::Tensor> &parameterBlocks(size_t engine) const {
    return engines_[engine].parameterBlocks;
  }
  /// nullptr for frozen engines.
  Optimizer *mutableOptimizer(size_t engine) {
    return engines_[engine].optimizer.get();
  }
  /// What a checkpoint saves as this rank's fp32 parameters: the master's
  /// blocks of a native bf16 / fp16 engine (stage 0: one view per
  /// parameter), else parameterBlocks().
  const std::vector<at::Tensor> &fp32Blocks(size_t engine) const {
    return engines_[engine].master.defined() ? engines_[engine].masterBlocks
                                             : engines_[engine].parameterBlocks;
  }
  /// The parameters (this rank's blocks; stage 0: all) become
  /// master.to(their dtype): after each applied update and after a checkpoint
  /// load wrote the master. A no-op without a master.
  void parametersFromMaster(size_t engine);
  /// nullptr without a loss scaler.
  LossScaler *mutableLossScaler(size_t engine) {
    return engines_[engine].scaler.get();
  }
  /// Steps skipped for an fp16 overflow (DeepSpeed's skipped_steps).
  int64_t skippedSteps(size_t engine) const {
    return engines_[engine].skippedSteps;
  }
  void setSkippedSteps(size_t engine, int64_t steps) {
    engines_[engine].skippedSteps = steps;
  }
  /// The norm of the last applied update (what a skipped step reports).
  double lastGradNorm(size_t engine) const {
    return engines_[engine].lastGradNorm;
  }
  void setLastGradNorm(size_t engine, double norm) {
    engines_[engine].lastGradNorm = norm;
  }
  /// Updates applied so far: the LR schedule's position.
  int64_t appliedUpdates(size_t engine) const {
    return engines_[engine].appliedUpdates;
  }
  void setAppliedUpdates(size_t engine, int64_t updates) {
    engines_[engine].appliedUpdates = updates;
  }
  void setSeed(uint64_t seed) { seed_ = seed; }

  // Memory (MemoryStats).
  /// Flat parameter buffers of stage 1-2 engines; stage 3's persistent
  /// buckets and shard parameter buffers. With `engine`: that engine's.
  int64_t flatParameterBytes() const;
  int64_t flatParameterBytes(size_t engine) const;
  /// Gradients held between steps: full buffers (stages 0-1), shard
  /// gradients (stages 2-3).
  int64_t heldGradientBytes() const;
  int64_t heldGradientBytes(size_t engine) const;
  int64_t optimizerBytes() const;
  int64_t optimizerBytes(size_t engine) const;
  /// The volume of the engine's collectives since load (its reductions,
  /// gathers and the clipping norm's all-reduce), counted as the
  /// communicator counts.
  plan::CommVolume volume(size_t engine) const;
  int64_t transientBytes() const { return transient_; }
  int64_t transientPeakBytes() const { return transientPeak_; }
  int64_t jointPeakBytes() const { return jointPeak_; }
  void resetPeaks();

private:
  /// Stage 3: one bucket's parameters.
  struct BucketParams {
    enum class Status { Released, Gathering, Gathered };
    /// Not persistent: gathered and released by the programs.
    bool sharded = false;
    Status status = Status::Released;
    /// The bucket's whole parameters: always for persistent buckets, from
    /// the all_gather to the release for sharded ones.
    at::Tensor full;
    /// The parameters in the bucket: state index, element offset in the
    /// bucket, shape.
    std::vector<int64_t> stateIndices;
    std::vector<int64_t> offsets;
    std::vector<std::vector<int64_t>> shapes;
  };

  struct EngineState {
    std::string name;
    /// Set for trainable engines (an optimizer and a partition).
    const plan::OptimizerDesc *desc = nullptr;
    /// Set for every partitioned engine (trainable ones, and the engines
    /// of evaluation plans that carry a partition).
    const plan::PartitionDesc *partition = nullptr;
    int64_t stage = 0;
    /// The parameters' places in the flat buffers.
    FlatLayout layout;
    config::OptimizerConfig optimizerConfig;
    std::optional<config::SchedulerConfig> scheduler;
    std::unique_ptr<Optimizer> optimizer;
    /// Updates applied (the scheduler advances after each one).
    int64_t appliedUpdates = 0;
    /// Element size and dtype of the parameter buffers.
    int64_t elementBytes = 4;
    at::ScalarType dtype = at::kFloat;
    /// The gradient buffers' (precision.grad_accum_dtype, else the
    /// parameters').
    int64_t gradElementBytes = 4;
    at::ScalarType gradDtype = at::kFloat;
    /// Per bucket: the dtype its reductions move (bucket dtype, else the
    /// gradients'), and the dtype stage 3's gathers of a sharded bucket in
    /// programs.train / programs.eval move (bucket dtype, else the
    /// parameters').
    std::vector<at::ScalarType> reduceDtypes;
    std::vector<at::ScalarType> gatherDtypes;
    /// Set for engines whose plan entry has a precision.
    const plan::PrecisionDesc *precision = nullptr;
    /// precision.mode bf16 or fp16 (autocast keeps float32 parameters and
    /// needs no master).
    bool native = false;
    /// Trainable engines with a precision: float32 copy of this rank's
    /// shard (stage 0: of the whole layout), and its per-bucket blocks
    /// (stages 1-3) or per-parameter views (stage 0) the optimizer updates.
    at::Tensor master;
    std::vector<at::Tensor> masterBlocks;
    /// fp16: the loss scaler.
    std::unique_ptr<LossScaler> scaler;
    /// The norm of the last applied update (reported on skipped steps).
    double lastGradNorm = 0.0;
    /// Steps skipped for an overflow.
    int64_t skippedSteps = 0;

    // Stages 1-3.
    /// Stages 1-2: the flat parameter buffer (partition.numel elements).
    at::Tensor parameters;
    /// Stage 3: this rank's blocks of the sharded buckets, one after
    /// another (the shard parameter buffer).
    at::Tensor shardParameters;
    /// Stage 3: per bucket.
    std::vector<BucketParams> buckets;
    /// This rank's block of each bucket: views of `parameters` (stages
    /// 1-2), of a persistent bucket's `full` or of `shardParameters`
    /// (stage 3).
    std::vector<at::Tensor> parameterBlocks;
    /// The shard gradient (shardNumel elements): stage 1 allocates it at
    /// the boundary and frees it after the update, stages 2-3 keep it.
    at::Tensor shardGradient;
    /// Stages 2-3: the reduce-scatter results before they are added into
    /// `shardGradient` (allocated with the full gradient buffer).
    at::Tensor receive;
    /// Stages 2-3: reduce-scatters waited in the current micro-step.
    int64_t reduceScattersWaited = 0;

    /// This step's update, for endStep().
    std::optional<EngineStepReport> stepped;
    /// Elements its collectives moved since load.
    plan::CommVolume volume;
  };
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

  /// The bucket's block of this rank: [offset + rank * n / W, ...).
  int64_t blockNumel(const EngineState &engine, int64_t bucket) const;
  /// Stage 3: the gathered bucket's parameters become state views.
  void attachBucket(size_t engine, int64_t bucket);
  /// Stage 3: drops a gathered (or gathering) sharded bucket.
  void dropBucket(size_t engine, int64_t bucket);
  /// "bucket 1 of engine \"model\"".
  std::string bucketName(size_t engine, int64_t bucket) const;
  int64_t shardNumel(const EngineState &engine) const;
  /// Allocates the engine's full gradient buffer (and stage 2's receive
  /// buffer) unless it exists.
  void ensureFullGradient(size_t engine);
  void releaseFullGradient(size_t engine);
  void ensureShardGradient(size_t engine);
  void releaseShardGradient(size_t engine);
  void addTransient(int64_t bytes);
  /// fp16: unscales `grads` (float32) in place and returns whether any rank
  /// found an inf / NaN in them (one MAX all-reduce over the ranks).
  bool unscaleAndCheckOverflow(size_t engine, const at::Tensor &grads);
  /// Adds the communicator's volume since `before` to the engine's.
  void chargeVolume(size_t engine, const plan::CommVolume &before);
  [[noreturn]] void internalError(const std::string &detail) const;

  const plan::Plan &plan_;
  std::string origin_;
  /// The ranks' communicator, and the timed view of it that the training
  /// collectives go through.
  std::shared_ptr<Communicator> communicator_;
  std::shared_ptr<TimedCommunicator> timed_;
  std::unique_ptr<EvalOps> evalOps_;
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
