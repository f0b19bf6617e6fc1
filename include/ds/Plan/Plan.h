//===- Plan.h - In-memory form of a plan file -------------------*- C++ -*-===//
//
// Plain structs that mirror the plan JSON (docs/plan-format.md) one to one.
// The compiler fills them and calls writePlan; the runtime gets them from
// readPlan. No MLIR, LLVM or LibTorch types appear here: the runtime must be
// able to read a plan with nothing but this library.
//
//===----------------------------------------------------------------------===//

#ifndef DS_PLAN_PLAN_H
#define DS_PLAN_PLAN_H

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ds::plan {

using ordered_json = nlohmann::ordered_json;

/// The plan format version this library writes (and the newest it reads).
inline constexpr int64_t kPlanFormatVersion = 9;
/// The oldest version it reads: 7 differs from 8 only in not having the
/// weights kind "pt2"; 8 from 9 in seeding the backward with constants
/// (no `cotangent` ops: what a version 8 plan's backward() differentiates
/// is the sum of its losses) and in every output being a loss.
inline constexpr int64_t kOldestPlanFormatVersion = 7;
/// The value of the top-level "format" field.
inline constexpr const char *kPlanFormatName = "ds-plan";
/// The values of the top-level "device" field: what a plan is compiled for.
inline constexpr std::array<const char *, 2> kPlanDevices = {"cpu", "cuda"};
/// Whether `device` is one of kPlanDevices.
bool isPlanDevice(std::string_view device);

/// Index into Program::values.
using ValueId = int64_t;

//===----------------------------------------------------------------------===//
// Element and value types
//===----------------------------------------------------------------------===//

enum class DType {
  Float32,
  Float64,
  Float16,
  BFloat16,
  Int64,
  Int32,
  Int16,
  Int8,
  UInt8,
  Bool,
};

/// "float32", "bfloat16", ... as spelled in the plan.
const char *dtypeName(DType dtype);
std::optional<DType> parseDType(std::string_view name);
/// Bytes per element.
int64_t dtypeSize(DType dtype);
/// All dtype names, comma separated, for error messages.
std::string allDTypeNames();

/// Token: a started collective, consumed by one `wait` op.
enum class ValueType { Tensor, Int, Float, Bool, None, Str, List, Token };

/// "tensor", "int", ... as spelled in the plan.
const char *valueTypeName(ValueType type);
std::optional<ValueType> parseValueType(std::string_view name);

/// Shape entry for a data-dependent size.
inline constexpr int64_t kDynamicDim = -1;

//===----------------------------------------------------------------------===//
// Enumerations of the engines' training settings
//===----------------------------------------------------------------------===//

/// "adamw" (decoupled weight decay: DeepSpeed's AdamW, and Adam with
/// adam_w_mode), "adam" (L2 weight decay added to the gradient:
/// torch.optim.Adam) or "sgd".
enum class OptimizerType { AdamW, Adam, SGD };
const char *optimizerTypeName(OptimizerType type);
std::optional<OptimizerType> parseOptimizerType(std::string_view name);

/// "WarmupLR", "WarmupDecayLR" or "WarmupCosineLR".
enum class SchedulerType { WarmupLR, WarmupDecayLR, WarmupCosineLR };
const char *schedulerTypeName(SchedulerType type);
std::optional<SchedulerType> parseSchedulerType(std::string_view name);

/// "log" or "linear".
enum class WarmupType { Log, Linear };
const char *warmupTypeName(WarmupType type);
std::optional<WarmupType> parseWarmupType(std::string_view name);

/// "dynamic" (fp16.loss_scale 0), "static", or "grad_scaler"
/// (torch.amp.GradScaler: halves on every overflow, doubles after
/// scale_window consecutive clean steps; hysteresis 1, min_scale 0).
enum class LossScalerType { Dynamic, Static, GradScaler };
const char *lossScalerTypeName(LossScalerType type);
std::optional<LossScalerType> parseLossScalerType(std::string_view name);

/// "bf16", "fp16" (native: parameters stored in the low dtype) or
/// "autocast" (torch_autocast: float32 parameters).
enum class PrecisionMode { BF16, FP16, Autocast };
const char *precisionModeName(PrecisionMode mode);
std::optional<PrecisionMode> parsePrecisionMode(std::string_view name);

//===----------------------------------------------------------------------===//
// Top-level descriptions
//===----------------------------------------------------------------------===//

struct WeightsDesc {
  /// "torchscript" (an archive from torch.jit.save), "safetensors", or
  /// "pt2" (torch.export.save; version 8).
  std::string kind = "torchscript";
  /// Absolute, or relative to the plan file's folder.
  std::string path;
};

/// The LR schedule of an engine, lowered from its config's "scheduler"
/// (docs/config.md has the formulas; the fields mirror DeepSpeed's params).
struct SchedulerDesc {
  SchedulerType type = SchedulerType::WarmupLR;
  double warmupMinLr = 0.0;
  /// Unset: the optimizer's lr.
  std::optional<double> warmupMaxLr;
  int64_t warmupNumSteps = 1000;
  WarmupType warmupType = WarmupType::Log;
  /// Required by WarmupDecayLR and WarmupCosineLR.
  std::optional<int64_t> totalNumSteps;
  double warmupMinRatio = 0.0;
  double cosMinRatio = 0.0001;
};

/// An engine's optimizer update, lowered by -ds-lower-optimizer from its
/// config (every default resolved): what an `optimizer_step` op runs.
struct OptimizerDesc {
  OptimizerType type = OptimizerType::AdamW;
  double lr = 1e-3;
  /// adam / adamw only.
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weightDecay = 0.0;
  /// sgd only.
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  /// Max global L2 norm of the engine's gradients; 0 disables clipping.
  double gradientClipping = 1.0;
  std::optional<SchedulerDesc> scheduler;
};

/// Where a trainable parameter sits in its engine's flat buffers.
struct FlatParamDesc {
  /// A `param` state entry of this engine with requires_grad.
  std::string name;
  /// Element offset in the flat buffer.
  int64_t offset = 0;
};

/// A slice [offset, offset + numel) of an engine's flat buffers that one
/// collective moves. numel is a multiple of world_size: rank r owns block
/// [offset + r*n/W, offset + (r+1)*n/W).
struct BucketDesc {
  int64_t offset = 0;
  int64_t numel = 0;
  /// Stage 3 only: the bucket's parameters stay whole on every rank
  /// (zero_optimization.stage3_param_persistence_threshold), gathered after
  /// each optimizer step as at stages 1-2. False: every rank holds only its
  /// block; `all_gather` in programs.train / programs.eval materialises the
  /// whole bucket and `release` drops it.
  bool persistent = false;
  /// The dtype the bucket's collectives move: its gradients are cast to it
  /// for the reduction (and the result back into the gradient buffer), and
  /// at stage 3 its parameters are cast to it for the all-gathers of
  /// programs.train / programs.eval (programs.step's gathers move the
  /// parameters' own dtype). Absent: reductions move the engine's gradient
  /// buffer dtype (precision.grad_accum_dtype, else the parameters' dtype)
  /// and gathers the parameters' dtype, i.e. no cast. A float dtype.
  std::optional<DType> dtype;
};

/// How -ds-zero-partition laid out and sharded one trainable engine
/// (docs/plan-format.md, "Partitioned engines").
struct PartitionDesc {
  /// ZeRO stage: 0 (nothing sharded), 1 (optimizer state), 2 (and
  /// gradients), 3 (and parameters).
  int64_t stage = 0;
  /// Elements of the flat gradient (and, stages 1-2, parameter) buffer,
  /// padding included. Stage 3 holds the parameters per bucket: persistent
  /// buckets whole, sharded buckets as this rank's block.
  int64_t numel = 0;
  /// Every trainable parameter of the engine, by offset.
  std::vector<FlatParamDesc> params;
  /// Disjoint, sorted by offset, covering [0, numel) exactly.
  std::vector<BucketDesc> buckets;

  /// Elements of one rank's shard: the sum of numel / worldSize over the
  /// buckets (stage 0: numel, nothing is sharded).
  int64_t shardNumel(int64_t worldSize) const;
  /// Where bucket `bucket`'s block lies in a rank's shard: the sum of
  /// numel / worldSize over the buckets before it.
  int64_t shardOffset(size_t bucket, int64_t worldSize) const;
  /// Stage 3 and not persistent: between steps every rank holds only its
  /// block of the bucket's parameters (all_gather / release in the
  /// programs materialise and drop them).
  bool shardsParameters(size_t bucket) const;
  /// The bucket that holds element `offset` of the flat buffers; -1 if none.
  int64_t bucketAt(int64_t offset) const;
};

/// Loss scaling: DeepSpeed's fp16 LossScaler / DynamicLossScaler, lowered
/// from the engine's "fp16" config section, or, for an fp16 torch_autocast
/// engine, the torch.amp.GradScaler DeepSpeed creates for it.
struct LossScalerDesc {
  LossScalerType type = LossScalerType::Dynamic;
  /// static: fp16.loss_scale; dynamic: the initial scale,
  /// 2^fp16.initial_scale_power; grad_scaler: init_scale, 2^16.
  double scale = 65536.0;
  /// dynamic only: loss_scale_window, hysteresis, consecutive_hysteresis,
  /// min_loss_scale; grad_scaler: scale_window is growth_interval (2000).
  int64_t scaleWindow = 1000;
  int64_t hysteresis = 2;
  bool consecutiveHysteresis = false;
  double minScale = 1.0;
};

/// An engine's mixed precision (docs/precision.md), set by
/// -ds-assign-precision. Engines without it train in fp32 throughout.
struct PrecisionDesc {
  /// BF16 or FP16: native (DeepSpeed's bf16 / fp16 sections): the engine's
  /// float parameters and buffers are stored in param_dtype, its ops run in
  /// it (on CPU, fp16 ops compute in fp32 and round); the optimizer keeps an
  /// fp32 master copy of the rank's shard. Autocast (torch_autocast):
  /// parameters stay float32, the compiler inserted torch.autocast's casts;
  /// buckets of lower-precision-safe parameters carry dtype =
  /// autocast_dtype.
  PrecisionMode mode = PrecisionMode::BF16;
  /// The dtype of the engine's float parameters and buffers in `state`:
  /// bfloat16 / float16 (native) or float32 (autocast).
  DType paramDtype = DType::Float32;
  /// The optimizer's master weights and state (this rank's shard): float32.
  DType masterDtype = DType::Float32;
  /// The gradient buffers (data_types.grad_accum_dtype; DeepSpeed's
  /// default: the model dtype, i.e. param_dtype).
  DType gradAccumDtype = DType::Float32;
  /// autocast only: torch_autocast.dtype.
  std::optional<DType> autocastDtype;
  /// fp16 and fp16 autocast only (required on trainable engines there).
  std::optional<LossScalerDesc> lossScaler;

  /// BF16 or FP16: parameters stored in the low dtype, an fp32 master copy.
  bool native() const { return mode != PrecisionMode::Autocast; }
};

/// An engine's resolved batch sizes: train_batch_size =
/// micro_batch_per_gpu * gradient_accumulation_steps * world_size.
struct BatchDesc {
  int64_t trainBatchSize = 1;
  int64_t microBatchPerGpu = 1;
  int64_t gradientAccumulationSteps = 1;
};

/// ZeRO-Offload of an engine's optimizer (zero_optimization.
/// offload_optimizer with "device": "cpu"; version 7).
struct OffloadDesc {
  /// pin_memory: page-locked host buffers where the run device copies.
  bool pinMemory = false;
};

struct EngineDesc {
  std::string name;
  /// Submodule path of the TorchScript root; "" for the root itself.
  std::string module;
  /// False: frozen (no optimizer, no gradients).
  bool trainable = false;
  /// The configured ZeRO stage, 0 to 3 (partition.stage where there is one).
  int64_t zeroStage = 0;
  /// The seed of every random draw; unset: none configured.
  std::optional<int64_t> seed;
  BatchDesc batch;
  /// Stage 3: save_checkpoint writes the gathered 16-bit model
  /// (zero_optimization.stage3_gather_16bit_weights_on_model_save).
  bool gather16BitWeightsOnModelSave = false;
  /// Stages 1-3: the float32 master and the optimizer state of this rank's
  /// shard live in host memory and the update runs on the CPU. Frozen
  /// engines have nothing to offload.
  std::optional<OffloadDesc> offloadOptimizer;
  /// The engine's DeepSpeed config as given: provenance only (checkpoints
  /// record it as ds_config); only the monitoring keys are read from it
  /// (ds/Plan/Monitor.h).
  ordered_json dsConfig = ordered_json::object();
  /// Trainable engines of plans with programs.train: both set. Frozen
  /// engines: no optimizer, a partition only at stage 3.
  std::optional<OptimizerDesc> optimizer;
  std::optional<PartitionDesc> partition;
  /// Absent: fp32 training (no master copy, no casts, no loss scaling).
  std::optional<PrecisionDesc> precision;

  /// The dtype of this engine's gradient buffers: precision's
  /// grad_accum_dtype, else `paramDtype` (the parameters' own).
  DType gradDtype(DType paramDtype) const;
  /// The dtype bucket `bucket` of the partition communicates in: its
  /// `dtype`, else gradDtype(paramDtype).
  DType bucketDtype(size_t bucket, DType paramDtype) const;
};

enum class StateKind { Param, Buffer };

struct StateDesc {
  /// Qualified name as named_parameters() / named_buffers() spell it.
  std::string name;
  StateKind kind = StateKind::Param;
  DType dtype = DType::Float32;
  /// Always static.
  std::vector<int64_t> shape;
  bool requiresGrad = false;
  /// Name of an EngineDesc.
  std::string engine;
  std::string module;
  std::string moduleClass;
};

struct InputDesc {
  std::string name;
  DType dtype = DType::Float32;
  /// One micro-step of one rank; kDynamicDim accepts any size.
  std::vector<int64_t> shape;
  /// False for `--unbatched` arguments.
  bool batched = true;
};

struct OutputDesc {
  std::string name;
  /// "loss" for a 0-dim float result (ds-run reports it and seeds its
  /// backward with 1), "tensor" for any other result (version 9).
  std::string kind = "loss";
};

//===----------------------------------------------------------------------===//
// Programs
//===----------------------------------------------------------------------===//

struct ValueDesc {
  ValueId id = 0;
  ValueType type = ValueType::Tensor;
  /// Tensors only; absent when the compiler does not know it.
  std::optional<DType> dtype;
  /// Tensors only; absent when even the rank is unknown. kDynamicDim marks
  /// data-dependent sizes.
  std::optional<std::vector<int64_t>> shape;
  /// Tensors with a kDynamicDim only: the most each dim can hold (the
  /// compiler's ShapeBounds; static dims repeat their size). Absent:
  /// unbounded.
  std::optional<std::vector<int64_t>> bound;
  /// Lists only: the element type (never List).
  std::optional<ValueType> elem;

  static ValueDesc tensor(ValueId id, DType dtype, std::vector<int64_t> shape);
  static ValueDesc scalar(ValueId id, ValueType type);
  static ValueDesc list(ValueId id, ValueType elem);
};

/// A constant operand: one of none/int/float/bool/str/tensor.
struct Constant {
  enum class Kind { None, Int, Float, Bool, Str, Tensor };
  Kind kind = Kind::None;
  int64_t intValue = 0;
  double floatValue = 0.0;
  bool boolValue = false;
  std::string strValue;
  /// Tensors: element type, shape, and raw little-endian bytes (row-major,
  /// exactly numel * dtypeSize bytes).
  DType tensorDType = DType::Float32;
  std::vector<int64_t> tensorShape;
  std::string tensorBytes;

  static Constant none();
  static Constant ofInt(int64_t value);
  static Constant ofFloat(double value);
  static Constant ofBool(bool value);
  static Constant ofStr(std::string value);
  static Constant ofTensor(DType dtype, std::vector<int64_t> shape,
                           std::string bytes);
};

enum class OpKind {
  Input,
  State,
  SetState,
  Constant,
  List,
  Unpack,
  Call,
  If,
  /// programs.train only: adds a value into a parameter's gradient buffer.
  Grad,
  /// Collectives over a bucket of an engine's flat buffers (programs.train
  /// and programs.step); each returns a token that one `wait` consumes.
  AllReduce,
  ReduceScatter,
  AllGather,
  Wait,
  /// programs.step only: clip, update and advance the LR of one engine.
  OptimizerStep,
  /// Stage 3, programs.train and programs.eval: drops the gathered
  /// parameters of a non-persistent bucket (no token).
  Release,
  /// programs.train only, after backward_start: the start and the end of one
  /// trainable engine's share of the joint backward (DeepSpeed's backward
  /// prologue and epilogue). Every grad op of the engine lies between the
  /// two, and every reduce_scatter of the engine is waited before its
  /// epilogue. No operands, no results.
  BackwardPrologue,
  BackwardEpilogue,
  /// programs.train only, after backward_start, outside branches: the
  /// current fp16 loss scale of an engine whose precision has a loss_scaler,
  /// as a float32 0-dim tensor (the backward seed is multiplied by it).
  LossScale,
  /// programs.train only, after backward_start, outside branches (version
  /// 9): the cotangent of result `index` that backward() was given (ds-run:
  /// 1 for a loss, zeros otherwise), typed as that result.
  Cotangent,
};

/// "input", "set_state", ... as spelled in the plan.
const char *opKindName(OpKind kind);
/// all_reduce, reduce_scatter or all_gather: the kinds that return a token.
bool isCollective(OpKind kind);
std::optional<OpKind> parseOpKind(std::string_view name);

struct Op;

/// One side of an `if`: ops, then the values it yields.
struct Branch {
  std::vector<Op> body;
  std::vector<ValueId> yields;
};

/// One op. Which fields matter depends on `kind` (see docs/plan-format.md);
/// the others stay at their defaults. Ops with a single JSON "result" keep it
/// as results[0].
struct Op {
  OpKind kind = OpKind::Call;
  /// input: position in Plan::inputs; cotangent: position in the
  /// program's results.
  int64_t index = 0;
  /// state, set_state, grad: qualified state name.
  std::string name;
  /// all_reduce, reduce_scatter, all_gather, release, optimizer_step,
  /// backward_prologue, backward_epilogue, loss_scale: an engine name.
  std::string engine;
  /// all_reduce, reduce_scatter, all_gather, release: index into the
  /// engine's partition buckets.
  int64_t bucket = -1;
  /// call: schema name with overload ("aten::add.Tensor", "aten::linear").
  std::string op;
  /// list, call: operands in order.
  std::vector<ValueId> args;
  /// unpack, set_state, grad, wait (a token): the operand.
  ValueId arg = -1;
  /// if: the condition (a bool value).
  ValueId cond = -1;
  std::vector<ValueId> results;
  /// constant: the value.
  Constant value;
  /// if: the branches.
  Branch thenBranch;
  Branch elseBranch;
  /// Values whose last use is this op (dropped right after it).
  std::vector<ValueId> free;
  /// For messages: qualified module path, demangled class, "file.py:LINE".
  std::string module;
  std::string moduleClass;
  std::string loc;

  static Op input(int64_t index, ValueId result);
  static Op state(std::string name, ValueId result);
  static Op setState(std::string name, ValueId arg);
  static Op constant(Constant value, ValueId result);
  static Op list(std::vector<ValueId> args, ValueId result);
  static Op unpack(ValueId arg, std::vector<ValueId> results);
  static Op call(std::string op, std::vector<ValueId> args,
                 std::vector<ValueId> results);
  static Op ifOp(ValueId cond, Branch thenBranch, Branch elseBranch,
                 std::vector<ValueId> results);
  /// Adds tensor `arg` into the gradient of parameter `name`.
  static Op grad(std::string name, ValueId arg);
  /// kind is AllReduce, ReduceScatter or AllGather; `result` is a token.
  static Op collective(OpKind kind, std::string engine, int64_t bucket,
                       ValueId result);
  static Op wait(ValueId token);
  static Op optimizerStep(std::string engine);
  static Op release(std::string engine, int64_t bucket);
  static Op backwardPrologue(std::string engine);
  static Op backwardEpilogue(std::string engine);
  /// `result`: a float32 0-dim tensor value.
  static Op lossScale(std::string engine, ValueId result);
  /// The cotangent of the program's result `index`.
  static Op cotangent(int64_t index, ValueId result);

  /// "aten::linear" for calls, the kind name ("if", "unpack") otherwise.
  std::string label() const;
};

struct Program {
  std::vector<ValueDesc> values;
  std::vector<Op> body;
  std::vector<ValueId> results;
  /// programs.train (required there): index into the top-level `body` of
  /// the first backward op. forward() runs body[0, backwardStart), backward()
  /// the rest. Other programs may carry it; it is checked and ignored.
  std::optional<int64_t> backwardStart;
};

/// One more micro-batch shape of a plan (ds-compile given several example
/// inputs): the same model, state, engines and programs.step, with the
/// forward programs compiled again for these inputs. The runtime runs, for
/// each micro-step, the programs whose inputs its tensors match.
struct ShapeVariant {
  int64_t microBatchPerRank = 1;
  /// The plan's inputs (names, dtypes, batched) with other shapes.
  std::vector<InputDesc> inputs;
  /// "eval", and "train" when the plan has programs.train.
  std::map<std::string, Program> programs;
};

struct Plan {
  std::string producer;
  /// The device the plan was compiled for: "cpu" or "cuda" (kPlanDevices).
  std::string device = "cpu";
  /// The torch version of the LibTorch that compiled the plan
  /// ("2.15.0+cu132"); empty when unknown (hand-written plans).
  std::string torchVersion;
  /// Absent only in plans without state.
  std::optional<WeightsDesc> weights;
  int64_t worldSize = 1;
  int64_t microBatchPerRank = 1;
  int64_t gradientAccumulationSteps = 1;
  std::vector<EngineDesc> engines;
  std::vector<StateDesc> state;
  std::vector<InputDesc> inputs;
  std::vector<OutputDesc> outputs;
  /// "eval" (required), "train" (the training micro-step, optional),
  /// "step" (the accumulation boundary's work: required with "train"); other
  /// names are kept, not run.
  std::map<std::string, Program> programs;
  /// Further input shapes, each with its own eval and train programs; the
  /// top-level inputs and programs are the first shape.
  std::vector<ShapeVariant> variants;

  const Program *findProgram(const std::string &name) const;
  /// The plan as if compiled for variants[index] alone: its micro-batch,
  /// inputs and programs, programs.step this plan's; no variants.
  Plan withVariant(size_t index) const;
  /// The index of the shape `shapes` (one per input, one rank's) match:
  /// 0 for the top-level inputs, i + 1 for variants[i]; nullopt if none.
  std::optional<size_t>
  matchShape(const std::vector<std::vector<int64_t>> &shapes) const;
  /// The inputs of shape `index` (0: the top-level ones).
  const std::vector<InputDesc> &shapeInputs(size_t index) const;
  /// 1 + variants.size().
  size_t numShapes() const { return 1 + variants.size(); }
  /// Every shape's inputs, per rank, for messages: "x [8, 8], y [8, 4]; x
  /// [4, 8], y [4, 4]".
  std::string describeShapes() const;
  const StateDesc *findState(const std::string &name) const;
  const EngineDesc *findEngine(const std::string &name) const;
};

/// Whether torch versions `a` and `b` are the same release: "2.15.0+cu132"
/// and "2.15.0" are (the local part after '+' names the build, not the
/// operators), "2.15.0" and "2.11.0" are not.
bool sameTorchRelease(std::string_view a, std::string_view b);

/// For errors about an operator the runtime lacks: " (the plan was compiled
/// with torch PLAN, this runtime has torch RUNTIME)" when both versions are
/// known and are different releases, else "".
std::string torchVersionNote(std::string_view planVersion,
                             std::string_view runtimeVersion);

/// Product of a static shape's entries; nullopt if any entry is dynamic.
std::optional<int64_t> staticNumel(const std::vector<int64_t> &shape);
/// "[4, -1]" for messages.
std::string formatShape(const std::vector<int64_t> &shape);
/// "idx [2, 16], targets [2, 16]" for messages: `shapes` named by `inputs`
/// (in<i> past their end).
std::string formatInputShapes(const std::vector<InputDesc> &inputs,
                              const std::vector<std::vector<int64_t>> &shapes);
/// Whether a tensor of `shape` fits `input`'s (kDynamicDim: any size).
bool shapeFits(const std::vector<int64_t> &shape, const InputDesc &input);

} // namespace ds::plan

#endif // DS_PLAN_PLAN_H
