// RUN: sed s/WORLD/2/ %s | ds-opt -split-input-file -ds-lower-optimizer -ds-zero-partition | FileCheck %s --check-prefixes=CHECK,W2
// RUN: sed s/WORLD/4/ %s | ds-opt -split-input-file -ds-lower-optimizer -ds-zero-partition | FileCheck %s --check-prefixes=CHECK,W4

// Bucket sizing. Parameters are packed in layout order into buckets of at
// most C parameter elements (stage 1: C = min(reduce_bucket_size,
// allgather_bucket_size) = 10); a parameter larger than C gets a bucket of
// its own; each bucket is padded with zeros at its end to a multiple of the
// world size.
//
//   layout   @p1 (3) | @p2 (12) | @p3 (5) @p4 (4)
//   W = 2    3 -> 4  | 12       | 9 -> 10            = 26 elements
//   W = 4    3 -> 4  | 12       | 9 -> 12            = 28 elements

// W2:         module attributes {ds.world_size = 2 : i64}
// W4:         module attributes {ds.world_size = 4 : i64}
// W2:         ds.engine @model {deepspeed = {{.*}}, flat_numel = 26 : i64, module = "", zero_stage = 1 : i64}
// W4:         ds.engine @model {deepspeed = {{.*}}, flat_numel = 28 : i64, module = "", zero_stage = 1 : i64}
// CHECK-NEXT: ds.param @p1 : tensor<3xf32> {engine = @model, flat_offset = 0 : i64,
// CHECK-NEXT: ds.param @p2 : tensor<3x4xf32> {engine = @model, flat_offset = 4 : i64,
// CHECK-NEXT: ds.param @p3 : tensor<5xf32> {engine = @model, flat_offset = 16 : i64,
// CHECK-NEXT: ds.param @p4 : tensor<4xf32> {engine = @model, flat_offset = 21 : i64,
// CHECK-NEXT: ds.bucket @model_bucket0 engine @model offset 0 numel 4
// CHECK-NEXT: ds.bucket @model_bucket1 engine @model offset 4 numel 12
// W2-NEXT:    ds.bucket @model_bucket2 engine @model offset 16 numel 10
// W4-NEXT:    ds.bucket @model_bucket2 engine @model offset 16 numel 12
module attributes {ds.world_size = WORLD : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = WORLD, optimizer = <kind = adamw>, zero = <stage = 1, reduce_bucket_size = 20, allgather_bucket_size = 10>>}
  ds.param @p1 : tensor<3xf32> {engine = @model, module = "", module_class = "M", requires_grad}
  ds.param @p2 : tensor<3x4xf32> {engine = @model, module = "", module_class = "M", requires_grad}
  ds.param @p3 : tensor<5xf32> {engine = @model, module = "", module_class = "M", requires_grad}
  ds.param @p4 : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad}
  func.func @forward(%g1: tensor<3xf32>, %g2: tensor<3x4xf32>, %g3: tensor<5xf32>, %g4: tensor<4xf32>) {
    ds.backward_begin
    ds.grad @p1, %g1 : tensor<3xf32>
    ds.grad @p2, %g2 : tensor<3x4xf32>
    ds.grad @p3, %g3 : tensor<5xf32>
    ds.grad @p4, %g4 : tensor<4xf32>
    return
  }
}

// -----

// Stage 0 has no all-gather: only reduce_bucket_size (here 6) counts. The
// default (5e8) puts a small model in one bucket. Parameters that do not
// require grad, and those of frozen engines, are not in any flat buffer.
// CHECK-LABEL: // -----
// CHECK:       ds.engine @model {deepspeed = {{.*}}, flat_numel = 8 : i64, module = "", zero_stage = 0 : i64}
// CHECK-NEXT:  ds.engine @whole {deepspeed = {{.*}}, flat_numel = 8 : i64, module = "whole", zero_stage = 0 : i64}
// CHECK-NEXT:  ds.engine @teacher {deepspeed = {{.*}}, frozen, module = "teacher"}
// CHECK-NEXT:  ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64,
// CHECK-NEXT:  ds.param @b : tensor<4xf32> {engine = @model, flat_offset = 4 : i64,
// CHECK-NEXT:  ds.param @fixed : tensor<6xf32> {engine = @model, module
// CHECK-NEXT:  ds.param @whole.a : tensor<4xf32> {engine = @whole, flat_offset = 0 : i64,
// CHECK-NEXT:  ds.param @whole.b : tensor<4xf32> {engine = @whole, flat_offset = 4 : i64,
// CHECK-NEXT:  ds.param @teacher.w : tensor<6xf32> {engine = @teacher, module
// CHECK-NEXT:  ds.bucket @model_bucket0 engine @model offset 0 numel 4
// CHECK-NEXT:  ds.bucket @model_bucket1 engine @model offset 4 numel 4
// CHECK-NEXT:  ds.bucket @whole_bucket0 engine @whole offset 0 numel 8
// CHECK-NEXT:  func.func @forward
module attributes {ds.world_size = WORLD : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, zero = <reduce_bucket_size = 6, allgather_bucket_size = 1>>}
  ds.engine @whole {module = "whole", deepspeed = #ds.engine_config<optimizer = <kind = adamw>>}
  ds.engine @teacher {module = "teacher", deepspeed = #ds.engine_config<train_batch_size = WORLD>, frozen}
  ds.param @a : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad}
  ds.param @b : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad}
  ds.param @fixed : tensor<6xf32> {engine = @model, module = "", module_class = "M"}
  ds.param @whole.a : tensor<4xf32> {engine = @whole, module = "whole", module_class = "M", requires_grad}
  ds.param @whole.b : tensor<4xf32> {engine = @whole, module = "whole", module_class = "M", requires_grad}
  ds.param @teacher.w : tensor<6xf32> {engine = @teacher, module = "teacher", module_class = "M", requires_grad}
  func.func @forward() {
    return
  }
}
