//===- Engine.h - A loaded plan, its state and its programs -----*- C++ -*-===//
//
// The runtime's entry point: loads and validates a plan, resolves its
// operators, loads its weights, and runs its programs: the eval forward, and
// training with DeepSpeed's engine API (forward, backward, step,
// isGradientAccumulationBoundary) over programs.train.
//
// Naming: one runtime Engine runs a whole plan; the plan's `engines` (the
// DeepSpeed engines of the config, e.g. a student and a frozen teacher) are
// called "DeepSpeed engines" or "plan engines" below.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_ENGINE_H
#define DS_RUNTIME_ENGINE_H

#include "ds/Plan/Plan.h"
#include "ds/Plan/Report.h"
#include "ds/Runtime/Checkpoint.h"
#include "ds/Runtime/Executor.h"
#include "ds/Runtime/Optimizer.h"
#include "ds/TensorIO/Safetensors.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ds::runtime {

class Communicator;
class Device;
class ExecutionObserver;
class Optimizer;
class StateStore;
namespace detail {
class SeedScaledOps;
class Trainer;
} // namespace detail

struct LoadOptions {
  /// Replaces the plan's `weights`: a .safetensors file, or a TorchScript
  /// archive (any other extension). Empty: use the plan's.
  std::string weightsPath;
  /// See ExecutorOptions::checkResults.
  bool checkResults = true;
  /// This process's data-parallel rank: it picks the micro-step seeds.
  /// Ignored when `communicator` is given (its rank() is the rank).
  int64_t rank = 0;
  /// The data-parallel ranks (ds-run's World makes it). When given, its
  /// size() must equal the plan's world_size; the state is broadcast from
  /// rank 0 after loading (as DeepSpeed does when it wraps a model), and
  /// the plan's collectives run over it. Null: this process trains alone,
  /// as rank `rank`, its collectives over one rank (tests that emulate one
  /// rank of several; only ZeRO stage 0 engines can, since stages 1-2
  /// shard over the plan's world_size).
  std::shared_ptr<Communicator> communicator;
  /// When set, makes the communicator (replacing `communicator`) once the
  /// run's device is known and before anything is loaded: the ranks of a
  /// GPU job meet over the device's channel (NCCL), a CPU job's over MPI
  /// or the store (ds-run's World::connect).
  std::function<std::shared_ptr<Communicator>(const std::shared_ptr<Device> &)>
      connect;
  /// Replaces the engine configs' "seed" (ds-run --seed). Without either,
  /// the seed is 0.
  std::optional<int64_t> seed;
  /// Where the plan runs: its state, flat buffers, optimizer state and
  /// every value of its programs. Null: the plan's own device (its
  /// `device`: "cuda" is cuda:LOCAL_RANK, createRankDevice). A device of
  /// another kind than the plan's is refused, naming both: the compiler
  /// chose precision tables and the RNG state's type for its target.
  std::shared_ptr<Device> device;
  /// The kernel of every engine's update; default: the device's
  /// (defaultOptimizerKernel: fused on CUDA). For comparisons and tests:
  /// the fused kernels (and fp16's device-side overflow check) run on the
  /// CPU too.
  std::optional<OptimizerKernel> optimizerKernel;
};

/// One plan engine's share of an optimizer step.
struct EngineStepReport {
  /// The plan engine's name.
  std::string engine;
  /// The learning rate this update used.
  double lr = 0.0;
  /// Global L2 norm of the engine's gradients before clipping (fp16:
  /// unscaled). On a skipped step: the norm of the last applied update (0
  /// before any), as DeepSpeed's get_global_grad_norm() reports it.
  double gradNorm = 0.0;
  /// The fp16 loss scale this step's gradients carried (1 without a loss
  /// scaler).
  double lossScale = 1.0;
  /// fp16: the gradients overflowed on some rank, so nothing was updated
  /// (gradients zeroed, LR schedule not advanced, the scale lowered).
  bool skipped = false;
};

/// What Engine::step() did.
struct StepReport {
  /// True on the accumulation boundary, when the parameters were updated.
  bool updated = false;
  /// Trainable plan engines in plan order (frozen ones are never updated);
  /// empty unless `updated`.
  std::vector<EngineStepReport> engines;

  /// Global norm over all trainable engines' gradients (before clipping):
  /// sqrt of the sum of the squared engine norms; 0 without any.
  double gradNorm() const;
  /// Whether any trainable engine skipped its update (fp16 overflow).
  bool skipped() const;
};

class Engine {
public:
  /// Reads, validates and loads the plan at `planPath`. Throws PlanError
  /// (plan problems, unknown operators) or RuntimeError (weights).
  static Engine load(const std::string &planPath,
                     const LoadOptions &options = {});
  /// The same for a plan built in memory; a relative weights path resolves
  /// against `baseDir`, and `origin` names the plan in errors.
  static Engine fromPlan(plan::Plan plan, const std::string &origin,
                         const std::string &baseDir,
                         const LoadOptions &options = {});

  Engine(Engine &&) noexcept;
  Engine &operator=(Engine &&) noexcept;
  ~Engine();

  /// Runs the `eval` program (no autograd) on one micro-batch: one tensor
  /// per plan input, in order. Returns its results. Throws RuntimeError.
  /// At ZeRO stage 3 the program gathers the parameters it reads (its
  /// all_gathers are collectives: every rank runs it in step), and it may
  /// not run between a training forward() and its backward().
  std::vector<at::Tensor> forwardEval(const std::vector<at::Tensor> &inputs);
  /// The same, for programs whose inputs or results are not all tensors.
  std::vector<c10::IValue> runEval(const std::vector<c10::IValue> &inputs);

  //===--------------------------------------------------------------------===//
  // Training (programs.train), mirroring DeepSpeed's engine. Per micro-step:
  // forward(batch), backward(), step(); step() updates the parameters only
  // on the accumulation boundary (every gradient_accumulation_steps-th
  // call). Each throws RuntimeError when called out of order or when the
  // plan has no train program.
  //===--------------------------------------------------------------------===//

  /// Whether the plan has programs.train.
  bool canTrain() const { return shapes_.front().train != nullptr; }
  /// Seeds the generator for this micro-step (microStepSeed of the seed,
  /// globalSteps(), the position in the accumulation window and the rank),
  /// then runs train body[0, backward_start) on one micro-batch of this
  /// rank. Returns the losses (the program's results). A forward() whose
  /// backward() never ran is dropped by the next forward().
  std::vector<at::Tensor> forward(const std::vector<at::Tensor> &inputs);
  /// Runs train body[backward_start, end): `grad` ops add into the
  /// gradient buffers. Requires a forward() before it. `seedScale` scales
  /// the backward's seed: the gradients are those of seedScale * (the sum of
  /// the losses), as when a Python loss `c * loss` is back-propagated. Each
  /// gradient is multiplied by it as it is added (gradients are linear in
  /// the seed: a power of two gives the seed-scaled gradients bitwise).
  void backward(double seedScale = 1.0);
  /// The same, with the gradient of the caller's objective for each result
  /// of forward() (a vector-Jacobian product: what PyTorch's autograd
  /// computed for the outputs). `cotangents` has one entry per result; an
  /// undefined tensor counts as zeros. Each must have its result's shape
  /// (it is cast to the result's dtype and device). backward(seedScale)
  /// gives 1 for each loss output (a float of one element) and zeros for
  /// the others. A version 8 plan (constant seeds) takes only
  /// backward(seedScale).
  void backward(const std::vector<at::Tensor> &cotangents);
  /// Whether the train program seeds its backward from cotangents (plan
  /// version 9), so that backward(cotangents) applies.
  bool takesCotangents() const;
  /// True when the next step() updates the parameters, i.e. on the last
  /// micro-step of an accumulation window (DeepSpeed's
  /// is_gradient_accumulation_boundary()).
  bool isGradientAccumulationBoundary() const;
  /// Ends the micro-step (requires a backward() since the last step()). On
  /// the boundary it runs programs.step: for each trainable plan engine the
  /// reduction of its gradients over the ranks its ZeRO stage prescribes
  /// (every rank must call step() in step), global-norm clipping to its
  /// gradient_clipping, its optimizer update at the scheduled LR on this
  /// rank's shard, the scheduler's advance, zeroed gradients, and (stages
  /// 1-2) the all-gather of the updated parameters (docs/runtime.md, "ZeRO
  /// stages"). Buffers (BatchNorm statistics) are not reduced: each rank
  /// keeps its own, as DeepSpeed does, and rank 0's are the ones to save.
  StepReport step();

  /// Optimizer steps taken (DeepSpeed's global_steps).
  int64_t globalSteps() const { return globalSteps_; }
  /// Micro-steps ended by step() (DeepSpeed's micro_steps).
  int64_t microSteps() const { return microSteps_; }
  /// The run's seed (LoadOptions::seed, else the configs', else 0).
  uint64_t seed() const;
  /// The LR the plan engine's next update will use; nullopt for frozen
  /// engines, unknown names and plans without a train program.
  std::optional<double> nextLr(const std::string &engine) const;
  /// The gradient of a trainable parameter accumulated on this rank in the
  /// current accumulation window, before any reduction: a view into its
  /// engine's full flat gradient buffer. Stages 0 and 1: the buffer lives
  /// for the whole run and is zero after each update. Stage 2: it exists
  /// only inside backward() (from the micro-step's first gradient to its
  /// last reduce-scatter), so between calls this is undefined; the reduced
  /// gradients are the rank's shard. An undefined tensor for anything else
  /// (frozen engines, buffers, unknown names).
  at::Tensor gradient(const std::string &param) const;
  /// The plan engine's optimizer; nullptr when frozen or unknown. At ZeRO
  /// stages 1-3 its state (expAvg(), ...) is this rank's shard: one block
  /// of each bucket, in bucket order.
  const Optimizer *optimizer(const std::string &engine) const;
  /// The fp16 loss scale the plan engine's next step uses (its
  /// `loss_scale` ops' value); nullopt for engines without a loss scaler
  /// (fp32, bf16, autocast, frozen), unknown names and evaluation plans.
  std::optional<double> lossScale(const std::string &engine) const;
  /// Native bf16 / fp16 engines: the float32 master weights the optimizer
  /// updates, this rank's shard of the flat layout (stage 0: the whole
  /// layout, padding included; stages 1-3: one block of each bucket, in
  /// bucket order, as optimizer()'s state). Undefined for other engines.
  at::Tensor masterParameters(const std::string &engine) const;

  /// Every parameter and buffer whole, (name, tensor) in plan order: what
  /// --save-params writes. Stages 0-2: the state's own tensors
  /// (state().named()). ZeRO stage 3: every rank holds only its block of
  /// each sharded bucket, so this all-gathers each one into a fresh buffer
  /// (no effect on the engine): a collective, which every rank must call at
  /// the same point, between programs (not between forward() and
  /// backward()). The way to read stage 3 parameters from outside:
  /// state().tensor() of a sharded parameter is undefined between programs
  /// (only its rank's block exists).
  NamedTensors gatherState() const;

  //===--------------------------------------------------------------------===//
  // Checkpoints (docs/checkpoint.md): DeepSpeed's layout and file names,
  // files Python's torch.load reads. Collectives: every rank calls them at
  // the same point, on an accumulation boundary (after step(), before the
  // next forward()).
  //===--------------------------------------------------------------------===//

  /// Saves DIR/<tag>/ (tag "": "global_step<N>"), one folder per saved
  /// plan engine in a multi-engine plan (DIR/<engine>/<tag>/), then the
  /// `latest` file(s) naming the tag. Each rank writes its own shards into
  /// a staging folder that is renamed into place once every rank wrote
  /// them: a save that dies part-way leaves the previous checkpoint as it
  /// was. Returns the tag. Throws RuntimeError (on every rank).
  std::string saveCheckpoint(const std::string &dir,
                             const std::string &tag = "",
                             const SaveCheckpointOptions &options = {});
  /// Loads DIR/<tag>/ (tag "": DIR/latest's): parameters, buffers (stages
  /// 0-2: rank 0's, as DeepSpeed saves them), optimizer state, LR schedule,
  /// step counters and seed, so that training goes on bitwise as if it had not
  /// stopped. Checks the ZeRO stage, accumulation steps, flat layout and every
  /// shape first and throws RuntimeError naming what differs, changing nothing.
  /// A checkpoint of another world size is re-sharded (every rank reads every
  /// shard). Frozen engines are loaded when their folder exists. Returns
  /// the folder loaded: DIR/<tag>, or DIR itself for a multi-engine plan
  /// (whose engines load from DIR/<engine>/<tag>).
  std::string loadCheckpoint(const std::string &dir,
                             const std::string &tag = "");
  /// DeepSpeed's save_16bit_model, per plan engine: its parameters and
  /// buffers whole, in the dtype they are stored in (bf16 / fp16 for native
  /// mixed-precision engines, whose fp32 master stays in the optimizer; fp32
  /// otherwise), written by rank 0 as a torch.save dict to DIR/FILENAME
  /// (one-engine plan) or DIR/<engine>/FILENAME keyed by names relative to
  /// the engine's module (several, like their checkpoints). `excludeFrozen`
  /// leaves out parameters that do not train (buffers stay). A ZeRO stage 3
  /// engine (trainable or frozen) is gathered, a collective, when its config
  /// sets stage3_gather_16bit_weights_on_model_save; otherwise it is
  /// skipped, the others are saved, and the call returns false with the
  /// reason in `*message`.
  bool save16bitModel(const std::string &dir,
                      const std::string &filename = "pytorch_model.bin",
                      bool excludeFrozen = false,
                      std::string *message = nullptr);

  /// The training collectives' timing since load (or resetOverlap()): per
  /// kind, how long they were in flight and how long the calling thread was
  /// blocked on them; trainSeconds is the time spent in forward(),
  /// backward() and step() (ds-run --report's "overlap").
  plan::OverlapReport overlap() const;
  void resetOverlap();

  /// Calls `observer` (ExecutionObserver.h) around every program part and
  /// op the engine runs from now on; null stops. It must outlive the runs.
  void setObserver(ExecutionObserver *observer);

  /// Eval program: live-value bytes measured by its executor; state,
  /// gradient and optimizer bytes.
  MemoryStats memory() const;
  /// The same for the train program (forward and backward together).
  MemoryStats trainMemory() const;
  /// Per plan engine, in plan order: its parameter, gradient and optimizer
  /// bytes now, and the elements its collectives moved since load (a
  /// report's "engines"; their sums are trainMemory()'s three).
  std::vector<plan::EngineReport> engineReports() const;
  void resetPeakMemory();

  /// This process's data-parallel rank and the number of ranks (1 without
  /// a communicator).
  int64_t rank() const { return rank_; }
  int64_t worldSize() const;
  /// Null when loaded without one.
  const std::shared_ptr<Communicator> &communicator() const {
    return communicator_;
  }

  /// The device the plan runs on.
  const std::shared_ptr<Device> &device() const { return device_; }

  const plan::Plan &plan() const { return *plan_; }
  const std::string &origin() const { return origin_; }
  StateStore &state() { return *state_; }
  const StateStore &state() const { return *state_; }

private:
  Engine();

  void requireTrain(const char *call) const;
  /// The shape whose inputs `inputs` match (one rank's; a plan with one
  /// shape: 0, the executor checks). Throws RuntimeError naming the shapes
  /// and the compiled ones.
  size_t shapeFor(const std::vector<c10::IValue> &inputs) const;
  MemoryStats fillStateBytes(MemoryStats stats) const;
  /// Every state tensor from rank 0 (several ranks only).
  void broadcastState();
  /// Checkpoints: on an accumulation boundary, outside a micro-step.
  void requireCheckpointPoint(const char *call) const;
  /// The factor backward() gives the train program's `grad` ops.
  void setSeedScale(double scale);
  /// Both backward()s: `given` null means backward(seedScale)'s defaults.
  void runBackward(const std::vector<at::Tensor> *given, double seedScale);
  /// One cotangent per result of the last forward(): `given`'s, checked
  /// against the results, else the defaults.
  std::vector<at::Tensor>
  cotangentsFor(const std::vector<at::Tensor> *given) const;

  std::unique_ptr<plan::Plan> plan_;
  std::string origin_;
  std::unique_ptr<StateStore> state_;
  /// The programs of one input shape of the plan: its own (index 0), then
  /// one per plan variant, run on the plan Plan::withVariant gives.
  struct ShapePrograms {
    /// Variants only; the executors point into it.
    std::unique_ptr<plan::Plan> variantPlan;
    std::unique_ptr<Executor> eval;
    /// Null without programs.train.
    std::unique_ptr<Executor> train;
    int64_t backwardStart = 0;
  };
  std::vector<ShapePrograms> shapes_;
  /// The shape of the micro-step forward() ran.
  size_t forwardShape_ = 0;
  std::shared_ptr<Communicator> communicator_;
  std::shared_ptr<Device> device_;
  /// Inputs on the host copied to device_ (the same values elsewhere).
  std::vector<c10::IValue> onDevice(std::vector<c10::IValue> values) const;

  // Training; null without programs.train.
  std::unique_ptr<detail::Trainer> trainer_;
  /// The trainer's ops as the train program sees them (its `grad` ops
  /// scaled by backward()'s seedScale).
  std::unique_ptr<detail::SeedScaledOps> trainOps_;
  /// programs.step, run at the accumulation boundary.
  std::unique_ptr<Executor> step_;
  int64_t rank_ = 0;
  /// Seconds spent in forward(), backward() and step().
  double trainSeconds_ = 0.0;
  int64_t globalSteps_ = 0;
  int64_t microSteps_ = 0;
  /// Where the current micro-step is: nothing run, forward done, backward
  /// done (step() next).
  enum class Phase { Idle, Forwarded, BackwardDone };
  Phase phase_ = Phase::Idle;
  /// The last forward()'s results, until its backward() ran.
  std::vector<at::Tensor> forwardResults_;
};

} // namespace ds::runtime

#endif // DS_RUNTIME_ENGINE_H
