// RUN: ds-opt %s | ds-opt | FileCheck %s
// RUN: ds-opt %s --mlir-print-op-generic | ds-opt | FileCheck %s

// The engine backward markers (-ds-engine-backward) and a frozen ZeRO
// stage 3 engine (every parameter in its flat buffer, requires_grad or not;
// gathered and released, never reduced), printed and parsed again from the
// custom and from the generic form.

// CHECK:      ds.engine @student {flat_numel = 4 : i64, module = "student", zero_stage = 2 : i64}
// CHECK-NEXT: ds.engine @teacher {flat_numel = 8 : i64, frozen, module = "teacher", zero_stage = 3 : i64}
// CHECK-NEXT: ds.param @student.w : tensor<4xf32> {engine = @student, flat_offset = 0 : i64, module = "student", module_class = "M", requires_grad}
// CHECK-NEXT: ds.param @teacher.w : tensor<4xf32> {engine = @teacher, flat_offset = 0 : i64, module = "teacher", module_class = "M", requires_grad}
// CHECK-NEXT: ds.param @teacher.b : tensor<4xf32> {engine = @teacher, flat_offset = 4 : i64, module = "teacher", module_class = "M"}
// CHECK-NEXT: ds.bucket @student_bucket0 engine @student offset 0 numel 4
// CHECK-NEXT: ds.bucket @teacher_bucket0 engine @teacher offset 0 numel 8
// CHECK-LABEL: func.func @forward(
// CHECK:        %[[T:.*]] = ds.all_gather @teacher_bucket0
// CHECK-NEXT:   ds.wait %[[T]]
// CHECK-NEXT:   ds.get_param @teacher.w
// CHECK-NEXT:   ds.release @teacher_bucket0
// CHECK-NEXT:   ds.backward_begin
// CHECK-NEXT:   ds.backward_prologue @student
// CHECK-NEXT:   ds.grad @student.w
// CHECK-NEXT:   %[[R:.*]] = ds.reduce_scatter @student_bucket0
// CHECK-NEXT:   ds.wait %[[R]]
// CHECK-NEXT:   ds.backward_epilogue @student
// CHECK-NEXT:   return
module attributes {ds.world_size = 2 : i64} {
ds.engine @student {module = "student", zero_stage = 2, flat_numel = 4}
ds.engine @teacher {module = "teacher", frozen, zero_stage = 3, flat_numel = 8}
ds.param @"student.w" : tensor<4xf32> {module = "student", module_class = "M", requires_grad, engine = @student, flat_offset = 0}
ds.param @"teacher.w" : tensor<4xf32> {module = "teacher", module_class = "M", requires_grad, engine = @teacher, flat_offset = 0}
ds.param @"teacher.b" : tensor<4xf32> {module = "teacher", module_class = "M", engine = @teacher, flat_offset = 4}
ds.bucket @student_bucket0 engine @student offset 0 numel 4
ds.bucket @teacher_bucket0 engine @teacher offset 0 numel 8
func.func @forward(%g: tensor<4xf32>) {
  %t = ds.all_gather @teacher_bucket0
  ds.wait %t
  %w = ds.get_param @"teacher.w" : tensor<4xf32>
  ds.release @teacher_bucket0
  ds.backward_begin
  ds.backward_prologue @student
  ds.grad @"student.w", %g : tensor<4xf32>
  %r = ds.reduce_scatter @student_bucket0
  ds.wait %r
  ds.backward_epilogue @student
  return
}
}
