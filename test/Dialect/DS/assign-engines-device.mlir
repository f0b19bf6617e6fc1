// RUN: split-file %s %t
// RUN: ds-opt %t/default.mlir -ds-assign-engines | FileCheck %t/default.mlir
// RUN: ds-opt %t/cuda.mlir --pass-pipeline='builtin.module(ds-assign-engines{device=cuda})' | FileCheck %t/cuda.mlir
// RUN: ds-opt %t/kept.mlir -ds-assign-engines | FileCheck %t/kept.mlir
// RUN: ds-opt %t/unknown.mlir --pass-pipeline='builtin.module(ds-assign-engines{device=tpu})' -verify-diagnostics
// RUN: ds-opt %t/disagrees.mlir --pass-pipeline='builtin.module(ds-assign-engines{device=cpu})' -verify-diagnostics

// -ds-assign-engines makes the compile target explicit: the module's
// ds.target_device is its `device` option, else the module's own, else cpu.

//--- default.mlir
// CHECK: module attributes {ds.target_device = "cpu"}
module {
  ds.param @fc.weight : tensor<4x8xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
}

//--- cuda.mlir
// CHECK: module attributes {ds.target_device = "cuda"}
module {
  ds.param @fc.weight : tensor<4x8xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
}

//--- kept.mlir
// CHECK: module attributes {ds.target_device = "cuda"}
module attributes {ds.target_device = "cuda"} {
  ds.param @fc.weight : tensor<4x8xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
}

//--- unknown.mlir
// expected-error @below {{device must be cpu or cuda, got 'tpu'}}
module {
  ds.param @fc.weight : tensor<4x8xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
}

//--- disagrees.mlir
// expected-error @below {{device=cpu disagrees with the module's ds.target_device = "cuda"}}
module attributes {ds.target_device = "cuda"} {
  ds.param @fc.weight : tensor<4x8xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
}
