//===- Executor.h - Runs one program of a plan ------------------*- C++ -*-===//
//
// Resolves every `call` op of a program to an executable operator when it is
// constructed (an unknown operator is a PlanError naming the op), then runs
// the program any number of times: values live in slots indexed by value
// id, ops run in order, each value is dropped after its last use (the op's
// `free` list), and the bytes held by live tensor values are tracked so that
// they can be compared with plan::predictPeakBytes.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_EXECUTOR_H
#define DS_RUNTIME_EXECUTOR_H

#include "ds/Plan/Plan.h"

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ds::runtime {

class ExecutionObserver;
class StateStore;

struct MemoryStats {
  /// Bytes of tensors held by live values (state excluded).
  int64_t currentBytes = 0;
  /// Highest currentBytes since the executor was built or reset.
  int64_t peakBytes = 0;
  /// Bytes of all parameters and buffers: parameterBytes + bufferBytes.
  int64_t stateBytes = 0;
  /// Parameters held between steps; a ZeRO stage 1-2 engine's trainable
  /// parameters count as its flat parameter buffer (padding included), a
  /// stage 3 engine's as its persistent buckets whole plus this rank's
  /// block of each sharded bucket.
  int64_t parameterBytes = 0;
  /// Buffers (BatchNorm statistics).
  int64_t bufferBytes = 0;
  /// Gradient bytes held between optimizer steps (training only): the full
  /// flat gradient buffers of stage 0-1 engines, the shard gradient of
  /// stage 2-3 engines.
  int64_t gradientBytes = 0;
  /// Bytes of the optimizers' flat state buffers and float32 masters on the
  /// run's device (training only; the rank's shard at stages 1-3).
  int64_t optimizerBytes = 0;
  /// ZeRO-Offload: the optimizer state and master in host memory instead
  /// (not part of the device figures above).
  int64_t hostBytes = 0;
  /// Training buffers that exist for part of a step (stage 2-3's full
  /// gradient and receive buffers, stage 1's shard gradient, stage 3's
  /// gathered buckets): held now, and the most held at once.
  int64_t transientBytes = 0;
  int64_t transientPeakBytes = 0;
  /// Highest sum of the live values of the train and step programs and the
  /// transient training buffers (training only).
  int64_t jointPeakBytes = 0;
};

/// What the training op kinds do (docs/plan-format.md): the executor
/// resolves their operands and runs them in program order; the training
/// side of the runtime (the Trainer) implements them.
class TrainingOps {
public:
  virtual ~TrainingOps();
  /// Whether a `grad` op may name state entry `stateIndex`.
  virtual bool hasGradient(int64_t stateIndex) const = 0;
  /// A `grad` op: adds `value` into the parameter's gradient.
  virtual void accumulateGradient(int64_t stateIndex,
                                  const at::Tensor &value) = 0;
  /// all_reduce, reduce_scatter or all_gather of bucket `bucket` of plan
  /// engine `engine` (its index in Plan::engines): starts it and returns
  /// the token that the result value holds until a `wait`.
  virtual c10::IValue startCollective(plan::OpKind kind, size_t engine,
                                      int64_t bucket) = 0;
  /// A `wait` on a token startCollective returned.
  virtual void wait(const c10::IValue &token) = 0;
  /// An `optimizer_step` of plan engine `engine`.
  virtual void optimizerStep(size_t engine) = 0;
  /// A `release` (ZeRO stage 3): drops the gathered parameters of bucket
  /// `bucket` of plan engine `engine`.
  virtual void release(size_t engine, int64_t bucket) = 0;
  /// A `loss_scale` op: the fp16 engine's current loss scale as a float32
  /// 0-dim tensor.
  virtual at::Tensor lossScale(size_t engine) = 0;
  /// The bytes of the executor's live values changed to `bytes`.
  virtual void liveBytesChanged(int64_t /*bytes*/) {}
};

struct ExecutorOptions {
  /// Compare every op result with its value's declared type, dtype and
  /// static shape entries; a difference is a RuntimeError.
  bool checkResults = true;
  /// Where the program runs: tensor constants are placed there, and every
  /// device argument of an operator (the plan writes them as None) is this
  /// device, so factory ops allocate on it. Inputs must be on it.
  c10::Device device = c10::Device(c10::kCPU);
};

class Executor {
public:
  /// `plan`, `state` and `training` must outlive the executor. `origin`
  /// names the plan in errors. `grad`, collective, `wait` and
  /// `optimizer_step` ops go to `training`; a program with such ops needs
  /// it. Throws PlanError for operators the runtime does not know, argument
  /// counts that do not fit their schemas, and training ops it cannot run
  /// (no `training`, or a grad op naming a frozen engine's parameter).
  /// programs.step takes no inputs; the other programs take the plan's.
  Executor(const plan::Plan &plan, const std::string &programName,
           StateStore &state, std::string origin, ExecutorOptions options = {},
           TrainingOps *training = nullptr);
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  /// Runs the program on `inputs` (one per plan input, checked against the
  /// plan's dtypes and shapes) and returns its results. Throws RuntimeError.
  std::vector<c10::IValue> run(const std::vector<c10::IValue> &inputs);

  /// A run in parts (programs.train: forward, then backward). start()
  /// checks and keeps `inputs` and empties the value slots; runRange runs
  /// top-level ops [begin, end) on the slots as the previous part left them;
  /// results() reads the program's results (valid once the ops defining
  /// them have run); finish() drops every value. A part that throws drops
  /// every value as well: the run is over.
  void start(const std::vector<c10::IValue> &inputs);
  void runRange(size_t begin, size_t end);
  std::vector<c10::IValue> results() const;
  void finish();
  /// What the program's `cotangent` ops read until finish(): one tensor per
  /// program result (undefined where no cotangent op reads it).
  void setCotangents(std::vector<at::Tensor> cotangents);
  /// Top-level ops of the program.
  size_t size() const;

  int64_t currentBytes() const;
  int64_t peakBytes() const;
  void resetPeak();

  /// Calls `observer` around each part run and each op (null: none, the
  /// default); it must outlive the runs.
  void setObserver(ExecutionObserver *observer);

private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace ds::runtime

#endif // DS_RUNTIME_EXECUTOR_H
