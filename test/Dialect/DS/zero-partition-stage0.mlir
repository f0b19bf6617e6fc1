// RUN: ds-opt %s -ds-lower-optimizer -ds-zero-partition -ds-verify-collectives | FileCheck %s

// ZeRO stage 0: nothing is sharded. The parameters are laid out in one flat
// buffer in the order their gradients are complete (@c's last ds.grad comes
// first, @a's last), cut into buckets of at most reduce_bucket_size = 6
// parameter elements and padded to a multiple of the world size 2; @step
// all-reduces every bucket, waits, then updates. The backward is unchanged.

// CHECK:      module attributes {ds.world_size = 2 : i64} {
// CHECK-NEXT:   ds.engine @model {deepspeed = {{.*}}, flat_numel = 14 : i64, module = "", zero_stage = 0 : i64}
// CHECK-NEXT:   ds.param @a : tensor<3xf32> {engine = @model, flat_offset = 10 : i64,
// CHECK-NEXT:   ds.param @b : tensor<2x2xf32> {engine = @model, flat_offset = 6 : i64,
// CHECK-NEXT:   ds.param @c : tensor<5xf32> {engine = @model, flat_offset = 0 : i64,
// CHECK-NEXT:   ds.bucket @model_bucket0 engine @model offset 0 numel 6
// CHECK-NEXT:   ds.bucket @model_bucket1 engine @model offset 6 numel 4
// CHECK-NEXT:   ds.bucket @model_bucket2 engine @model offset 10 numel 4
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <reduce_bucket_size = 6>>}
  ds.param @a : tensor<3xf32> {engine = @model, module = "", module_class = "M", requires_grad}
  ds.param @b : tensor<2x2xf32> {engine = @model, module = "", module_class = "M", requires_grad}
  ds.param @c : tensor<5xf32> {engine = @model, module = "", module_class = "M", requires_grad}

  // CHECK-LABEL: func.func @forward(
  // CHECK-NEXT:    ds.backward_begin
  // CHECK-NEXT:    ds.grad @c
  // CHECK-NEXT:    ds.grad @b
  // CHECK-NEXT:    ds.grad @a
  // CHECK-NEXT:    return
  func.func @forward(%ga: tensor<3xf32>, %gb: tensor<2x2xf32>, %gc: tensor<5xf32>) {
    ds.backward_begin
    ds.grad @c, %gc : tensor<5xf32>
    ds.grad @b, %gb : tensor<2x2xf32>
    ds.grad @a, %ga : tensor<3xf32>
    return
  }
}

// CHECK-LABEL: func.func @step()
// CHECK-NEXT:    %[[T0:.*]] = ds.all_reduce @model_bucket0
// CHECK-NEXT:    %[[T1:.*]] = ds.all_reduce @model_bucket1
// CHECK-NEXT:    %[[T2:.*]] = ds.all_reduce @model_bucket2
// CHECK-NEXT:    ds.wait %[[T0]]
// CHECK-NEXT:    ds.wait %[[T1]]
// CHECK-NEXT:    ds.wait %[[T2]]
// CHECK-NEXT:    ds.optimizer_step @model {type = adamw
// CHECK-NEXT:    return
