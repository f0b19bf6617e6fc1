//===- Optimizer.h - Parameter updates at the boundary --------*- C++ -*-===//
//
// The plan's optimizers (plan::OptimizerType: AdamW, Adam, SGD), computed
// exactly as torch.optim 2.15 computes them (its single-tensor code paths, op
// for op, so that results agree with the numerical oracle to the last bits),
// and global-norm gradient clipping as torch.nn.utils.clip_grad_norm_ does it.
// Optimizer state (Adam's m and v, SGD's momentum buffer) lives in flat
// buffers with the engine's gradient layout, one set per engine.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_OPTIMIZER_H
#define DS_RUNTIME_OPTIMIZER_H

#include "ds/Plan/Plan.h"
#include "ds/Runtime/GradientBuffers.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace ds::runtime {

/// How an update is computed; both give torch.optim's numbers.
enum class OptimizerKernel {
  /// torch.optim's single-tensor path, op for op per parameter: bitwise
  /// torch.optim's default on the CPU. The CPU's default.
  Reference,
  /// One fused ATen kernel over every parameter (at::_fused_adamw_,
  /// _fused_adam_, _fused_sgd_): bitwise torch.optim(fused=True) on the
  /// same device. The default on CUDA, where one launch replaces a few per
  /// parameter.
  Fused,
};

/// "reference", "fused".
const char *optimizerKernelName(OptimizerKernel kernel);
/// Fused on CUDA devices, Reference elsewhere.
OptimizerKernel defaultOptimizerKernel(c10::Device device);

/// Allocates a zero-filled flat buffer of `numel` elements of `dtype`
/// (ZeRO-Offload: page-locked host memory).
using BufferAllocator =
    std::function<at::Tensor(int64_t numel, at::ScalarType dtype)>;

class Optimizer {
public:
  /// State for the parameters of `layout`, zero-initialised, on the
  /// layout's device, or from `allocate` when given. The caller applies
  /// `desc`'s gradient clipping and LR schedule. `kernel`:
  /// defaultOptimizerKernel(layout.device) unless given.
  Optimizer(const plan::OptimizerDesc &desc, const FlatLayout &layout,
            std::optional<OptimizerKernel> kernel = std::nullopt,
            const BufferAllocator &allocate = nullptr);
  OptimizerKernel kernel() const { return kernel_; }

  /// One update at learning rate `lr`: `params[i]` (updated in place) with
  /// gradient `grads[i]`, both in the layout's order. Every parameter
  /// steps, a zero gradient included (DeepSpeed's flat buffers).
  ///  - AdamW (torch.optim.AdamW):
  ///      p *= 1 - lr*wd; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
  ///      p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
  ///  - Adam (torch.optim.Adam): g += wd*p, then the same moments and
  ///    update without the decoupled decay.
  ///  - SGD (torch.optim.SGD): g += wd*p; with momentum, buf = g on the
  ///    first update, else buf = momentum*buf + (1-dampening)*g; the step
  ///    direction is buf, or g + momentum*buf with nesterov; p -= lr*step.
  void step(const std::vector<at::Tensor> &params,
            const std::vector<at::Tensor> &grads, double lr);
  /// The fused kernels only: the same update, skipped on the device when
  /// `foundInf` (a 0-dim float32 tensor on the parameters' device) is not
  /// 0 (torch.amp's found_inf): fp16 decides to skip without the host
  /// reading the overflow flag first. steps() counts the update; a caller
  /// that learns later that it was skipped calls setSteps(steps() - 1).
  void step(const std::vector<at::Tensor> &params,
            const std::vector<at::Tensor> &grads, double lr,
            const at::Tensor &foundInf);

  const plan::OptimizerDesc &desc() const { return desc_; }
  /// Updates applied so far (torch.optim's per-parameter "step").
  int64_t steps() const { return steps_; }
  /// Flat state buffers: Adam's exp_avg and exp_avg_sq, or SGD's
  /// momentum_buffer (undefined without momentum).
  const at::Tensor &expAvg() const { return first_; }
  const at::Tensor &expAvgSq() const { return second_; }
  const at::Tensor &momentumBuffer() const { return first_; }
  int64_t bytes() const;

  /// For loading a checkpoint: the state buffers (writable, same as
  /// expAvg() / expAvgSq()) and the update count.
  at::Tensor &mutableExpAvg() { return first_; }
  at::Tensor &mutableExpAvgSq() { return second_; }
  void setSteps(int64_t steps) { steps_ = steps; }

private:
  void adamStep(const std::vector<at::Tensor> &params,
                const std::vector<at::Tensor> &grads, double lr);
  void sgdStep(const std::vector<at::Tensor> &params,
               const std::vector<at::Tensor> &grads, double lr);
  void fusedStep(const std::vector<at::Tensor> &params,
                 const std::vector<at::Tensor> &grads, double lr,
                 const std::optional<at::Tensor> &foundInf);

  plan::OptimizerDesc desc_;
  OptimizerKernel kernel_;
  int64_t steps_ = 0;
  /// Fused Adam: torch.optim's per-parameter float32 `step` tensors, set to
  /// the update's number before each kernel.
  std::vector<at::Tensor> stepTensors_;
  /// Their storage: stepTensors_[i] is element i.
  at::Tensor stepsBuffer_;
  at::Tensor first_, second_;
  std::vector<at::Tensor> firstViews_, secondViews_;
};

/// torch.nn.utils.clip_grad_norm_(max_norm, norm_type=2) over `grads`:
/// total = ||(||g_1||, ..., ||g_n||)||, and when maxNorm > 0 every gradient
/// is multiplied in place by min(1, maxNorm / (total + 1e-6)) (computed as
/// torch 2.15 does, in float32). Returns the norm before clipping; 0 for no
/// gradients. maxNorm == 0 only measures (DeepSpeed: clipping disabled).
double clipGradientsByGlobalNorm(const std::vector<at::Tensor> &grads,
                                 double maxNorm);

class Communicator;

/// The same clipping when every rank holds a shard of the gradients (ZeRO
/// stages 1-2): the global norm is sqrt of the sum over the ranks (one
/// scalar float64 all-reduce over `communicator`, skipped when null or of
/// size 1) of the sum of squares of each `shard` (computed in float64);
/// then, as torch computes it in the gradients' dtype, coef = maxNorm /
/// (norm + 1e-6) clamped to 1 multiplies `shard` in place when maxNorm >
/// 0. Returns the norm (in the gradients' dtype, as torch's is). Every rank
/// must call it. An undefined `shard` counts as empty.
double clipShardByGlobalNorm(const at::Tensor &shard, double maxNorm,
                             Communicator *communicator);

/// The two clippings above, returning the norm as a 0-dim tensor where the
/// gradients live instead of reading it: on a GPU the host then waits once
/// per optimizer step, for every norm at once (Trainer::endStep), not once
/// per engine. The double versions read these.
at::Tensor clipGradientsByGlobalNormTensor(const std::vector<at::Tensor> &grads,
                                           double maxNorm);
at::Tensor clipShardByGlobalNormTensor(const at::Tensor &shard, double maxNorm,
                                       Communicator *communicator);

} // namespace ds::runtime

#endif // DS_RUNTIME_OPTIMIZER_H
