// RUN: ds-opt %s -ds-lower-optimizer -ds-zero-partition -ds-verify-collectives | FileCheck %s

// Several engines, each with its own stage and flat buffer. Every engine's
// reductions start before any engine waits, so the engines' communication
// overlaps: @head's reduce-scatter runs while @student updates, @dp's
// all-reduce while @head updates, and the all-gathers of the updated
// parameters are waited only at the end. The frozen @teacher has no buffer,
// no collectives and no update.

// CHECK:      ds.engine @student {deepspeed = {{.*}}, flat_numel = 4 : i64, module = "student", zero_stage = 2 : i64}
// CHECK-NEXT: ds.engine @head {deepspeed = {{.*}}, flat_numel = 4 : i64, module = "head", zero_stage = 1 : i64}
// CHECK-NEXT: ds.engine @dp {deepspeed = {{.*}}, flat_numel = 4 : i64, module = "dp", zero_stage = 0 : i64}
// CHECK-NEXT: ds.engine @teacher {deepspeed = {{.*}}, frozen, module = "teacher"}
// CHECK:      ds.bucket @student_bucket0 engine @student offset 0 numel 4
// CHECK-NEXT: ds.bucket @head_bucket0 engine @head offset 0 numel 4
// CHECK-NEXT: ds.bucket @dp_bucket0 engine @dp offset 0 numel 4
// CHECK-NOT:  ds.bucket
module attributes {ds.world_size = 2 : i64} {
  ds.engine @student {module = "student", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2>>}
  ds.engine @head {module = "head", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = sgd, lr = 0.1>, zero = <stage = 1>>}
  ds.engine @dp {module = "dp", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>>}
  ds.engine @teacher {module = "teacher", deepspeed = #ds.engine_config<train_batch_size = 2>, frozen}
  ds.param @student.w : tensor<4xf32> {engine = @student, module = "student", module_class = "M", requires_grad}
  ds.param @head.w : tensor<4xf32> {engine = @head, module = "head", module_class = "M", requires_grad}
  ds.param @dp.w : tensor<4xf32> {engine = @dp, module = "dp", module_class = "M", requires_grad}
  ds.param @teacher.w : tensor<4xf32> {engine = @teacher, module = "teacher", module_class = "M"}

  // Only the stage-2 engine reduces in the backward.
  // CHECK-LABEL: func.func @forward(
  // CHECK-NEXT:    ds.backward_begin
  // CHECK-NEXT:    ds.grad @head.w
  // CHECK-NEXT:    ds.grad @student.w
  // CHECK-NEXT:    %[[S:.*]] = ds.reduce_scatter @student_bucket0
  // CHECK-NEXT:    ds.grad @dp.w
  // CHECK-NEXT:    ds.wait %[[S]]
  // CHECK-NEXT:    return
  func.func @forward(%g: tensor<4xf32>) {
    ds.backward_begin
    ds.grad @head.w, %g : tensor<4xf32>
    ds.grad @student.w, %g : tensor<4xf32>
    ds.grad @dp.w, %g : tensor<4xf32>
    return
  }
}

// CHECK-LABEL: func.func @step()
// CHECK-NEXT:    %[[HR:.*]] = ds.reduce_scatter @head_bucket0
// CHECK-NEXT:    %[[DR:.*]] = ds.all_reduce @dp_bucket0
// CHECK-NEXT:    ds.optimizer_step @student {type = adamw
// CHECK-NEXT:    %[[SG:.*]] = ds.all_gather @student_bucket0
// CHECK-NEXT:    ds.wait %[[HR]]
// CHECK-NEXT:    ds.optimizer_step @head {type = sgd
// CHECK-NEXT:    %[[HG:.*]] = ds.all_gather @head_bucket0
// CHECK-NEXT:    ds.wait %[[DR]]
// CHECK-NEXT:    ds.optimizer_step @dp {type = adamw
// CHECK-NEXT:    ds.wait %[[SG]]
// CHECK-NEXT:    ds.wait %[[HG]]
// CHECK-NEXT:    return
