// RUN: ds-opt %s -split-input-file --pass-pipeline='builtin.module(ds-if-training{pipeline="builtin.module(ds-autodiff)"})' | FileCheck %s

// ds-if-training's textual pipeline runs on the module when an engine trains.
// CHECK-LABEL: func.func @forward(
// CHECK:         ds.backward_begin
// CHECK:         ds.grad @fc.weight
module {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 4, optimizer = <kind = sgd>>}
  ds.param @fc.weight : tensor<2x8xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<4x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %n = ds.constant unit : !ds.none
    %w = ds.get_param @fc.weight : tensor<2x8xf32>
    %o = ds.aten "aten::linear"(%x, %w, %n) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<2x8xf32>, !ds.none) -> tensor<4x2xf32>
    %s = ds.aten "aten::sum"(%o, %n) : (tensor<4x2xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Only frozen engines: nothing runs.
// CHECK-LABEL: func.func @forward(
// CHECK-NOT:     ds.backward_begin
// CHECK:         return
module {
  ds.engine @model {module = "", frozen, deepspeed = #ds.engine_config<train_batch_size = 4>}
  ds.param @fc.weight : tensor<2x8xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear"}
  func.func @forward(%x: tensor<4x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %n = ds.constant unit : !ds.none
    %w = ds.get_param @fc.weight : tensor<2x8xf32>
    %o = ds.aten "aten::linear"(%x, %w, %n) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<2x8xf32>, !ds.none) -> tensor<4x2xf32>
    %s = ds.aten "aten::sum"(%o, %n) : (tensor<4x2xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}
