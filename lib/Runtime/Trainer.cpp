//===- Trainer.cpp - The training side of the executor --------------------===//

#include "Trainer.h"

#include "ds/Runtime/TimedCommunicator.h"

#include "ds/Plan/PlanError.h"
#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/RuntimeError.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

namespace ds::runtime::detail {

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
                 std::shared_ptr<Communicator> communicator, int64_t rank,
                 std::shared_ptr<Device> device,
                 std::optional<OptimizerKernel> kernel)
    : origin_(origin), communicator_(std::move(communicator)),
      device_(device ? std::move(device) : cpuDevice()), rank_(rank),
      accumulation_(plan.gradientAccumulationSteps) {
  if (communicator_) {
    rank_ = communicator_->rank();
  } else {
    // One rank: collectives over one rank (identities, copies).
    communicator_ = createLocalCommunicator();
  }
  timed_ = std::make_shared<TimedCommunicator>(communicator_);
  evalOps_ = std::make_unique<EvalOps>(*this);

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

  std::vector<FlatLayout> layouts;
  std::vector<bool> allocateNow;
  inFlat_.assign(plan.state.size(), false);
  for (size_t e = 0; e < plan.engines.size(); ++e) {
    const ZeroEngineState &engine =
        engines_.emplace_back(plan, e, origin, rank_,
                              int64_t(communicator_->size()), device_, kernel);
    if (engine.partitioned() && engine.stage() >= 1)
      for (int64_t index : engine.layout().stateIndices)
        inFlat_[size_t(index)] = true;
    layouts.push_back(engine.gradientLayout());
    allocateNow.push_back(engine.keepsFullGradient());
  }
  gradients_ =
      std::make_unique<GradientBuffers>(plan, std::move(layouts), allocateNow);
}

void Trainer::bindParameters(StateStore &state) {
  state_ = &state;
  for (ZeroEngineState &engine : engines_)
    engine.bindParameters(state);
  for (ZeroEngineState &engine : engines_)
    engine.initMaster();
}

bool Trainer::hasStage3() const {
  for (const ZeroEngineState &engine : engines_)
    if (engine.partitioned() && engine.stage() == 3)
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
  std::vector<CommHandle> started;
  for (const ZeroEngineState &engine : engines_)
    engine.startWholeGathers(*communicator_, started, tensors);
  for (CommHandle &handle : started)
    handle.wait();
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

std::optional<double> Trainer::nextLr(size_t engine) const {
  const UpdateProgress *progress = engines_[engine].progress();
  if (!progress)
    return std::nullopt;
  return progress->nextLr();
}

std::optional<double> Trainer::currentLossScale(size_t engine) const {
  const UpdateProgress *progress = engines_[engine].progress();
  if (!progress || !progress->lossScaler())
    return std::nullopt;
  return progress->lossScaler()->scale();
}

void Trainer::liveBytesChanged(int64_t bytes) { ledger_.setLiveBytes(bytes); }

int64_t Trainer::flatParameterBytes() const {
  int64_t total = 0;
  for (const ZeroEngineState &engine : engines_)
    total += engine.flatParameterBytes();
  return total;
}

int64_t Trainer::heldGradientBytes() const {
  int64_t total = 0;
  for (const ZeroEngineState &engine : engines_)
    total += engine.heldGradientBytes(*gradients_);
  return total;
}

int64_t Trainer::optimizerBytes() const {
  int64_t total = 0;
  for (const ZeroEngineState &engine : engines_)
    total += engine.optimizerBytes();
  return total;
}

int64_t Trainer::hostBytes() const {
  int64_t total = 0;
  for (const ZeroEngineState &engine : engines_)
    total += engine.hostBytes();
  return total;
}

void Trainer::chargeVolume(size_t engine, const plan::CommVolume &before) {
  engines_[engine].addVolume(communicator_->volume() - before);
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
  ZeroEngineState &engine = engines_[size_t(e)];
  // Stage 2: the micro-step's first gradient allocates the buffer.
  engine.ensureFullGradient(*gradients_, ledger_);
  // Mixed precision: the value is cast to the gradient buffer's dtype
  // first, then added in it.
  at::ScalarType dtype = engine.gradDtype();
  if (engine.precision() && value.defined() &&
      at::isFloatingType(value.scalar_type()) && value.scalar_type() != dtype)
    gradients_->accumulate(stateIndex, value.to(dtype));
  else
    gradients_->accumulate(stateIndex, value);
}

c10::IValue Trainer::startCollective(plan::OpKind kind, size_t e,
                                     int64_t bucket) {
  ZeroEngineState &engine = engines_[e];
  if (!engine.partitioned())
    internalError("a collective on engine \"" + engine.name() +
                  "\", which has no partition");
  const plan::CommVolume before = communicator_->volume();
  at::NoGradGuard noGrad;
  Pending pending{CommHandle(), kind, e, bucket, {}, {}, {}};
  CommHandle &handle = pending.handle;
  // A reduction in the bucket's dtype: the gradient slice cast to it,
  // reduced (summed, then divided by W, in that dtype, as the communicator
  // averages), cast back into the buffer at the wait.
  const at::ScalarType reduceDtype = engine.reduceDtype(bucket);
  switch (kind) {
  case plan::OpKind::AllReduce: {
    at::Tensor slice = engine.gradientSlice(*gradients_, bucket);
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
    engine.ensureFullGradient(*gradients_, ledger_);
    at::Tensor input = engine.gradientSlice(*gradients_, bucket);
    at::Tensor output = engine.reduceScatterOutput(bucket, ledger_);
    if (reduceDtype != input.scalar_type()) {
      pending.sent = input.to(reduceDtype);
      pending.received = at::empty({engine.blockNumel(bucket)},
                                   device_->options(reduceDtype));
      pending.target = output;
      handle =
          timed_->reduceScatter(pending.received, pending.sent, ReduceOp::Avg);
    } else {
      handle = timed_->reduceScatter(output, input, ReduceOp::Avg);
    }
    break;
  }
  case plan::OpKind::AllGather:
    startAllGather(pending);
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

void Trainer::startAllGather(Pending &pending) {
  ZeroEngineState &engine = engines_[pending.engine];
  const int64_t bucket = pending.bucket;
  const plan::BucketDesc &desc = engine.bucket(bucket);
  const int64_t block = engine.blockNumel(bucket);
  if (engine.stage() != 3) {
    // Stages 1-2 after the update: the parameters' own dtype (exact).
    const at::Tensor &flat = engine.flatParameters();
    pending.handle =
        timed_->allGather(flat.narrow(0, desc.offset, desc.numel),
                          flat.narrow(0, desc.offset + rank_ * block, block));
    return;
  }
  if (!engine.shardsBucket(bucket)) {
    // A persistent bucket after the update: in place, as stages 1-2 (the
    // parameters' own dtype: exact).
    const at::Tensor &full = engine.persistentBucket(bucket);
    pending.handle =
        timed_->allGather(full, full.narrow(0, rank_ * block, block));
    return;
  }
  if (!engine.bucketReleased(bucket))
    internalError("all_gather of " + engine.bucketName(bucket) +
                  ", which is gathered already");
  // The bucket's whole parameters, for the programs to read until the
  // release: every rank's block gathered from the shards.
  at::Tensor full = engine.beginGather(bucket, ledger_);
  const at::Tensor &mine = engine.parameterBlocks()[size_t(bucket)];
  const at::ScalarType gatherDtype = engine.gatherDtype(bucket);
  if (gatherDtype != engine.dtype()) {
    // The bucket's dtype: each block cast to it, gathered, and the whole
    // cast back (the programs read the rounded parameters).
    pending.sent = mine.to(gatherDtype);
    pending.received =
        at::empty({desc.numel}, device_->options(gatherDtype));
    pending.target = full;
    pending.handle = timed_->allGather(pending.received, pending.sent);
    return;
  }
  pending.handle = timed_->allGather(full, mine);
}

void Trainer::wait(const c10::IValue &token) {
  if (!token.isInt())
    internalError("wait on a value that is not a token");
  auto it = pending_.find(token.toInt());
  if (it == pending_.end())
    internalError("wait on an unknown token " + std::to_string(token.toInt()));
  Pending pending = std::move(it->second);
  pending_.erase(it);
  // The compute stream goes on after the collective (a host wait for the
  // MPI and local backends).
  pending.handle.waitOn(device_->stream(StreamRole::Compute));
  if (pending.target.defined()) {
    at::NoGradGuard noGrad;
    pending.target.copy_(pending.received);
  }
  ZeroEngineState &engine = engines_[pending.engine];
  if (pending.kind == plan::OpKind::AllGather) {
    if (engine.shardsBucket(pending.bucket))
      engine.attachBucket(pending.bucket);
    return;
  }
  if (pending.kind == plan::OpKind::ReduceScatter)
    engine.finishReduceScatter(pending.bucket, *gradients_, ledger_);
}

void Trainer::release(size_t e, int64_t bucket) {
  ZeroEngineState &engine = engines_[e];
  if (!engine.shardsBucket(bucket) || !engine.bucketGathered(bucket))
    internalError("release of " + engine.bucketName(bucket) +
                  ", which is not a gathered sharded bucket");
  engine.dropBucket(bucket, ledger_);
}

at::Tensor Trainer::lossScale(size_t e) {
  const ZeroEngineState &engine = engines_[e];
  std::optional<double> scale = currentLossScale(e);
  if (!scale)
    internalError("loss_scale of engine \"" + engine.name() +
                  "\", which does not scale its loss");
  return at::scalar_tensor(*scale, device_->options(at::kFloat));
}

//===----------------------------------------------------------------------===//
// The boundary and failures
//===----------------------------------------------------------------------===//

void Trainer::beginStep() {
  for (ZeroEngineState &engine : engines_)
    if (UpdateProgress *progress = engine.progress())
      progress->beginStep();
}

StepReport Trainer::endStep() {
  // Every engine's gradient norm in one read: on a GPU, the host's one
  // wait of the step (fp16's overflow flags aside).
  // fp16 engines on the fused kernels: their overflow flags with them.
  std::vector<ZeroEngineState *> pending;
  std::vector<at::Tensor> values;
  auto onDevice = [&](const at::Tensor &value) {
    // An empty shard's norm is a host zero: all on the run's device.
    return value.defined()
               ? value.reshape({}).to(device_->device(), at::kDouble)
               : at::zeros({}, device_->options(at::kDouble));
  };
  for (ZeroEngineState &engine : engines_) {
    UpdateProgress *progress = engine.progress();
    if (!progress || (!progress->pendingNorm().defined() &&
                      !progress->pendingOverflow().defined()))
      continue;
    pending.push_back(&engine);
    values.push_back(onDevice(progress->pendingNorm()));
    values.push_back(onDevice(progress->pendingOverflow()));
  }
  if (!values.empty()) {
    at::Tensor host = at::stack(values).to(at::kCPU);
    for (size_t i = 0; i < pending.size(); ++i) {
      UpdateProgress &progress = *pending[i]->progress();
      double norm = host[int64_t(2 * i)].item<double>();
      if (!progress.pendingOverflow().defined()) {
        progress.resolveNorm(norm);
        continue;
      }
      bool overflow = host[int64_t(2 * i + 1)].item<double>() != 0.0;
      if (progress.resolveOverflow(overflow, norm)) {
        // The kernels skipped the update: it does not count.
        Optimizer &optimizer = *pending[i]->optimizer();
        optimizer.setSteps(optimizer.steps() - 1);
      }
    }
  }
  StepReport report;
  report.updated = true;
  for (const ZeroEngineState &engine : engines_) {
    const UpdateProgress *progress = engine.progress();
    if (!progress)
      continue; // Frozen: no gradients, never updated.
    if (!progress->stepped())
      internalError("programs.step did not step engine \"" + engine.name() +
                    "\"");
    report.engines.push_back(*progress->stepped());
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
  for (ZeroEngineState &engine : engines_) {
    engine.releaseFullGradient(*gradients_, ledger_);
    engine.releaseShardGradient(ledger_);
    engine.dropBuckets(ledger_);
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
  for (ZeroEngineState &engine : engines_)
    engine.dropBuckets(ledger_);
}

} // namespace ds::runtime::detail
