// RUN: split-file %s %t
// RUN: ds-opt %t/distill.mlir -ds-assign-engines | FileCheck %t/distill.mlir --check-prefix=DEFAULT
// RUN: ds-opt %t/distill.mlir --pass-pipeline='builtin.module(ds-assign-engines{engines=student=student,teacher=teacher frozen=teacher})' | FileCheck %t/distill.mlir --check-prefix=DISTILL
// RUN: ds-opt %t/root.mlir --pass-pipeline='builtin.module(ds-assign-engines{engines=student=student,model= frozen=model})' | FileCheck %t/root.mlir

// -ds-assign-engines declares the engines in config order at the top of the
// module and tags each ds.param / ds.buffer with the engine whose submodule
// prefix its qualified name lies under.

//--- distill.mlir

// Without options, one engine @model (the root, not frozen) owns all state.
// DEFAULT-LABEL: module attributes {ds.target_device = "cpu"} {
// DEFAULT-NEXT:    ds.engine @model {module = ""}
// DEFAULT-NEXT:    ds.param @student.fc.weight : tensor<4x8xf32> {engine = @model,
// DEFAULT-NEXT:    ds.param @student.fc.bias : tensor<4xf32> {engine = @model,
// DEFAULT-NEXT:    ds.param @teacher.fc.weight : tensor<4x8xf32> {engine = @model,
// DEFAULT-NEXT:    ds.buffer @teacher.bn.running_mean : tensor<4xf32> {engine = @model,
// DEFAULT-NOT:     ds.engine

// Two engines, each owning its submodule; the teacher is frozen. Engines are
// declared in the order of the `engines` option, before all state.
// DISTILL-LABEL: module attributes {ds.target_device = "cpu"} {
// DISTILL-NEXT:    ds.engine @student {module = "student"}
// DISTILL-NEXT:    ds.engine @teacher {frozen, module = "teacher"}
// DISTILL-NEXT:    ds.param @student.fc.weight : tensor<4x8xf32> {engine = @student,
// DISTILL-NEXT:    ds.param @student.fc.bias : tensor<4xf32> {engine = @student,
// DISTILL-NEXT:    ds.param @teacher.fc.weight : tensor<4x8xf32> {engine = @teacher,
// DISTILL-NEXT:    ds.buffer @teacher.bn.running_mean : tensor<4xf32> {engine = @teacher,
// DISTILL:         func.func @forward
// DISTILL-NOT:     ds.engine

ds.param @"student.fc.weight" : tensor<4x8xf32> {module = "student.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @"student.fc.bias" : tensor<4xf32> {module = "student.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @"teacher.fc.weight" : tensor<4x8xf32> {module = "teacher.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.buffer @"teacher.bn.running_mean" : tensor<4xf32> {module = "teacher.bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d"}
func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %w = ds.get_param @"student.fc.weight" : tensor<4x8xf32>
  %b = ds.get_param @"student.fc.bias" : tensor<4xf32>
  %y = ds.aten "aten::linear"(%x, %w, %b) {module = "student.fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

//--- root.mlir

// The root engine (empty prefix) owns what no other engine takes, wherever it
// stands in the `engines` list. Prefixes match whole name segments:
// `student2.*` is not under `student`.
// CHECK-LABEL: module attributes {ds.target_device = "cpu"} {
// CHECK-NEXT:    ds.engine @student {module = "student"}
// CHECK-NEXT:    ds.engine @model {frozen, module = ""}
// CHECK-NEXT:    ds.param @head.weight : tensor<4xf32> {engine = @model,
// CHECK-NEXT:    ds.param @student.fc.weight : tensor<4x8xf32> {engine = @student,
// CHECK-NEXT:    ds.param @student2.fc.weight : tensor<4x8xf32> {engine = @model,
// CHECK-NEXT:    ds.buffer @student.bn.running_mean : tensor<4xf32> {engine = @student,
// CHECK-NEXT:    ds.buffer @mask : tensor<4x4xi1> {engine = @model,
// CHECK-NEXT:  {{^}}}

ds.param @"head.weight" : tensor<4xf32> {module = "head", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @"student.fc.weight" : tensor<4x8xf32> {module = "student.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @"student2.fc.weight" : tensor<4x8xf32> {module = "student2.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.buffer @"student.bn.running_mean" : tensor<4xf32> {module = "student.bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d"}
ds.buffer @mask : tensor<4x4xi1> {module = "", module_class = "Model"}
