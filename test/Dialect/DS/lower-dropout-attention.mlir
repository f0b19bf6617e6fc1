// RUN: ds-opt %s -split-input-file -ds-lower-dropout | FileCheck %s

// scaled_dot_product_attention with dropout_p 0.25 (a transformers model's
// default attention dropout) is ATen's math path, which LibTorch runs for it
// on the CPU: q and k^T scaled by sqrt(scale) each (scale 1/sqrt(8)), the
// causal mask, _safe_softmax, then the CPU's dropout of the probabilities
// (bernoulli(p, 0.75) / 0.75) and the product with v. Every op keeps the
// attention's module (lower-dropout-autodiff.mlir differentiates them).
// CHECK-LABEL: func.func @attention_dropout
// CHECK-NOT:   aten::scaled_dot_product_attention
// CHECK:       %[[QF:.*]] = ds.constant 0.59460355750136051 : f64
// CHECK:       %[[QS:.*]] = ds.aten "aten::mul.Scalar"(%{{.*}}, %[[QF]]) {module = "attn", module_class = "Attention"}
// CHECK:       %[[KT:.*]] = ds.aten "aten::transpose.int"(%arg1,
// CHECK:       %[[KTS:.*]] = ds.aten "aten::mul.Scalar"(%[[KT]],
// CHECK:       %[[S:.*]] = ds.aten "aten::matmul"(%[[QS]], %[[KTS]]) {{.*}} -> tensor<2x2x4x4xf32>
// CHECK:       ds.aten "aten::triu"
// CHECK:       %[[CAUSAL:.*]] = ds.aten "aten::masked_fill.Scalar"(%[[S]],
// CHECK:       %[[P:.*]] = ds.aten "aten::_safe_softmax"(%[[CAUSAL]],
// CHECK:       %[[KEEP:.*]] = ds.constant 7.500000e-01 : f64
// CHECK:       %[[BITS:.*]] = ds.aten "aten::bernoulli.p"(%[[P]], %[[KEEP]],
// CHECK-NEXT:  %[[NOISE:.*]] = ds.aten "aten::div.Scalar"(%[[BITS]], %[[KEEP]])
// CHECK-NEXT:  %[[DROPPED:.*]] = ds.aten "aten::mul.Tensor"(%[[P]], %[[NOISE]])
// CHECK-NEXT:  %[[OUT:.*]] = ds.aten "aten::matmul"(%[[DROPPED]], %arg2) {module = "attn", module_class = "Attention"} {{.*}} -> tensor<2x2x4x8xf32>
// CHECK-NEXT:  ds.aten "aten::mul.Tensor"(%[[OUT]],
module {
  ds.param @w : tensor<2x2x4x8xf32> {module = "", module_class = "M", requires_grad}
  func.func @attention_dropout(%q0: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<f32> {
    %w = ds.get_param @w : tensor<2x2x4x8xf32>
    %q = ds.aten "aten::mul.Tensor"(%q0, %w) : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
    %none = ds.constant unit : !ds.none
    %p = ds.constant 2.500000e-01 : f64
    %true = ds.constant true
    %false = ds.constant false
    %o = ds.aten "aten::scaled_dot_product_attention"(%q, %k, %v, %none, %p, %true, %none, %false) {module = "attn", module_class = "Attention"} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, !ds.none, f64, i1, !ds.none, i1) -> tensor<2x2x4x8xf32>
    %y = ds.aten "aten::mul.Tensor"(%o, %q) : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
    %s = ds.aten "aten::sum"(%y, %none) : (tensor<2x2x4x8xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Without dropout (p = 0) the attention stays one op (its gradient rule takes
// LibTorch's flash or math backend); on CUDA the probabilities' dropout is
// the fused native_dropout, as CUDA's at::dropout draws it.
// CHECK-LABEL: func.func @no_dropout
// CHECK:       ds.aten "aten::scaled_dot_product_attention"
// CHECK-LABEL: func.func @cuda
// CHECK:       ds.aten "aten::_safe_softmax"
// CHECK:       ds.aten "aten::native_dropout"
// CHECK-NOT:   aten::bernoulli
module attributes {ds.target_device = "cuda"} {
  func.func @no_dropout(%q: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %none = ds.constant unit : !ds.none
    %p = ds.constant 0.000000e+00 : f64
    %false = ds.constant false
    %o = ds.aten "aten::scaled_dot_product_attention"(%q, %q, %q, %none, %p, %false, %none, %false) : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, !ds.none, f64, i1, !ds.none, i1) -> tensor<2x4x8xf32>
    return %o : tensor<2x4x8xf32>
  }
  func.func @cuda(%q: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %none = ds.constant unit : !ds.none
    %p = ds.constant 1.000000e-01 : f64
    %false = ds.constant false
    %o = ds.aten "aten::scaled_dot_product_attention"(%q, %q, %q, %none, %p, %false, %none, %false) : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, !ds.none, f64, i1, !ds.none, i1) -> tensor<2x4x8xf32>
    return %o : tensor<2x4x8xf32>
  }
}
