//===- GradientClipping.cpp - Global-norm clipping as torch 1.13 does it --===//
//
// torch.nn.utils.clip_grad_norm_ in 1.13, op for op:
//   total_norm = torch.norm(torch.stack([torch.norm(g, 2.0) for g in grads]),
//                           2.0)
//   clip_coef = max_norm / (total_norm + 1e-6)  # Tensor.__rdiv__:
//                                               # reciprocal() * max_norm
//   clip_coef_clamped = torch.clamp(clip_coef, max=1.0)
//   for g in grads: g.mul_(clip_coef_clamped)
// torch.norm(g, 2.0) without dim is aten::norm over all dimensions. The
// coefficient stays a float32 tensor, as in torch: rounding it in double
// would differ in the last bit.
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/Optimizer.h"

#include "ds/Runtime/Communicator.h"

#include <ATen/ATen.h>

#include <numeric>

namespace ds::runtime {

namespace {

at::Tensor norm2(const at::Tensor &tensor) {
  std::vector<int64_t> dims(size_t(tensor.dim()));
  std::iota(dims.begin(), dims.end(), int64_t(0));
  return at::norm(tensor, at::Scalar(2.0), dims, /*keepdim=*/false);
}

} // namespace

double clipGradientsByGlobalNorm(const std::vector<at::Tensor> &grads,
                                 double maxNorm) {
  if (grads.empty())
    return 0.0;
  at::NoGradGuard noGrad;
  std::vector<at::Tensor> norms;
  norms.reserve(grads.size());
  for (const at::Tensor &grad : grads)
    norms.push_back(norm2(grad));
  at::Tensor total = norm2(at::stack(norms));
  if (maxNorm > 0.0) {
    at::Tensor coef = (total + 1e-6).reciprocal() * maxNorm;
    at::Tensor clamped = at::clamp(coef, c10::nullopt, 1.0);
    for (const at::Tensor &grad : grads)
      grad.mul_(clamped);
  }
  return total.item<double>();
}

double clipShardByGlobalNorm(const at::Tensor &shard, double maxNorm,
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
    at::Tensor clamped = at::clamp(coef, c10::nullopt, 1.0);
    shard.mul_(clamped);
  }
  return total.item<double>();
}

} // namespace ds::runtime
