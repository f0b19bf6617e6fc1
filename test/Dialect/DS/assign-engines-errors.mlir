// RUN: split-file %s %t
// RUN: ds-opt %t/no-equals.mlir --pass-pipeline='builtin.module(ds-assign-engines{engines=student})' -verify-diagnostics
// RUN: ds-opt %t/no-name.mlir --pass-pipeline='builtin.module(ds-assign-engines{engines==student})' -verify-diagnostics
// RUN: ds-opt %t/duplicate.mlir --pass-pipeline='builtin.module(ds-assign-engines{engines=student=student,student=teacher})' -verify-diagnostics
// RUN: ds-opt %t/overlap.mlir --pass-pipeline='builtin.module(ds-assign-engines{engines=student=student,head=student.head})' -verify-diagnostics
// RUN: ds-opt %t/two-roots.mlir --pass-pipeline='builtin.module(ds-assign-engines{engines=model=,rest=})' -verify-diagnostics
// RUN: ds-opt %t/empty-prefix.mlir --pass-pipeline='builtin.module(ds-assign-engines{engines=student=student,teacher=teacher,model=})' -verify-diagnostics
// RUN: ds-opt %t/outside.mlir --pass-pipeline='builtin.module(ds-assign-engines{engines=student=student})' -verify-diagnostics
// RUN: ds-opt %t/unknown-frozen.mlir --pass-pipeline='builtin.module(ds-assign-engines{engines=student=student,teacher=teacher frozen=techer})' -verify-diagnostics
// RUN: ds-opt %t/name-taken.mlir --pass-pipeline='builtin.module(ds-assign-engines{engines=student=student,forward=})' -verify-diagnostics
// RUN: ds-opt %t/eval-root.mlir --pass-pipeline='builtin.module(ds-assign-engines)' -verify-diagnostics
// RUN: ds-opt %t/eval-student.mlir --pass-pipeline='builtin.module(ds-assign-engines{engines=student=student,teacher=teacher frozen=teacher})' -verify-diagnostics
// RUN: ds-opt %t/eval-teacher-frozen.mlir --pass-pipeline='builtin.module(ds-assign-engines{engines=student=student,teacher=teacher frozen=teacher})' | FileCheck %t/eval-teacher-frozen.mlir
// RUN: not ds-opt %t/eval-modules-type.mlir 2>&1 | FileCheck %t/eval-modules-type.mlir

// Each rejection of -ds-assign-engines needs its own options, hence one file
// per rejection. Errors about the options are reported on the module, so each
// file spells the module out: an implicit module has no source line to match.

//--- no-equals.mlir
// expected-error @below {{engine spec 'student' is not NAME=PREFIX}}
module {
  ds.param @"student.fc.weight" : tensor<4x8xf32> {module = "student.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
}

//--- no-name.mlir
// expected-error @below {{engine spec '=student' is not NAME=PREFIX}}
module {
  ds.param @"student.fc.weight" : tensor<4x8xf32> {module = "student.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
}

//--- duplicate.mlir
// expected-error @below {{engine 'student' is given twice}}
module {
  ds.param @"student.fc.weight" : tensor<4x8xf32> {module = "student.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @"teacher.fc.weight" : tensor<4x8xf32> {module = "teacher.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
}

//--- overlap.mlir
// expected-error @below {{engines 'student' (submodule 'student') and 'head' (submodule 'student.head') overlap}}
module {
  ds.param @"student.fc.weight" : tensor<4x8xf32> {module = "student.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @"student.head.weight" : tensor<4x8xf32> {module = "student.head", module_class = "torch.nn.modules.linear.Linear", requires_grad}
}

//--- two-roots.mlir
// expected-error @below {{engines 'model' (submodule '') and 'rest' (submodule '') overlap}}
module {
  ds.param @"fc.weight" : tensor<4x8xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
}

//--- empty-prefix.mlir
// expected-error @below {{engine 'teacher': submodule 'teacher' has no parameters or buffers in this model}}
module {
  ds.param @"student.fc.weight" : tensor<4x8xf32> {module = "student.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  // A name that merely starts with the prefix is not under it: the root
  // engine owns this buffer, and @teacher owns nothing.
  ds.buffer @"teachers.bn.running_mean" : tensor<4xf32> {module = "teachers.bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d"}
}

//--- outside.mlir
module {
  ds.param @"student.fc.weight" : tensor<4x8xf32> {module = "student.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  // expected-error @below {{state 'head.weight' lies outside every engine's submodule; add an engine keyed "" to own the rest of the model}}
  ds.param @"head.weight" : tensor<4xf32> {module = "head", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  // expected-error @below {{state 'mask' lies outside every engine's submodule}}
  ds.buffer @mask : tensor<4x4xi1> {module = "", module_class = "Model"}
}

//--- unknown-frozen.mlir
// expected-error @below {{frozen engine 'techer' is not among the engines}}
module {
  ds.param @"student.fc.weight" : tensor<4x8xf32> {module = "student.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @"teacher.fc.weight" : tensor<4x8xf32> {module = "teacher.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
}

//--- name-taken.mlir
// expected-error @below {{engine name 'forward' is already a symbol of this module}}
module {
  ds.param @"student.fc.weight" : tensor<4x8xf32> {module = "student.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward() {
    return
  }
}

//--- eval-root.mlir
// A model saved after model.eval() would train without dropout, BatchNorm on
// running statistics: refused for a trainable engine.
// expected-error @below {{engine 'model' is trainable, but its module (the root) was saved in eval mode: call .train() on it before torch.jit.save, or make the engine frozen (no optimizer)}}
module attributes {ds.eval_modules = ["", "fc"]} {
  ds.param @"fc.weight" : tensor<4x8xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
}

//--- eval-student.mlir
// expected-error @below {{engine 'student' is trainable, but its module 'student' was saved in eval mode}}
module attributes {ds.eval_modules = ["student", "student.fc"]} {
  ds.param @"student.fc.weight" : tensor<4x8xf32> {module = "student.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @"teacher.fc.weight" : tensor<4x8xf32> {module = "teacher.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
}

//--- eval-teacher-frozen.mlir
// A frozen teacher in eval mode is what distillation wants.
// CHECK: ds.engine @student {module = "student"}
// CHECK: ds.engine @teacher {frozen, module = "teacher"}
module attributes {ds.eval_modules = ["teacher", "teacher.fc"]} {
  ds.param @"student.fc.weight" : tensor<4x8xf32> {module = "student.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @"teacher.fc.weight" : tensor<4x8xf32> {module = "teacher.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
}

//--- eval-modules-type.mlir
// CHECK: error: 'ds.eval_modules' must be an array of module paths (strings), got [1]
module attributes {ds.eval_modules = [1]} {
}
