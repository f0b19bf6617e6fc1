// RUN: ds-opt %s -split-input-file -ds-autodiff -canonicalize -cse -ds-lower-optimizer -ds-zero-partition -ds-verify-collectives | FileCheck %s

// ZeRO stage 2: gradients are sharded too, so each bucket is reduce-scattered
// inside the backward as soon as its last gradient is written, and the waits
// close the backward; @step updates the shard and all-gathers the
// parameters.

// A two-layer MLP through the compile pipeline's passes. fc2's gradients
// come first in the backward, so fc2 leads the layout; bucket 0 (fc2.bias,
// fc2.weight, fc1.bias: 84 elements <= reduce_bucket_size 100) is reduced
// right after fc1.bias's gradient, bucket 1 (fc1.weight, 128) after the last
// ds.grad.
// CHECK-LABEL: module attributes {ds.world_size = 2 : i64}
// CHECK:         ds.engine @model {deepspeed = {{.*}}, flat_numel = 212 : i64, module = "", zero_stage = 2 : i64}
// CHECK-NEXT:    ds.param @fc1.weight : tensor<16x8xf32> {engine = @model, flat_offset = 84 : i64,
// CHECK-NEXT:    ds.param @fc1.bias : tensor<16xf32> {engine = @model, flat_offset = 68 : i64,
// CHECK-NEXT:    ds.param @fc2.weight : tensor<4x16xf32> {engine = @model, flat_offset = 4 : i64,
// CHECK-NEXT:    ds.param @fc2.bias : tensor<4xf32> {engine = @model, flat_offset = 0 : i64,
// CHECK-NEXT:    ds.bucket @model_bucket0 engine @model offset 0 numel 84
// CHECK-NEXT:    ds.bucket @model_bucket1 engine @model offset 84 numel 128
// CHECK-LABEL:   func.func @forward(
// CHECK:           ds.backward_begin
// CHECK:           ds.grad @fc2.bias
// CHECK-NEXT:      ds.grad @fc2.weight
// CHECK:           ds.grad @fc1.bias
// CHECK-NEXT:      %[[B0:.*]] = ds.reduce_scatter @model_bucket0
// CHECK-NEXT:      ds.grad @fc1.weight
// CHECK-NEXT:      %[[B1:.*]] = ds.reduce_scatter @model_bucket1
// CHECK-NEXT:      ds.wait %[[B0]]
// CHECK-NEXT:      ds.wait %[[B1]]
// CHECK-NEXT:      return
// CHECK-LABEL:   func.func @step()
// CHECK-NEXT:      ds.optimizer_step @model
// CHECK-NEXT:      %[[G0:.*]] = ds.all_gather @model_bucket0
// CHECK-NEXT:      %[[G1:.*]] = ds.all_gather @model_bucket1
// CHECK-NEXT:      ds.wait %[[G0]]
// CHECK-NEXT:      ds.wait %[[G1]]
// CHECK-NEXT:      return
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

// A gradient written inside a data-dependent branch (an expert some token
// may not choose) counts at the ds.if: the bucket is reduced after the
// ds.if, never inside it, so every rank issues the same collectives. A
// parameter no ds.grad writes (unused in the forward) goes last, and its
// bucket is reduced at the end of the backward. reduce_bucket_size 4 gives
// every parameter its own bucket.
// CHECK-LABEL: module attributes {ds.world_size = 2 : i64}
// CHECK:         ds.param @expert.w : tensor<4xf32> {engine = @model, flat_offset = 0 : i64,
// CHECK-NEXT:    ds.param @proj.w : tensor<4xf32> {engine = @model, flat_offset = 4 : i64,
// CHECK-NEXT:    ds.param @unused.w : tensor<4xf32> {engine = @model, flat_offset = 8 : i64,
// CHECK-LABEL:   func.func @forward(
// CHECK:           ds.backward_begin
// CHECK:           ds.if %{{.*}} -> (tensor<4xf32>) {
// CHECK-NOT:         ds.reduce_scatter
// CHECK:             ds.grad @expert.w
// CHECK:           } else {
// CHECK:           }
// CHECK-NEXT:      %[[E:.*]] = ds.reduce_scatter @model_bucket0
// CHECK:           ds.grad @proj.w
// CHECK-NEXT:      %[[P:.*]] = ds.reduce_scatter @model_bucket1
// CHECK-NEXT:      %[[U:.*]] = ds.reduce_scatter @model_bucket2
// CHECK-NEXT:      ds.wait %[[E]]
// CHECK-NEXT:      ds.wait %[[P]]
// CHECK-NEXT:      ds.wait %[[U]]
// CHECK-NEXT:      return
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2, reduce_bucket_size = 4>>}
  ds.param @expert.w : tensor<4xf32> {engine = @model, module = "expert", module_class = "E", requires_grad}
  ds.param @proj.w : tensor<4xf32> {engine = @model, module = "proj", module_class = "P", requires_grad}
  ds.param @unused.w : tensor<4xf32> {engine = @model, module = "unused", module_class = "U", requires_grad}
  func.func @forward(%x: tensor<4xf32> {ds.name = "x"}, %c: i1 {ds.name = "c", ds.unbatched}) -> tensor<f32> {
    %wp = ds.get_param @proj.w : tensor<4xf32>
    %one = ds.constant 1 : i64
    %h = ds.aten "aten::mul.Tensor"(%x, %wp) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %y = ds.if %c -> (tensor<4xf32>) {
      %we = ds.get_param @expert.w : tensor<4xf32>
      %e = ds.aten "aten::mul.Tensor"(%h, %we) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      ds.yield %e : tensor<4xf32>
    } else {
      ds.yield %h : tensor<4xf32>
    }
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %n) : (tensor<4xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}
