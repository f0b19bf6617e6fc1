//===- ZeroEngineState.h - One engine's ZeRO buffers -----------*- C++ -*-===//
//
// One plan engine's training buffers as its `partition` lays them out and
// its ZeRO stage shards them (docs/runtime.md, "ZeRO stages"): the flat
// layout, the flat parameter buffer (stages 1-2) or stage 3's buckets and
// shard parameter buffer, this rank's block of each bucket, the float32
// master of a native bf16 / fp16 engine, the shard and receive gradients,
// and the optimizer with its UpdateProgress. The full gradient buffers are
// GradientBuffers', allocated and released here. With ZeRO-Offload the
// master (float32 engines too) and the optimizer state live in host memory
// (docs/zero.md, "ZeRO-Offload"). Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_ZEROENGINESTATE_H
#define DS_LIB_RUNTIME_ZEROENGINESTATE_H

#include "UpdateProgress.h"

#include "ds/Plan/Plan.h"
#include "ds/Plan/Report.h"
#include "ds/Runtime/Communicator.h"
#include "ds/Runtime/Device.h"
#include "ds/Runtime/GradientBuffers.h"
#include "ds/Runtime/Optimizer.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ds::runtime {
class StateStore;
} // namespace ds::runtime

namespace ds::runtime::detail {

class MemoryLedger;

class ZeroEngineState {
public:
  /// Lays out engine `index` of `plan` for rank `rank` of `ranks`.
  /// RuntimeError for a trainable parameter this runtime cannot train and
  /// for a ZeRO stage 1-3 engine whose plan is for another number of ranks.
  /// `device` (null: the CPU) holds the engine's buffers, except the
  /// offloaded master and optimizer state (host memory, pinned through
  /// `device` when the plan asks for it).
  ZeroEngineState(const plan::Plan &plan, size_t index,
                  const std::string &origin, int64_t rank, int64_t ranks,
                  std::shared_ptr<Device> device = nullptr,
                  std::optional<OptimizerKernel> kernel = std::nullopt);

  const std::string &name() const { return name_; }
  /// The run's device (the offloaded buffers live on the host instead).
  c10::Device device() const { return device_; }
  /// Engines with a partition: trainable ones, and the engines of
  /// evaluation plans that carry one.
  bool partitioned() const { return partition_ != nullptr; }
  int64_t stage() const { return stage_; }
  /// Trainable: an optimizer and a partition.
  bool trains() const { return optimizer_ != nullptr; }
  /// The parameters' places in the flat buffers.
  const FlatLayout &layout() const { return layout_; }
  /// Set for engines whose plan entry has a precision.
  const plan::PrecisionDesc *precision() const { return precision_; }
  /// The gradient buffers' dtype (precision.grad_accum_dtype, else the
  /// parameters').
  at::ScalarType gradDtype() const { return gradDtype_; }
  /// The gradient buffer's layout (GradientBuffers): empty for frozen
  /// engines.
  FlatLayout gradientLayout() const;
  /// Whether the full gradient buffer lives from load on (stages 0-1).
  bool keepsFullGradient() const { return trains() && stage_ <= 1; }

  /// nullptr for frozen engines.
  const Optimizer *optimizer() const { return optimizer_.get(); }
  Optimizer *optimizer() { return optimizer_.get(); }
  /// nullptr for frozen engines.
  const UpdateProgress *progress() const {
    return progress_ ? &*progress_ : nullptr;
  }
  UpdateProgress *progress() { return progress_ ? &*progress_ : nullptr; }
  /// The global-norm clipping threshold of a trainable engine.
  double gradientClipping() const { return optimizerDesc_->gradientClipping; }

  /// Stages 1-2 move the parameters into the flat parameter buffer, stage 3
  /// keeps each persistent bucket whole and this rank's block of the sharded
  /// ones; `state`'s entries become views of them (StateStore::bind,
  /// StateStore::shard). `state` must outlive the engine state.
  void bindParameters(StateStore &state);
  /// After bindParameters(): a trainable native bf16 / fp16 engine, and an
  /// offloading one, copies this rank's shard (stage 0: every parameter)
  /// into its master.
  void initMaster();
  /// The parameters (this rank's blocks; stage 0: all) become
  /// master.to(their dtype) (offload: copied up to the device). A no-op
  /// without a master.
  void parametersFromMaster();
  /// Native bf16 / fp16: the float32 master of this rank's shard (stage 0:
  /// the whole flat layout); offload: the master of the shard in host
  /// memory (a float32 engine's in its parameters' dtype); undefined
  /// otherwise and before binding.
  const at::Tensor &master() const { return master_; }
  /// Whether the engine keeps a master (trainable, native bf16 / fp16 or
  /// offloading).
  bool hasMaster() const { return trains() && (native_ || offload_); }
  /// ZeRO-Offload: the master and the optimizer state are in host memory
  /// and the update runs there (trainable, stages 1-3).
  bool offloadsOptimizer() const { return offload_; }
  /// Offload: this rank's reduced shard gradient in host memory as `dtype`,
  /// copied down from the device (on the CPU: the shard gradient itself,
  /// or its cast, as without offload). Writable: unscaling and clipping
  /// change it in place.
  at::Tensor shardGradientOnHost(at::ScalarType dtype) const;
  /// The master's per-bucket blocks (stages 1-3) or per-parameter views
  /// (stage 0): what the optimizer updates.
  const std::vector<at::Tensor> &masterBlocks() const { return masterBlocks_; }
  /// Stages 1-3: this rank's block of each bucket (views of the flat or
  /// shard parameter buffers, or of a persistent bucket).
  const std::vector<at::Tensor> &parameterBlocks() const {
    return parameterBlocks_;
  }
  /// This rank's fp32 parameters as a checkpoint saves them: the master's
  /// blocks, else parameterBlocks().
  const std::vector<at::Tensor> &fp32Blocks() const {
    return master_.defined() ? masterBlocks_ : parameterBlocks_;
  }

  // Buckets.
  const plan::BucketDesc &bucket(int64_t bucket) const {
    return partition_->buckets[size_t(bucket)];
  }
  /// The bucket's block of this rank: [offset + rank * n / W, ...).
  int64_t blockNumel(int64_t bucket) const;
  /// Where the bucket's block sits in the shard.
  int64_t shardOffset(int64_t bucket) const;
  int64_t shardNumel() const;
  /// "bucket 1 of engine \"model\"".
  std::string bucketName(int64_t bucket) const;
  /// The dtype the bucket's reductions move (its dtype, else the
  /// gradients').
  at::ScalarType reduceDtype(int64_t bucket) const {
    return reduceDtypes_[size_t(bucket)];
  }
  /// The dtype stage 3's gathers of a sharded bucket move (its dtype, else
  /// the parameters').
  at::ScalarType gatherDtype(int64_t bucket) const {
    return gatherDtypes_[size_t(bucket)];
  }
  /// The parameter buffers' dtype.
  at::ScalarType dtype() const { return dtype_; }
  /// Stages 1-2: the flat parameter buffer.
  const at::Tensor &flatParameters() const { return parameters_; }

  // Stage 3's buckets.
  /// Whether the bucket is gathered and released by the programs (stage 3,
  /// not persistent).
  bool shardsBucket(int64_t bucket) const;
  bool bucketReleased(int64_t bucket) const;
  bool bucketGathered(int64_t bucket) const;
  /// A persistent bucket's whole parameters.
  const at::Tensor &persistentBucket(int64_t bucket) const {
    return buckets_[size_t(bucket)].full;
  }
  /// A sharded bucket's gather starts: its whole buffer, returned, is
  /// allocated (a transient of `ledger`).
  at::Tensor beginGather(int64_t bucket, MemoryLedger &ledger);
  /// The gathered bucket's parameters become state views.
  void attachBucket(int64_t bucket);
  /// Drops a gathered (or gathering) sharded bucket.
  void dropBucket(int64_t bucket, MemoryLedger &ledger);
  /// Drops every gathered (or gathering) sharded bucket.
  void dropBuckets(MemoryLedger &ledger);
  /// Starts gathering every sharded bucket whole into a fresh buffer and
  /// sets `tensors[stateIndex]` of its parameters to views of it (valid
  /// once `handles` are waited).
  void startWholeGathers(Communicator &communicator,
                         std::vector<CommHandle> &handles,
                         std::vector<at::Tensor> &tensors) const;

  // Gradients.
  /// The bucket's slice of the full gradient buffer.
  at::Tensor gradientSlice(const GradientBuffers &gradients,
                           int64_t bucket) const;
  /// Allocates the full gradient buffer (and stages 2-3's receive buffer)
  /// unless it exists.
  void ensureFullGradient(GradientBuffers &gradients, MemoryLedger &ledger);
  /// Stages 2-3: frees them.
  void releaseFullGradient(GradientBuffers &gradients, MemoryLedger &ledger);
  /// The shard gradient (shardNumel() elements): stage 1 allocates it at
  /// the boundary and frees it after the update, stages 2-3 keep it.
  const at::Tensor &shardGradient() const { return shardGradient_; }
  void ensureShardGradient(MemoryLedger &ledger);
  /// Stage 1: frees it; stages 2-3 zero it.
  void finishShardGradient(MemoryLedger &ledger);
  void releaseShardGradient(MemoryLedger &ledger);
  /// Where the bucket's reduce-scatter writes this rank's block: the shard
  /// gradient at stage 1 (fresh at the boundary, each bucket reduced once),
  /// the receive buffer at stages 2-3.
  at::Tensor reduceScatterOutput(int64_t bucket, MemoryLedger &ledger);
  /// After the bucket's reduce-scatter: stages 2-3 add the received block
  /// into the shard gradient and free the full buffer after the engine's
  /// last bucket; otherwise the bucket's gradient slice is zeroed.
  void finishReduceScatter(int64_t bucket, GradientBuffers &gradients,
                           MemoryLedger &ledger);

  // Memory and communication.
  /// The flat parameter buffer (stages 1-2); stage 3's persistent buckets
  /// and shard parameter buffer.
  int64_t flatParameterBytes() const;
  /// Gradients held between steps: the full buffer (stages 0-1), the shard
  /// gradient (stages 2-3).
  int64_t heldGradientBytes(const GradientBuffers &gradients) const;
  /// The optimizer's state and the master on the device (0 with offload).
  int64_t optimizerBytes() const;
  /// Offload: the optimizer's state and the master in host memory.
  int64_t hostBytes() const;
  /// Elements its collectives moved since load.
  const plan::CommVolume &volume() const { return volume_; }
  void addVolume(const plan::CommVolume &volume) { volume_ += volume; }

private:
  /// Stage 3: one bucket's parameters.
  struct BucketParams {
    enum class Status { Released, Gathering, Gathered };
    /// Not persistent: gathered and released by the programs.
    bool sharded = false;
    Status status = Status::Released;
    /// The bucket's whole parameters: always for persistent buckets, from
    /// the all_gather to the release for sharded ones.
    at::Tensor full;
    /// The parameters in the bucket: state index, element offset in the
    /// bucket, shape.
    std::vector<int64_t> stateIndices;
    std::vector<int64_t> offsets;
    std::vector<std::vector<int64_t>> shapes;
  };

  void bindStage3(StateStore &state);
  /// A zero-filled host buffer for offloaded state: page-locked when the
  /// plan pins memory and the device is not the CPU.
  at::Tensor hostBuffer(int64_t numel, at::ScalarType dtype) const;

  std::string name_;
  size_t index_;
  int64_t rank_;
  int64_t worldSize_;
  /// Where every buffer of the engine lives (the offloaded ones aside).
  std::shared_ptr<Device> runDevice_;
  c10::Device device_;
  /// ZeRO-Offload, and whether its host buffers are page-locked.
  bool offload_ = false;
  bool pinMemory_ = false;
  /// Offload: the last upload of the parameters and the host memory it
  /// reads, kept until it has completed.
  std::unique_ptr<Event> upload_;
  at::Tensor uploadStaging_;
  at::TensorOptions options(at::ScalarType dtype) const {
    return at::TensorOptions().dtype(dtype).device(device_);
  }
  const plan::OptimizerDesc *optimizerDesc_ = nullptr;
  const plan::PartitionDesc *partition_ = nullptr;
  const plan::PrecisionDesc *precision_ = nullptr;
  int64_t stage_ = 0;
  FlatLayout layout_;
  /// precision.mode bf16 or fp16 (autocast keeps float32 parameters and
  /// needs no master).
  bool native_ = false;
  int64_t elementBytes_ = 4;
  at::ScalarType dtype_ = at::kFloat;
  int64_t gradElementBytes_ = 4;
  at::ScalarType gradDtype_ = at::kFloat;
  std::vector<at::ScalarType> reduceDtypes_;
  std::vector<at::ScalarType> gatherDtypes_;
  std::unique_ptr<Optimizer> optimizer_;
  std::optional<UpdateProgress> progress_;
  StateStore *state_ = nullptr;

  at::Tensor master_;
  std::vector<at::Tensor> masterBlocks_;
  at::Tensor parameters_;
  /// Stage 3: this rank's blocks of the sharded buckets, one after another.
  at::Tensor shardParameters_;
  std::vector<BucketParams> buckets_;
  std::vector<at::Tensor> parameterBlocks_;
  at::Tensor shardGradient_;
  /// Stages 2-3: the reduce-scatter results before they are added into
  /// the shard gradient (allocated with the full gradient buffer).
  at::Tensor receive_;
  /// Stages 2-3: reduce-scatters waited in the current micro-step.
  int64_t reduceScattersWaited_ = 0;
  plan::CommVolume volume_;
};

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_ZEROENGINESTATE_H
