// RUN: ds-opt %s -split-input-file -ds-autodiff -canonicalize -cse -ds-lower-optimizer -ds-zero-partition -ds-print-schedule -o /dev/null | FileCheck %s

// -ds-print-schedule: the order in which every rank runs compute and
// collectives, runs of compute compressed to one line, each collective with
// the line of its wait.

// ZeRO stage 2: the reduce-scatter of bucket 0 overlaps the rest of the
// backward.
// CHECK-LABEL: schedule of @forward (identical on every rank: no collective is inside a ds.if)
// CHECK-NEXT:     1  forward: 17 ops
// CHECK-NEXT:     2  backward: 24 ops (through grad @fc1.bias)
// CHECK-NEXT:     3  reduce_scatter @model bucket 0 (84 elements) -> wait at 6
// CHECK-NEXT:     4  backward: 1 op (through grad @fc1.weight)
// CHECK-NEXT:     5  reduce_scatter @model bucket 1 (128 elements) -> wait at 7
// CHECK-NEXT:     6  wait reduce_scatter @model bucket 0
// CHECK-NEXT:     7  wait reduce_scatter @model bucket 1
// CHECK-NEXT:  schedule of @step (identical on every rank: no collective is inside a ds.if)
// CHECK-NEXT:     1  optimizer_step @model (adamw, lr 0.001)
// CHECK-NEXT:     2  all_gather @model bucket 0 (84 elements) -> wait at 4
// CHECK-NEXT:     3  all_gather @model bucket 1 (128 elements) -> wait at 5
// CHECK-NEXT:     4  wait all_gather @model bucket 0
// CHECK-NEXT:     5  wait all_gather @model bucket 1
// CHECK-NOT:   schedule
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2, reduce_bucket_size = 100>>}
  ds.param @fc1.weight : tensor<16x8xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc1.bias : tensor<16xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc2.weight : tensor<4x16xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc2.bias : tensor<4xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<4x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %w1 = ds.get_param @fc1.weight : tensor<16x8xf32>
    %b1 = ds.get_param @fc1.bias : tensor<16xf32>
    %h = ds.aten "aten::linear"(%x, %w1, %b1) {module = "fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    %r = ds.aten "aten::relu"(%h) : (tensor<4x16xf32>) -> tensor<4x16xf32>
    %w2 = ds.get_param @fc2.weight : tensor<4x16xf32>
    %b2 = ds.get_param @fc2.bias : tensor<4xf32>
    %y = ds.aten "aten::linear"(%r, %w2, %b2) {module = "fc2", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<4x4xf32>
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %n) : (tensor<4x4xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Two engines, stages 0 and 1: nothing in the backward (a gradient written
// in a ds.if counts as one op, the ds.if); at the boundary both engines'
// reductions start before either engine updates.
// CHECK-LABEL: schedule of @forward (identical on every rank: no collective is inside a ds.if)
// CHECK-NEXT:     1  forward: 8 ops
// CHECK-NEXT:     2  backward: 7 ops (through grad @b.w)
// CHECK-NEXT:  schedule of @step (identical on every rank: no collective is inside a ds.if)
// CHECK-NEXT:     1  all_reduce @a bucket 0 (4 elements) -> wait at 3
// CHECK-NEXT:     2  reduce_scatter @b bucket 0 (4 elements) -> wait at 5
// CHECK-NEXT:     3  wait all_reduce @a bucket 0
// CHECK-NEXT:     4  optimizer_step @a (sgd, lr 0.1)
// CHECK-NEXT:     5  wait reduce_scatter @b bucket 0
// CHECK-NEXT:     6  optimizer_step @b (adamw, lr 0.001 scheduled by WarmupLR)
// CHECK-NEXT:     7  all_gather @b bucket 0 (4 elements) -> wait at 8
// CHECK-NEXT:     8  wait all_gather @b bucket 0
module attributes {ds.world_size = 2 : i64} {
  ds.engine @a {module = "a", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = sgd, lr = 0.1>>}
  ds.engine @b {module = "b", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, scheduler = <kind = WarmupLR>, zero = <stage = 1>>}
  ds.param @a.w : tensor<4xf32> {engine = @a, module = "a", module_class = "M", requires_grad}
  ds.param @b.w : tensor<4xf32> {engine = @b, module = "b", module_class = "M", requires_grad}
  func.func @forward(%x: tensor<4xf32> {ds.name = "x"}, %c: i1 {ds.name = "c", ds.unbatched}) -> tensor<f32> {
    %wb = ds.get_param @b.w : tensor<4xf32>
    %h = ds.aten "aten::mul.Tensor"(%x, %wb) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %y = ds.if %c -> (tensor<4xf32>) {
      %wa = ds.get_param @a.w : tensor<4xf32>
      %e = ds.aten "aten::mul.Tensor"(%h, %wa) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      ds.yield %e : tensor<4xf32>
    } else {
      ds.yield %h : tensor<4xf32>
    }
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %n) : (tensor<4xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}
