//===- EngineTraining.cpp - DeepSpeed's engine API over programs.train ----===//
//
// forward / backward / step as DeepSpeed's engine sequences them: step()
// ends every micro-step and updates only on the accumulation boundary. The
// train program's value slots persist from forward() to backward() (one
// executor run in two parts), so activations the backward needs stay alive
// exactly as the plan's free lists say.
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/Engine.h"

#include "Trainer.h"

#include "ds/Runtime/Seed.h"
#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/DTypes.h"
#include "ds/TensorIO/RuntimeError.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <chrono>
#include <cmath>

namespace ds::runtime {

namespace {

/// Adds the time until it goes out of scope to `total`.
class Stopwatch {
public:
  explicit Stopwatch(double &total)
      : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~Stopwatch() {
    total_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
            .count();
  }

private:
  double &total_;
  std::chrono::steady_clock::time_point start_;
};

} // namespace

double StepReport::gradNorm() const {
  if (engines.size() == 1)
    return engines[0].gradNorm;
  double sum = 0.0;
  for (const EngineStepReport &engine : engines)
    sum += engine.gradNorm * engine.gradNorm;
  return std::sqrt(sum);
}

bool StepReport::skipped() const {
  for (const EngineStepReport &engine : engines)
    if (engine.skipped)
      return true;
  return false;
}

void Engine::requireTrain(const char *call) const {
  if (!canTrain())
    throw RuntimeError(origin_ + ": " + call +
                       ": the plan has no train program (programs.train); "
                       "it was compiled for evaluation only");
}

uint64_t Engine::seed() const { return trainer_ ? trainer_->seed() : 0; }

std::vector<at::Tensor> Engine::forward(const std::vector<at::Tensor> &inputs) {
  requireTrain("forward");
  Stopwatch stopwatch(trainSeconds_);
  std::vector<c10::IValue> values =
      onDevice(std::vector<c10::IValue>(inputs.begin(), inputs.end()));
  size_t shape = shapeFor(values);
  // A forward whose backward never ran is dropped with its activations
  // (and whatever collectives its part of the program started).
  shapes_[forwardShape_].train->finish();
  if (phase_ == Phase::Forwarded)
    trainer_->abandon();
  phase_ = Phase::Idle;
  forwardResults_.clear();
  forwardShape_ = shape;
  Executor &train = *shapes_[shape].train;

  int64_t accumulation = trainer_->gradientAccumulationSteps();
  at::manual_seed(microStepSeed(trainer_->seed(), uint64_t(globalSteps_),
                                uint64_t(microSteps_ % accumulation),
                                uint64_t(rank_)));
  // The program spells out its backward; nothing here needs autograd.
  at::NoGradGuard noGrad;
  train.start(values);
  try {
    train.runRange(0, size_t(shapes_[shape].backwardStart));
  } catch (...) {
    // Collectives in flight, stage 3's gathered buckets.
    trainer_->abandon();
    throw;
  }
  std::vector<c10::IValue> results = train.results();
  std::vector<at::Tensor> losses;
  losses.reserve(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].isTensor()) {
      train.finish();
      trainer_->abandon();
      throw RuntimeError(origin_ + ": programs.train.results[" +
                         std::to_string(i) + "]: expected a tensor, got " +
                         results[i].tagKind());
    }
    losses.push_back(results[i].toTensor());
  }
  phase_ = Phase::Forwarded;
  forwardResults_ = losses;
  return losses;
}

void Engine::backward(double seedScale) { runBackward(nullptr, seedScale); }

void Engine::backward(const std::vector<at::Tensor> &cotangents) {
  runBackward(&cotangents, 1.0);
}

bool Engine::takesCotangents() const {
  if (!canTrain())
    return false;
  const plan::Program &train = *plan_->findProgram("train");
  for (const plan::Op &op : train.body)
    if (op.kind == plan::OpKind::Cotangent)
      return true;
  return false;
}

std::vector<at::Tensor>
Engine::cotangentsFor(const std::vector<at::Tensor> *given) const {
  size_t count = forwardResults_.size();
  if (given && given->size() != count)
    throw RuntimeError(origin_ + ": backward: got " +
                       std::to_string(given->size()) +
                       " cotangent(s), one per output expected (the forward "
                       "returned " +
                       std::to_string(count) + ")");
  std::vector<at::Tensor> cotangents(count);
  for (size_t i = 0; i < count; ++i) {
    const at::Tensor &result = forwardResults_[i];
    if (!at::isFloatingType(result.scalar_type()))
      continue; // No gradient; no cotangent op reads it.
    bool loss = i < plan_->outputs.size() && plan_->outputs[i].kind == "loss";
    if (!given || !(*given)[i].defined()) {
      // One element expanded: no memory of the output's size.
      at::Tensor fill =
          at::scalar_tensor(given || !loss ? 0.0 : 1.0, result.options());
      cotangents[i] = fill.expand(result.sizes());
      continue;
    }
    const at::Tensor &cotangent = (*given)[i];
    if (cotangent.sizes() != result.sizes()) {
      std::string name =
          i < plan_->outputs.size() ? " (\"" + plan_->outputs[i].name + "\")"
                                    : std::string();
      throw RuntimeError(origin_ + ": backward: the gradient of output " +
                         std::to_string(i) + name + " is " +
                         describeTensor(cotangent) + ", but the output is " +
                         describeTensor(result));
    }
    cotangents[i] = cotangent.to(result.options());
  }
  return cotangents;
}

void Engine::runBackward(const std::vector<at::Tensor> *given,
                         double seedScale) {
  requireTrain("backward");
  Stopwatch stopwatch(trainSeconds_);
  if (phase_ != Phase::Forwarded)
    throw RuntimeError(
        origin_ + ": backward: no forward() to differentiate" +
        (phase_ == Phase::BackwardDone
             ? std::string(" (backward() already ran for this micro-step; "
                           "call step() next)")
             : std::string()));
  if (!std::isfinite(seedScale))
    throw RuntimeError(origin_ +
                       ": backward: the seed scale must be finite, "
                       "got " +
                       std::to_string(seedScale));
  if (given && !takesCotangents())
    throw RuntimeError(origin_ +
                       ": backward: this plan (version 8 or a plan whose "
                       "outputs reach no trainable parameter) seeds its "
                       "backward with constants; it takes a seed scale, "
                       "not the outputs' gradients: recompile it");
  at::NoGradGuard noGrad;
  std::vector<at::Tensor> cotangents = cotangentsFor(given);
  phase_ = Phase::Idle; // A failing backward ends the micro-step.
  forwardResults_.clear();
  setSeedScale(seedScale);
  Executor &train = *shapes_[forwardShape_].train;
  train.setCotangents(std::move(cotangents));
  try {
    train.runRange(size_t(shapes_[forwardShape_].backwardStart), train.size());
  } catch (...) {
    setSeedScale(1.0);
    train.finish(); // Its values and any cotangent not read yet.
    trainer_->abandon();
    throw;
  }
  setSeedScale(1.0);
  train.finish();
  phase_ = Phase::BackwardDone;
}

bool Engine::isGradientAccumulationBoundary() const {
  int64_t accumulation = trainer_ ? trainer_->gradientAccumulationSteps()
                                  : plan_->gradientAccumulationSteps;
  return (microSteps_ + 1) % accumulation == 0;
}

StepReport Engine::step() {
  requireTrain("step");
  Stopwatch stopwatch(trainSeconds_);
  if (phase_ != Phase::BackwardDone)
    throw RuntimeError(origin_ + ": step: call backward() first (each "
                                 "micro-step is forward(), backward(), "
                                 "step())");
  StepReport report;
  if (isGradientAccumulationBoundary()) {
    // programs.step: the reductions, updates and gathers, as compiled.
    at::NoGradGuard noGrad;
    trainer_->beginStep();
    try {
      step_->run({});
    } catch (...) {
      trainer_->abandon();
      phase_ = Phase::Idle;
      throw;
    }
    report = trainer_->endStep();
    ++globalSteps_;
  }
  ++microSteps_;
  phase_ = Phase::Idle;
  return report;
}

std::optional<double> Engine::nextLr(const std::string &engine) const {
  if (!trainer_)
    return std::nullopt;
  for (size_t e = 0; e < plan_->engines.size(); ++e)
    if (plan_->engines[e].name == engine)
      return trainer_->nextLr(e);
  return std::nullopt;
}

at::Tensor Engine::gradient(const std::string &param) const {
  if (!trainer_)
    return at::Tensor();
  return trainer_->gradient(state_->indexOf(param));
}

const Optimizer *Engine::optimizer(const std::string &engine) const {
  if (!trainer_)
    return nullptr;
  for (size_t e = 0; e < plan_->engines.size(); ++e)
    if (plan_->engines[e].name == engine)
      return trainer_->engine(e).optimizer();
  return nullptr;
}

std::optional<double> Engine::lossScale(const std::string &engine) const {
  if (!trainer_)
    return std::nullopt;
  for (size_t e = 0; e < plan_->engines.size(); ++e)
    if (plan_->engines[e].name == engine)
      return trainer_->currentLossScale(e);
  return std::nullopt;
}

at::Tensor Engine::masterParameters(const std::string &engine) const {
  if (!trainer_)
    return at::Tensor();
  for (size_t e = 0; e < plan_->engines.size(); ++e)
    if (plan_->engines[e].name == engine)
      return trainer_->engine(e).master();
  return at::Tensor();
}

} // namespace ds::runtime
