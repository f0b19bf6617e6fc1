// RUN: ds-opt %s -ds-assign-precision -ds-autodiff -canonicalize -cse | FileCheck %s

// The backward -ds-autodiff derives from a native fp16 forward runs in f16
// as well (LibTorch 2.15 has Half CPU kernels for every backward kernel the
// rules call): the seed has the loss's type, the only casts are the
// forward's two inputs, and the parameters' gradients are f16.
// CHECK-LABEL: func.func @forward(%arg0: tensor<2x8xf32>, %arg1: tensor<8xf32>) -> tensor<f16>
// CHECK:      %[[SEED:.*]] = ds.constant dense<1.000000e+00> : tensor<f16> {ds.backward_seed}
// CHECK-COUNT-2: "aten::to.dtype"
// CHECK-NOT:  "aten::to.dtype"
// CHECK:      ds.backward_begin
// CHECK-NEXT: %[[C:.*]] = ds.cotangent 0 : tensor<f16>
// CHECK-NEXT: %[[SEEDED:.*]] = ds.aten "aten::mul.Tensor"(%[[C]], %[[SEED]]) : (tensor<f16>, tensor<f16>) -> tensor<f16>
// CHECK-NEXT: %[[G:.*]] = ds.aten "aten::mse_loss_backward"(%[[SEEDED]], {{.*}} : (tensor<f16>, tensor<8xf16>, tensor<8xf16>, i64) -> tensor<8xf16>
// CHECK-NOT:  "aten::to.dtype"
// CHECK:      ds.aten "aten::gelu_backward"({{.*}} : (tensor<2x4xf16>, tensor<2x4xf16>, !ds.str) -> tensor<2x4xf16>
// CHECK-NOT:  "aten::to.dtype"
// CHECK:      ds.aten "aten::mm"({{.*}} : (tensor<4x2xf16>, tensor<2x8xf16>) -> tensor<4x8xf16>
// CHECK-NOT:  "aten::to.dtype"
// CHECK:      ds.grad @fc.bias, %{{.*}} : tensor<4xf16>
// CHECK-NEXT: ds.grad @fc.weight, %{{.*}} : tensor<4x8xf16>
// CHECK-NEXT: return
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = fp16, loss_scaler = <kind = dynamic>>>}
ds.param @fc.weight : tensor<4x8xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @fc.bias : tensor<4xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}

func.func @forward(%x: tensor<2x8xf32>, %y: tensor<8xf32>) -> tensor<f32> {
  %one = ds.constant 1 : i64
  %w = ds.get_param @fc.weight : tensor<4x8xf32>
  %b = ds.get_param @fc.bias : tensor<4xf32>
  %h = ds.aten "aten::linear"(%x, %w, %b) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %approx = ds.constant "none" : !ds.str
  %g = ds.aten "aten::gelu"(%h, %approx) {module = "act", module_class = "torch.nn.modules.activation.GELU"} : (tensor<2x4xf32>, !ds.str) -> tensor<2x4xf32>
  %m8 = ds.constant 8 : i64
  %shape = ds.list_construct %m8 : (i64) -> !ds.list<i64>
  %v = ds.aten "aten::view"(%g, %shape) {module_class = "Net"} : (tensor<2x4xf32>, !ds.list<i64>) -> tensor<8xf32>
  %loss = ds.aten "aten::mse_loss"(%v, %y, %one) {module_class = "Net"} : (tensor<8xf32>, tensor<8xf32>, i64) -> tensor<f32>
  return %loss : tensor<f32>
}
