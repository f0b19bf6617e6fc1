//===- GradientClipping.cpp - Global-norm clipping as torch 2.15 does it --===//
//
// torch.nn.utils.clip_grad_norm_ in 2.15 on CPU tensors (its foreach path),
// op for op:
//   norms = torch._foreach_norm(grads, 2.0)
//   total_norm = torch.linalg.vector_norm(torch.stack(norms), 2.0)
//   clip_coef = max_norm / (total_norm + 1e-6)  # Tensor.__rdiv__:
//                                               # reciprocal() * max_norm
//   clip_coef_clamped = torch.clamp(clip_coef, max=1.0)
//   torch._foreach_mul_(grads, clip_coef_clamped)
// The coefficient stays a float32 tensor, as in torch: rounding it in double
// would differ in the last bit.
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/Optimizer.h"

#include "ds/Runtime/Communicator.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

namespace ds::runtime {

at::Tensor clipGradientsByGlobalNormTensor(const std::vector<at::Tensor> &grads,
                                           double maxNorm) {
  if (grads.empty())
    return at::Tensor();
  at::NoGradGuard noGrad;
  std::vector<at::Tensor> norms = at::_foreach_norm(grads, 2.0);
  at::Tensor total = at::linalg_vector_norm(at::stack(norms), 2.0);
  if (maxNorm > 0.0) {
    at::Tensor coef = (total + 1e-6).reciprocal() * maxNorm;
    at::Tensor clamped = at::clamp(coef, std::nullopt, 1.0);
    at::_foreach_mul_(grads, clamped);
  }
  return total;
}

double clipGradientsByGlobalNorm(const std::vector<at::Tensor> &grads,
                                 double maxNorm) {
  at::Tensor total = clipGradientsByGlobalNormTensor(grads, maxNorm);
  return total.defined() ? total.item<double>() : 0.0;
}

at::Tensor clipShardByGlobalNormTensor(const at::Tensor &shard, double maxNorm,
                                       Communicator *communicator) {
  at::NoGradGuard noGrad;
  at::Tensor squares = shard.defined() && shard.numel() > 0
                           ? shard.to(at::kDouble).square().sum()
                           : at::zeros({}, at::kDouble);
  if (communicator && communicator->size() > 1)
    communicator->allReduce(squares, ReduceOp::Sum).wait();
  at::ScalarType dtype = shard.defined() ? shard.scalar_type() : at::kFloat;
  at::Tensor total = squares.sqrt().to(dtype);
  if (maxNorm > 0.0 && shard.defined() && shard.numel() > 0) {
    at::Tensor coef = (total + 1e-6).reciprocal() * maxNorm;
    at::Tensor clamped = at::clamp(coef, std::nullopt, 1.0);
    shard.mul_(clamped);
  }
  return total;
}

double clipShardByGlobalNorm(const at::Tensor &shard, double maxNorm,
                             Communicator *communicator) {
  return clipShardByGlobalNormTensor(shard, maxNorm, communicator)
      .item<double>();
}

} // namespace ds::runtime
