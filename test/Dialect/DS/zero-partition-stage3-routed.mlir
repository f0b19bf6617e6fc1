// RUN: ds-opt %s -ds-autodiff -canonicalize -cse -ds-lower-optimizer -ds-zero-partition -ds-verify-collectives -verify-diagnostics | FileCheck %s

// ZeRO stage 3 with data-dependent routing (a mixture-of-experts): the
// expert's parameters are read inside a ds.if, which some ranks take and
// others do not. A gather inside the branch would hang the ranks that skip
// it (DeepSpeed's ZeRO-3 MoE deadlock without leaf modules), so the
// expert's bucket is gathered before the ds.if, on every rank, and released
// after it; the pass says so with a remark naming the expert's module.
// reduce_bucket_size 8 puts both expert parameters in bucket 0, the gate in
// bucket 1; stage3_max_reuse_distance 0 releases everything after the
// forward.
// CHECK-LABEL: func.func @forward(
// CHECK:         %[[G1:.*]] = ds.all_gather @model_bucket1
// CHECK-NEXT:    ds.wait %[[G1]]
// CHECK-NEXT:    ds.get_param @moe.gate.w
// CHECK-NEXT:    ds.aten "aten::mul.Tensor"
// CHECK-NEXT:    ds.release @model_bucket1
// CHECK-NEXT:    %[[G0:.*]] = ds.all_gather @model_bucket0
// CHECK-NEXT:    ds.wait %[[G0]]
// CHECK-NEXT:    ds.if
// CHECK-NOT:       ds.all_gather
// CHECK:           ds.get_param @moe.experts.0.fc1.w
// CHECK:           ds.get_param @moe.experts.0.fc2.w
// CHECK:         } else {
// CHECK:         }
// CHECK-NEXT:    ds.release @model_bucket0
// CHECK:         ds.backward_begin
// CHECK:         %[[B0:.*]] = ds.all_gather @model_bucket0
// CHECK-NEXT:    ds.wait %[[B0]]
// CHECK-NEXT:    ds.if
// CHECK-NOT:       ds.release
// CHECK:           ds.grad @moe.experts.0.fc2.w
// CHECK:           ds.grad @moe.experts.0.fc1.w
// CHECK:         } else {
// CHECK:         }
// CHECK-NEXT:    ds.release @model_bucket0
// CHECK-NEXT:    ds.reduce_scatter @model_bucket0
// CHECK-LABEL: func.func @forward_eval(
// CHECK:         ds.release @model_bucket1
// CHECK-NEXT:    %[[E0:.*]] = ds.all_gather @model_bucket0
// CHECK-NEXT:    ds.wait %[[E0]]
// CHECK-NEXT:    ds.if
// CHECK:         } else {
// CHECK:         }
// CHECK-NEXT:    ds.release @model_bucket0
// CHECK-NEXT:    return

module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 8, stage3_param_persistence_threshold = 0, stage3_max_reuse_distance = 0>>}
  ds.param @moe.gate.w : tensor<4xf32> {engine = @model, module = "moe.gate", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @moe.experts.0.fc1.w : tensor<4xf32> {engine = @model, module = "moe.experts.0.fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @moe.experts.0.fc2.w : tensor<4xf32> {engine = @model, module = "moe.experts.0.fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<4xf32> {ds.name = "x"}, %c: i1 {ds.name = "c", ds.unbatched}) -> tensor<f32> {
    %wg = ds.get_param @moe.gate.w : tensor<4xf32>
    %h = ds.aten "aten::mul.Tensor"(%x, %wg) {module = "moe.gate", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    // The forward's ds.if and the backward's (-ds-autodiff recomputes the
    // branch there, at this location) each read the expert's parameters.
    // expected-remark @+2 {{ZeRO-3: the parameters of module 'moe.experts.0' are read inside this data-dependent ds.if in the forward of @forward; bucket @model_bucket0 is gathered before it on every rank, whether or not the branch runs (a collective inside the branch could deadlock)}}
    // expected-remark @+1 {{ZeRO-3: the parameters of module 'moe.experts.0' are read inside this data-dependent ds.if in the backward of @forward; bucket @model_bucket0 is gathered before it on every rank, whether or not the branch runs (a collective inside the branch could deadlock)}}
    %y = ds.if %c -> (tensor<4xf32>) {
      %w1 = ds.get_param @moe.experts.0.fc1.w : tensor<4xf32>
      %e1 = ds.aten "aten::mul.Tensor"(%h, %w1) {module = "moe.experts.0.fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %w2 = ds.get_param @moe.experts.0.fc2.w : tensor<4xf32>
      %e2 = ds.aten "aten::mul.Tensor"(%e1, %w2) {module = "moe.experts.0.fc2", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      ds.yield %e2 : tensor<4xf32>
    } else {
      ds.yield %h : tensor<4xf32>
    }
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %n) {module = "", module_class = "Model"} : (tensor<4xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @forward_eval(%x: tensor<4xf32> {ds.name = "x"}, %c: i1 {ds.name = "c", ds.unbatched}) -> tensor<4xf32> {
    %wg = ds.get_param @moe.gate.w : tensor<4xf32>
    %h = ds.aten "aten::mul.Tensor"(%x, %wg) {module = "moe.gate", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    // expected-remark @below {{ZeRO-3: the parameters of module 'moe.experts.0.fc1' are read inside this data-dependent ds.if of @forward_eval; bucket @model_bucket0 is gathered before it on every rank}}
    %y = ds.if %c -> (tensor<4xf32>) {
      %w1 = ds.get_param @moe.experts.0.fc1.w : tensor<4xf32>
      %e1 = ds.aten "aten::mul.Tensor"(%h, %w1) {module = "moe.experts.0.fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      ds.yield %e1 : tensor<4xf32>
    } else {
      ds.yield %h : tensor<4xf32>
    }
    return %y : tensor<4xf32>
  }
}
