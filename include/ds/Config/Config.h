//===- Config.h - DeepSpeed JSON configuration ------------------*- C++ -*-===//
//
// Reads DeepSpeed's JSON config format, unchanged, into typed structs with
// DeepSpeed's defaults, and rejects what we cannot honour: unknown keys,
// impossible values, unresolvable "auto" values and DeepSpeed features we do
// not implement ("not supported"). Every error is a ConfigError naming the
// offending key by its dotted path and, when it came from a file, the file.
//
// This library has no MLIR, LLVM or LibTorch dependency. The compiler links
// it; the runtime reads only the plan. The key-by-key reference is
// docs/config.md.
//
//===----------------------------------------------------------------------===//

#ifndef DS_CONFIG_CONFIG_H
#define DS_CONFIG_CONFIG_H

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ds::config {

/// Order-preserving JSON: engines keep the order of the file.
using ordered_json = nlohmann::ordered_json;

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// A configuration error. what() reads "<file>: <key.path>: <detail>", with
/// the file and key parts left out when unknown.
class ConfigError : public std::runtime_error {
public:
  ConfigError(std::string keyPath, std::string detail, std::string file = "");

  /// Dotted path of the offending key ("zero_optimization.stage"); empty for
  /// errors about a whole document (a missing file, malformed JSON).
  const std::string &keyPath() const { return keyPath_; }
  const std::string &detail() const { return detail_; }
  const std::string &file() const { return file_; }

  /// The same error, its key path nested under `prefix` (e.g. "engines.a").
  ConfigError withKeyPrefix(const std::string &prefix) const;
  /// The same error attributed to `file`, unless it already names one.
  ConfigError withFile(const std::string &file) const;

private:
  std::string keyPath_;
  std::string detail_;
  std::string file_;
};

enum class DType { Float32, Float16, BFloat16 };

//===----------------------------------------------------------------------===//
// Warnings and remarks
//===----------------------------------------------------------------------===//

/// A warning or remark, worded as a ConfigError is: "<file>[:<line>]:
/// <key.path>: <detail>", each part left out when unknown.
struct ConfigNote {
  std::string keyPath;
  std::string detail;
  std::string file;
  /// 1-based line in `file`; 0 when the note is about a key.
  int64_t line = 0;

  std::string message() const;
};

struct ConfigNotes {
  /// Values that fell to a default, accepted deviations from strict JSON.
  std::vector<ConfigNote> warnings;
  /// How a value was resolved or why a key is ignored.
  std::vector<ConfigNote> remarks;
};

//===----------------------------------------------------------------------===//
// Reading JSON
//===----------------------------------------------------------------------===//

/// Reads a JSON document preserving key order. A missing or unreadable file,
/// malformed JSON (reported with line, column and byte offset) and an object
/// with a duplicated key are ConfigErrors naming the file. Trailing commas
/// (before `}` or `]`) are accepted with a warning naming the line, added to
/// `notes` when given.
ordered_json readJsonFile(const std::string &path,
                          ConfigNotes *notes = nullptr);

/// Parses JSON text with the same checks; `sourceName` names it in errors.
ordered_json parseJsonText(const std::string &text,
                           const std::string &sourceName,
                           ConfigNotes *notes = nullptr);

/// `text` with every comma that directly precedes a `}` or `]` (outside
/// strings, whitespace between) replaced by a space, so that lines and
/// columns stay; the 1-based line of each such comma is added to `lines`.
std::string blankTrailingCommas(const std::string &text,
                                std::vector<int64_t> &lines);

//===----------------------------------------------------------------------===//
// Command-line settings: --set KEY=VALUE, --mixed-precision, --config NAME=FILE
//===----------------------------------------------------------------------===//

/// One `--set KEY=VALUE`: KEY is a dotted path into an engine's config
/// (`optimizer.params.lr`), or `engines.NAME.PATH` for engine NAME only.
/// VALUE is JSON when it parses as JSON (1e-4, true, [0.9, 0.95]), else a
/// string (WarmupLR).
struct ConfigOverride {
  /// As given, for messages.
  std::string text;
  /// The path, engines.NAME prefix included.
  std::string key;
  ordered_json value;
};

/// Parses "KEY=VALUE"; a ConfigError naming `--set` for a missing `=`, an
/// empty value or a key with an empty segment.
ConfigOverride parseConfigOverride(const std::string &text);

/// `--mixed-precision`: "bf16", "fp16" or "no" (fp32); else a ConfigError.
DType parseMixedPrecision(const std::string &text);

/// The session document of `--config NAME=FILE ...`: {"engines": {NAME:
/// FILE, ...}} in the order given. A ConfigError for an entry that is not
/// NAME=FILE and for a name given twice.
ordered_json engineFilesDocument(const std::vector<std::string> &namedFiles);

//===----------------------------------------------------------------------===//
// What the caller knows that the config does not
//===----------------------------------------------------------------------===//

enum class Backend { CPU, CUDA };

/// A model's hidden size and how it was found (for the remark on "auto").
struct HiddenSize {
  int64_t value = 0;
  std::string origin;
};

struct ParseContext {
  /// Data-parallel world size (number of ranks).
  int64_t worldSize = 1;
  /// Global micro-batch B of the data file (its dimension 1):
  /// train_micro_batch_size_per_gpu must equal B / worldSize. Unset: nothing
  /// to check against, and "auto" batch sizes are errors.
  std::optional<int64_t> dataMicroBatch;
  /// Model hidden size; resolves "auto" bucket sizes the way Accelerate does.
  std::optional<int64_t> hiddenSize;
  /// How hiddenSize was found, for the remark on each "auto" it resolves.
  std::string hiddenSizeOrigin;
  /// The hidden size of one engine of a session, given its key and every
  /// engine's key (the root engine "" owns what the others do not own);
  /// replaces hiddenSize for that engine when it returns a value.
  std::function<std::optional<HiddenSize>(const std::string &key,
                                          const std::vector<std::string> &keys)>
      engineHiddenSize;
  /// Where the plan will run: decides torch_autocast's default dtype.
  Backend backend = Backend::CPU;
  /// `--mixed-precision`: resolves "auto" in bf16.enabled / fp16.enabled;
  /// unset means not given (both false, with a warning).
  std::optional<DType> mixedPrecision;
  /// `--set` overrides, in order; a session applies `engines.NAME.` ones to
  /// engine NAME only.
  std::vector<ConfigOverride> overrides;
};

//===----------------------------------------------------------------------===//
// Engine configuration
//===----------------------------------------------------------------------===//

/// "fp32", "fp16" or "bf16".
const char *dtypeName(DType dtype);

enum class OptimizerType { Adam, AdamW, SGD };

const char *optimizerTypeName(OptimizerType type);

struct OptimizerConfig {
  OptimizerType type = OptimizerType::AdamW;
  double lr = 1e-3;
  // Adam / AdamW.
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  /// DeepSpeed's default: 0, except 0.01 for torch.optim.AdamW
  /// ("torch_adam": true with decoupled weight decay).
  double weightDecay = 0.0;
  /// As given for Adam (default true); always true for AdamW, false for SGD.
  bool adamWMode = true;
  bool torchAdam = false;
  // SGD.
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;

  /// True when weight decay is decoupled (AdamW semantics), false when it is
  /// added to the gradient (torch.optim.Adam and SGD semantics).
  bool decoupledWeightDecay() const;
};

enum class SchedulerType { WarmupLR, WarmupDecayLR, WarmupCosineLR };
enum class WarmupType { Log, Linear };

const char *schedulerTypeName(SchedulerType type);

struct SchedulerConfig {
  SchedulerType type = SchedulerType::WarmupLR;
  // WarmupLR and WarmupDecayLR.
  double warmupMinLr = 0.0;
  /// Unset means the optimizer's lr (WarmupLR in DeepSpeed 0.19 when the key
  /// is absent); WarmupDecayLR always sets it (default 0.001).
  std::optional<double> warmupMaxLr;
  // All three.
  /// As written; the formulas use max(2, warmupNumSteps) as DeepSpeed does.
  int64_t warmupNumSteps = 1000;
  WarmupType warmupType = WarmupType::Log;
  /// Required by WarmupDecayLR and WarmupCosineLR.
  std::optional<int64_t> totalNumSteps;
  // WarmupCosineLR.
  double warmupMinRatio = 0.0;
  double cosMinRatio = 0.0001;
};

struct LeafModuleConfig {
  /// Class names, bare or dotted. DeepSpeed's default list until the user
  /// gives "classes" (which replaces it).
  std::vector<std::string> classes;
  /// False when `classes` is DeepSpeed's default list: only user-given
  /// entries must match a module.
  bool classesGiven = false;
  std::vector<std::string> names;
  std::vector<std::string> nameSuffixes;
};

/// DeepSpeed's default ZeRO-3 leaf classes (HF Mixtral/Qwen2/Qwen3 MoE blocks).
const std::vector<std::string> &defaultLeafModuleClasses();

/// `activation_checkpointing`: DeepSpeed's keys (accepted; what they tune
/// has no counterpart on one CPU rank without model parallelism) and our
/// extension `modules`, the modules whose activations -ds-rematerialize
/// recomputes in the backward (docs/activation-checkpointing.md).
struct ActivationCheckpointingConfig {
  /// Selected like leaf modules; no default classes (`classesGiven` is true
  /// whenever `classes` holds anything).
  LeafModuleConfig modules;

  bool selectsAny() const {
    return !modules.classes.empty() || !modules.names.empty() ||
           !modules.nameSuffixes.empty();
  }
};

/// One of DeepSpeed's file monitors (`tensorboard`, `csv_monitor`): rank 0
/// writes under outputPath/jobName/ (docs/config.md, "Monitoring").
struct MonitorOutputConfig {
  bool enabled = false;
  /// DeepSpeed's default "" is the working directory.
  std::string outputPath;
  std::string jobName = "DeepSpeedJobName";
};

/// DeepSpeed's monitor sections. `wandb` and `comet` are accepted (their
/// keys checked) and not written: enabling one is a remark.
struct MonitorConfig {
  MonitorOutputConfig tensorboard;
  MonitorOutputConfig csv;

  bool enabled() const { return tensorboard.enabled || csv.enabled; }
};

/// zero_optimization.offload_optimizer with "device": "cpu" (ZeRO-Offload).
struct OffloadConfig {
  /// pin_memory: page-locked host buffers (DeepSpeed's default false).
  bool pinMemory = false;
};

struct ZeroConfig {
  int stage = 0;
  /// Set: the fp32 master and optimizer state live in host memory and the
  /// update runs on the CPU (stages 1-3).
  std::optional<OffloadConfig> offloadOptimizer;
  bool contiguousGradients = true;
  bool reduceScatter = true;
  int64_t reduceBucketSize = 500000000;
  int64_t allgatherBucketSize = 500000000;
  bool allgatherPartitions = true;
  /// Default: true for stage 3, false otherwise.
  bool overlapComm = false;
  int64_t stage3PrefetchBucketSize = 50000000;
  int64_t stage3ParamPersistenceThreshold = 100000;
  int64_t stage3MaxLiveParameters = 1000000000;
  int64_t stage3MaxReuseDistance = 1000000000;
  bool stage3Gather16BitWeightsOnModelSave = false;
  /// Accepted for compatibility; it only tiles DeepSpeed's optimizer step.
  int64_t subGroupSize = 1000000000;
  LeafModuleConfig leafModule;
};

struct Fp16Config {
  bool enabled = false;
  /// 0 means dynamic loss scaling.
  double lossScale = 0.0;
  int64_t initialScalePower = 16;
  int64_t lossScaleWindow = 1000;
  int64_t hysteresis = 2;
  bool consecutiveHysteresis = false;
  double minLossScale = 1.0;

  bool dynamicLossScale() const { return lossScale == 0.0; }
  /// The scale of the first step: lossScale, or 2^initialScalePower.
  double initialLossScale() const;
};

struct Bf16Config {
  bool enabled = false;
};

/// How an engine scales its loss. DeepSpeed has two scalers: its own fp16
/// LossScaler / DynamicLossScaler (deepspeed/runtime/fp16/loss_scaler.py)
/// for `fp16.enabled`, and, for torch_autocast with dtype float16, a
/// `torch.amp.GradScaler(device=...)` with torch's defaults (engine.py at
/// stage 0, the ZeRO optimizers at stages 1-3).
struct LossScalerConfig {
  enum class Kind {
    /// fp16.loss_scale > 0: the scale never changes.
    Static,
    /// DeepSpeed's DynamicLossScaler (hysteresis, window, floor).
    Dynamic,
    /// torch.amp.GradScaler: halves on every overflow, doubles after
    /// `window` consecutive clean steps, no floor.
    GradScaler,
  };
  Kind kind = Kind::Dynamic;
  /// The scale of the first step.
  double initialScale = 65536.0;
  /// Dynamic: loss_scale_window; GradScaler: growth_interval.
  int64_t window = 1000;
  /// Dynamic: hysteresis; GradScaler: 1.
  int64_t hysteresis = 2;
  bool consecutiveHysteresis = false;
  /// Dynamic: min_loss_scale; GradScaler: 0 (no floor).
  double minScale = 1.0;
};

struct TorchAutocastConfig {
  bool enabled = false;
  /// Default: the backend's autocast dtype (bf16 on CPU, fp16 on CUDA).
  DType dtype = DType::BFloat16;
  std::vector<std::string> lowerPrecisionSafeModules;
};

/// torch.nn.Linear, Conv1d, Conv2d, Conv3d.
const std::vector<std::string> &defaultLowerPrecisionSafeModules();

struct EngineConfig {
  int64_t trainBatchSize = 0;
  int64_t trainMicroBatchSizePerGpu = 0;
  int64_t gradientAccumulationSteps = 1;

  /// Max global gradient norm; 0 disables clipping.
  double gradientClipping = 1.0;
  int64_t stepsPerPrint = 10;
  /// Our extension: fixes dropout masks and every random draw.
  std::optional<int64_t> seed;

  /// Absent: the engine is frozen (forward only, no gradients).
  std::optional<OptimizerConfig> optimizer;
  std::optional<SchedulerConfig> scheduler;
  ZeroConfig zero;

  Fp16Config fp16;
  Bf16Config bf16;
  TorchAutocastConfig torchAutocast;
  /// Resolved: data_types.grad_accum_dtype, else the model dtype.
  DType gradAccumDtype = DType::Float32;
  /// Resolved: communication_data_type, else the model dtype.
  DType communicationDataType = DType::Float32;

  ActivationCheckpointingConfig activationCheckpointing;

  /// Per-phase times (fwd, bwd, ...) every stepsPerPrint steps.
  bool wallClockBreakdown = false;
  MonitorConfig monitor;
  bool prescaleGradients = false;
  double gradientPredivideFactor = 1.0;

  /// The JSON this was parsed from, with `--set` applied and every "auto"
  /// replaced by its resolved value (plans and checkpoints record it as
  /// ds_config).
  ordered_json source;
  /// What parsing resolved by default or ignored.
  ConfigNotes notes;

  bool frozen() const { return !optimizer.has_value(); }
  /// fp16 or bf16 when those are enabled, else fp32 (torch_autocast keeps
  /// fp32 parameters).
  DType modelDtype() const;
  /// The engine's loss scaler: DeepSpeed's (fp16.enabled), a
  /// torch.amp.GradScaler (torch_autocast with dtype float16), or none (fp32,
  /// bf16, bf16 autocast).
  std::optional<LossScalerConfig> lossScaler() const;
};

/// Parses and validates one engine's DeepSpeed config.
EngineConfig parseEngineConfig(const ordered_json &json,
                               const ParseContext &context);

//===----------------------------------------------------------------------===//
// Session: one or several engines
//===----------------------------------------------------------------------===//

struct EngineEntry {
  /// Submodule path of the TorchScript root that the engine owns; "" is the
  /// root (everything no other engine owns).
  std::string key;
  /// The file the engine's config came from when given as a path; else "".
  std::string sourceFile;
  EngineConfig config;
};

struct SessionConfig {
  /// In the order of the JSON file.
  std::vector<EngineEntry> engines;
  /// True when the document used the "engines" form.
  bool multiEngine = false;
  /// Every engine's notes (key paths under engines.KEY, or naming the
  /// engine's file) and the documents' own (trailing commas).
  ConfigNotes notes;

  /// The engine with this key, or nullptr.
  const EngineEntry *find(const std::string &key) const;
};

/// A document with a top-level "engines" key (which must be its only key)
/// maps submodule paths to inline configs or to paths of JSON files
/// (relative paths are resolved against `baseDir`); any other document is one
/// engine keyed "". Engines must agree on the batch sizes and GAS, and no
/// engine key may be a prefix path of another.
SessionConfig parseSessionConfig(const ordered_json &json,
                                 const ParseContext &context,
                                 const std::string &baseDir);

/// readJsonFile + parseSessionConfig relative to the file's folder; errors
/// name the file.
SessionConfig loadSessionConfig(const std::string &path,
                                const ParseContext &context);

/// loadSessionConfig for callers built without exceptions (LLVM-style code):
/// returns nullopt and sets `error` to the ConfigError's message.
std::optional<SessionConfig> tryLoadSessionConfig(const std::string &path,
                                                  const ParseContext &context,
                                                  std::string &error) noexcept;

} // namespace ds::config

#endif // DS_CONFIG_CONFIG_H
