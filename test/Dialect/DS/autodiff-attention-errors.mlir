// RUN: ds-opt %s -split-input-file -ds-autodiff -verify-diagnostics

// Dropout inside scaled_dot_product_attention draws its mask in the kernel,
// where the backward cannot see it: refused, naming the operator.
ds.param @wq : tensor<2x2x5x4xf32> {module = "", module_class = "M", requires_grad}
func.func @forward(%k: tensor<2x2x5x4xf32>, %v: tensor<2x2x5x4xf32>) -> tensor<f32> {
  %q = ds.get_param @wq : tensor<2x2x5x4xf32>
  %none = ds.constant unit : !ds.none
  %p = ds.constant 1.000000e-01 : f64
  %true = ds.constant true
  %false = ds.constant false
  // expected-error @+1 {{gradient of scaled_dot_product_attention with dropout_p != 0 needs -ds-lower-dropout first (the kernel draws its mask internally; that pass writes the attention with its dropout as ATen's math path computes it)}}
  %y = ds.aten "aten::scaled_dot_product_attention"(%q, %k, %v, %none, %p, %true, %none, %false) : (tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>, !ds.none, f64, i1, !ds.none, i1) -> tensor<2x2x5x4xf32>
  %s = ds.aten "aten::sum"(%y, %none) : (tensor<2x2x5x4xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// rms_norm over a dim whose size only the run time knows.
ds.param @w : tensor<8xf32> {module = "", module_class = "M", requires_grad}
func.func @forward(%x: tensor<3x?xf32>) -> tensor<f32> {
  %w = ds.get_param @w : tensor<8xf32>
  %eight = ds.constant 8 : i64
  %shape = ds.list_construct %eight : (i64) -> !ds.list<i64>
  %none = ds.constant unit : !ds.none
  %xw = ds.aten "aten::mul.Tensor"(%x, %w) : (tensor<3x?xf32>, tensor<8xf32>) -> tensor<3x?xf32>
  // expected-error @+1 {{gradient of rms_norm over a dynamic dim}}
  %y = ds.aten "aten::rms_norm"(%xw, %shape, %none, %none) : (tensor<3x?xf32>, !ds.list<i64>, !ds.none, !ds.none) -> tensor<3x?xf32>
  %s = ds.aten "aten::sum"(%y, %none) : (tensor<3x?xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}
