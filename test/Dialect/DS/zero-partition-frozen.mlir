// RUN: ds-opt %s -ds-autodiff -canonicalize -cse -ds-lower-optimizer -ds-zero-partition -ds-engine-backward -ds-verify-collectives | FileCheck %s

// A frozen engine (no optimizer) under ZeRO stage 3: all its parameters,
// requires_grad or not, are laid out in a flat buffer and cut into buckets
// by the usual rules (stage3_param_persistence_threshold: @critic.b stays
// whole in a persistent bucket). Its sharded bucket is gathered and released
// in the forward, in the eval function and, because the student's
// activation gradient crosses the critic, again in the backward; it has no
// reduce_scatter, no gradient, no backward markers and nothing in @step. A
// frozen engine at stage 2 (@ref) is not partitioned: nothing to shard.

// CHECK:      ds.engine @student {{{.*}}flat_numel = 4 : i64, module = "student", zero_stage = 2 : i64}
// CHECK-NEXT: ds.engine @critic {{{.*}}flat_numel = 14 : i64, frozen, module = "critic", zero_stage = 3 : i64}
// CHECK-NEXT: ds.engine @ref {deepspeed = {{.*}}, frozen, module = "ref"}
// CHECK-NEXT: ds.param @student.w : tensor<3xf32> {engine = @student, flat_offset = 0 : i64,
// CHECK-NEXT: ds.param @critic.w : tensor<3x3xf32> {engine = @critic, flat_offset = 0 : i64, module = "critic", module_class = "C"}
// CHECK-NEXT: ds.param @critic.b : tensor<3xf32> {engine = @critic, flat_offset = 10 : i64, module = "critic", module_class = "C", requires_grad}
// CHECK-NEXT: ds.param @ref.w : tensor<3xf32> {engine = @ref, module = "ref", module_class = "R", requires_grad}
// CHECK-NEXT: ds.bucket @student_bucket0 engine @student offset 0 numel 4
// CHECK-NEXT: ds.bucket @critic_bucket0 engine @critic offset 0 numel 10
// CHECK-NEXT: ds.bucket @critic_bucket1 engine @critic offset 10 numel 4 persistent
// CHECK-NOT:  ds.bucket
module attributes {ds.world_size = 2 : i64} {
  ds.engine @student {module = "student", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2>>}
  ds.engine @critic {module = "critic", frozen, deepspeed = #ds.engine_config<train_batch_size = 2, zero = <stage = 3, overlap_comm = true, stage3_param_persistence_threshold = 3, stage3_max_reuse_distance = 0>>}
  ds.engine @ref {module = "ref", frozen, deepspeed = #ds.engine_config<train_batch_size = 2, zero = <stage = 2>>}
  ds.param @student.w : tensor<3xf32> {module = "student", module_class = "S", requires_grad, engine = @student}
  ds.param @critic.w : tensor<3x3xf32> {module = "critic", module_class = "C", engine = @critic}
  ds.param @critic.b : tensor<3xf32> {module = "critic", module_class = "C", requires_grad, engine = @critic}
  ds.param @ref.w : tensor<3xf32> {module = "ref", module_class = "R", requires_grad, engine = @ref}

  // CHECK-LABEL: func.func @forward(
  // CHECK:         %[[G:.*]] = ds.all_gather @critic_bucket0
  // CHECK-NEXT:    ds.wait %[[G]]
  // CHECK-NEXT:    ds.get_param @critic.w
  // CHECK-NEXT:    ds.get_param @critic.b
  // CHECK-NEXT:    ds.aten "aten::linear"
  // CHECK-NEXT:    ds.release @critic_bucket0
  // CHECK:         ds.backward_begin
  // CHECK:         %[[G2:.*]] = ds.all_gather @critic_bucket0
  // CHECK-NEXT:    ds.wait %[[G2]]
  // CHECK-NEXT:    ds.get_param @critic.w
  // CHECK-NEXT:    ds.aten "aten::matmul"
  // CHECK-NEXT:    ds.release @critic_bucket0
  // CHECK:         ds.backward_prologue @student
  // CHECK-NEXT:    ds.grad @student.w
  // CHECK-NEXT:    %[[R:.*]] = ds.reduce_scatter @student_bucket0
  // CHECK-NEXT:    ds.wait %[[R]]
  // CHECK-NEXT:    ds.backward_epilogue @student
  // CHECK-NEXT:    return
  func.func @forward(%x: tensor<2x3xf32>) -> tensor<f32> {
    %s = ds.get_param @student.w : tensor<3xf32>
    %h = ds.aten "aten::mul.Tensor"(%x, %s) {module = "student"} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %w = ds.get_param @critic.w : tensor<3x3xf32>
    %b = ds.get_param @critic.b : tensor<3xf32>
    %y = ds.aten "aten::linear"(%h, %w, %b) {module = "critic"} : (tensor<2x3xf32>, tensor<3x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %r = ds.get_param @ref.w : tensor<3xf32>
    %q = ds.aten "aten::mul.Tensor"(%y, %r) {module = "ref"} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %n = ds.constant unit : !ds.none
    %l = ds.aten "aten::sum"(%q, %n) : (tensor<2x3xf32>, !ds.none) -> tensor<f32>
    return %l : tensor<f32>
  }

  // CHECK-LABEL: func.func @forward_eval(
  // CHECK:         %[[E:.*]] = ds.all_gather @critic_bucket0
  // CHECK-NEXT:    ds.wait %[[E]]
  // CHECK-NEXT:    ds.get_param @critic.w
  // CHECK-NEXT:    ds.aten "aten::linear"
  // CHECK-NEXT:    ds.release @critic_bucket0
  func.func @forward_eval(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %w = ds.get_param @critic.w : tensor<3x3xf32>
    %n = ds.constant unit : !ds.none
    %y = ds.aten "aten::linear"(%x, %w, %n) {module = "critic"} : (tensor<2x3xf32>, tensor<3x3xf32>, !ds.none) -> tensor<2x3xf32>
    return %y : tensor<2x3xf32>
  }
}

// Only the student is updated; the critic's persistent bucket is whole from
// the start, never gathered.
// CHECK-LABEL: func.func @step()
// CHECK-NEXT:    ds.optimizer_step @student
// CHECK-NEXT:    %[[S:.*]] = ds.all_gather @student_bucket0
// CHECK-NEXT:    ds.wait %[[S]]
// CHECK-NEXT:    return
