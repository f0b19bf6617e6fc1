// RUN: ds-opt %s -ds-autodiff -canonicalize -cse -ds-lower-optimizer -ds-zero-partition -ds-verify-collectives -verify-diagnostics | FileCheck %s

// A ZeRO-3 leaf module with data-dependent routing (the MoE of
// zero-partition-stage3-routed.mlir, declared a leaf by its bare class):
// the gate and both experts, 12 elements, go into one bucket of their own
// although reduce_bucket_size is 4, gathered before the leaf's first read,
// released after its last ds.if (in the backward: after the last op that
// reads one of its parameters), with no collective inside the branches and
// no remark about them; the bucket is reduce-scattered once, after the
// backward's last ds.grad into it (the gate's). head.w, outside the leaf, keeps a bucket
// of its own.
// CHECK:       ds.bucket @model_bucket0 engine @model offset 0 numel 4{{$}}
// CHECK-NEXT:  ds.bucket @model_bucket1 engine @model offset 4 numel 12 leaf "moe"
// CHECK-LABEL: func.func @forward(
// CHECK:         %[[L:.*]] = ds.all_gather @model_bucket1
// CHECK-NEXT:    ds.wait %[[L]]
// CHECK-NEXT:    ds.get_param @moe.gate.w
// CHECK-NEXT:    ds.aten "aten::mul.Tensor"
// CHECK-NEXT:    ds.aten "aten::relu"
// CHECK-NEXT:    ds.if
// CHECK-NOT:       ds.all_gather
// CHECK-NOT:       ds.release
// CHECK:           ds.get_param @moe.experts.0.fc1.w
// CHECK:         } else {
// CHECK:         }
// CHECK-NEXT:    ds.if
// CHECK-NOT:       ds.all_gather
// CHECK-NOT:       ds.release
// CHECK:           ds.get_param @moe.experts.1.fc1.w
// CHECK:         } else {
// CHECK:         }
// CHECK-NEXT:    ds.release @model_bucket1
// CHECK:         ds.backward_begin
// CHECK:         %[[B:.*]] = ds.all_gather @model_bucket1
// CHECK-NEXT:    ds.wait %[[B]]
// CHECK-NEXT:    ds.if
// CHECK-NOT:       ds.reduce_scatter
// CHECK:           ds.grad @moe.experts.1.fc1.w
// CHECK:         } else {
// CHECK:         }
// CHECK-NEXT:    ds.if
// CHECK:           ds.grad @moe.experts.0.fc1.w
// CHECK:         } else {
// CHECK:         }
// CHECK-NEXT:    ds.release @model_bucket1
// CHECK-NOT:     ds.reduce_scatter
// CHECK:         ds.grad @moe.gate.w
// CHECK-NEXT:    ds.reduce_scatter @model_bucket1
// CHECK-NOT:     ds.reduce_scatter @model_bucket1
// CHECK:         return
// CHECK-LABEL: func.func @forward_eval(
// CHECK:         %[[E:.*]] = ds.all_gather @model_bucket1
// CHECK-NEXT:    ds.wait %[[E]]
// CHECK-NEXT:    ds.get_param @moe.gate.w
// CHECK-NEXT:    ds.aten "aten::mul.Tensor"
// CHECK-NEXT:    ds.aten "aten::relu"
// CHECK-NEXT:    ds.if
// CHECK-NOT:       ds.all_gather
// CHECK:         } else {
// CHECK:         }
// CHECK-NEXT:    ds.if
// CHECK-NOT:       ds.all_gather
// CHECK:         } else {
// CHECK:         }
// CHECK-NEXT:    ds.release @model_bucket1
// CHECK-NEXT:    return

module attributes {ds.world_size = 2 : i64} {
  // expected-remark @below {{ZeRO-3 leaf module 'moe' (SparseMoeBlock), matched by zero_optimization.leaf_module.classes[0] "SparseMoeBlock": bucket @model_bucket1 holds its 3 parameters (12 elements), gathered at once and reduced once}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 4, stage3_param_persistence_threshold = 0, stage3_max_reuse_distance = 0, leaf_module = <classes = ["SparseMoeBlock"]>>>}
  ds.param @moe.gate.w : tensor<4xf32> {engine = @model, module = "moe.gate", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @moe.experts.0.fc1.w : tensor<4xf32> {engine = @model, module = "moe.experts.0.fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @moe.experts.1.fc1.w : tensor<4xf32> {engine = @model, module = "moe.experts.1.fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @head.w : tensor<4xf32> {engine = @model, module = "head", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<4xf32> {ds.name = "x"}, %c: i1 {ds.name = "c", ds.unbatched}, %d: i1 {ds.name = "d", ds.unbatched}) -> tensor<f32> {
    %wg = ds.get_param @moe.gate.w : tensor<4xf32>
    %g = ds.aten "aten::mul.Tensor"(%x, %wg) {module = "moe.gate", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %h = ds.aten "aten::relu"(%g) {module = "moe", module_class = "SparseMoeBlock"} : (tensor<4xf32>) -> tensor<4xf32>
    %y0 = ds.if %c -> (tensor<4xf32>) {
      %w = ds.get_param @moe.experts.0.fc1.w : tensor<4xf32>
      %e = ds.aten "aten::mul.Tensor"(%h, %w) {module = "moe.experts.0.fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      ds.yield %e : tensor<4xf32>
    } else {
      ds.yield %h : tensor<4xf32>
    }
    %y1 = ds.if %d -> (tensor<4xf32>) {
      %w = ds.get_param @moe.experts.1.fc1.w : tensor<4xf32>
      %e = ds.aten "aten::mul.Tensor"(%y0, %w) {module = "moe.experts.1.fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      ds.yield %e : tensor<4xf32>
    } else {
      ds.yield %y0 : tensor<4xf32>
    }
    %wh = ds.get_param @head.w : tensor<4xf32>
    %o = ds.aten "aten::mul.Tensor"(%y1, %wh) {module = "head", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%o, %n) {module = "", module_class = "Model"} : (tensor<4xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @forward_eval(%x: tensor<4xf32> {ds.name = "x"}, %c: i1 {ds.name = "c", ds.unbatched}, %d: i1 {ds.name = "d", ds.unbatched}) -> tensor<4xf32> {
    %wg = ds.get_param @moe.gate.w : tensor<4xf32>
    %g = ds.aten "aten::mul.Tensor"(%x, %wg) {module = "moe.gate", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %h = ds.aten "aten::relu"(%g) {module = "moe", module_class = "SparseMoeBlock"} : (tensor<4xf32>) -> tensor<4xf32>
    %y0 = ds.if %c -> (tensor<4xf32>) {
      %w = ds.get_param @moe.experts.0.fc1.w : tensor<4xf32>
      %e = ds.aten "aten::mul.Tensor"(%h, %w) {module = "moe.experts.0.fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      ds.yield %e : tensor<4xf32>
    } else {
      ds.yield %h : tensor<4xf32>
    }
    %y1 = ds.if %d -> (tensor<4xf32>) {
      %w = ds.get_param @moe.experts.1.fc1.w : tensor<4xf32>
      %e = ds.aten "aten::mul.Tensor"(%y0, %w) {module = "moe.experts.1.fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      ds.yield %e : tensor<4xf32>
    } else {
      ds.yield %y0 : tensor<4xf32>
    }
    return %y1 : tensor<4xf32>
  }
}
