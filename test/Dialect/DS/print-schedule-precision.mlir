// RUN: ds-opt %s -split-input-file -ds-autodiff -ds-scale-loss -canonicalize -cse -ds-lower-optimizer -ds-zero-partition -ds-print-schedule -o /dev/null 2>/dev/null | FileCheck %s

// -ds-print-schedule names the dtype a collective moves when its bucket has
// one, and prints the fp16 loss scale on its own line.

// torch_autocast, stage 2: the Linear buckets move bf16, the LayerNorm's f32.
// CHECK-LABEL: schedule of @forward (identical on every rank: no collective is inside a ds.if)
// CHECK-NEXT:     1  forward: 20 ops
// CHECK-NEXT:     2  backward: 22 ops (through grad @ln.weight)
// CHECK-NEXT:     3  reduce_scatter @model bucket 1 (8 f32 elements) -> wait at 8
// CHECK-NEXT:     4  backward: 7 ops (through grad @fc1.bias)
// CHECK-NEXT:     5  reduce_scatter @model bucket 0 (14 bf16 elements) -> wait at 9
// CHECK-NEXT:     6  backward: 1 op (through grad @fc1.weight)
// CHECK-NEXT:     7  reduce_scatter @model bucket 2 (32 bf16 elements) -> wait at 10
// CHECK-NEXT:     8  wait reduce_scatter @model bucket 1
// CHECK-NEXT:     9  wait reduce_scatter @model bucket 0
// CHECK-NEXT:    10  wait reduce_scatter @model bucket 2
// CHECK-NEXT:  schedule of @step (identical on every rank: no collective is inside a ds.if)
// CHECK-NEXT:     1  optimizer_step @model (adamw, lr 0.001)
// CHECK-NEXT:     2  all_gather @model bucket 0 (14 bf16 elements) -> wait at 5
// CHECK-NEXT:     3  all_gather @model bucket 1 (8 f32 elements) -> wait at 6
// CHECK-NEXT:     4  all_gather @model bucket 2 (32 bf16 elements) -> wait at 7
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2, reduce_bucket_size = 40>, precision = <mode = autocast, autocast_dtype = bf16>>}
  ds.param @fc1.weight : tensor<4x8xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc1.bias : tensor<4xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @ln.weight : tensor<4xf32> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @ln.bias : tensor<4xf32> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @fc2.weight : tensor<2x4xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc2.bias : tensor<2xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<2x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %w1 = ds.get_param @fc1.weight : tensor<4x8xf32>
    %b1 = ds.get_param @fc1.bias : tensor<4xf32>
    %h = ds.aten "aten::linear"(%x, %w1, %b1) {module = "fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %g = ds.get_param @ln.weight : tensor<4xf32>
    %be = ds.get_param @ln.bias : tensor<4xf32>
    %n = ds.aten "aten::mul.Tensor"(%h, %g) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %one = ds.constant 1 : i64
    %m = ds.aten "aten::add.Tensor"(%n, %be, %one) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xf32>, tensor<4xf32>, i64) -> tensor<2x4xf32>
    %w2 = ds.get_param @fc2.weight : tensor<2x4xf32>
    %b2 = ds.get_param @fc2.bias : tensor<2xf32>
    %y = ds.aten "aten::linear"(%m, %w2, %b2) {module = "fc2", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<2x2xf32>
    %none = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %none) : (tensor<2x2xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}
// -----

// fp16: the loss scale, then the backward; the bucket moves f16.
// CHECK-LABEL: schedule of @forward (identical on every rank: no collective is inside a ds.if)
// CHECK-NEXT:     1  forward: 14 ops
// CHECK-NEXT:     2  loss_scale @model
// CHECK-NEXT:     3  backward: 17 ops (through grad @fc.weight)
// CHECK-NEXT:     4  reduce_scatter @model bucket 0 (10 f16 elements) -> wait at 5
// CHECK-NEXT:     5  wait reduce_scatter @model bucket 0
// CHECK-NEXT:  schedule of @step (identical on every rank: no collective is inside a ds.if)
// CHECK-NEXT:     1  optimizer_step @model (adamw, lr 0.001)
// CHECK-NEXT:     2  all_gather @model bucket 0 (10 f16 elements) -> wait at 3
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
