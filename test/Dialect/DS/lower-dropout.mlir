// RUN: ds-opt %s -split-input-file -ds-lower-dropout | FileCheck %s

// On the CPU (no ds.target_device), training-mode dropout is ATen's CPU
// dropout: noise = bernoulli(x, 1 - p) / (1 - p), out = x * noise, tagged
// with the dropout's module.
// CHECK-LABEL: func.func @cpu_dropout
// CHECK:       %[[Y:.*]] = ds.aten "aten::mul.Tensor"(%arg0,
// CHECK-NEXT:  %[[KEEP:.*]] = ds.constant 7.500000e-01 : f64
// CHECK-NEXT:  %[[NONE:.*]] = ds.constant unit : !ds.none
// CHECK-NEXT:  %[[BITS:.*]] = ds.aten "aten::bernoulli.p"(%[[Y]], %[[KEEP]], %[[NONE]]) {module = "drop", module_class = "torch.nn.modules.dropout.Dropout"} : (tensor<4x8xf32>, f64, !ds.none) -> tensor<4x8xf32>
// CHECK-NEXT:  %[[NOISE:.*]] = ds.aten "aten::div.Scalar"(%[[BITS]], %[[KEEP]]) {module = "drop"
// CHECK-NEXT:  %[[OUT:.*]] = ds.aten "aten::mul.Tensor"(%[[Y]], %[[NOISE]]) {module = "drop"
// CHECK-NEXT:  ds.aten "aten::sum"(%[[OUT]],
module {
  ds.param @w : tensor<4x8xf32> {module = "", module_class = "M", requires_grad}
  func.func @cpu_dropout(%x: tensor<4x8xf32>) -> tensor<f32> {
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

// A core-ATen program's native_dropout whose mask nothing reads is the same
// CPU dropout; one whose mask is read, eval-mode dropout, p = 0 and a p not
// known at compile time stay as they are.
// CHECK-LABEL: func.func @cpu_other_forms
// CHECK:       %[[HALF:.*]] = ds.constant 5.000000e-01 : f64
// CHECK-NEXT:  %[[ZERO:.*]] = ds.constant 0.000000e+00 : f64
// CHECK-NEXT:  %[[TRUE:.*]] = ds.constant true
// CHECK-NEXT:  %[[FALSE:.*]] = ds.constant false
// CHECK:       ds.aten "aten::bernoulli.p"(%arg0,
// CHECK:       ds.aten "aten::mul.Tensor"(%arg0,
// CHECK-NEXT:  %[[KEPT:.*]]:2 = ds.aten "aten::native_dropout"(%arg0, %[[HALF]], %[[TRUE]])
// CHECK-NEXT:  ds.aten "aten::dropout"(%arg0, %[[HALF]], %[[FALSE]])
// CHECK-NEXT:  ds.aten "aten::dropout"(%arg0, %[[ZERO]], %[[TRUE]])
// CHECK-NEXT:  ds.aten "aten::dropout"(%arg0, %arg1, %[[TRUE]])
// CHECK-NEXT:  return {{.*}}, %[[KEPT]]#1,
module {
  func.func @cpu_other_forms(%x: tensor<4x8xf32>, %q: f64) -> (tensor<4x8xf32>, tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
    %p = ds.constant 5.000000e-01 : f64
    %zero = ds.constant 0.000000e+00 : f64
    %true = ds.constant true
    %false = ds.constant false
    %a:2 = ds.aten "aten::native_dropout"(%x, %p, %true) : (tensor<4x8xf32>, f64, i1) -> (tensor<4x8xf32>, tensor<4x8xi1>)
    %b:2 = ds.aten "aten::native_dropout"(%x, %p, %true) : (tensor<4x8xf32>, f64, i1) -> (tensor<4x8xf32>, tensor<4x8xi1>)
    %c = ds.aten "aten::dropout"(%x, %p, %false) : (tensor<4x8xf32>, f64, i1) -> tensor<4x8xf32>
    %d = ds.aten "aten::dropout"(%x, %zero, %true) : (tensor<4x8xf32>, f64, i1) -> tensor<4x8xf32>
    %e = ds.aten "aten::dropout"(%x, %q, %true) : (tensor<4x8xf32>, f64, i1) -> tensor<4x8xf32>
    return %a#0, %b#1, %c, %d, %e : tensor<4x8xf32>, tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  }
}

// -----

// On CUDA, at::dropout calls the fused kernel: native_dropout, whose boolean
// mask the backward reads (native_dropout_backward, scale 1 / (1 - p)).
// CHECK-LABEL: func.func @cuda_dropout
// CHECK:       %[[P:.*]] = ds.constant 2.500000e-01 : f64
// CHECK:       %[[OUT:.*]]:2 = ds.aten "aten::native_dropout"(%{{.*}}, %[[P]], %{{.*}}) {module = "drop", module_class = "torch.nn.modules.dropout.Dropout"} : (tensor<4x8xf32>, f64, i1) -> (tensor<4x8xf32>, tensor<4x8xi1>)
// CHECK-NEXT:  ds.aten "aten::sum"(%[[OUT]]#0,
// CHECK-NOT:   aten::bernoulli
module attributes {ds.target_device = "cuda"} {
  ds.param @w : tensor<4x8xf32> {module = "", module_class = "M", requires_grad}
  func.func @cuda_dropout(%x: tensor<4x8xf32>) -> tensor<f32> {
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
