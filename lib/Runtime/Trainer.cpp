//===- Trainer.cpp - The training side of the executor --------------------===//

#include "Trainer.h"

#include "ds/Runtime/TimedCommunicator.h"

#include "ds/Plan/PlanError.h"
#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/DTypes.h"
#include "ds/TensorIO/RuntimeError.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>

namespace ds::runtime::detail {

namespace {

config::OptimizerType optimizerType(plan::OptimizerType type) {
  switch (type) {
  case plan::OptimizerType::AdamW:
    return config::OptimizerType::AdamW;
  case plan::OptimizerType::Adam:
    return config::OptimizerType::Adam;
  case plan::OptimizerType::SGD:
    return config::OptimizerType::SGD;
  }
  return config::OptimizerType::AdamW; // Unreachable: every enumerator.
}

config::OptimizerConfig optimizerConfig(const plan::OptimizerDesc &desc) {
  config::OptimizerConfig config;
  config.type = optimizerType(desc.type);
  // "adam" is torch.optim.Adam (L2 decay added to the gradient).
  config.adamWMode = desc.type != plan::OptimizerType::Adam;
  config.lr = desc.lr;
  config.betas = desc.betas;
  config.eps = desc.eps;
  config.weightDecay = desc.weightDecay;
  config.momentum = desc.momentum;
  config.dampening = desc.dampening;
  config.nesterov = desc.nesterov;
  return config;
}

config::SchedulerType schedulerType(plan::SchedulerType type) {
  switch (type) {
  case plan::SchedulerType::WarmupLR:
    return config::SchedulerType::WarmupLR;
  case plan::SchedulerType::WarmupDecayLR:
    return config::SchedulerType::WarmupDecayLR;
  case plan::SchedulerType::WarmupCosineLR:
    return config::SchedulerType::WarmupCosineLR;
  }
  return config::SchedulerType::WarmupLR; // Unreachable: every enumerator.
}

config::WarmupType warmupType(plan::WarmupType type) {
  switch (type) {
  case plan::WarmupType::Log:
    return config::WarmupType::Log;
  case plan::WarmupType::Linear:
    return config::WarmupType::Linear;
  }
  return config::WarmupType::Log; // Unreachable: every enumerator.
}

config::SchedulerConfig schedulerConfig(const plan::SchedulerDesc &desc) {
  config::SchedulerConfig config;
  config.type = schedulerType(desc.type);
  config.warmupMinLr = desc.warmupMinLr;
  config.warmupMaxLr = desc.warmupMaxLr;
  config.warmupNumSteps = desc.warmupNumSteps;
  config.warmupType = warmupType(desc.warmupType);
  config.totalNumSteps = desc.totalNumSteps;
  config.warmupMinRatio = desc.warmupMinRatio;
  config.cosMinRatio = desc.cosMinRatio;
  return config;
}

config::LossScalerConfig::Kind lossScalerKind(plan::LossScalerType type) {
  using Kind = config::LossScalerConfig::Kind;
  switch (type) {
  case plan::LossScalerType::Dynamic:
    return Kind::Dynamic;
  case plan::LossScalerType::Static:
    return Kind::Static;
  case plan::LossScalerType::GradScaler:
    return Kind::GradScaler;
  }
  return Kind::Dynamic; // Unreachable: every enumerator.
}

config::LossScalerConfig lossScalerConfig(const plan::LossScalerDesc &desc) {
  config::LossScalerConfig config;
  config.kind = lossScalerKind(desc.type);
  config.initialScale = desc.scale;
  config.window = desc.scaleWindow;
  config.hysteresis = desc.hysteresis;
  config.consecutiveHysteresis = desc.consecutiveHysteresis;
  config.minScale = desc.minScale;
  return config;
}

} // namespace

/// What programs.eval runs through: only stage 3's gathers, their waits and
/// releases (the validator allows nothing else there).
class Trainer::EvalOps final : public TrainingOps {
public:
  explicit EvalOps(Trainer &trainer) : trainer_(trainer) {}
  bool hasGradient(int64_t) const override { return false; }
  void accumulateGradient(int64_t, const at::Tensor &) override {
    trainer_.internalError("a grad op in programs.eval");
  }
  c10::IValue startCollective(plan::OpKind kind, size_t engine,
                              int64_t bucket) override {
    return trainer_.startCollective(kind, engine, bucket);
  }
  void wait(const c10::IValue &token) override { trainer_.wait(token); }
  void optimizerStep(size_t) override {
    trainer_.internalError("an optimizer_step in programs.eval");
  }
  void release(size_t engine, int64_t bucket) override {
    trainer_.release(engine, bucket);
  }
  at::Tensor lossScale(size_t) override {
    trainer_.internalError("a loss_scale in programs.eval");
  }

private:
  Trainer &trainer_;
};

Trainer::~Trainer() = default;

TrainingOps &Trainer::evalOps() { return *evalOps_; }

Trainer::Trainer(const plan::Plan &plan, const std::string &origin,
                 std::optional<int64_t> seedOverride,
                 std::shared_ptr<Communicator> communicator, int64_t rank)
    : plan_(plan), origin_(origin), communicator_(std::move(communicator)),
      rank_(rank), accumulation_(plan.gradientAccumulationSteps) {
  if (communicator_) {
    rank_ = communicator_->rank();
  } else {
    // One rank: collectives over one rank (identities, copies).
    communicator_ = createLocalCommunicator();
  }
  timed_ = std::make_shared<TimedCommunicator>(communicator_);
  evalOps_ = std::make_unique<EvalOps>(*this);
  worldSize_ = plan.worldSize;

  // The seed: the engines' (they must agree) unless overridden.
  std::optional<int64_t> planSeed;
  std::string seedEngine;
  for (size_t i = 0; i < plan.engines.size(); ++i) {
    const plan::EngineDesc &desc = plan.engines[i];
    if (!desc.seed)
      continue;
    if (planSeed && *planSeed != *desc.seed && !seedOverride)
      throw plan::PlanError(origin, "engines[" + std::to_string(i) + "].seed",
                            "is " + std::to_string(*desc.seed) +
                                ", but engine \"" + seedEngine + "\" says " +
                                std::to_string(*planSeed) +
                                " (a run has one seed; --seed overrides both)");
    if (!planSeed) {
      planSeed = desc.seed;
      seedEngine = desc.name;
    }
  }
  seed_ = uint64_t(seedOverride.value_or(planSeed.value_or(0)));

  std::vector<FlatLayout> layouts(plan.engines.size());
  std::vector<bool> allocateNow(plan.engines.size(), false);
  inFlat_.assign(plan.state.size(), false);
  for (size_t e = 0; e < plan.engines.size(); ++e) {
    const plan::EngineDesc &desc = plan.engines[e];
    EngineState engine;
    engine.name = desc.name;
    if (desc.partition) {
      const bool trains = desc.optimizer.has_value();
      const bool native = desc.precision && desc.precision->native();
      if (desc.precision)
        engine.precision = &*desc.precision;
      engine.native = native;
      engine.partition = &*desc.partition;
      engine.stage = desc.partition->stage;
      if (engine.stage >= 1 && worldSize_ != communicator_->size())
        throw RuntimeError(
            origin + ": engine \"" + desc.name + "\": ZeRO stage " +
            std::to_string(engine.stage) + " shards over the plan's " +
            std::to_string(worldSize_) +
            " ranks; load it with their communicator (ds-run under mpirun "
            "-n " +
            std::to_string(worldSize_) + ")");

      FlatLayout &layout = engine.layout;
      for (const plan::FlatParamDesc &param : desc.partition->params) {
        const plan::StateDesc *state = plan.findState(param.name);
        int64_t index = int64_t(state - plan.state.data());
        const bool lowPrecision = state->dtype == plan::DType::BFloat16 ||
                                  state->dtype == plan::DType::Float16;
        if (trains && state->dtype != plan::DType::Float32 &&
            state->dtype != plan::DType::Float64 && !(lowPrecision && native))
          throw RuntimeError(origin + ": trainable parameter \"" + state->name +
                             "\" is " + plan::dtypeName(state->dtype) +
                             "; this runtime trains float32 and float64 "
                             "parameters, and bfloat16 / float16 ones of "
                             "engines whose plan `precision` is bf16 / fp16");
        layout.dtype = toScalarType(state->dtype);
        layout.place(index, state->shape, param.offset);
        if (engine.stage >= 1)
          inFlat_[size_t(index)] = true;
      }
      layout.numel = desc.partition->numel;
      engine.dtype = layout.dtype;
      engine.elementBytes = int64_t(c10::elementSize(layout.dtype));
      engine.gradDtype = desc.precision
                             ? toScalarType(desc.precision->gradAccumDtype)
                             : engine.dtype;
      engine.gradElementBytes = int64_t(c10::elementSize(engine.gradDtype));
      for (const plan::BucketDesc &bucket : desc.partition->buckets) {
        engine.reduceDtypes.push_back(bucket.dtype ? toScalarType(*bucket.dtype)
                                                   : engine.gradDtype);
        engine.gatherDtypes.push_back(bucket.dtype ? toScalarType(*bucket.dtype)
                                                   : engine.dtype);
      }

      if (trains) {
        engine.desc = &*desc.optimizer;
        engine.optimizerConfig = optimizerConfig(*desc.optimizer);
        if (desc.optimizer->scheduler)
          engine.scheduler = schedulerConfig(*desc.optimizer->scheduler);
        layouts[e] = layout;
        layouts[e].dtype = engine.gradDtype;
        allocateNow[e] = engine.stage <= 1;
        // Mixed precision: the optimizer and its state work on the float32
        // master.
        const at::ScalarType optimizerDtype =
            native ? toScalarType(desc.precision->masterDtype) : layout.dtype;
        if (desc.precision && desc.precision->lossScaler) {
          // DeepSpeed's fp16 scaler, or fp16 autocast's torch.amp.GradScaler.
          engine.scaler = std::make_unique<LossScaler>(
              lossScalerConfig(*desc.precision->lossScaler));
        }
        if (engine.stage == 0) {
          // Per-parameter views of flat state: torch.optim's op sequence on
          // each parameter, bit for bit.
          FlatLayout master = layout;
          master.dtype = optimizerDtype;
          engine.optimizer =
              std::make_unique<Optimizer>(engine.optimizerConfig, master);
        } else {
          // The shard: this rank's block of each bucket. The updates are
          // element-wise, so blocks give torch.optim's numbers.
          FlatLayout shard;
          shard.dtype = optimizerDtype;
          for (size_t b = 0; b < desc.partition->buckets.size(); ++b)
            shard.add(-1, {blockNumel(engine, int64_t(b))});
          engine.optimizer =
              std::make_unique<Optimizer>(engine.optimizerConfig, shard);
        }
      }
    }
    engines_.push_back(std::move(engine));
  }
  gradients_ =
      std::make_unique<GradientBuffers>(plan, std::move(layouts), allocateNow);
  for (size_t e = 0; e < engines_.size(); ++e) {
    EngineState &engine = engines_[e];
    // Stages 2-3 keep the shard gradient between steps.
    if (engine.optimizer && engine.stage >= 2) {
      engine.shardGradient = at::zeros(
          {shardNumel(engine)}, at::TensorOptions().dtype(engine.gradDtype));
    }
  }
}

int64_t Trainer::blockNumel(const EngineState &engine, int64_t bucket) const {
  return engine.partition->buckets[size_t(bucket)].numel / worldSize_;
}

int64_t Trainer::shardNumel(const EngineState &engine) const {
  return engine.partition ? engine.partition->shardNumel(worldSize_) : 0;
}

void Trainer::bindParameters(StateStore &state) {
  state_ = &state;
  at::NoGradGuard noGrad;
  for (size_t e = 0; e < engines_.size(); ++e) {
    EngineState &engine = engines_[e];
    if (!engine.partition || engine.stage == 0)
      continue;
    const FlatLayout &layout = engine.layout;
    const std::vector<plan::BucketDesc> &buckets = engine.partition->buckets;
    engine.parameterBlocks.clear();
    if (engine.stage <= 2) {
      engine.parameters = layout.allocate(); // Padding stays zero.
      std::vector<at::Tensor> views = layout.views(engine.parameters);
      for (size_t k = 0; k < views.size(); ++k)
        state.bind(layout.stateIndices[k], views[k]);
      for (size_t b = 0; b < buckets.size(); ++b) {
        int64_t block = blockNumel(engine, int64_t(b));
        engine.parameterBlocks.push_back(engine.parameters.narrow(
            0, buckets[b].offset + rank_ * block, block));
      }
      continue;
    }

    // Stage 3: persistent buckets whole, this rank's block of the others.
    at::TensorOptions options = at::TensorOptions().dtype(engine.dtype);
    int64_t shardedNumel = 0;
    engine.buckets.assign(buckets.size(), BucketParams());
    for (size_t b = 0; b < buckets.size(); ++b) {
      engine.buckets[b].sharded = engine.partition->shardsParameters(b);
      if (engine.buckets[b].sharded)
        shardedNumel += blockNumel(engine, int64_t(b));
    }
    for (size_t k = 0; k < layout.stateIndices.size(); ++k) {
      // The plan validator put every parameter inside one bucket.
      int64_t b = engine.partition->bucketAt(layout.offsets[k]);
      if (b < 0)
        continue; // An empty parameter at the end.
      BucketParams &bucket = engine.buckets[size_t(b)];
      bucket.stateIndices.push_back(layout.stateIndices[k]);
      bucket.offsets.push_back(layout.offsets[k] - buckets[size_t(b)].offset);
      bucket.shapes.push_back(layout.shapes[k]);
    }
    engine.shardParameters = at::zeros({shardedNumel}, options);
    int64_t shardOffset = 0;
    for (size_t b = 0; b < buckets.size(); ++b) {
      BucketParams &bucket = engine.buckets[b];
      const int64_t n = buckets[b].numel;
      const int64_t block = blockNumel(engine, int64_t(b));
      // The loaded (and broadcast) parameters, whole; padding zero.
      at::Tensor whole = at::zeros({n}, options);
      for (size_t k = 0; k < bucket.stateIndices.size(); ++k) {
        const at::Tensor &value = state.tensor(bucket.stateIndices[k]);
        whole.narrow(0, bucket.offsets[k], value.numel())
            .copy_(value.reshape(-1));
      }
      if (!bucket.sharded) {
        bucket.full = whole;
        for (size_t k = 0; k < bucket.stateIndices.size(); ++k) {
          int64_t numel = plan::staticNumel(bucket.shapes[k]).value_or(0);
          state.bind(
              bucket.stateIndices[k],
              whole.narrow(0, bucket.offsets[k], numel).view(bucket.shapes[k]));
        }
        engine.parameterBlocks.push_back(whole.narrow(0, rank_ * block, block));
        continue;
      }
      at::Tensor mine = engine.shardParameters.narrow(0, shardOffset, block);
      mine.copy_(whole.narrow(0, rank_ * block, block));
      engine.parameterBlocks.push_back(mine);
      shardOffset += block;
      // From now on this rank holds only its block: the whole tensors go.
      const int64_t blockBegin = rank_ * block;
      for (size_t k = 0; k < bucket.stateIndices.size(); ++k) {
        const int64_t offset = bucket.offsets[k];
        state.shard(bucket.stateIndices[k], bucketName(e, int64_t(b)),
                    [mine, offset, blockBegin, block](const at::Tensor &value) {
                      // A later load: keep the part of the new value in the
                      // block.
                      at::NoGradGuard noGrad;
                      int64_t begin = std::max(offset, blockBegin);
                      int64_t end =
                          std::min(offset + value.numel(), blockBegin + block);
                      if (begin < end)
                        mine.narrow(0, begin - blockBegin, end - begin)
                            .copy_(value.reshape(-1).narrow(0, begin - offset,
                                                            end - begin));
                    });
      }
    }
  }

  // Mixed precision: the float32 master of this rank's shard, from the
  // loaded (and broadcast) parameters, rounded as they are stored.
  for (size_t e = 0; e < engines_.size(); ++e) {
    EngineState &engine = engines_[e];
    if (!engine.optimizer || !engine.native)
      continue;
    const at::ScalarType masterDtype =
        toScalarType(engine.precision->masterDtype);
    engine.masterBlocks.clear();
    if (engine.stage == 0) {
      FlatLayout master = engine.layout;
      master.dtype = masterDtype;
      engine.master = master.allocate();
      engine.masterBlocks = master.views(engine.master);
      for (size_t k = 0; k < master.stateIndices.size(); ++k)
        engine.masterBlocks[k].copy_(state.tensor(master.stateIndices[k]));
      continue;
    }
    engine.master =
        at::zeros({shardNumel(engine)}, at::TensorOptions().dtype(masterDtype));
    for (size_t b = 0; b < engine.parameterBlocks.size(); ++b) {
      at::Tensor block =
          engine.master.narrow(0, engine.partition->shardOffset(b, worldSize_),
                               blockNumel(engine, int64_t(b)));
      block.copy_(engine.parameterBlocks[b]);
      engine.masterBlocks.push_back(block);
    }
  }
}

std::string Trainer::bucketName(size_t e, int64_t bucket) const {
  return "bucket " + std::to_string(bucket) + " of engine \"" +
         engines_[e].name + "\"";
}

bool Trainer::hasStage3() const {
  for (const EngineState &engine : engines_)
    if (engine.partition && engine.stage == 3)
      return true;
  return false;
}

NamedTensors Trainer::gatherState() const {
  if (!state_)
    internalError("gatherState before the parameters were bound");
  at::NoGradGuard noGrad;
  std::vector<at::Tensor> tensors(state_->size());
  // Stage 3's sharded buckets: every rank gathers each one into a fresh
  // buffer, in plan order (the same collectives on every rank).
  std::vector<std::pair<CommHandle, const BucketParams *>> started;
  std::vector<at::Tensor> buffers;
  for (size_t e = 0; e < engines_.size(); ++e) {
    const EngineState &engine = engines_[e];
    if (!engine.partition || engine.stage != 3)
      continue;
    for (size_t b = 0; b < engine.buckets.size(); ++b) {
      const BucketParams &bucket = engine.buckets[b];
      if (!bucket.sharded)
        continue;
      at::Tensor whole = at::empty({engine.partition->buckets[b].numel},
                                   at::TensorOptions().dtype(engine.dtype));
      started.emplace_back(
          communicator_->allGather(whole, engine.parameterBlocks[b]), &bucket);
      buffers.push_back(whole);
    }
  }
  for (size_t i = 0; i < started.size(); ++i) {
    started[i].first.wait();
    const BucketParams &bucket = *started[i].second;
    for (size_t k = 0; k < bucket.stateIndices.size(); ++k) {
      int64_t numel = plan::staticNumel(bucket.shapes[k]).value_or(0);
      tensors[size_t(bucket.stateIndices[k])] =
          buffers[i].narrow(0, bucket.offsets[k], numel).view(bucket.shapes[k]);
    }
  }
  NamedTensors named;
  for (size_t i = 0; i < tensors.size(); ++i)
    named.emplace_back(state_->desc(int64_t(i)).name,
                       tensors[i].defined() ? tensors[i]
                                            : state_->tensor(int64_t(i)));
  return named;
}

plan::OverlapReport Trainer::timing() const { return timed_->timing(); }

void Trainer::resetTiming() { timed_->reset(); }

bool Trainer::inFlatParameters(int64_t stateIndex) const {
  return stateIndex >= 0 && stateIndex < int64_t(inFlat_.size()) &&
         inFlat_[size_t(stateIndex)] && state_ != nullptr;
}

void Trainer::internalError(const std::string &detail) const {
  throw RuntimeError("internal error: " + detail);
}

//===----------------------------------------------------------------------===//
// Transient buffers and memory
//===----------------------------------------------------------------------===//

void Trainer::addTransient(int64_t bytes) {
  transient_ += bytes;
  transientPeak_ = std::max(transientPeak_, transient_);
  jointPeak_ = std::max(jointPeak_, live_ + transient_);
}

void Trainer::liveBytesChanged(int64_t bytes) {
  live_ = bytes;
  jointPeak_ = std::max(jointPeak_, live_ + transient_);
}

void Trainer::resetPeaks() {
  transientPeak_ = transient_;
  jointPeak_ = live_ + transient_;
}

void Trainer::ensureFullGradient(size_t e) {
  if (gradients_->allocated(e))
    return;
  EngineState &engine = engines_[e];
  gradients_->allocate(e);
  int64_t bytes = gradients_->bytes(e);
  if (engine.stage >= 2) {
    // Written block by block by the reduce-scatters before it is read.
    engine.receive = at::empty({shardNumel(engine)},
                               at::TensorOptions().dtype(engine.gradDtype));
    bytes += shardNumel(engine) * engine.gradElementBytes;
  }
  addTransient(bytes);
}

void Trainer::releaseFullGradient(size_t e) {
  EngineState &engine = engines_[e];
  if (engine.stage < 2 || !gradients_->allocated(e))
    return;
  gradients_->release(e);
  engine.receive = at::Tensor();
  engine.reduceScattersWaited = 0;
  transient_ -=
      gradients_->bytes(e) + shardNumel(engine) * engine.gradElementBytes;
}

void Trainer::ensureShardGradient(size_t e) {
  EngineState &engine = engines_[e];
  if (engine.shardGradient.defined())
    return;
  engine.shardGradient = at::zeros({shardNumel(engine)},
                                   at::TensorOptions().dtype(engine.gradDtype));
  addTransient(shardNumel(engine) * engine.gradElementBytes);
}

void Trainer::releaseShardGradient(size_t e) {
  EngineState &engine = engines_[e];
  if (engine.stage != 1 || !engine.shardGradient.defined())
    return;
  engine.shardGradient = at::Tensor();
  transient_ -= shardNumel(engine) * engine.gradElementBytes;
}

int64_t Trainer::flatParameterBytes(size_t e) const {
  const EngineState &engine = engines_[e];
  int64_t total = 0;
  if (engine.parameters.defined())
    total += int64_t(engine.parameters.nbytes());
  if (engine.shardParameters.defined())
    total += int64_t(engine.shardParameters.nbytes());
  for (const BucketParams &bucket : engine.buckets)
    if (!bucket.sharded && bucket.full.defined())
      total += int64_t(bucket.full.nbytes());
  return total;
}

int64_t Trainer::heldGradientBytes(size_t e) const {
  const EngineState &engine = engines_[e];
  if (!engine.optimizer)
    return 0;
  return engine.stage >= 2 ? shardNumel(engine) * engine.gradElementBytes
                           : gradients_->bytes(e);
}

int64_t Trainer::optimizerBytes(size_t e) const {
  const EngineState &engine = engines_[e];
  if (!engine.optimizer)
    return 0;
  // Mixed precision: the float32 master counts as optimizer state (as
  // ZeRO's accounting does).
  return engine.optimizer->bytes() +
         (engine.master.defined() ? int64_t(engine.master.nbytes()) : 0);
}

plan::CommVolume Trainer::volume(size_t e) const { return engines_[e].volume; }

int64_t Trainer::flatParameterBytes() const {
  int64_t total = 0;
  for (size_t e = 0; e < engines_.size(); ++e)
    total += flatParameterBytes(e);
  return total;
}

int64_t Trainer::heldGradientBytes() const {
  int64_t total = 0;
  for (size_t e = 0; e < engines_.size(); ++e)
    total += heldGradientBytes(e);
  return total;
}

int64_t Trainer::optimizerBytes() const {
  int64_t total = 0;
  for (size_t e = 0; e < engines_.size(); ++e)
    total += optimizerBytes(e);
  return total;
}

void Trainer::chargeVolume(size_t e, const plan::CommVolume &before) {
  engines_[e].volume += communicator_->volume() - before;
}

//===----------------------------------------------------------------------===//
// The op kinds
//===----------------------------------------------------------------------===//

bool Trainer::hasGradient(int64_t stateIndex) const {
  return gradients_->has(stateIndex);
}

void Trainer::accumulateGradient(int64_t stateIndex, const at::Tensor &value) {
  int64_t e = gradients_->engineOf(stateIndex);
  if (e < 0)
    internalError("a gradient for a parameter without a buffer");
  // Stage 2: the micro-step's first gradient allocates the buffer.
  ensureFullGradient(size_t(e));
  // Mixed precision: the value is cast to the gradient buffer's dtype
  // first, then added in it.
  at::ScalarType dtype = engines_[size_t(e)].gradDtype;
  if (engines_[size_t(e)].precision && value.defined() &&
      at::isFloatingType(value.scalar_type()) && value.scalar_type() != dtype)
    gradients_->accumulate(stateIndex, value.to(dtype));
  else
    gradients_->accumulate(stateIndex, value);
}

c10::IValue Trainer::startCollective(plan::OpKind kind, size_t e,
                                     int64_t bucket) {
  EngineState &engine = engines_[e];
  if (!engine.partition)
    internalError("a collective on engine \"" + engine.name +
                  "\", which has no partition");
  const plan::BucketDesc &desc = engine.partition->buckets[size_t(bucket)];
  const int64_t block = blockNumel(engine, bucket);
  const int64_t shardOffset =
      engine.partition->shardOffset(size_t(bucket), worldSize_);
  const plan::CommVolume before = communicator_->volume();
  at::NoGradGuard noGrad;
  Pending pending{CommHandle(), kind, e, bucket, {}, {}, {}};
  CommHandle &handle = pending.handle;
  // A reduction in the bucket's dtype: the gradient slice cast to it,
  // reduced (summed, then divided by W, in that dtype, as the communicator
  // averages), cast back into the buffer at the wait.
  const at::ScalarType reduceDtype = engine.reduceDtypes[size_t(bucket)];
  switch (kind) {
  case plan::OpKind::AllReduce: {
    at::Tensor slice = gradients_->flat(e).narrow(0, desc.offset, desc.numel);
    if (reduceDtype != slice.scalar_type()) {
      pending.received = slice.to(reduceDtype);
      pending.target = slice;
      handle = timed_->allReduce(pending.received, ReduceOp::Avg);
    } else {
      handle = timed_->allReduce(slice, ReduceOp::Avg);
    }
    break;
  }
  case plan::OpKind::ReduceScatter: {
    // Stages 2-3: a rank whose micro-step wrote no gradient of this engine
    // still takes part (with zeros).
    ensureFullGradient(e);
    at::Tensor input = gradients_->flat(e).narrow(0, desc.offset, desc.numel);
    at::Tensor output;
    if (engine.stage == 1) {
      // The shard is fresh (zero) at the boundary and each bucket is
      // reduced once: receiving into it is adding into it.
      ensureShardGradient(e);
      output = engine.shardGradient.narrow(0, shardOffset, block);
    } else {
      output = engine.receive.narrow(0, shardOffset, block);
    }
    if (reduceDtype != input.scalar_type()) {
      pending.sent = input.to(reduceDtype);
      pending.received =
          at::empty({block}, at::TensorOptions().dtype(reduceDtype));
      pending.target = output;
      handle =
          timed_->reduceScatter(pending.received, pending.sent, ReduceOp::Avg);
    } else {
      handle = timed_->reduceScatter(output, input, ReduceOp::Avg);
    }
    break;
  }
  case plan::OpKind::AllGather:
    if (engine.stage == 3) {
      BucketParams &params = engine.buckets[size_t(bucket)];
      if (!params.sharded) {
        // A persistent bucket after the update: in place, as stages 1-2
        // (the parameters' own dtype: exact).
        handle = timed_->allGather(params.full,
                                   params.full.narrow(0, rank_ * block, block));
        break;
      }
      if (params.status != BucketParams::Status::Released)
        internalError("all_gather of " + bucketName(e, bucket) +
                      ", which is gathered already");
      // The bucket's whole parameters, for the programs to read until the
      // release: every rank's block gathered from the shards.
      params.full =
          at::empty({desc.numel}, at::TensorOptions().dtype(engine.dtype));
      params.status = BucketParams::Status::Gathering;
      addTransient(desc.numel * engine.elementBytes);
      const at::ScalarType gatherDtype = engine.gatherDtypes[size_t(bucket)];
      if (gatherDtype != engine.dtype) {
        // The bucket's dtype: each block cast to it, gathered, and the
        // whole cast back (the programs read the rounded parameters).
        pending.sent = engine.parameterBlocks[size_t(bucket)].to(gatherDtype);
        pending.received =
            at::empty({desc.numel}, at::TensorOptions().dtype(gatherDtype));
        pending.target = params.full;
        handle = timed_->allGather(pending.received, pending.sent);
        break;
      }
      handle = timed_->allGather(params.full,
                                 engine.parameterBlocks[size_t(bucket)]);
      break;
    }
    // Stages 1-2 after the update: the parameters' own dtype (exact).
    handle = timed_->allGather(
        engine.parameters.narrow(0, desc.offset, desc.numel),
        engine.parameters.narrow(0, desc.offset + rank_ * block, block));
    break;
  default:
    internalError(std::string("startCollective(") + plan::opKindName(kind) +
                  ")");
  }
  chargeVolume(e, before);
  int64_t token = nextToken_++;
  pending_[token] = std::move(pending);
  return c10::IValue(token);
}

void Trainer::wait(const c10::IValue &token) {
  if (!token.isInt())
    internalError("wait on a value that is not a token");
  auto it = pending_.find(token.toInt());
  if (it == pending_.end())
    internalError("wait on an unknown token " + std::to_string(token.toInt()));
  Pending pending = std::move(it->second);
  pending_.erase(it);
  pending.handle.wait();
  if (pending.target.defined()) {
    at::NoGradGuard noGrad;
    pending.target.copy_(pending.received);
  }
  EngineState &engine = engines_[pending.engine];
  if (pending.kind == plan::OpKind::AllGather) {
    if (engine.stage == 3 && engine.buckets[size_t(pending.bucket)].sharded)
      attachBucket(pending.engine, pending.bucket);
    return;
  }
  if (pending.kind != plan::OpKind::ReduceScatter)
    return;

  const plan::BucketDesc &desc =
      engine.partition->buckets[size_t(pending.bucket)];
  at::NoGradGuard noGrad;
  if (engine.stage >= 2) {
    int64_t block = blockNumel(engine, pending.bucket);
    int64_t offset =
        engine.partition->shardOffset(size_t(pending.bucket), worldSize_);
    engine.shardGradient.narrow(0, offset, block)
        .add_(engine.receive.narrow(0, offset, block));
    // The end of the engine's backward: the full buffer goes.
    if (++engine.reduceScattersWaited ==
        int64_t(engine.partition->buckets.size())) {
      releaseFullGradient(pending.engine);
      return;
    }
  }
  gradients_->flat(pending.engine).narrow(0, desc.offset, desc.numel).zero_();
}

void Trainer::attachBucket(size_t e, int64_t bucket) {
  BucketParams &params = engines_[e].buckets[size_t(bucket)];
  for (size_t k = 0; k < params.stateIndices.size(); ++k) {
    int64_t numel = plan::staticNumel(params.shapes[k]).value_or(0);
    state_->attach(
        params.stateIndices[k],
        params.full.narrow(0, params.offsets[k], numel).view(params.shapes[k]));
  }
  params.status = BucketParams::Status::Gathered;
}

at::Tensor Trainer::lossScale(size_t e) {
  const EngineState &engine = engines_[e];
  if (!engine.scaler)
    internalError("loss_scale of engine \"" + engine.name +
                  "\", which does not scale its loss");
  return at::scalar_tensor(engine.scaler->scale(),
                           at::TensorOptions().dtype(at::kFloat));
}

std::optional<double> Trainer::currentLossScale(size_t e) const {
  const EngineState &engine = engines_[e];
  if (!engine.scaler)
    return std::nullopt;
  return engine.scaler->scale();
}

bool Trainer::unscaleAndCheckOverflow(size_t e, const at::Tensor &grads) {
  EngineState &engine = engines_[e];
  at::NoGradGuard noGrad;
  bool overflow = false;
  if (grads.defined() && grads.numel() > 0) {
    // Division by a power of two is exact; a static scale rounds as
    // DeepSpeed's 1/scale multiplication would not, but no test depends on
    // non-power-of-two static scales.
    grads.div_(engine.scaler->scale());
    overflow = !at::isfinite(grads).all().item<bool>();
  }
  // Every rank, every stage: DeepSpeed's check covers every shard.
  if (communicator_->size() > 1) {
    at::Tensor flag = at::full({1}, overflow ? 1.0 : 0.0,
                               at::TensorOptions().dtype(at::kFloat));
    const plan::CommVolume before = communicator_->volume();
    timed_->allReduce(flag, ReduceOp::Max).wait();
    chargeVolume(e, before);
    overflow = flag.item<float>() != 0.0f;
  }
  return overflow;
}

void Trainer::release(size_t e, int64_t bucket) {
  EngineState &engine = engines_[e];
  if (engine.stage != 3 || !engine.buckets[size_t(bucket)].sharded ||
      engine.buckets[size_t(bucket)].status != BucketParams::Status::Gathered)
    internalError("release of " + bucketName(e, bucket) +
                  ", which is not a gathered sharded bucket");
  dropBucket(e, bucket);
}

void Trainer::dropBucket(size_t e, int64_t bucket) {
  EngineState &engine = engines_[e];
  BucketParams &params = engine.buckets[size_t(bucket)];
  if (params.status == BucketParams::Status::Released)
    return;
  for (int64_t index : params.stateIndices)
    state_->detach(index);
  params.full = at::Tensor();
  params.status = BucketParams::Status::Released;
  transient_ -=
      engine.partition->buckets[size_t(bucket)].numel * engine.elementBytes;
}

void Trainer::optimizerStep(size_t e) {
  EngineState &engine = engines_[e];
  if (!engine.optimizer || !state_)
    internalError("optimizer_step of engine \"" + engine.name + "\"");
  for (const auto &[token, pending] : pending_)
    if (pending.engine == e && pending.kind != plan::OpKind::AllGather)
      internalError("optimizer_step of engine \"" + engine.name +
                    "\" while a reduction of it is in flight");
  at::NoGradGuard noGrad;
  const double lr = *nextLr(e);
  const double clipping = engine.desc->gradientClipping;
  // Mixed precision: the update runs on the float32 master, with the
  // gradients cast to float32 (a copy unless they are float32 already).
  const bool mixed = engine.master.defined();
  const at::ScalarType masterDtype =
      mixed ? engine.master.scalar_type() : engine.dtype;
  const double scale = engine.scaler ? engine.scaler->scale() : 1.0;
  double gradNorm = 0.0;
  bool overflow = false;
  if (engine.stage == 0) {
    std::vector<at::Tensor> grads = gradients_->views(e);
    if (mixed) {
      at::Tensor flat = gradients_->flat(e).to(masterDtype);
      if (engine.scaler)
        overflow = unscaleAndCheckOverflow(e, flat);
      grads = gradients_->layout(e).views(flat);
    } else if (engine.scaler) {
      // fp16 autocast: float32 parameters, no master; the GradScaler
      // unscales the gradients in place (unscale_ before clipping).
      overflow = unscaleAndCheckOverflow(e, gradients_->flat(e));
    }
    if (!overflow) {
      gradNorm = clipGradientsByGlobalNorm(grads, clipping);
      std::vector<at::Tensor> params;
      if (mixed) {
        params = engine.masterBlocks;
      } else {
        for (int64_t index : gradients_->layout(e).stateIndices)
          params.push_back(state_->tensor(index));
      }
      engine.optimizer->step(params, grads, lr);
      parametersFromMaster(e);
    }
    gradients_->zero(e);
  } else {
    ensureShardGradient(e); // Stage 1 without buckets: an empty shard.
    at::Tensor shard =
        mixed ? engine.shardGradient.to(masterDtype) : engine.shardGradient;
    if (engine.scaler)
      overflow = unscaleAndCheckOverflow(e, shard);
    if (!overflow) {
      const plan::CommVolume before = communicator_->volume();
      gradNorm = clipShardByGlobalNorm(shard, clipping, timed_.get());
      chargeVolume(e, before);
      std::vector<at::Tensor> grads;
      for (size_t b = 0; b < engine.parameterBlocks.size(); ++b) {
        int64_t block = blockNumel(engine, int64_t(b));
        grads.push_back(shard.narrow(
            0, engine.partition->shardOffset(b, worldSize_), block));
      }
      engine.optimizer->step(
          mixed ? engine.masterBlocks : engine.parameterBlocks, grads, lr);
      // Stages 1-2 and stage 3's persistent buckets then all-gather the
      // rounded blocks in the parameters' dtype, exactly.
      parametersFromMaster(e);
    }
    if (engine.stage == 1)
      releaseShardGradient(e);
    else
      engine.shardGradient.zero_();
  }
  if (engine.scaler)
    engine.scaler->update(overflow); // Throws at min_loss_scale.
  if (overflow) {
    ++engine.skippedSteps;
    // Skipped (DeepSpeed): no update, the LR schedule stays where it is,
    // and the norm reported is the last applied step's.
    engine.stepped =
        EngineStepReport{engine.name, lr, engine.lastGradNorm, scale, true};
    return;
  }
  ++engine.appliedUpdates;
  engine.lastGradNorm = gradNorm;
  engine.stepped = EngineStepReport{engine.name, lr, gradNorm, scale, false};
}

void Trainer::parametersFromMaster(size_t e) {
  EngineState &engine = engines_[e];
  if (!engine.master.defined())
    return;
  at::NoGradGuard noGrad;
  if (engine.stage == 0) {
    const std::vector<int64_t> &indices = engine.layout.stateIndices;
    for (size_t k = 0; k < indices.size(); ++k)
      state_->tensor(indices[k]).copy_(engine.masterBlocks[k]);
    return;
  }
  // This rank's blocks; the other ranks write theirs (every rank loads the
  // same checkpoint), so the flat buffers end up whole.
  for (size_t b = 0; b < engine.parameterBlocks.size(); ++b)
    engine.parameterBlocks[b].copy_(engine.masterBlocks[b]);
}

void Trainer::beginStep() {
  for (EngineState &engine : engines_)
    engine.stepped.reset();
}

StepReport Trainer::endStep() {
  StepReport report;
  report.updated = true;
  for (EngineState &engine : engines_) {
    if (!engine.optimizer)
      continue; // Frozen: no gradients, never updated.
    if (!engine.stepped)
      internalError("programs.step did not step engine \"" + engine.name +
                    "\"");
    report.engines.push_back(*engine.stepped);
  }
  return report;
}

void Trainer::abandon() {
  for (auto &[token, pending] : pending_) {
    try {
      pending.handle.wait();
    } catch (const std::exception &) {
      // The run is failing already; this error says nothing new.
    }
  }
  pending_.clear();
  for (size_t e = 0; e < engines_.size(); ++e) {
    releaseFullGradient(e);
    releaseShardGradient(e);
    for (size_t b = 0; b < engines_[e].buckets.size(); ++b)
      if (engines_[e].buckets[b].sharded)
        dropBucket(e, int64_t(b));
  }
}

void Trainer::abandonGathers() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.kind != plan::OpKind::AllGather) {
      ++it;
      continue;
    }
    try {
      it->second.handle.wait();
    } catch (const std::exception &) {
      // The run is failing already.
    }
    it = pending_.erase(it);
  }
  for (size_t e = 0; e < engines_.size(); ++e)
    for (size_t b = 0; b < engines_[e].buckets.size(); ++b)
      if (engines_[e].buckets[b].sharded)
        dropBucket(e, int64_t(b));
}

std::optional<double> Trainer::nextLr(size_t engine) const {
  const EngineState &state = engines_[engine];
  if (!state.desc)
    return std::nullopt;
  double baseLr = state.desc->lr;
  if (!state.scheduler)
    return baseLr;
  return config::schedulerLrForUpdate(*state.scheduler, baseLr,
                                      state.appliedUpdates);
}

} // namespace ds::runtime::detail
