//===- Optimizer.cpp - Adam, AdamW and SGD as torch.optim 2.15 ------------===//
//
// OptimizerKernel::Reference mirrors torch/optim/{adam,sgd}.py, _single_tensor_*
// (torch.optim's default path for CPU tensors in 2.15: foreach kernels are used
// on CUDA only; AdamW is Adam with decoupled_weight_decay), one ATen call per
// Python tensor op with the same scalar arithmetic in double: the oracle is
// torch.optim, and only the same operations in the same order round the
// same way. The updates run per parameter on views of the flat state
// buffers, so each kernel sees the same tensor shapes as in torch.optim.
// OptimizerKernel::Fused calls the fused kernels that torch.optim's
// fused=True calls, with the same arguments (fusedStep).
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/Optimizer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <stdexcept>

namespace ds::runtime {

using plan::OptimizerType;

const char *optimizerKernelName(OptimizerKernel kernel) {
  return kernel == OptimizerKernel::Fused ? "fused" : "reference";
}

OptimizerKernel defaultOptimizerKernel(c10::Device device) {
  return device.is_cuda() ? OptimizerKernel::Fused
                          : OptimizerKernel::Reference;
}

Optimizer::Optimizer(const plan::OptimizerDesc &desc, const FlatLayout &layout,
                     std::optional<OptimizerKernel> kernel,
                     const BufferAllocator &allocate)
    : desc_(desc),
      kernel_(kernel.value_or(defaultOptimizerKernel(layout.device))) {
  auto buffer = [&] {
    return allocate ? allocate(layout.numel, layout.dtype) : layout.allocate();
  };
  bool adam = desc.type != OptimizerType::SGD;
  // torch.optim.SGD keeps no state without momentum.
  if (adam || desc.momentum != 0.0) {
    first_ = buffer();
    firstViews_ = layout.views(first_);
  }
  if (adam) {
    second_ = buffer();
    secondViews_ = layout.views(second_);
  }
  if (adam && kernel_ == OptimizerKernel::Fused) {
    // One buffer, so that one fill_ sets every parameter's step.
    stepsBuffer_ = at::zeros(
        {int64_t(layout.shapes.size())},
        at::TensorOptions().dtype(at::kFloat).device(layout.device));
    for (int64_t i = 0; i < stepsBuffer_.numel(); ++i)
      stepTensors_.push_back(stepsBuffer_.select(0, i));
  }
}

int64_t Optimizer::bytes() const {
  int64_t total = 0;
  for (const at::Tensor *buffer : {&first_, &second_})
    if (buffer->defined())
      total += int64_t(buffer->nbytes());
  return total;
}

void Optimizer::step(const std::vector<at::Tensor> &params,
                     const std::vector<at::Tensor> &grads, double lr) {
  at::NoGradGuard noGrad;
  if (kernel_ == OptimizerKernel::Fused)
    fusedStep(params, grads, lr, std::nullopt);
  else if (desc_.type == OptimizerType::SGD)
    sgdStep(params, grads, lr);
  else
    adamStep(params, grads, lr);
  ++steps_;
}

void Optimizer::adamStep(const std::vector<at::Tensor> &params,
                         const std::vector<at::Tensor> &grads, double lr) {
  const double beta1 = desc_.betas[0];
  const double beta2 = desc_.betas[1];
  const double weightDecay = desc_.weightDecay;
  const bool decoupled = desc_.type == OptimizerType::AdamW;
  // torch.optim keeps `step` as a float tensor and reads it with .item().
  const double step = double(steps_ + 1);
  const double biasCorrection1 = 1 - std::pow(beta1, step);
  const double biasCorrection2 = 1 - std::pow(beta2, step);
  const double stepSize = lr / biasCorrection1;
  // Python's `bias_correction2**0.5`.
  const double biasCorrection2Sqrt = std::pow(biasCorrection2, 0.5);

  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor param = params[i];
    at::Tensor grad = grads[i];
    at::Tensor &expAvg = firstViews_[i];
    at::Tensor &expAvgSq = secondViews_[i];
    if (decoupled) {
      // AdamW: param.mul_(1 - lr * weight_decay), always; a factor of
      // exactly 1 changes nothing, so it is skipped.
      if (weightDecay != 0.0)
        param.mul_(1 - lr * weightDecay);
    } else if (weightDecay != 0.0) {
      // Adam: grad = grad.add(param, alpha=weight_decay) (a new tensor: the
      // accumulated gradient itself is not changed).
      grad = grad.add(param, weightDecay);
    }
    expAvg.lerp_(grad, 1 - beta1);
    expAvgSq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
    at::Tensor denom = (expAvgSq.sqrt() / biasCorrection2Sqrt).add_(desc_.eps);
    param.addcdiv_(expAvg, denom, -stepSize);
  }
}

void Optimizer::sgdStep(const std::vector<at::Tensor> &params,
                        const std::vector<at::Tensor> &grads, double lr) {
  const double momentum = desc_.momentum;
  const double dampening = desc_.dampening;
  const double weightDecay = desc_.weightDecay;
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor param = params[i];
    at::Tensor direction = grads[i];
    if (weightDecay != 0.0)
      direction = direction.add(param, weightDecay);
    if (momentum != 0.0) {
      at::Tensor &buffer = firstViews_[i];
      // torch.optim.SGD: the buffer starts as a copy of the first gradient.
      if (steps_ == 0)
        buffer.copy_(direction);
      else
        buffer.mul_(momentum).add_(direction, 1 - dampening);
      direction = desc_.nesterov ? direction.add(buffer, momentum) : buffer;
    }
    param.add_(direction, -lr);
  }
}

void Optimizer::step(const std::vector<at::Tensor> &params,
                     const std::vector<at::Tensor> &grads, double lr,
                     const at::Tensor &foundInf) {
  if (kernel_ != OptimizerKernel::Fused)
    throw std::logic_error("Optimizer::step with found_inf needs the fused "
                           "kernels");
  at::NoGradGuard noGrad;
  fusedStep(params, grads, lr, foundInf);
  ++steps_;
}

void Optimizer::fusedStep(const std::vector<at::Tensor> &params,
                          const std::vector<at::Tensor> &grads, double lr,
                          const std::optional<at::Tensor> &foundInf) {
  // torch/optim/{adam,sgd}.py, _fused_adam / _fused_sgd: one kernel over
  // the parameter list, the moments in their flat buffers' views.
  if (params.empty())
    return;
  if (desc_.type == OptimizerType::SGD) {
    const bool momentum = desc_.momentum != 0.0;
    // torch.optim: the momentum buffers are None before the first update,
    // and the kernel then starts them as copies of the gradients.
    at::_fused_sgd_(params, grads,
                    momentum ? at::TensorList(firstViews_) : at::TensorList(),
                    desc_.weightDecay, desc_.momentum, lr, desc_.dampening,
                    desc_.nesterov, /*maximize=*/false,
                    /*is_first_step=*/momentum && steps_ == 0,
                    /*grad_scale=*/std::nullopt, foundInf);
    return;
  }
  // torch.optim adds 1 to each float32 `step` before the kernel; the
  // counts are whole numbers, exact in float32 up to 2^24.
  stepsBuffer_.fill_(double(steps_ + 1));
  if (desc_.type == OptimizerType::AdamW)
    at::_fused_adamw_(params, grads, firstViews_, secondViews_,
                      /*max_exp_avg_sqs=*/{}, stepTensors_, lr,
                      desc_.betas[0], desc_.betas[1], desc_.weightDecay,
                      desc_.eps, /*amsgrad=*/false, /*maximize=*/false,
                      /*grad_scale=*/std::nullopt, foundInf);
  else
    at::_fused_adam_(params, grads, firstViews_, secondViews_,
                     /*max_exp_avg_sqs=*/{}, stepTensors_, lr, desc_.betas[0],
                     desc_.betas[1], desc_.weightDecay, desc_.eps,
                     /*amsgrad=*/false, /*maximize=*/false,
                     /*grad_scale=*/std::nullopt, foundInf);
}

} // namespace ds::runtime
