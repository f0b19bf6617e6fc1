// RUN: ds-opt %s -split-input-file -ds-autodiff | FileCheck %s

// scaled_dot_product_attention's gradient takes the backend LibTorch's CPU
// dispatch takes. 4-D query/key/value of equal batch, heads and head dim,
// causal, no mask: the flash kernel, recomputed next to its own backward,
// which gives the three gradients at once.
ds.param @wq : tensor<2x2x5x4xf32> {module = "", module_class = "M", requires_grad}
// CHECK-LABEL: func.func @forward
// CHECK:      %[[Q:.*]] = ds.get_param @wq
// CHECK:      ds.backward_begin
// CHECK:      %[[FWD:.*]]:2 = ds.aten "aten::_scaled_dot_product_flash_attention_for_cpu"(%[[Q]], %arg0, %arg1, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {{.*}} -> (tensor<2x2x5x4xf32>, tensor<2x2x5xf32>)
// CHECK-NEXT: %[[G:.*]]:3 = ds.aten "aten::_scaled_dot_product_flash_attention_for_cpu_backward"(%{{.*}}, %[[Q]], %arg0, %arg1, %[[FWD]]#0, %[[FWD]]#1, {{.*}}) {{.*}} -> (tensor<2x2x5x4xf32>, tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>)
// CHECK:      ds.grad @wq, %[[G]]#0 : tensor<2x2x5x4xf32>
// CHECK-NOT:  _safe_softmax
func.func @forward(%k: tensor<2x2x6x4xf32>, %v: tensor<2x2x6x4xf32>) -> tensor<f32> {
  %q = ds.get_param @wq : tensor<2x2x5x4xf32>
  %none = ds.constant unit : !ds.none
  %zero = ds.constant 0.000000e+00 : f64
  %true = ds.constant true
  %false = ds.constant false
  %y = ds.aten "aten::scaled_dot_product_attention"(%q, %k, %v, %none, %zero, %true, %none, %false) : (tensor<2x2x5x4xf32>, tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>, !ds.none, f64, i1, !ds.none, i1) -> tensor<2x2x5x4xf32>
  %s = ds.aten "aten::sum"(%y, %none) : (tensor<2x2x5x4xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Rank 3 runs as rank 4 (unsqueezed at 0), as LibTorch runs it; a boolean
// mask becomes the additive mask LibTorch converts it to.
ds.param @wk : tensor<3x6x4xf32> {module = "", module_class = "M", requires_grad}
// CHECK-LABEL: func.func @forward
// CHECK:      ds.backward_begin
// CHECK:      ds.aten "aten::zeros_like"
// CHECK:      ds.aten "aten::masked_fill.Scalar"
// CHECK:      ds.aten "aten::_scaled_dot_product_flash_attention_for_cpu"({{.*}}){{.*}} : (tensor<1x3x5x4xf32>, tensor<1x3x6x4xf32>, tensor<1x3x6x4xf32>, f64, i1, tensor<5x6xf32>, f64) -> (tensor<1x3x5x4xf32>, tensor<1x3x5xf32>)
// CHECK:      %[[G:.*]]:3 = ds.aten "aten::_scaled_dot_product_flash_attention_for_cpu_backward"
// CHECK:      %[[GK:.*]] = ds.aten "aten::squeeze.dim"(%[[G]]#1, %{{.*}}) {{.*}} -> tensor<3x6x4xf32>
// CHECK:      ds.grad @wk, %[[GK]] : tensor<3x6x4xf32>
func.func @forward(%q: tensor<3x5x4xf32>, %v: tensor<3x6x4xf32>, %m: tensor<5x6xi1>) -> tensor<f32> {
  %k = ds.get_param @wk : tensor<3x6x4xf32>
  %none = ds.constant unit : !ds.none
  %zero = ds.constant 0.000000e+00 : f64
  %scale = ds.constant 3.000000e-01 : f64
  %false = ds.constant false
  %y = ds.aten "aten::scaled_dot_product_attention"(%q, %k, %v, %m, %zero, %false, %scale, %false) : (tensor<3x5x4xf32>, tensor<3x6x4xf32>, tensor<3x6x4xf32>, tensor<5x6xi1>, f64, i1, f64, i1) -> tensor<3x5x4xf32>
  %s = ds.aten "aten::sum"(%y, %none) : (tensor<3x5x4xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// A mask that needs a gradient (a trainable bias): LibTorch takes the math
// path, and so does the rule, op for op; the mask's gradient is the
// softmax backward summed to its shape.
ds.param @bias : tensor<5x6xf32> {module = "", module_class = "M", requires_grad}
// CHECK-LABEL: func.func @forward
// CHECK:      ds.backward_begin
// CHECK:      %[[P:.*]] = ds.aten "aten::_safe_softmax"
// CHECK:      %[[DS:.*]] = ds.aten "aten::_softmax_backward_data"(%{{.*}}, %[[P]], {{.*}}) {{.*}} -> tensor<2x2x5x6xf32>
// CHECK:      %[[GB:.*]] = ds.aten "aten::sum_to_size"(%[[DS]], {{.*}}) {{.*}} -> tensor<5x6xf32>
// CHECK:      ds.grad @bias, %[[GB]] : tensor<5x6xf32>
// CHECK-NOT:  flash_attention
func.func @forward(%q: tensor<2x2x5x4xf32>, %k: tensor<2x2x6x4xf32>, %v: tensor<2x2x6x4xf32>) -> tensor<f32> {
  %b = ds.get_param @bias : tensor<5x6xf32>
  %none = ds.constant unit : !ds.none
  %zero = ds.constant 0.000000e+00 : f64
  %false = ds.constant false
  %y = ds.aten "aten::scaled_dot_product_attention"(%q, %k, %v, %b, %zero, %false, %none, %false) : (tensor<2x2x5x4xf32>, tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>, tensor<5x6xf32>, f64, i1, !ds.none, i1) -> tensor<2x2x5x4xf32>
  %s = ds.aten "aten::sum"(%y, %none) : (tensor<2x2x5x4xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// A value head dim other than the query's: the math path; causal masking as
// ATen builds it (the upper triangle above the diagonal is -inf).
ds.param @wv : tensor<2x2x6x8xf32> {module = "", module_class = "M", requires_grad}
// CHECK-LABEL: func.func @forward
// CHECK:      ds.backward_begin
// CHECK:      %[[ONES:.*]] = ds.aten "aten::ones"({{.*}}) {{.*}} -> tensor<5x6xi1>
// CHECK:      %[[UP:.*]] = ds.aten "aten::triu"(%[[ONES]], %{{.*}}) {{.*}} -> tensor<5x6xi1>
// CHECK:      ds.aten "aten::masked_fill.Scalar"(%{{.*}}, %[[UP]], %{{.*}})
// CHECK:      %[[P:.*]] = ds.aten "aten::_safe_softmax"
// CHECK:      ds.aten "aten::transpose.int"(%[[P]], {{.*}}) {{.*}} -> tensor<2x2x6x5xf32>
// CHECK:      %[[GV:.*]] = ds.aten "aten::matmul"({{.*}}) {{.*}} -> tensor<2x2x6x8xf32>
// CHECK:      ds.grad @wv, %[[GV]] : tensor<2x2x6x8xf32>
// CHECK-NOT:  flash_attention
func.func @forward(%q: tensor<2x2x5x4xf32>, %k: tensor<2x2x6x4xf32>) -> tensor<f32> {
  %v = ds.get_param @wv : tensor<2x2x6x8xf32>
  %none = ds.constant unit : !ds.none
  %zero = ds.constant 0.000000e+00 : f64
  %true = ds.constant true
  %false = ds.constant false
  %y = ds.aten "aten::scaled_dot_product_attention"(%q, %k, %v, %none, %zero, %true, %none, %false) : (tensor<2x2x5x4xf32>, tensor<2x2x6x4xf32>, tensor<2x2x6x8xf32>, !ds.none, f64, i1, !ds.none, i1) -> tensor<2x2x5x8xf32>
  %s = ds.aten "aten::sum"(%y, %none) : (tensor<2x2x5x8xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// rms_norm with a weight: the statistics are recomputed (pow, mean, add eps,
// rsqrt) and the gradients follow autograd's order on ATen's decomposition;
// the default eps is float32's epsilon.
ds.param @x : tensor<3x8xf32> {module = "", module_class = "M", requires_grad}
ds.param @w : tensor<8xf32> {module = "norm", module_class = "torch.nn.modules.normalization.RMSNorm", requires_grad}
// CHECK-LABEL: func.func @forward
// CHECK:      ds.backward_begin
// CHECK:      %[[SQ:.*]] = ds.aten "aten::pow.Tensor_Scalar"
// CHECK:      %[[MS:.*]] = ds.aten "aten::mean.dim"(%[[SQ]], {{.*}}) {{.*}} -> tensor<3x1xf32>
// CHECK-NEXT: %[[EPS:.*]] = ds.constant 1.1920928955078125E-7 : f64
// CHECK:      ds.aten "aten::add.Scalar"(%[[MS]], %[[EPS]], %{{.*}})
// CHECK:      %[[R:.*]] = ds.aten "aten::rsqrt"
// CHECK:      %[[GW:.*]] = ds.aten "aten::sum_to_size"({{.*}}) {{.*}} -> tensor<8xf32>
// CHECK:      ds.aten "aten::sum.dim_IntList"
// CHECK:      ds.aten "aten::expand"
// CHECK:      %[[GX:.*]] = ds.aten "aten::add.Tensor"
// CHECK-DAG:  ds.grad @w, %[[GW]] : tensor<8xf32>
// CHECK-DAG:  ds.grad @x, %[[GX]] : tensor<3x8xf32>
func.func @forward() -> tensor<f32> {
  %x = ds.get_param @x : tensor<3x8xf32>
  %w = ds.get_param @w : tensor<8xf32>
  %eight = ds.constant 8 : i64
  %shape = ds.list_construct %eight : (i64) -> !ds.list<i64>
  %none = ds.constant unit : !ds.none
  %y = ds.aten "aten::rms_norm"(%x, %shape, %w, %none) {module = "norm"} : (tensor<3x8xf32>, !ds.list<i64>, tensor<8xf32>, !ds.none) -> tensor<3x8xf32>
  %s = ds.aten "aten::sum"(%y, %none) : (tensor<3x8xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Compiled for CUDA: the flash kernel of the first case is the CPU's, so the
// rule recomputes ATen's math path, which runs on any device.
// CHECK-LABEL: func.func @forward
// CHECK-NOT:  flash_attention
// CHECK:      ds.backward_begin
// CHECK:      %[[P:.*]] = ds.aten "aten::_safe_softmax"
// CHECK:      ds.aten "aten::_softmax_backward_data"
// CHECK:      ds.grad @wq
// CHECK-NOT:  flash_attention
module attributes {ds.target_device = "cuda"} {
  ds.param @wq : tensor<2x2x5x4xf32> {module = "", module_class = "M", requires_grad}
  func.func @forward(%k: tensor<2x2x6x4xf32>, %v: tensor<2x2x6x4xf32>) -> tensor<f32> {
    %q = ds.get_param @wq : tensor<2x2x5x4xf32>
    %none = ds.constant unit : !ds.none
    %zero = ds.constant 0.000000e+00 : f64
    %true = ds.constant true
    %false = ds.constant false
    %y = ds.aten "aten::scaled_dot_product_attention"(%q, %k, %v, %none, %zero, %true, %none, %false) : (tensor<2x2x5x4xf32>, tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>, !ds.none, f64, i1, !ds.none, i1) -> tensor<2x2x5x4xf32>
    %s = ds.aten "aten::sum"(%y, %none) : (tensor<2x2x5x4xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}
