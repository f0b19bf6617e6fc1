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

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ds::runtime {

class GradientBuffers;
class StateStore;

struct MemoryStats {
  /// Bytes of tensors held by live values (state excluded).
  int64_t currentBytes = 0;
  /// Highest currentBytes since the executor was built or reset.
  int64_t peakBytes = 0;
  /// Bytes of all parameters and buffers.
  int64_t stateBytes = 0;
  /// Bytes of the flat gradient buffers (training only).
  int64_t gradientBytes = 0;
  /// Bytes of the optimizers' flat state buffers (training only).
  int64_t optimizerBytes = 0;
};

struct ExecutorOptions {
  /// Compare every op result with its value's declared type, dtype and
  /// static shape entries; a difference is a RuntimeError.
  bool checkResults = true;
};

class Executor {
public:
  /// `plan`, `state` and `gradients` must outlive the executor. `origin`
  /// names the plan in errors. `grad` ops add into `gradients`; a program
  /// with grad ops needs them. Throws PlanError for operators the runtime
  /// does not know, argument counts that do not fit their schemas, and grad
  /// ops without a gradient buffer (no `gradients`, or a frozen engine's
  /// parameter).
  Executor(const plan::Plan &plan, const std::string &programName,
           StateStore &state, std::string origin, ExecutorOptions options = {},
           GradientBuffers *gradients = nullptr);
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
  /// Top-level ops of the program.
  size_t size() const;

  int64_t currentBytes() const;
  int64_t peakBytes() const;
  void resetPeak();

private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace ds::runtime

#endif // DS_RUNTIME_EXECUTOR_H
