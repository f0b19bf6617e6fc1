//===- Trainer.h - Per-engine training state and the update ---*- C++ -*-===//
//
// What the runtime reads from each engine's DeepSpeed config (the plan's
// engines[].config, parsed with the compiler's config library) and does at
// the accumulation boundary: the gradients' reduction across ranks
// (GradientReduction.h), clipping, the optimizer update, the LR schedule,
// zeroing the gradients. Engine (EngineTraining.cpp) drives it. Private to
// lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_TRAINER_H
#define DS_LIB_RUNTIME_TRAINER_H

#include "GradientReduction.h"

#include "ds/Config/Config.h"
#include "ds/Runtime/Communicator.h"
#include "ds/Runtime/Engine.h"
#include "ds/Runtime/GradientBuffers.h"
#include "ds/Runtime/Optimizer.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ds::runtime::detail {

class Trainer {
public:
  /// Parses every engine's config (PlanError naming engines[i].config on a
  /// bad one) and lays out the gradient and optimizer buffers. RuntimeError
  /// for what this runtime cannot train yet (fp16 / bf16 engines, trainable
  /// parameters that are not float32; ZeRO stages above 0 on several
  /// ranks). `seedOverride` replaces the configs' "seed". `communicator`
  /// (null: one rank) reduces the gradients across ranks at the boundary.
  Trainer(const plan::Plan &plan, const std::string &origin,
          std::optional<int64_t> seedOverride,
          std::shared_ptr<Communicator> communicator);

  GradientBuffers &gradients() { return *gradients_; }
  const GradientBuffers &gradients() const { return *gradients_; }
  uint64_t seed() const { return seed_; }
  int64_t gradientAccumulationSteps() const { return accumulation_; }

  /// The boundary's work. Every trainable engine's gradient reduction is
  /// started first (all in flight together), then engine by engine in plan
  /// order: wait for its reduction, global-norm clipping (of the averaged
  /// gradients: the global norm), the optimizer step at the scheduled LR,
  /// the scheduler's advance, zeroed gradients. Frozen engines are skipped.
  StepReport update(StateStore &state);

  /// The LR the engine's next update uses; nullopt for frozen engines.
  std::optional<double> nextLr(size_t engine) const;
  const config::EngineConfig &config(size_t engine) const {
    return engines_[engine].config;
  }
  /// nullptr for frozen engines.
  const Optimizer *optimizer(size_t engine) const {
    return engines_[engine].optimizer.get();
  }
  int64_t optimizerBytes() const;

private:
  struct EngineState {
    std::string name;
    config::EngineConfig config;
    std::unique_ptr<Optimizer> optimizer;
    /// Updates applied (DeepSpeed steps its scheduler after each one).
    int64_t appliedUpdates = 0;
  };

  const plan::Plan &plan_;
  std::vector<EngineState> engines_;
  std::unique_ptr<GradientBuffers> gradients_;
  std::unique_ptr<GradientReducer> reducer_;
  uint64_t seed_ = 0;
  int64_t accumulation_ = 1;
};

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_TRAINER_H
