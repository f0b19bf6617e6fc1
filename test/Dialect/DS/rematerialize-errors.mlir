// RUN: ds-opt %s -split-input-file -ds-autodiff=grad-scale=1 -ds-rematerialize -verify-diagnostics

// The root module cannot be checkpointed: nothing outside it keeps its inputs.
// expected-error@+1 {{'ds.checkpoint_modules' lists the root module (""): nothing outside it would keep its inputs; list its submodules instead}}
module attributes {ds.checkpoint_modules = [""]} {
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

// A module inside another listed one.
// expected-error@+1 {{'ds.checkpoint_modules' lists 'blocks.0.fc' and 'blocks.0', one inside the other; list the outer one only}}
module attributes {ds.checkpoint_modules = ["blocks.0", "blocks.0.fc"]} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 4, optimizer = <kind = sgd>>}
  ds.param @blocks.0.fc.weight : tensor<2x8xf32> {engine = @model, module = "blocks.0.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<4x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %n = ds.constant unit : !ds.none
    %w = ds.get_param @blocks.0.fc.weight : tensor<2x8xf32>
    %o = ds.aten "aten::linear"(%x, %w, %n) {module = "blocks.0.fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<2x8xf32>, !ds.none) -> tensor<4x2xf32>
    %s = ds.aten "aten::sum"(%o, %n) : (tensor<4x2xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A path that runs no op ("blocks.1" is not "blocks.10": paths match on a
// '.' boundary).
module attributes {ds.checkpoint_modules = ["blocks.1"]} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 4, optimizer = <kind = sgd>>}
  ds.param @blocks.10.weight : tensor<2x8xf32> {engine = @model, module = "blocks.10", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  // expected-error@+1 {{'ds.checkpoint_modules' lists 'blocks.1', which runs no op in the forward of @forward}}
  func.func @forward(%x: tensor<4x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %n = ds.constant unit : !ds.none
    %w = ds.get_param @blocks.10.weight : tensor<2x8xf32>
    %o = ds.aten "aten::linear"(%x, %w, %n) {module = "blocks.10", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<2x8xf32>, !ds.none) -> tensor<4x2xf32>
    %s = ds.aten "aten::sum"(%o, %n) : (tensor<4x2xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// The attribute belongs on builtin.module and holds strings.
// expected-error@+1 {{'ds.checkpoint_modules' must be an array of module paths (strings), got [1]}}
module attributes {ds.checkpoint_modules = [1]} {
}

// -----

module {
  // expected-error@+1 {{'ds.checkpoint_modules' is an attribute of builtin.module (the activation-checkpointed modules), not of 'func.func'}}
  func.func @f() attributes {ds.checkpoint_modules = ["a"]} {
    return
  }
}
