// RUN: ds-opt %s -ds-lower-optimizer -ds-zero-partition -ds-verify-collectives | FileCheck %s

// ZeRO stage 1: the optimizer state is sharded. Buckets hold at most
// min(reduce_bucket_size, allgather_bucket_size) = 8 parameter elements.
// @step reduce-scatters every bucket into the ranks' shards, waits, updates
// the shard, then all-gathers every bucket of updated parameters; the
// backward is unchanged.

// CHECK:      ds.engine @model {deepspeed = {{.*}}, flat_numel = 10 : i64, module = "", zero_stage = 1 : i64}
// CHECK-NEXT: ds.param @w : tensor<2x3xf32> {engine = @model, flat_offset = 4 : i64,
// CHECK-NEXT: ds.param @bias : tensor<3xf32> {engine = @model, flat_offset = 0 : i64,
// CHECK-NEXT: ds.bucket @model_bucket0 engine @model offset 0 numel 4
// CHECK-NEXT: ds.bucket @model_bucket1 engine @model offset 4 numel 6
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 1, reduce_bucket_size = 100, allgather_bucket_size = 8>>}
  ds.param @w : tensor<2x3xf32> {engine = @model, module = "fc", module_class = "L", requires_grad}
  ds.param @bias : tensor<3xf32> {engine = @model, module = "fc", module_class = "L", requires_grad}

  // CHECK-LABEL: func.func @forward(
  // CHECK-NEXT:    ds.backward_begin
  // CHECK-NEXT:    ds.grad @bias
  // CHECK-NEXT:    ds.grad @w
  // CHECK-NEXT:    return
  func.func @forward(%gw: tensor<2x3xf32>, %gb: tensor<3xf32>) {
    ds.backward_begin
    ds.grad @bias, %gb : tensor<3xf32>
    ds.grad @w, %gw : tensor<2x3xf32>
    return
  }
}

// CHECK-LABEL: func.func @step()
// CHECK-NEXT:    %[[R0:.*]] = ds.reduce_scatter @model_bucket0
// CHECK-NEXT:    %[[R1:.*]] = ds.reduce_scatter @model_bucket1
// CHECK-NEXT:    ds.wait %[[R0]]
// CHECK-NEXT:    ds.wait %[[R1]]
// CHECK-NEXT:    ds.optimizer_step @model
// CHECK-NEXT:    %[[G0:.*]] = ds.all_gather @model_bucket0
// CHECK-NEXT:    %[[G1:.*]] = ds.all_gather @model_bucket1
// CHECK-NEXT:    ds.wait %[[G0]]
// CHECK-NEXT:    ds.wait %[[G1]]
// CHECK-NEXT:    return
