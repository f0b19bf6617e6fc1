// RUN: ds-opt %s -split-input-file -ds-autodiff -verify-diagnostics

ds.param @w : tensor<3xf32> {module = "", module_class = "M", requires_grad}
func.func @forward(%x: tensor<3xf32>) -> tensor<f32> {
  %w = ds.get_param @w : tensor<3xf32>
  %one = ds.constant 1 : i64
  %a = ds.aten "aten::add.Tensor"(%x, %w, %one) : (tensor<3xf32>, tensor<3xf32>, i64) -> tensor<3xf32>
  %n = ds.constant unit : !ds.none
  %zero = ds.constant 0 : i64
  // expected-error @+1 {{operator 'aten::diff' has no gradient rule, but a trainable parameter's gradient flows through it}}
  %d = ds.aten "aten::diff"(%a, %one, %zero, %n, %n) : (tensor<3xf32>, i64, i64, !ds.none, !ds.none) -> tensor<2xf32>
  %l = ds.aten "aten::sum"(%d, %n) : (tensor<2xf32>, !ds.none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A forward with no scalar loss still differentiates (the caller gives the
// cotangents), but ds-run alone would not train it: a remark says so.
ds.param @w : tensor<3xf32> {module = "", module_class = "M", requires_grad}
// expected-remark @+1 {{@forward returns no scalar loss that reaches a trainable parameter: ds-run seeds every result with zeros, so only a caller that gives the results' gradients (dsopt, from PyTorch's autograd) trains it}}
func.func @forward(%x: tensor<3xf32>) -> tensor<3xf32> {
  %w = ds.get_param @w : tensor<3xf32>
  %one = ds.constant 1 : i64
  %a = ds.aten "aten::add.Tensor"(%x, %w, %one) : (tensor<3xf32>, tensor<3xf32>, i64) -> tensor<3xf32>
  return %a : tensor<3xf32>
}

// -----

// expected-error @below {{no function @forward to differentiate}}
module {
  func.func @other() {
    return
  }
}

// -----

ds.param @w : tensor<3xf32> {module = "", module_class = "M", requires_grad}
func.func @forward(%x: tensor<3xf32>) -> tensor<f32> {
  %w = ds.get_param @w : tensor<3xf32>
  %p = ds.constant 0.5 : f64
  %t = ds.constant true
  // expected-error @+1 {{gradient of training-mode dropout needs its mask: run -ds-lower-dropout first}}
  %d = ds.aten "aten::dropout"(%w, %p, %t) : (tensor<3xf32>, f64, i1) -> tensor<3xf32>
  %n = ds.constant unit : !ds.none
  %l = ds.aten "aten::sum"(%d, %n) : (tensor<3xf32>, !ds.none) -> tensor<f32>
  return %l : tensor<f32>
}
