//===- Engine.cpp - A loaded plan, its state and its programs -------------===//

#include "ds/Runtime/Engine.h"

#include "Trainer.h"

#include "ds/Plan/PlanFormat.h"
#include "ds/Runtime/Communicator.h"
#include "ds/Runtime/Device.h"
#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/RuntimeError.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <fstream>

namespace ds::runtime {

namespace {

std::string folderOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

} // namespace

namespace detail {

/// The trainer's ops with each `grad` value multiplied by a factor:
/// Engine::backward(seedScale) without recompiling the seed into the plan.
class SeedScaledOps final : public TrainingOps {
public:
  explicit SeedScaledOps(TrainingOps &inner) : inner_(inner) {}

  void setScale(double scale) { scale_ = scale; }

  bool hasGradient(int64_t stateIndex) const override {
    return inner_.hasGradient(stateIndex);
  }
  void accumulateGradient(int64_t stateIndex,
                          const at::Tensor &value) override {
    if (scale_ == 1.0 || !value.defined())
      inner_.accumulateGradient(stateIndex, value);
    else
      inner_.accumulateGradient(stateIndex, value.mul(scale_));
  }
  c10::IValue startCollective(plan::OpKind kind, size_t engine,
                              int64_t bucket) override {
    return inner_.startCollective(kind, engine, bucket);
  }
  void wait(const c10::IValue &token) override { inner_.wait(token); }
  void optimizerStep(size_t engine) override { inner_.optimizerStep(engine); }
  void release(size_t engine, int64_t bucket) override {
    inner_.release(engine, bucket);
  }
  at::Tensor lossScale(size_t engine) override {
    return inner_.lossScale(engine);
  }
  void liveBytesChanged(int64_t bytes) override {
    inner_.liveBytesChanged(bytes);
  }

private:
  TrainingOps &inner_;
  double scale_ = 1.0;
};

} // namespace detail

Engine::Engine() = default;
Engine::Engine(Engine &&) noexcept = default;
Engine &Engine::operator=(Engine &&) noexcept = default;
Engine::~Engine() = default;

Engine Engine::load(const std::string &planPath, const LoadOptions &options) {
  return fromPlan(plan::readPlan(planPath), planPath, folderOf(planPath),
                  options);
}

Engine Engine::fromPlan(plan::Plan plan, const std::string &origin,
                        const std::string &baseDir,
                        const LoadOptions &options) {
  plan::validatePlan(plan, origin);
  std::shared_ptr<Device> device =
      options.device ? options.device : createRankDevice(plan.device);
  if (device->backendName() != plan.device)
    throw RuntimeError(origin + ": the plan was compiled for device '" +
                       plan.device + "' (ds-compile --device " + plan.device +
                       "), but this run is on " + device->device().str() +
                       ": compile it with --device " + device->backendName() +
                       ", or run it on its own device");
  std::shared_ptr<Communicator> communicator =
      options.connect ? options.connect(device) : options.communicator;
  // Before anything expensive: every rank fails alike on a mismatch.
  if (communicator && communicator->size() != plan.worldSize)
    throw RuntimeError(
        origin + ": the plan was compiled for --world-size " +
        std::to_string(plan.worldSize) + ", but " +
        std::to_string(communicator->size()) +
        (communicator->size() == 1 ? " rank was" : " ranks were") +
        " launched");
  Engine engine;
  engine.device_ = device;
  // The plan lives on the heap: the state store and executors point into it
  // and must survive moves of the Engine.
  engine.plan_ = std::make_unique<plan::Plan>(std::move(plan));
  engine.origin_ = origin;
  engine.state_ =
      std::make_unique<StateStore>(*engine.plan_, device->device());

  // Training: configs first (they decide which parameters get gradients),
  // then the operators of every program, grad ops included: an unknown
  // operator is a plan error, cheaper to report than loading large weights.
  // ZeRO stage 3 engines need the trainer's parameter shards even in a plan
  // without programs.train (their eval program gathers).
  ExecutorOptions executorOptions;
  executorOptions.checkResults = options.checkResults;
  executorOptions.device = device->device();
  engine.communicator_ = communicator;
  engine.rank_ = communicator ? communicator->rank() : options.rank;
  bool stage3 = false;
  for (const plan::EngineDesc &desc : engine.plan_->engines)
    stage3 |= desc.partition && desc.partition->stage == 3;
  if (engine.plan_->findProgram("train") || stage3)
    engine.trainer_ = std::make_unique<detail::Trainer>(
        *engine.plan_, origin, options.seed, communicator, engine.rank_, device,
        options.optimizerKernel);
  if (engine.plan_->findProgram("train"))
    engine.trainOps_ =
        std::make_unique<detail::SeedScaledOps>(*engine.trainer_);
  // One eval and train executor per input shape, sharing the state, the
  // trainer (flat buffers, optimizer) and programs.step.
  for (size_t index = 0; index < engine.plan_->numShapes(); ++index) {
    ShapePrograms shape;
    if (index > 0)
      shape.variantPlan =
          std::make_unique<plan::Plan>(engine.plan_->withVariant(index - 1));
    const plan::Plan &shapePlan =
        index > 0 ? *shape.variantPlan : *engine.plan_;
    std::string shapeOrigin =
        index > 0 ? origin + ": variants[" + std::to_string(index - 1) + "]"
                  : origin;
    shape.eval = std::make_unique<Executor>(
        shapePlan, "eval", *engine.state_, shapeOrigin, executorOptions,
        engine.trainer_ ? &engine.trainer_->evalOps() : nullptr);
    if (const plan::Program *train = shapePlan.findProgram("train")) {
      shape.train = std::make_unique<Executor>(
          shapePlan, "train", *engine.state_, shapeOrigin, executorOptions,
          engine.trainOps_.get());
      shape.backwardStart = *train->backwardStart;
    }
    engine.shapes_.push_back(std::move(shape));
  }
  if (engine.plan_->findProgram("train")) {
    engine.step_ = std::make_unique<Executor>(
        *engine.plan_, "step", *engine.state_, origin, executorOptions,
        engine.trainer_.get());
  }

  const plan::Plan &loaded = *engine.plan_;
  std::string planWeights;
  if (loaded.weights) {
    planWeights = loaded.weights->path;
    if (!planWeights.empty() && planWeights[0] != '/')
      planWeights = baseDir + "/" + planWeights;
  }
  // Under --weights, the plan's own file (when it is there) loads first, so
  // that buffers a state dict leaves out (non-persistent ones, as Llama's
  // rotary inv_freq) keep the plan's values.
  if (loaded.weights &&
      (options.weightsPath.empty() || std::ifstream(planWeights).good()))
    engine.state_->load(loaded.weights->kind, planWeights);
  if (!options.weightsPath.empty()) {
    engine.state_->load(weightsKindOf(options.weightsPath), options.weightsPath,
                        engine.state_->loaded());
  } else if (!loaded.weights && !loaded.state.empty()) {
    throw RuntimeError(origin + ": the plan has " +
                       std::to_string(loaded.state.size()) +
                       " state tensor(s) but names no weights file; pass "
                       "one (ds-run --weights FILE)");
  }
  engine.broadcastState();
  // After the broadcast, so that what moves is each state tensor as loaded.
  if (engine.trainer_)
    engine.trainer_->bindParameters(*engine.state_);
  return engine;
}

void Engine::setSeedScale(double scale) { trainOps_->setScale(scale); }

int64_t Engine::worldSize() const {
  return communicator_ ? communicator_->size() : 1;
}

void Engine::broadcastState() {
  if (worldSize() <= 1)
    return;
  // DeepSpeed broadcasts the model from rank 0 when it wraps it: ranks that
  // loaded different files (or initialised differently) still start equal.
  std::vector<CommHandle> handles;
  std::vector<std::pair<int64_t, at::Tensor>> copies;
  for (size_t i = 0; i < state_->size(); ++i) {
    at::Tensor tensor = state_->tensor(int64_t(i));
    if (!tensor.defined() || tensor.numel() == 0)
      continue;
    if (!tensor.is_contiguous()) {
      tensor = tensor.contiguous();
      copies.emplace_back(int64_t(i), tensor);
    }
    handles.push_back(communicator_->broadcast(tensor, 0));
  }
  waitAll(handles);
  for (auto &[index, tensor] : copies)
    state_->assign(index, tensor);
}

size_t Engine::shapeFor(const std::vector<c10::IValue> &inputs) const {
  if (plan_->numShapes() == 1)
    return 0;
  std::vector<std::vector<int64_t>> shapes;
  for (const c10::IValue &input : inputs)
    shapes.push_back(input.isTensor() ? input.toTensor().sizes().vec()
                                      : std::vector<int64_t>());
  if (std::optional<size_t> index = plan_->matchShape(shapes))
    return *index;
  throw RuntimeError(
      origin_ + ": inputs of shapes " +
      plan::formatInputShapes(plan_->inputs, shapes) +
      " match no compiled program (compiled: " + plan_->describeShapes() + ")");
}

std::vector<c10::IValue>
Engine::onDevice(std::vector<c10::IValue> values) const {
  if (device_->device().is_cpu())
    return values;
  c10::Stream compute = device_->stream(StreamRole::Compute);
  for (c10::IValue &value : values)
    if (value.isTensor() && value.toTensor().device().is_cpu())
      value = device_->copyFromHost(value.toTensor(), compute);
  return values;
}

std::vector<c10::IValue>
Engine::runEval(const std::vector<c10::IValue> &hostInputs) {
  at::NoGradGuard noGrad;
  std::vector<c10::IValue> inputs = onDevice(hostInputs);
  Executor &eval = *shapes_[shapeFor(inputs)].eval;
  if (!trainer_)
    return eval.run(inputs);
  if (phase_ == Phase::Forwarded && trainer_->hasStage3())
    throw RuntimeError(origin_ +
                       ": programs.eval: cannot run between forward() and "
                       "backward() of a ZeRO stage 3 plan (the training "
                       "micro-step may hold gathered parameters); call "
                       "backward() first");
  try {
    return eval.run(inputs);
  } catch (...) {
    // Its gathers (stage 3) are released; the collectives finished.
    trainer_->abandonGathers();
    throw;
  }
}

NamedTensors Engine::gatherState() const {
  if (trainer_ && trainer_->hasStage3()) {
    if (phase_ == Phase::Forwarded)
      throw RuntimeError(origin_ + ": gatherState: cannot run between "
                                   "forward() and backward(); call backward() "
                                   "first");
    return trainer_->gatherState();
  }
  return state_->named();
}

plan::OverlapReport Engine::overlap() const {
  plan::OverlapReport report;
  if (trainer_)
    report = trainer_->timing();
  report.trainSeconds = trainSeconds_;
  return report;
}

void Engine::resetOverlap() {
  if (trainer_)
    trainer_->resetTiming();
  trainSeconds_ = 0.0;
}

std::vector<at::Tensor>
Engine::forwardEval(const std::vector<at::Tensor> &inputs) {
  std::vector<c10::IValue> values(inputs.begin(), inputs.end());
  std::vector<c10::IValue> results = runEval(values);
  std::vector<at::Tensor> tensors;
  tensors.reserve(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].isTensor())
      throw RuntimeError(origin_ + ": programs.eval.results[" +
                         std::to_string(i) + "]: expected a tensor, got " +
                         results[i].tagKind());
    tensors.push_back(results[i].toTensor());
  }
  return tensors;
}

MemoryStats Engine::fillStateBytes(MemoryStats stats) const {
  for (size_t i = 0; i < state_->size(); ++i) {
    const at::Tensor &tensor = state_->tensor(int64_t(i));
    int64_t bytes = tensor.defined() ? int64_t(tensor.nbytes()) : 0;
    if (state_->desc(int64_t(i)).kind == plan::StateKind::Buffer)
      stats.bufferBytes += bytes;
    else if (!trainer_ || !trainer_->inFlatParameters(int64_t(i)))
      stats.parameterBytes += bytes;
  }
  if (trainer_) {
    // A flat parameter buffer counts whole, padding included.
    stats.parameterBytes += trainer_->flatParameterBytes();
    stats.gradientBytes = trainer_->heldGradientBytes();
    stats.optimizerBytes = trainer_->optimizerBytes();
    stats.hostBytes = trainer_->hostBytes();
    stats.transientBytes = trainer_->ledger().transientBytes();
    stats.transientPeakBytes = trainer_->ledger().transientPeakBytes();
    stats.jointPeakBytes = trainer_->ledger().jointPeakBytes();
  }
  stats.stateBytes = stats.parameterBytes + stats.bufferBytes;
  return stats;
}

std::vector<plan::EngineReport> Engine::engineReports() const {
  std::vector<plan::EngineReport> reports;
  for (size_t e = 0; e < plan_->engines.size(); ++e) {
    const plan::EngineDesc &desc = plan_->engines[e];
    plan::EngineReport report;
    report.name = desc.name;
    report.frozen = !desc.optimizer;
    report.zeroStage = desc.zeroStage;
    for (size_t i = 0; i < state_->size(); ++i) {
      const plan::StateDesc &state = state_->desc(int64_t(i));
      const at::Tensor &tensor = state_->tensor(int64_t(i));
      if (state.kind == plan::StateKind::Param && state.engine == desc.name &&
          tensor.defined() &&
          (!trainer_ || !trainer_->inFlatParameters(int64_t(i))))
        report.paramBytes += int64_t(tensor.nbytes());
    }
    if (trainer_) {
      report.paramBytes += trainer_->flatParameterBytes(e);
      report.gradBytes = trainer_->heldGradientBytes(e);
      report.optimizerStateBytes = trainer_->optimizerBytes(e);
      if (trainer_->engine(e).offloadsOptimizer())
        report.hostBytes = trainer_->hostBytes(e);
      report.comm = trainer_->volume(e);
    }
    reports.push_back(std::move(report));
  }
  return reports;
}

MemoryStats Engine::memory() const {
  // One shape runs at a time: the most any of them holds.
  MemoryStats stats;
  for (const ShapePrograms &shape : shapes_) {
    stats.currentBytes =
        std::max(stats.currentBytes, shape.eval->currentBytes());
    stats.peakBytes = std::max(stats.peakBytes, shape.eval->peakBytes());
  }
  return fillStateBytes(stats);
}

MemoryStats Engine::trainMemory() const {
  MemoryStats stats;
  for (const ShapePrograms &shape : shapes_) {
    if (!shape.train)
      continue;
    stats.currentBytes =
        std::max(stats.currentBytes, shape.train->currentBytes());
    stats.peakBytes = std::max(stats.peakBytes, shape.train->peakBytes());
  }
  return fillStateBytes(stats);
}

void Engine::resetPeakMemory() {
  for (ShapePrograms &shape : shapes_) {
    shape.eval->resetPeak();
    if (shape.train)
      shape.train->resetPeak();
  }
  if (trainer_)
    trainer_->resetPeaks();
}

} // namespace ds::runtime
