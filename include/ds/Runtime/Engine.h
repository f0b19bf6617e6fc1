//===- Engine.h - A loaded plan, its state and its programs -----*- C++ -*-===//
//
// The runtime's entry point: loads and validates a plan, resolves its
// operators, loads its weights, and runs its programs. Issue 4 adds the
// training step (forward, backward, optimizer step) next to forwardEval.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_ENGINE_H
#define DS_RUNTIME_ENGINE_H

#include "ds/Plan/Plan.h"
#include "ds/Runtime/Executor.h"

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

namespace ds::runtime {

class StateStore;

struct LoadOptions {
  /// Replaces the plan's `weights`: a .safetensors file, or a TorchScript
  /// archive (any other extension). Empty: use the plan's.
  std::string weightsPath;
  /// See ExecutorOptions::checkResults.
  bool checkResults = true;
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
  std::vector<at::Tensor> forwardEval(const std::vector<at::Tensor> &inputs);
  /// The same, for programs whose inputs or results are not all tensors.
  std::vector<c10::IValue> runEval(const std::vector<c10::IValue> &inputs);

  MemoryStats memory() const;
  void resetPeakMemory();

  const plan::Plan &plan() const { return *plan_; }
  const std::string &origin() const { return origin_; }
  StateStore &state() { return *state_; }
  const StateStore &state() const { return *state_; }

private:
  Engine();

  std::unique_ptr<plan::Plan> plan_;
  std::string origin_;
  std::unique_ptr<StateStore> state_;
  std::unique_ptr<Executor> eval_;
};

} // namespace ds::runtime

#endif // DS_RUNTIME_ENGINE_H
