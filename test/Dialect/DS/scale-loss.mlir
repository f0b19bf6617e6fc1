// RUN: ds-opt %s -split-input-file -ds-autodiff=grad-scale=0.5 -ds-scale-loss | FileCheck %s
// RUN: ds-opt %s -split-input-file -ds-autodiff=grad-scale=0.5 -ds-scale-loss -canonicalize -cse -ds-lower-optimizer -ds-zero-partition -ds-engine-backward -ds-schedule-collectives -ds-verify-collectives | FileCheck %s --check-prefix=PIPE

// -ds-scale-loss: an fp16 (or fp16 autocast) engine's loss scale multiplies the backward's
// seed (1 / GAS = 0.5 here) right after ds.backward_begin, in f32, cast
// back to the loss's dtype (f16: the parameters of this engine are typed
// f16 by hand). Every gradient flows from the scaled seed.
// CHECK-LABEL: func.func @forward(
// CHECK:         ds.backward_begin
// CHECK-NEXT:    %[[SCALE:.*]] = ds.loss_scale @model : tensor<f32>
// CHECK-NEXT:    %[[COT:.*]] = ds.cotangent 0 : tensor<f16>
// CHECK-NEXT:    %[[SEED:.*]] = ds.constant dense<5.000000e-01> : tensor<f16> {ds.backward_seed}
// CHECK-NEXT:    %[[F32:.*]] = ds.constant 6 : i64
// CHECK-NEXT:    %[[NO:.*]] = ds.constant false
// CHECK-NEXT:    %[[NONE:.*]] = ds.constant unit : !ds.none
// CHECK-NEXT:    %[[WIDE:.*]] = ds.aten "aten::to.dtype"(%[[SEED]], %[[F32]], %[[NO]], %[[NO]], %[[NONE]]) : (tensor<f16>, i64, i1, i1, !ds.none) -> tensor<f32>
// CHECK-NEXT:    %[[PRODUCT:.*]] = ds.aten "aten::mul.Tensor"(%[[WIDE]], %[[SCALE]]) : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:    %[[F16:.*]] = ds.constant 5 : i64
// CHECK-NEXT:    %[[NO2:.*]] = ds.constant false
// CHECK-NEXT:    %[[NONE2:.*]] = ds.constant unit : !ds.none
// CHECK-NEXT:    %[[SCALED:.*]] = ds.aten "aten::to.dtype"(%[[PRODUCT]], %[[F16]], %[[NO2]], %[[NO2]], %[[NONE2]]) : (tensor<f32>, i64, i1, i1, !ds.none) -> tensor<f16>
// CHECK-NEXT:    %[[SEEDED:.*]] = ds.aten "aten::mul.Tensor"(%[[COT]], %[[SCALED]])
// CHECK-NOT:     %[[SEED]]
// CHECK:         ds.aten "aten::expand"(%[[SEEDED]],
// CHECK-NOT:     %[[SEED]]
// CHECK:         return

// Canonicalization and CSE hoist the seed's constant, but neither folds nor
// moves the scale: it stays right after ds.backward_begin, and the engine's
// backward prologue comes after the scaling.
// PIPE-LABEL: func.func @forward(
// PIPE:         ds.backward_begin
// PIPE-NEXT:    %[[SCALE:.*]] = ds.loss_scale @model : tensor<f32>
// PIPE-NEXT:    %[[COT:.*]] = ds.cotangent 0 : tensor<f16>
// PIPE-NEXT:    %[[WIDE:.*]] = ds.aten "aten::to.dtype"(%{{.*}}) : (tensor<f16>, i64, i1, i1, !ds.none) -> tensor<f32>
// PIPE-NEXT:    %[[PRODUCT:.*]] = ds.aten "aten::mul.Tensor"(%[[WIDE]], %[[SCALE]])
// PIPE-NEXT:    %[[SCALED:.*]] = ds.aten "aten::to.dtype"(%[[PRODUCT]], {{.*}} -> tensor<f16>
// PIPE-NEXT:    %[[SEEDED:.*]] = ds.aten "aten::mul.Tensor"(%[[COT]], %[[SCALED]])
// PIPE:         ds.aten "aten::expand"(%[[SEEDED]],
// PIPE:         ds.backward_prologue @model
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2>, precision = <mode = fp16, loss_scaler = <kind = dynamic>>>}
  ds.param @fc.weight : tensor<2x4xf16> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc.bias : tensor<2xf16> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<3x4xf16> {ds.name = "x"}) -> tensor<f16> {
    %w = ds.get_param @fc.weight : tensor<2x4xf16>
    %b = ds.get_param @fc.bias : tensor<2xf16>
    %y = ds.aten "aten::linear"(%x, %w, %b) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<3x4xf16>, tensor<2x4xf16>, tensor<2xf16>) -> tensor<3x2xf16>
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %n) : (tensor<3x2xf16>, !ds.none) -> tensor<f16>
    return %s : tensor<f16>
  }
}

// -----

// A static scale (fp16.loss_scale 128) on an engine whose parameters are
// still f32, with two losses: each seed is scaled, an f32 seed directly.
// CHECK-LABEL: func.func @forward(
// CHECK:         ds.backward_begin
// CHECK-NEXT:    %[[SCALE:.*]] = ds.loss_scale @model : tensor<f32>
// CHECK-NEXT:    %[[COT0:.*]] = ds.cotangent 0 : tensor<f32>
// CHECK-NEXT:    %[[SEED0:.*]] = ds.constant dense<5.000000e-01> : tensor<f32> {ds.backward_seed}
// CHECK-NEXT:    %[[SCALED0:.*]] = ds.aten "aten::mul.Tensor"(%[[SEED0]], %[[SCALE]]) : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:    %[[SEEDED0:.*]] = ds.aten "aten::mul.Tensor"(%[[COT0]], %[[SCALED0]])
// CHECK-NEXT:    %[[COT1:.*]] = ds.cotangent 1 : tensor<f32>
// CHECK-NEXT:    %[[SEED1:.*]] = ds.constant dense<5.000000e-01> : tensor<f32> {ds.backward_seed}
// CHECK-NEXT:    %[[SCALED1:.*]] = ds.aten "aten::mul.Tensor"(%[[SEED1]], %[[SCALE]]) : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:    %[[SEEDED1:.*]] = ds.aten "aten::mul.Tensor"(%[[COT1]], %[[SCALED1]])
// CHECK-NOT:     ds.loss_scale
// CHECK-DAG:     ds.aten "aten::expand"(%[[SEEDED0]],
// CHECK-DAG:     ds.aten "aten::expand"(%[[SEEDED1]],
// CHECK:         return
// PIPE-LABEL: func.func @forward(
// PIPE:         ds.backward_begin
// PIPE-NEXT:    ds.loss_scale @model : tensor<f32>
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, precision = <mode = fp16, loss_scaler = <kind = static, scale = 128.0>>>}
  ds.param @w : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad}
  func.func @forward(%x: tensor<4xf32> {ds.name = "x"}) -> (tensor<f32>, tensor<f32>) {
    %w = ds.get_param @w : tensor<4xf32>
    %p = ds.aten "aten::mul.Tensor"(%x, %w) {module = "", module_class = "M"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%p, %n) : (tensor<4xf32>, !ds.none) -> tensor<f32>
    %t = ds.aten "aten::mean"(%p, %n) : (tensor<4xf32>, !ds.none) -> tensor<f32>
    return %s, %t : tensor<f32>, tensor<f32>
  }
}

// -----

// torch_autocast with dtype float16: DeepSpeed scales the loss with a
// torch.amp.GradScaler, so the seed is scaled as for fp16. The parameters
// stay f32, the linear runs in f16 between autocast's casts, the loss is
// f32: its seed is multiplied directly, and the f16 linear's backward sees
// the scaled gradient.
// CHECK-LABEL: func.func @forward(
// CHECK:         ds.backward_begin
// CHECK-NEXT:    %[[SCALE:.*]] = ds.loss_scale @model : tensor<f32>
// CHECK-NEXT:    %[[COT:.*]] = ds.cotangent 0 : tensor<f32>
// CHECK-NEXT:    %[[SEED:.*]] = ds.constant dense<5.000000e-01> : tensor<f32> {ds.backward_seed}
// CHECK-NEXT:    %[[SCALED:.*]] = ds.aten "aten::mul.Tensor"(%[[SEED]], %[[SCALE]]) : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:    %[[SEEDED:.*]] = ds.aten "aten::mul.Tensor"(%[[COT]], %[[SCALED]])
// CHECK-NOT:     ds.loss_scale
// CHECK:         ds.aten "aten::expand"(%[[SEEDED]],
// CHECK:         -> tensor<3x2xf16>
// CHECK:         return
// PIPE-LABEL: func.func @forward(
// PIPE:         ds.backward_begin
// PIPE-NEXT:    %[[SCALE:.*]] = ds.loss_scale @model : tensor<f32>
// PIPE-NEXT:    ds.cotangent 0 : tensor<f32>
// PIPE-NEXT:    ds.aten "aten::mul.Tensor"(%{{.*}}, %[[SCALE]]) : (tensor<f32>, tensor<f32>) -> tensor<f32>
// PIPE:         ds.backward_prologue @model
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2>, precision = <mode = autocast, autocast_dtype = f16, loss_scaler = <kind = grad_scaler, scale_window = 2000, hysteresis = 1, min_scale = 0.0>>>}
  ds.param @fc.weight : tensor<2x4xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<3x4xf32> {ds.name = "x"}) -> tensor<f32> {
    %w = ds.get_param @fc.weight : tensor<2x4xf32>
    %c5 = ds.constant 5 : i64
    %c6 = ds.constant 6 : i64
    %no = ds.constant false
    %none = ds.constant unit : !ds.none
    %x16 = ds.aten "aten::to.dtype"(%x, %c5, %no, %no, %none) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<3x4xf32>, i64, i1, i1, !ds.none) -> tensor<3x4xf16>
    %w16 = ds.aten "aten::to.dtype"(%w, %c5, %no, %no, %none) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x4xf32>, i64, i1, i1, !ds.none) -> tensor<2x4xf16>
    %y = ds.aten "aten::linear"(%x16, %w16, %none) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<3x4xf16>, tensor<2x4xf16>, !ds.none) -> tensor<3x2xf16>
    %y32 = ds.aten "aten::to.dtype"(%y, %c6, %no, %no, %none) : (tensor<3x2xf16>, i64, i1, i1, !ds.none) -> tensor<3x2xf32>
    %s = ds.aten "aten::sum"(%y32, %none) : (tensor<3x2xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// bf16 autocast has no loss scale (DeepSpeed's GradScaler is for float16
// only).
// CHECK-LABEL: func.func @forward(
// CHECK:         ds.backward_begin
// CHECK-NEXT:    ds.cotangent 0 : tensor<f32>
// CHECK-NEXT:    ds.constant dense<5.000000e-01> : tensor<f32> {ds.backward_seed}
// CHECK-NOT:     ds.loss_scale
// PIPE-LABEL: func.func @forward(
// PIPE-NOT:     ds.loss_scale
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, precision = <mode = autocast, autocast_dtype = bf16>>}
  ds.param @w : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad}
  func.func @forward(%x: tensor<4xf32> {ds.name = "x"}) -> tensor<f32> {
    %w = ds.get_param @w : tensor<4xf32>
    %p = ds.aten "aten::mul.Tensor"(%x, %w) {module = "", module_class = "M"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%p, %n) : (tensor<4xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Engines without fp16 (here bf16) are left alone.
// CHECK-LABEL: func.func @forward(
// CHECK:         ds.backward_begin
// CHECK-NEXT:    ds.cotangent 0 : tensor<f32>
// CHECK-NEXT:    ds.constant dense<5.000000e-01> : tensor<f32> {ds.backward_seed}
// CHECK-NOT:     ds.loss_scale
// PIPE-LABEL: func.func @forward(
// PIPE-NOT:     ds.loss_scale
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, precision = <mode = bf16>>}
  ds.param @w : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad}
  func.func @forward(%x: tensor<4xf32> {ds.name = "x"}) -> tensor<f32> {
    %w = ds.get_param @w : tensor<4xf32>
    %p = ds.aten "aten::mul.Tensor"(%x, %w) {module = "", module_class = "M"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%p, %n) : (tensor<4xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}
