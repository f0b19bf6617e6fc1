// RUN: ds-opt %s -split-input-file -ds-lower-dropout -ds-autodiff | FileCheck %s

// The backward of lowered dropout reads the forward's mask; nothing draws
// twice. On the CPU the mask is the forward's noise.
// CHECK-LABEL:  func.func @forward
// CHECK:        %[[NOISE:.*]] = ds.aten "aten::div.Scalar"
// CHECK-NOT:    aten::bernoulli
// CHECK:        ds.backward_begin
// CHECK:        ds.aten "aten::mul.Tensor"(%{{.*}}, %[[NOISE]])
module {
  ds.param @w : tensor<4x8xf32> {module = "", module_class = "M", requires_grad}
  func.func @forward(%x: tensor<4x8xf32>) -> tensor<f32> {
    %p = ds.constant 2.500000e-01 : f64
    %true = ds.constant true
    %none = ds.constant unit : !ds.none
    %w = ds.get_param @w : tensor<4x8xf32>
    %y = ds.aten "aten::mul.Tensor"(%x, %w) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %d = ds.aten "aten::dropout"(%y, %p, %true) {module = "drop", module_class = "torch.nn.modules.dropout.Dropout"} : (tensor<4x8xf32>, f64, i1) -> tensor<4x8xf32>
    %s = ds.aten "aten::sum"(%d, %none) : (tensor<4x8xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// On CUDA it is native_dropout's boolean mask, with the scale 1 / (1 - p).
// CHECK-LABEL:  func.func @forward
// CHECK:        %[[FWD:.*]]:2 = ds.aten "aten::native_dropout"
// CHECK-NOT:    aten::native_dropout"
// CHECK:        ds.backward_begin
// CHECK:        %[[SCALE:.*]] = ds.constant 1.3333333333333333 : f64
// CHECK:        ds.aten "aten::native_dropout_backward"(%{{.*}}, %[[FWD]]#1, %[[SCALE]])
module attributes {ds.target_device = "cuda"} {
  ds.param @w : tensor<4x8xf32> {module = "", module_class = "M", requires_grad}
  func.func @forward(%x: tensor<4x8xf32>) -> tensor<f32> {
    %p = ds.constant 2.500000e-01 : f64
    %true = ds.constant true
    %none = ds.constant unit : !ds.none
    %w = ds.get_param @w : tensor<4x8xf32>
    %y = ds.aten "aten::mul.Tensor"(%x, %w) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %d = ds.aten "aten::dropout"(%y, %p, %true) {module = "drop", module_class = "torch.nn.modules.dropout.Dropout"} : (tensor<4x8xf32>, f64, i1) -> tensor<4x8xf32>
    %s = ds.aten "aten::sum"(%d, %none) : (tensor<4x8xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}


// -----

// Attention with dropout (lower-dropout-attention.mlir): the backward of its
// math path reads the forward's probabilities and noise; nothing draws twice.
// CHECK-LABEL:  func.func @forward
// CHECK:        %[[P:.*]] = ds.aten "aten::_safe_softmax"
// CHECK:        %[[NOISE:.*]] = ds.aten "aten::div.Scalar"
// CHECK-NOT:    aten::bernoulli
// CHECK:        ds.backward_begin
// CHECK:        ds.aten "aten::mul.Tensor"(%{{.*}}, %[[NOISE]])
// CHECK:        ds.aten "aten::_softmax_backward_data"(%{{.*}}, %[[P]],
// CHECK:        ds.grad @w
module {
  ds.param @w : tensor<2x4x8xf32> {module = "", module_class = "M", requires_grad}
  func.func @forward(%x: tensor<2x4x8xf32>) -> tensor<f32> {
    %w = ds.get_param @w : tensor<2x4x8xf32>
    %q = ds.aten "aten::mul.Tensor"(%x, %w) : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %none = ds.constant unit : !ds.none
    %p = ds.constant 1.000000e-01 : f64
    %false = ds.constant false
    %o = ds.aten "aten::scaled_dot_product_attention"(%q, %q, %q, %none, %p, %false, %none, %false) {module = "attn", module_class = "A"} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, !ds.none, f64, i1, !ds.none, i1) -> tensor<2x4x8xf32>
    %s = ds.aten "aten::sum"(%o, %none) : (tensor<2x4x8xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}
