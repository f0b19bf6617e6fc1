//===- ZeroEngineState.cpp - One engine's ZeRO buffers --------------------===//

#include "ZeroEngineState.h"

#include "MemoryLedger.h"
#include "OffloadCopies.h"

#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/DTypes.h"
#include "ds/TensorIO/RuntimeError.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>

namespace ds::runtime::detail {

ZeroEngineState::ZeroEngineState(const plan::Plan &plan, size_t index,
                                 const std::string &origin, int64_t rank,
                                 int64_t ranks, std::shared_ptr<Device> device,
                                 std::optional<OptimizerKernel> kernel)
    : name_(plan.engines[index].name), index_(index), rank_(rank),
      worldSize_(plan.worldSize),
      runDevice_(device ? std::move(device) : cpuDevice()),
      device_(runDevice_->device()) {
  layout_.device = device_;
  const plan::EngineDesc &desc = plan.engines[index];
  if (!desc.partition)
    return;
  const bool trains = desc.optimizer.has_value();
  native_ = desc.precision && desc.precision->native();
  if (desc.precision)
    precision_ = &*desc.precision;
  partition_ = &*desc.partition;
  stage_ = desc.partition->stage;
  if (stage_ >= 1 && worldSize_ != ranks)
    throw RuntimeError(origin + ": engine \"" + desc.name + "\": ZeRO stage " +
                       std::to_string(stage_) + " shards over the plan's " +
                       std::to_string(worldSize_) +
                       " ranks; load it with their communicator (ds-run under "
                       "mpirun -n " +
                       std::to_string(worldSize_) + ")");

  for (const plan::FlatParamDesc &param : desc.partition->params) {
    const plan::StateDesc *state = plan.findState(param.name);
    int64_t stateIndex = int64_t(state - plan.state.data());
    const bool lowPrecision = state->dtype == plan::DType::BFloat16 ||
                              state->dtype == plan::DType::Float16;
    if (trains && state->dtype != plan::DType::Float32 &&
        state->dtype != plan::DType::Float64 && !(lowPrecision && native_))
      throw RuntimeError(origin + ": trainable parameter \"" + state->name +
                         "\" is " + plan::dtypeName(state->dtype) +
                         "; this runtime trains float32 and float64 "
                         "parameters, and bfloat16 / float16 ones of "
                         "engines whose plan `precision` is bf16 / fp16");
    layout_.dtype = toScalarType(state->dtype);
    layout_.place(stateIndex, state->shape, param.offset);
  }
  layout_.numel = desc.partition->numel;
  dtype_ = layout_.dtype;
  elementBytes_ = int64_t(c10::elementSize(layout_.dtype));
  gradDtype_ =
      desc.precision ? toScalarType(desc.precision->gradAccumDtype) : dtype_;
  gradElementBytes_ = int64_t(c10::elementSize(gradDtype_));
  for (const plan::BucketDesc &bucket : desc.partition->buckets) {
    reduceDtypes_.push_back(bucket.dtype ? toScalarType(*bucket.dtype)
                                         : gradDtype_);
    gatherDtypes_.push_back(bucket.dtype ? toScalarType(*bucket.dtype)
                                         : dtype_);
  }
  if (!trains)
    return;

  optimizerDesc_ = &*desc.optimizer;
  progress_.emplace(desc.name, *desc.optimizer, precision_);
  // Mixed precision: the optimizer and its state work on the float32
  // master.
  const at::ScalarType optimizerDtype =
      native_ ? toScalarType(desc.precision->masterDtype) : layout_.dtype;
  if (stage_ == 0) {
    // Per-parameter views of flat state: torch.optim's op sequence on each
    // parameter, bit for bit.
    FlatLayout master = layout_;
    master.dtype = optimizerDtype;
    optimizer_ = std::make_unique<Optimizer>(*desc.optimizer, master, kernel);
    return;
  }
  // The shard: this rank's block of each bucket. The updates are
  // element-wise, so blocks give torch.optim's numbers.
  FlatLayout shard;
  shard.dtype = optimizerDtype;
  shard.device = device_;
  for (size_t b = 0; b < desc.partition->buckets.size(); ++b)
    shard.add(-1, {blockNumel(int64_t(b))});
  if (desc.offloadOptimizer) {
    // ZeRO-Offload: the state in host memory, updated by the CPU's
    // optimizer (its reference kernels unless the run asks for others).
    offload_ = true;
    pinMemory_ = desc.offloadOptimizer->pinMemory;
    shard.device = c10::Device(c10::kCPU);
    optimizer_ = std::make_unique<Optimizer>(
        *desc.optimizer, shard,
        kernel.value_or(defaultOptimizerKernel(shard.device)),
        [this](int64_t numel, at::ScalarType dtype) {
          return hostBuffer(numel, dtype);
        });
  } else {
    optimizer_ = std::make_unique<Optimizer>(*desc.optimizer, shard, kernel);
  }
  // Stages 2-3 keep the shard gradient between steps.
  if (stage_ >= 2)
    shardGradient_ = at::zeros({shardNumel()}, options(gradDtype_));
}

FlatLayout ZeroEngineState::gradientLayout() const {
  if (!trains())
    return FlatLayout();
  FlatLayout layout = layout_;
  layout.dtype = gradDtype_;
  return layout;
}

int64_t ZeroEngineState::blockNumel(int64_t bucket) const {
  return partition_->buckets[size_t(bucket)].numel / worldSize_;
}

int64_t ZeroEngineState::shardOffset(int64_t bucket) const {
  return partition_->shardOffset(size_t(bucket), worldSize_);
}

int64_t ZeroEngineState::shardNumel() const {
  return partition_ ? partition_->shardNumel(worldSize_) : 0;
}

std::string ZeroEngineState::bucketName(int64_t bucket) const {
  return "bucket " + std::to_string(bucket) + " of engine \"" + name_ + "\"";
}

//===----------------------------------------------------------------------===//
// Binding
//===----------------------------------------------------------------------===//

void ZeroEngineState::bindParameters(StateStore &state) {
  state_ = &state;
  at::NoGradGuard noGrad;
  if (partition_ && stage_ == 3) {
    bindStage3(state);
  } else if (partition_ && stage_ >= 1) {
    parameterBlocks_.clear();
    parameters_ = layout_.allocate(); // Padding stays zero.
    std::vector<at::Tensor> views = layout_.views(parameters_);
    for (size_t k = 0; k < views.size(); ++k)
      state.bind(layout_.stateIndices[k], views[k]);
    for (size_t b = 0; b < partition_->buckets.size(); ++b) {
      int64_t block = blockNumel(int64_t(b));
      parameterBlocks_.push_back(parameters_.narrow(
          0, partition_->buckets[b].offset + rank_ * block, block));
    }
  }
}

void ZeroEngineState::bindStage3(StateStore &state) {
  // Persistent buckets whole, this rank's block of the others.
  const std::vector<plan::BucketDesc> &buckets = partition_->buckets;
  parameterBlocks_.clear();
  at::TensorOptions options = this->options(dtype_);
  int64_t shardedNumel = 0;
  buckets_.assign(buckets.size(), BucketParams());
  for (size_t b = 0; b < buckets.size(); ++b) {
    buckets_[b].sharded = partition_->shardsParameters(b);
    if (buckets_[b].sharded)
      shardedNumel += blockNumel(int64_t(b));
  }
  for (size_t k = 0; k < layout_.stateIndices.size(); ++k) {
    // The plan validator put every parameter inside one bucket.
    int64_t b = partition_->bucketAt(layout_.offsets[k]);
    if (b < 0)
      continue; // An empty parameter at the end.
    BucketParams &bucket = buckets_[size_t(b)];
    bucket.stateIndices.push_back(layout_.stateIndices[k]);
    bucket.offsets.push_back(layout_.offsets[k] - buckets[size_t(b)].offset);
    bucket.shapes.push_back(layout_.shapes[k]);
  }
  shardParameters_ = at::zeros({shardedNumel}, options);
  int64_t shardOffset = 0;
  for (size_t b = 0; b < buckets.size(); ++b) {
    BucketParams &bucket = buckets_[b];
    const int64_t n = buckets[b].numel;
    const int64_t block = blockNumel(int64_t(b));
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
      parameterBlocks_.push_back(whole.narrow(0, rank_ * block, block));
      continue;
    }
    at::Tensor mine = shardParameters_.narrow(0, shardOffset, block);
    mine.copy_(whole.narrow(0, rank_ * block, block));
    parameterBlocks_.push_back(mine);
    shardOffset += block;
    // From now on this rank holds only its block: the whole tensors go.
    const int64_t blockBegin = rank_ * block;
    for (size_t k = 0; k < bucket.stateIndices.size(); ++k) {
      const int64_t offset = bucket.offsets[k];
      state.shard(bucket.stateIndices[k], bucketName(int64_t(b)),
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

at::Tensor ZeroEngineState::hostBuffer(int64_t numel,
                                       at::ScalarType dtype) const {
  if (pinMemory_ && !device_.is_cpu())
    return runDevice_->hostStaging({numel}, dtype).zero_();
  return at::zeros({numel}, at::TensorOptions().dtype(dtype));
}

at::Tensor ZeroEngineState::shardGradientOnHost(at::ScalarType dtype) const {
  if (device_.is_cpu())
    return shardGradient_.to(dtype);
  // Down in the gradients' dtype (half the bytes of a 16-bit engine's),
  // cast on the host.
  at::Tensor host =
      pinMemory_
          ? runDevice_->hostStaging({shardNumel()}, gradDtype_)
          : at::empty({shardNumel()}, at::TensorOptions().dtype(gradDtype_));
  copyToHost(*runDevice_, shardGradient_, host);
  return host.to(dtype);
}

void ZeroEngineState::initMaster() {
  if (!hasMaster())
    return;
  // Mixed precision: the float32 master of this rank's shard, from the
  // loaded (and broadcast) parameters, rounded as they are stored. Offload
  // of a float32 engine: a copy of the shard in host memory.
  at::NoGradGuard noGrad;
  const at::ScalarType masterDtype =
      native_ ? toScalarType(precision_->masterDtype) : dtype_;
  masterBlocks_.clear();
  if (stage_ == 0) {
    FlatLayout master = layout_;
    master.dtype = masterDtype;
    master_ = master.allocate();
    masterBlocks_ = master.views(master_);
    for (size_t k = 0; k < master.stateIndices.size(); ++k)
      masterBlocks_[k].copy_(state_->tensor(master.stateIndices[k]));
    return;
  }
  master_ = offload_ ? hostBuffer(shardNumel(), masterDtype)
                     : at::zeros({shardNumel()}, options(masterDtype));
  for (size_t b = 0; b < parameterBlocks_.size(); ++b) {
    at::Tensor block =
        master_.narrow(0, shardOffset(int64_t(b)), blockNumel(int64_t(b)));
    if (offload_)
      copyToHost(*runDevice_, parameterBlocks_[b], block);
    else
      block.copy_(parameterBlocks_[b]);
    masterBlocks_.push_back(block);
  }
}

void ZeroEngineState::parametersFromMaster() {
  if (!master_.defined())
    return;
  at::NoGradGuard noGrad;
  if (stage_ == 0) {
    const std::vector<int64_t> &indices = layout_.stateIndices;
    for (size_t k = 0; k < indices.size(); ++k)
      state_->tensor(indices[k]).copy_(masterBlocks_[k]);
    return;
  }
  // This rank's blocks; the other ranks write theirs (every rank loads the
  // same checkpoint), so the flat buffers end up whole.
  if (!offload_ || device_.is_cpu()) {
    for (size_t b = 0; b < parameterBlocks_.size(); ++b)
      parameterBlocks_[b].copy_(masterBlocks_[b]);
    return;
  }
  // Offload: rounded on the host, then up on the copy stream. The last
  // upload's staging memory is reused once that upload is done.
  if (upload_)
    upload_->synchronize();
  if (!uploadStaging_.defined())
    uploadStaging_ =
        pinMemory_
            ? runDevice_->hostStaging({shardNumel()}, dtype_)
            : at::empty({shardNumel()}, at::TensorOptions().dtype(dtype_));
  uploadStaging_.copy_(master_);
  for (size_t b = 0; b < parameterBlocks_.size(); ++b) {
    std::unique_ptr<Event> done =
        copyToDevice(*runDevice_,
                     uploadStaging_.narrow(0, shardOffset(int64_t(b)),
                                           blockNumel(int64_t(b))),
                     parameterBlocks_[b]);
    if (done)
      upload_ = std::move(done); // Copies on one stream finish in order.
  }
}

//===----------------------------------------------------------------------===//
// Stage 3's buckets
//===----------------------------------------------------------------------===//

bool ZeroEngineState::shardsBucket(int64_t bucket) const {
  return stage_ == 3 && buckets_[size_t(bucket)].sharded;
}

bool ZeroEngineState::bucketReleased(int64_t bucket) const {
  return buckets_[size_t(bucket)].status == BucketParams::Status::Released;
}

bool ZeroEngineState::bucketGathered(int64_t bucket) const {
  return buckets_[size_t(bucket)].status == BucketParams::Status::Gathered;
}

at::Tensor ZeroEngineState::beginGather(int64_t bucket, MemoryLedger &ledger) {
  BucketParams &params = buckets_[size_t(bucket)];
  const int64_t numel = partition_->buckets[size_t(bucket)].numel;
  params.full = at::empty({numel}, options(dtype_));
  params.status = BucketParams::Status::Gathering;
  ledger.allocated(numel * elementBytes_);
  return params.full;
}

void ZeroEngineState::attachBucket(int64_t bucket) {
  BucketParams &params = buckets_[size_t(bucket)];
  for (size_t k = 0; k < params.stateIndices.size(); ++k) {
    int64_t numel = plan::staticNumel(params.shapes[k]).value_or(0);
    state_->attach(
        params.stateIndices[k],
        params.full.narrow(0, params.offsets[k], numel).view(params.shapes[k]));
  }
  params.status = BucketParams::Status::Gathered;
}

void ZeroEngineState::dropBucket(int64_t bucket, MemoryLedger &ledger) {
  BucketParams &params = buckets_[size_t(bucket)];
  if (params.status == BucketParams::Status::Released)
    return;
  for (int64_t index : params.stateIndices)
    state_->detach(index);
  params.full = at::Tensor();
  params.status = BucketParams::Status::Released;
  ledger.freed(partition_->buckets[size_t(bucket)].numel * elementBytes_);
}

void ZeroEngineState::dropBuckets(MemoryLedger &ledger) {
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (buckets_[b].sharded)
      dropBucket(int64_t(b), ledger);
}

void ZeroEngineState::startWholeGathers(
    Communicator &communicator, std::vector<CommHandle> &handles,
    std::vector<at::Tensor> &tensors) const {
  if (!partition_ || stage_ != 3)
    return;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const BucketParams &bucket = buckets_[b];
    if (!bucket.sharded)
      continue;
    at::Tensor whole = at::empty({partition_->buckets[b].numel},
                                 options(dtype_));
    handles.push_back(communicator.allGather(whole, parameterBlocks_[b]));
    for (size_t k = 0; k < bucket.stateIndices.size(); ++k) {
      int64_t numel = plan::staticNumel(bucket.shapes[k]).value_or(0);
      tensors[size_t(bucket.stateIndices[k])] =
          whole.narrow(0, bucket.offsets[k], numel).view(bucket.shapes[k]);
    }
  }
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

at::Tensor ZeroEngineState::gradientSlice(const GradientBuffers &gradients,
                                          int64_t bucket) const {
  const plan::BucketDesc &desc = partition_->buckets[size_t(bucket)];
  return gradients.flat(index_).narrow(0, desc.offset, desc.numel);
}

void ZeroEngineState::ensureFullGradient(GradientBuffers &gradients,
                                         MemoryLedger &ledger) {
  if (gradients.allocated(index_))
    return;
  gradients.allocate(index_);
  int64_t bytes = gradients.bytes(index_);
  if (stage_ >= 2) {
    // Written block by block by the reduce-scatters before it is read.
    receive_ = at::empty({shardNumel()}, options(gradDtype_));
    bytes += shardNumel() * gradElementBytes_;
  }
  ledger.allocated(bytes);
}

void ZeroEngineState::releaseFullGradient(GradientBuffers &gradients,
                                          MemoryLedger &ledger) {
  if (stage_ < 2 || !gradients.allocated(index_))
    return;
  gradients.release(index_);
  receive_ = at::Tensor();
  reduceScattersWaited_ = 0;
  ledger.freed(gradients.bytes(index_) + shardNumel() * gradElementBytes_);
}

void ZeroEngineState::ensureShardGradient(MemoryLedger &ledger) {
  if (shardGradient_.defined())
    return;
  shardGradient_ =
      at::zeros({shardNumel()}, options(gradDtype_));
  ledger.allocated(shardNumel() * gradElementBytes_);
}

void ZeroEngineState::finishShardGradient(MemoryLedger &ledger) {
  if (stage_ == 1)
    releaseShardGradient(ledger);
  else
    shardGradient_.zero_();
}

void ZeroEngineState::releaseShardGradient(MemoryLedger &ledger) {
  if (stage_ != 1 || !shardGradient_.defined())
    return;
  shardGradient_ = at::Tensor();
  ledger.freed(shardNumel() * gradElementBytes_);
}

at::Tensor ZeroEngineState::reduceScatterOutput(int64_t bucket,
                                                MemoryLedger &ledger) {
  if (stage_ == 1) {
    ensureShardGradient(ledger);
    return shardGradient_.narrow(0, shardOffset(bucket), blockNumel(bucket));
  }
  return receive_.narrow(0, shardOffset(bucket), blockNumel(bucket));
}

void ZeroEngineState::finishReduceScatter(int64_t bucket,
                                          GradientBuffers &gradients,
                                          MemoryLedger &ledger) {
  at::NoGradGuard noGrad;
  if (stage_ >= 2) {
    int64_t block = blockNumel(bucket);
    int64_t offset = shardOffset(bucket);
    shardGradient_.narrow(0, offset, block)
        .add_(receive_.narrow(0, offset, block));
    // The end of the engine's backward: the full buffer goes.
    if (++reduceScattersWaited_ == int64_t(partition_->buckets.size())) {
      releaseFullGradient(gradients, ledger);
      return;
    }
  }
  gradientSlice(gradients, bucket).zero_();
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

int64_t ZeroEngineState::flatParameterBytes() const {
  int64_t total = 0;
  if (parameters_.defined())
    total += int64_t(parameters_.nbytes());
  if (shardParameters_.defined())
    total += int64_t(shardParameters_.nbytes());
  for (const BucketParams &bucket : buckets_)
    if (!bucket.sharded && bucket.full.defined())
      total += int64_t(bucket.full.nbytes());
  return total;
}

int64_t
ZeroEngineState::heldGradientBytes(const GradientBuffers &gradients) const {
  if (!optimizer_)
    return 0;
  return stage_ >= 2 ? shardNumel() * gradElementBytes_
                     : gradients.bytes(index_);
}

int64_t ZeroEngineState::hostBytes() const {
  if (!optimizer_ || !offload_)
    return 0;
  return optimizer_->bytes() +
         (master_.defined() ? int64_t(master_.nbytes()) : 0);
}

int64_t ZeroEngineState::optimizerBytes() const {
  if (!optimizer_ || offload_)
    return 0;
  // Mixed precision: the float32 master counts as optimizer state (as
  // ZeRO's accounting does).
  return optimizer_->bytes() +
         (master_.defined() ? int64_t(master_.nbytes()) : 0);
}

} // namespace ds::runtime::detail
