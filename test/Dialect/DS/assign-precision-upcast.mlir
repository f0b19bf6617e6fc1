// RUN: ds-opt %s -split-input-file -ds-assign-precision -canonicalize | FileCheck %s
// RUN: ds-opt %s -split-input-file -ds-assign-precision -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: ds-opt %s -split-input-file -ds-assign-precision -ds-autodiff -canonicalize -cse | FileCheck %s --check-prefix=GRAD

// Explicit upcasts in a native bf16 engine: what the model's code makes wider
// on purpose stays wider, as in DeepSpeed (where the module is bf16 and the
// code runs as written). `cross_entropy(fc(x).float(), y)`: the logits are
// upcast and the loss is computed in f32, not rounded back to bf16.
// REMARK: remark: bf16: 2 parameters and 0 buffers stored in bf16; 1 op in bf16, 0 ops computed in f32 and rounded to bf16; 2 ops kept wider as the model's code asks (aten::to.dtype, aten::cross_entropy_loss)
// CHECK-LABEL: func.func @forward(%arg0: tensor<2x8xf32>, %arg1: tensor<2xi64>) -> tensor<f32>
// CHECK:      %[[H:.*]] = ds.aten "aten::linear"({{.*}}) {{.*}} -> tensor<2x4xbf16>
// CHECK-NEXT: %[[F:.*]] = ds.aten "aten::to.dtype"(%[[H]], {{.*}}) {{.*}} : (tensor<2x4xbf16>, {{.*}}) -> tensor<2x4xf32>
// CHECK-NEXT: %[[L:.*]] = ds.aten "aten::cross_entropy_loss"(%[[F]], %arg1, {{.*}}) {{.*}} : (tensor<2x4xf32>, tensor<2xi64>, {{.*}}) -> tensor<f32>
// CHECK-NEXT: return %[[L]] : tensor<f32>
// The backward: the loss's gradient in f32, cast back to bf16 by the
// upcast's own rule.
// GRAD-LABEL: func.func @forward(
// GRAD:      ds.backward_begin
// GRAD:      %[[G:.*]] = ds.aten "aten::_log_softmax_backward_data"({{.*}} -> tensor<2x4xf32>
// GRAD-NEXT: ds.aten "aten::to.dtype"(%[[G]], {{.*}} : (tensor<2x4xf32>, {{.*}}) -> tensor<2x4xbf16>
// GRAD:      ds.grad @fc.weight, %{{.*}} : tensor<4x8xbf16>
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = bf16>>}
ds.param @fc.weight : tensor<4x8xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @fc.bias : tensor<4xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}

func.func @forward(%x: tensor<2x8xf32>, %y: tensor<2xi64>) -> tensor<f32> {
  %w = ds.get_param @fc.weight : tensor<4x8xf32>
  %b = ds.get_param @fc.bias : tensor<4xf32>
  %none = ds.constant unit : !ds.none
  %false = ds.constant false
  %f32 = ds.constant 6 : i64
  %mean = ds.constant 1 : i64
  %ignore = ds.constant -100 : i64
  %smooth = ds.constant 0.000000e+00 : f64
  %h = ds.aten "aten::linear"(%x, %w, %b) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %f = ds.aten "aten::to.dtype"(%h, %f32, %false, %false, %none) {module_class = "Net"} : (tensor<2x4xf32>, i64, i1, i1, !ds.none) -> tensor<2x4xf32>
  %loss = ds.aten "aten::cross_entropy_loss"(%f, %y, %none, %mean, %ignore, %smooth) {module_class = "Net"} : (tensor<2x4xf32>, tensor<2xi64>, !ds.none, i64, i64, f64) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A router as Mixtral writes it: softmax(logits, dim, dtype=torch.float) runs
// in f32 on the bf16 logits; what follows from it stays f32 (topk's values),
// and `.to(hidden.dtype)`, which the f32 capture recorded as a cast to f32
// of a value that is already f32, restores the engine's dtype before the
// weights meet the bf16 activations again.
// REMARK: remark: bf16: 1 parameter and 0 buffers stored in bf16; 4 ops in bf16, 0 ops computed in f32 and rounded to bf16; 2 ops kept wider as the model's code asks (aten::softmax.int, aten::topk)
// CHECK-LABEL: func.func @forward(%arg0: tensor<4x8xf32>) -> tensor<bf16>
// CHECK-DAG:  %[[BF16:.*]] = ds.constant 15 : i64
// CHECK:      %[[R:.*]] = ds.aten "aten::linear"({{.*}}) {{.*}} -> tensor<4x2xbf16>
// CHECK-NEXT: %[[P:.*]] = ds.aten "aten::softmax.int"(%[[R]], {{.*}}) {{.*}} : (tensor<4x2xbf16>, i64, i64) -> tensor<4x2xf32>
// CHECK-NEXT: %[[T:.*]]:2 = ds.aten "aten::topk"(%[[P]], {{.*}}) {{.*}} -> (tensor<4x1xf32>, tensor<4x1xi64>)
// CHECK-NEXT: %[[W:.*]] = ds.aten "aten::to.dtype"(%[[T]]#0, %[[BF16]], {{.*}}) {{.*}} : (tensor<4x1xf32>, {{.*}}) -> tensor<4x1xbf16>
// CHECK-NEXT: %[[O:.*]] = ds.aten "aten::mul.Tensor"(%[[R]], %[[W]]) {{.*}} : (tensor<4x2xbf16>, tensor<4x1xbf16>) -> tensor<4x2xbf16>
// The softmax's backward runs in its result's dtype and is cast back to the
// logits' (softmax with dtype= is a cast, then softmax).
// GRAD-LABEL: func.func @forward(
// GRAD:      ds.backward_begin
// GRAD:      %[[SG:.*]] = ds.aten "aten::_softmax_backward_data"({{.*}}) {{.*}} : (tensor<4x2xf32>, tensor<4x2xf32>, i64, i64) -> tensor<4x2xf32>
// GRAD-NEXT: ds.aten "aten::to.dtype"(%[[SG]], {{.*}} : (tensor<4x2xf32>, {{.*}}) -> tensor<4x2xbf16>
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = bf16>>}
ds.param @router.weight : tensor<2x8xf32> {engine = @model, module = "router", module_class = "torch.nn.modules.linear.Linear", requires_grad}

func.func @forward(%x: tensor<4x8xf32>) -> tensor<f32> {
  %w = ds.get_param @router.weight : tensor<2x8xf32>
  %none = ds.constant unit : !ds.none
  %false = ds.constant false
  %true = ds.constant true
  %f32 = ds.constant 6 : i64
  %one = ds.constant 1 : i64
  %r = ds.aten "aten::linear"(%x, %w, %none) {module = "router", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<2x8xf32>, !ds.none) -> tensor<4x2xf32>
  %p = ds.aten "aten::softmax.int"(%r, %one, %f32) {module_class = "Moe"} : (tensor<4x2xf32>, i64, i64) -> tensor<4x2xf32>
  %t:2 = ds.aten "aten::topk"(%p, %one, %one, %true, %true) {module_class = "Moe"} : (tensor<4x2xf32>, i64, i64, i1, i1) -> (tensor<4x1xf32>, tensor<4x1xi64>)
  %wt = ds.aten "aten::to.dtype"(%t#0, %f32, %false, %false, %none) {module_class = "Moe"} : (tensor<4x1xf32>, i64, i1, i1, !ds.none) -> tensor<4x1xf32>
  %o = ds.aten "aten::mul.Tensor"(%r, %wt) {module_class = "Moe"} : (tensor<4x2xf32>, tensor<4x1xf32>) -> tensor<4x2xf32>
  %s = ds.aten "aten::sum"(%o, %none) {module_class = "Moe"} : (tensor<4x2xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// A buffer update computed from an upcast value (a running statistic updated
// in f32) is rounded to the buffer's bf16 once, by the ds.set_buffer.
// CHECK-LABEL: func.func @forward(%arg0: tensor<4xf32>) -> tensor<bf16>
// CHECK:      %[[R:.*]] = ds.get_buffer @running : tensor<4xbf16>
// CHECK-NEXT: %[[W:.*]] = ds.aten "aten::to.dtype"(%[[R]], {{.*}}) {{.*}} -> tensor<4xf32>
// CHECK:      %[[L:.*]] = ds.aten "aten::lerp.Scalar"(%[[W]], {{.*}}) {{.*}} -> tensor<4xf32>
// CHECK-NEXT: %[[B:.*]] = ds.aten "aten::to.dtype"(%[[L]], {{.*}}) {{.*}} : (tensor<4xf32>, {{.*}}) -> tensor<4xbf16>
// CHECK-NEXT: ds.set_buffer @running, %[[B]] : tensor<4xbf16>
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = bf16>>}
ds.param @w : tensor<4xf32> {engine = @model, module = "", module_class = "Net", requires_grad}
ds.buffer @running : tensor<4xf32> {engine = @model, module = "", module_class = "Net"}

func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
  %none = ds.constant unit : !ds.none
  %false = ds.constant false
  %f32 = ds.constant 6 : i64
  %m = ds.constant 1.000000e-01 : f64
  %w = ds.get_param @w : tensor<4xf32>
  %r = ds.get_buffer @running : tensor<4xf32>
  %rw = ds.aten "aten::to.dtype"(%r, %f32, %false, %false, %none) {module_class = "Net"} : (tensor<4xf32>, i64, i1, i1, !ds.none) -> tensor<4xf32>
  %xw = ds.aten "aten::mul.Tensor"(%x, %w) {module_class = "Net"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %l = ds.aten "aten::lerp.Scalar"(%rw, %xw, %m) {module_class = "Net"} : (tensor<4xf32>, tensor<4xf32>, f64) -> tensor<4xf32>
  ds.set_buffer @running, %l : tensor<4xf32>
  %s = ds.aten "aten::sum"(%xw, %none) {module_class = "Net"} : (tensor<4xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}
