// RUN: ds-opt %s -split-input-file -ds-verify-collectives -verify-diagnostics

// -ds-verify-collectives accepts ds.loss_scale (it is no collective) where
// the plan reads it: in the training function's backward, at the top level,
// once per engine.

ds.engine @model {module = ""}
func.func @forward(%x: tensor<f32>) -> tensor<f32> {
  ds.backward_begin
  %s = ds.loss_scale @model : tensor<f32>
  %y = ds.aten "aten::mul.Tensor"(%x, %s) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

ds.engine @model {module = ""}
func.func @forward(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @below {{ds.loss_scale @model in @forward comes before ds.backward_begin: the loss scale belongs to the backward of the training function}}
  %s = ds.loss_scale @model : tensor<f32>
  ds.backward_begin
  %y = ds.aten "aten::mul.Tensor"(%x, %s) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

ds.engine @model {module = ""}
func.func @forward_eval(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @below {{ds.loss_scale @model in @forward_eval: the loss scale belongs to the backward of the training function}}
  %s = ds.loss_scale @model : tensor<f32>
  %y = ds.aten "aten::mul.Tensor"(%x, %s) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

ds.engine @model {module = ""}
func.func @forward(%x: tensor<f32>) -> tensor<f32> {
  ds.backward_begin
  // expected-note @below {{the first}}
  %s = ds.loss_scale @model : tensor<f32>
  // expected-error @below {{second ds.loss_scale of engine @model in @forward}}
  %t = ds.loss_scale @model : tensor<f32>
  %y = ds.aten "aten::mul.Tensor"(%s, %t) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %y : tensor<f32>
}
