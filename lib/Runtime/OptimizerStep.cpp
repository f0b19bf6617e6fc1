//===- OptimizerStep.cpp - An engine's update on the boundary -------------===//
//
// Trainer::optimizerStep: fp16 unscaling and the overflow check, global-norm
// clipping and the optimizer's update of an engine's parameters (stage 0) or
// of this rank's shard (stages 1-3), on the float32 master of a native bf16 /
// fp16 engine (docs/runtime.md, "Mixed precision"). With ZeRO-Offload all of
// it runs on the host, on the shard gradient copied down, and the updated
// parameters go back up (docs/zero.md, "ZeRO-Offload").
//
//===----------------------------------------------------------------------===//

#include "Trainer.h"

#include "ds/Runtime/StateStore.h"
#include "ds/Runtime/TimedCommunicator.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

namespace ds::runtime::detail {

bool Trainer::unscaleAndCheckOverflow(size_t e, const at::Tensor &grads) {
  const LossScaler &scaler = *engines_[e].progress()->lossScaler();
  at::NoGradGuard noGrad;
  bool overflow = false;
  if (grads.defined() && grads.numel() > 0) {
    // Division by a power of two is exact; a static scale rounds as
    // DeepSpeed's 1/scale multiplication would not, but no test depends on
    // non-power-of-two static scales.
    grads.div_(scaler.scale());
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

at::Tensor Trainer::unscaleOnDevice(size_t e, const at::Tensor &grads) {
  const LossScaler &scaler = *engines_[e].progress()->lossScaler();
  at::NoGradGuard noGrad;
  if (!grads.defined() || grads.numel() == 0)
    return at::zeros({}, device_->options(at::kFloat));
  grads.div_(scaler.scale());
  return at::logical_not(at::isfinite(grads).all()).to(at::kFloat);
}

void Trainer::optimizerStep(size_t e) {
  ZeroEngineState &engine = engines_[e];
  if (!engine.trains() || !state_)
    internalError("optimizer_step of engine \"" + engine.name() + "\"");
  for (const auto &[token, pending] : pending_)
    if (pending.engine == e && pending.kind != plan::OpKind::AllGather)
      internalError("optimizer_step of engine \"" + engine.name() +
                    "\" while a reduction of it is in flight");
  at::NoGradGuard noGrad;
  UpdateProgress &progress = *engine.progress();
  LossScaler *scaler = progress.lossScaler();
  const double lr = progress.nextLr();
  const double clipping = engine.gradientClipping();
  // Mixed precision: the update runs on the float32 master, with the
  // gradients cast to float32 (a copy unless they are float32 already).
  // Offload: on the master in host memory.
  const bool mixed = engine.master().defined();
  const bool offload = engine.offloadsOptimizer();
  const at::ScalarType masterDtype =
      mixed ? engine.master().scalar_type() : engine.dtype();
  const double scale = progress.scale();
  // The norm stays on the device until endStep() reads every engine's.
  at::Tensor gradNorm;
  bool overflow = false;
  // fp16 with the fused kernels on one rank: the overflow check stays on the
  // device too (found_inf skips the update there), read with the norms.
  const bool deviceOverflow =
      scaler && engine.optimizer()->kernel() == OptimizerKernel::Fused &&
      communicator_->size() == 1 && !offload;
  at::Tensor foundInf;
  auto unscale = [&](const at::Tensor &grads) {
    if (!deviceOverflow)
      return unscaleAndCheckOverflow(e, grads);
    foundInf = unscaleOnDevice(e, grads);
    return false;
  };
  auto update = [&](const std::vector<at::Tensor> &params,
                    const std::vector<at::Tensor> &grads) {
    if (foundInf.defined())
      engine.optimizer()->step(params, grads, lr, foundInf);
    else
      engine.optimizer()->step(params, grads, lr);
  };
  if (engine.stage() == 0) {
    std::vector<at::Tensor> grads = gradients_->views(e);
    if (mixed) {
      at::Tensor flat = gradients_->flat(e).to(masterDtype);
      if (scaler)
        overflow = unscale(flat);
      grads = gradients_->layout(e).views(flat);
    } else if (scaler) {
      // fp16 autocast: float32 parameters, no master; the GradScaler
      // unscales the gradients in place (unscale_ before clipping).
      overflow = unscale(gradients_->flat(e));
    }
    if (!overflow) {
      gradNorm = clipGradientsByGlobalNormTensor(grads, clipping);
      std::vector<at::Tensor> params;
      if (mixed) {
        params = engine.masterBlocks();
      } else {
        for (int64_t index : gradients_->layout(e).stateIndices)
          params.push_back(state_->tensor(index));
      }
      update(params, grads);
      engine.parametersFromMaster();
    }
    gradients_->zero(e);
  } else {
    engine.ensureShardGradient(ledger_); // Stage 1 without buckets: empty.
    at::Tensor shard = offload ? engine.shardGradientOnHost(masterDtype)
                       : mixed ? engine.shardGradient().to(masterDtype)
                               : engine.shardGradient();
    if (scaler)
      overflow = unscale(shard);
    if (!overflow) {
      const plan::CommVolume before = communicator_->volume();
      gradNorm = clipShardByGlobalNormTensor(shard, clipping, timed_.get());
      chargeVolume(e, before);
      std::vector<at::Tensor> grads;
      for (size_t b = 0; b < engine.parameterBlocks().size(); ++b)
        grads.push_back(shard.narrow(0, engine.shardOffset(int64_t(b)),
                                     engine.blockNumel(int64_t(b))));
      update(mixed ? engine.masterBlocks() : engine.parameterBlocks(), grads);
      // Stages 1-2 and stage 3's persistent buckets then all-gather the
      // rounded blocks in the parameters' dtype, exactly. Offload: the
      // blocks are copied up first.
      engine.parametersFromMaster();
    }
    engine.finishShardGradient(ledger_);
  }
  if (deviceOverflow) {
    // endStep() reads the flag, then updates the scaler and the progress.
    if (!foundInf.defined())
      foundInf = at::zeros({}, device_->options(at::kFloat));
    progress.recordPending(lr, gradNorm, foundInf, scale);
    return;
  }
  if (scaler)
    scaler->update(overflow); // Throws at min_loss_scale.
  if (overflow)
    progress.recordSkipped(lr, scale);
  else
    progress.recordApplied(lr, gradNorm, scale);
}

} // namespace ds::runtime::detail
