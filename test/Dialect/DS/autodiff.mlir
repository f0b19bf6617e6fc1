// RUN: ds-opt %s -split-input-file -ds-autodiff='grad-scale=0.5' | FileCheck %s

// A linear layer with ReLU and an MSE loss: the backward follows the forward
// in reverse after ds.backward_begin, seeded with the loss's cotangent times
// grad-scale, and ends with one ds.grad per parameter read.
ds.param @w : tensor<4x3xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @b : tensor<4xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
// CHECK-LABEL: func.func @forward
func.func @forward(%x: tensor<2x3xf32>, %y: tensor<2x4xf32>) -> tensor<f32> {
  %w = ds.get_param @w : tensor<4x3xf32>
  %b = ds.get_param @b : tensor<4xf32>
  %h = ds.aten "aten::linear"(%x, %w, %b) {module = "fc"} : (tensor<2x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %r = ds.aten "aten::relu"(%h) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %mean = ds.constant 1 : i64
  %l = ds.aten "aten::mse_loss"(%r, %y, %mean) : (tensor<2x4xf32>, tensor<2x4xf32>, i64) -> tensor<f32>
  // CHECK: %[[L:.*]] = ds.aten "aten::mse_loss"
  // CHECK-NEXT: ds.backward_begin
  // CHECK-NEXT: %[[COT:.*]] = ds.cotangent 0 : tensor<f32>
  // CHECK-NEXT: %[[SCALE:.*]] = ds.constant dense<5.000000e-01> : tensor<f32> {ds.backward_seed}
  // CHECK-NEXT: %[[SEED:.*]] = ds.aten "aten::mul.Tensor"(%[[COT]], %[[SCALE]])
  // CHECK-NEXT: %[[GR:.*]] = ds.aten "aten::mse_loss_backward"(%[[SEED]],
  // CHECK: %[[GH:.*]] = ds.aten "aten::threshold_backward"(%[[GR]],
  // CHECK: ds.aten "aten::mm"
  // CHECK-SAME: module = "fc"
  // CHECK: %[[GB:.*]] = ds.aten "aten::sum_to_size"(%[[GH]],
  // CHECK: ds.grad @b, %[[GB]] : tensor<4xf32>
  // CHECK: ds.grad @w, %{{.*}} : tensor<4x3xf32>
  // CHECK-NEXT: return %[[L]] : tensor<f32>
  return %l : tensor<f32>
}

// -----

// No gradient for parameters without requires_grad or of a frozen engine,
// and none through detach; no backward work is spent on them.
ds.engine @teacher {module = "teacher", frozen}
ds.param @frozen_w : tensor<3xf32> {module = "", module_class = "M"}
ds.param @teacher.w : tensor<3xf32> {module = "teacher", module_class = "T", requires_grad, engine = @teacher}
ds.param @w : tensor<3xf32> {module = "", module_class = "M", requires_grad}
// CHECK-LABEL: func.func @forward
// CHECK-NOT: ds.grad @frozen_w
// CHECK-NOT: ds.grad @teacher.w
// CHECK-NOT: ds.grad @w
// CHECK: return
func.func @forward(%x: tensor<3xf32>) -> tensor<f32> {
  %f = ds.get_param @frozen_w : tensor<3xf32>
  %t = ds.get_param @teacher.w : tensor<3xf32>
  %w = ds.get_param @w : tensor<3xf32>
  %d = ds.aten "aten::detach"(%w) : (tensor<3xf32>) -> tensor<3xf32>
  %one = ds.constant 1 : i64
  %a = ds.aten "aten::add.Tensor"(%x, %f, %one) : (tensor<3xf32>, tensor<3xf32>, i64) -> tensor<3xf32>
  %b = ds.aten "aten::add.Tensor"(%a, %t, %one) : (tensor<3xf32>, tensor<3xf32>, i64) -> tensor<3xf32>
  %c = ds.aten "aten::mul.Tensor"(%b, %d) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %n = ds.constant unit : !ds.none
  %s = ds.aten "aten::sum"(%c, %n) : (tensor<3xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// A trainable engine's output flowing through a frozen engine: the frozen
// parameter gets no gradient, but the activation gradient crosses the
// frozen engine (reading its parameter) to reach the student.
ds.engine @student {module = "student"}
ds.engine @critic {module = "critic", frozen}
ds.param @student.w : tensor<3xf32> {module = "student", module_class = "S", requires_grad, engine = @student}
ds.param @critic.w : tensor<3xf32> {module = "critic", module_class = "C", requires_grad, engine = @critic}
// CHECK-LABEL: func.func @forward
// CHECK:       %[[C:.*]] = ds.get_param @critic.w
// CHECK:       ds.backward_begin
// CHECK:       %[[SEED:.*]] = ds.aten "aten::expand"
// CHECK-NEXT:  %[[THROUGH:.*]] = ds.aten "aten::mul.Tensor"(%[[SEED]], %[[C]]) {module = "critic"}
// CHECK-NEXT:  %[[G:.*]] = ds.aten "aten::mul.Tensor"(%[[THROUGH]], %arg0) {module = "student"}
// CHECK-NEXT:  ds.grad @student.w, %[[G]]
// CHECK-NEXT:  return
func.func @forward(%x: tensor<3xf32>) -> tensor<f32> {
  %s = ds.get_param @student.w : tensor<3xf32>
  %h = ds.aten "aten::mul.Tensor"(%x, %s) {module = "student"} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %c = ds.get_param @critic.w : tensor<3xf32>
  %y = ds.aten "aten::mul.Tensor"(%h, %c) {module = "critic"} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %n = ds.constant unit : !ds.none
  %l = ds.aten "aten::sum"(%y, %n) : (tensor<3xf32>, !ds.none) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Broadcasting: a [4, 1] parameter added to a [4, 8] input gets its
// gradient summed back to [4, 1].
ds.param @bias : tensor<4x1xf32> {module = "", module_class = "M", requires_grad}
// CHECK-LABEL: func.func @forward
// CHECK: %[[G:.*]] = ds.aten "aten::sum_to_size"(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, !ds.list<i64>) -> tensor<4x1xf32>
// CHECK: ds.grad @bias, %[[G]] : tensor<4x1xf32>
func.func @forward(%x: tensor<4x8xf32>) -> tensor<f32> {
  %p = ds.get_param @bias : tensor<4x1xf32>
  %one = ds.constant 1 : i64
  %a = ds.aten "aten::add.Tensor"(%x, %p, %one) : (tensor<4x8xf32>, tensor<4x1xf32>, i64) -> tensor<4x8xf32>
  %n = ds.constant unit : !ds.none
  %s = ds.aten "aten::sum"(%a, %n) : (tensor<4x8xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// A data-dependent branch is differentiated by a branch on the same
// condition that recomputes its forward; the parameter read inside gets its
// gradient inside, the outer input's gradient leaves as a result (in the
// else branch, which passes %h through, it is the incoming gradient).
ds.param @expert : tensor<4x4xf32> {module = "experts.0", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @proj : tensor<4x4xf32> {module = "proj", module_class = "torch.nn.modules.linear.Linear", requires_grad}
// CHECK-LABEL: func.func @forward
// CHECK: ds.backward_begin
// CHECK: %[[G:.*]] = ds.aten "aten::expand"
// CHECK: %[[BACK:.*]] = ds.if %arg1 -> (tensor<2x4xf32>) {
// CHECK:   ds.get_param @expert
// CHECK:   ds.aten "aten::linear"
// CHECK:   %[[GX:.*]] = ds.aten "aten::matmul"(%[[G]],
// CHECK:   ds.grad @expert
// CHECK:   ds.yield %[[GX]]
// CHECK: } else {
// CHECK-NEXT:   ds.yield %[[G]] : tensor<2x4xf32>
// CHECK-NEXT: }
// CHECK: ds.aten "aten::reshape"(%[[BACK]],
// CHECK: ds.grad @proj
func.func @forward(%x: tensor<2x4xf32>, %c: i1) -> tensor<f32> {
  %p = ds.get_param @proj : tensor<4x4xf32>
  %n = ds.constant unit : !ds.none
  %h = ds.aten "aten::linear"(%x, %p, %n) : (tensor<2x4xf32>, tensor<4x4xf32>, !ds.none) -> tensor<2x4xf32>
  %r = ds.if %c -> (tensor<2x4xf32>) {
    %e = ds.get_param @expert : tensor<4x4xf32>
    %y = ds.aten "aten::linear"(%h, %e, %n) : (tensor<2x4xf32>, tensor<4x4xf32>, !ds.none) -> tensor<2x4xf32>
    ds.yield %y : tensor<2x4xf32>
  } else {
    ds.yield %h : tensor<2x4xf32>
  }
  %s = ds.aten "aten::sum"(%r, %n) : (tensor<2x4xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Outputs of any kind: a loss and the logits, each seeded with its own
// cotangent (the vector-Jacobian product the caller asks for); the integer
// result and the result no parameter reaches get none.
ds.param @w : tensor<4x3xf32> {module = "fc", module_class = "L", requires_grad}
// CHECK-LABEL: func.func @forward
func.func @forward(%x: tensor<2x3xf32>, %y: tensor<2xi64>) -> (tensor<f32>, tensor<2x4xf32>, tensor<2xi64>, tensor<2x3xf32>) {
  %w = ds.get_param @w : tensor<4x3xf32>
  %n = ds.constant unit : !ds.none
  %logits = ds.aten "aten::linear"(%x, %w, %n) : (tensor<2x3xf32>, tensor<4x3xf32>, !ds.none) -> tensor<2x4xf32>
  %mean = ds.constant 1 : i64
  %ignore = ds.constant -100 : i64
  %smooth = ds.constant 0.000000e+00 : f64
  %l = ds.aten "aten::cross_entropy_loss"(%logits, %y, %n, %mean, %ignore, %smooth) : (tensor<2x4xf32>, tensor<2xi64>, !ds.none, i64, i64, f64) -> tensor<f32>
  %keep = ds.constant false
  %dim = ds.constant 1 : i64
  %pick = ds.aten "aten::argmax"(%logits, %dim, %keep) : (tensor<2x4xf32>, i64, i1) -> tensor<2xi64>
  // CHECK: ds.backward_begin
  // CHECK-NEXT: %[[C0:.*]] = ds.cotangent 0 : tensor<f32>
  // CHECK-NEXT: %[[S0:.*]] = ds.constant dense<5.000000e-01> : tensor<f32> {ds.backward_seed}
  // CHECK-NEXT: %[[G0:.*]] = ds.aten "aten::mul.Tensor"(%[[C0]], %[[S0]])
  // CHECK-NEXT: %[[C1:.*]] = ds.cotangent 1 : tensor<2x4xf32>
  // CHECK-NEXT: %[[S1:.*]] = ds.constant dense<5.000000e-01> : tensor<f32> {ds.backward_seed}
  // CHECK-NEXT: %[[G1:.*]] = ds.aten "aten::mul.Tensor"(%[[C1]], %[[S1]])
  // CHECK-NOT: ds.cotangent
  // CHECK: ds.aten "aten::add.Tensor"(%[[G1]],
  // CHECK: ds.grad @w
  return %l, %logits, %pick, %x : tensor<f32>, tensor<2x4xf32>, tensor<2xi64>, tensor<2x3xf32>
}
