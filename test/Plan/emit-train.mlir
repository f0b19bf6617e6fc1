// RUN: ds-opt %s -ds-autodiff='grad-scale=0.25' | ds-translate --ds-mlir-to-plan --gradient-accumulation-steps=4 | FileCheck %s

// The training program: forward, backward_start at the first backward op,
// and a grad op per parameter read.
ds.engine @model {module = ""}
ds.param @w : tensor<2x3xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad, engine = @model}
func.func @forward(%x: tensor<4x3xf32> {ds.name = "x"}) -> tensor<f32> {
  %w = ds.get_param @w : tensor<2x3xf32>
  %n = ds.constant unit : !ds.none
  %h = ds.aten "aten::linear"(%x, %w, %n) : (tensor<4x3xf32>, tensor<2x3xf32>, !ds.none) -> tensor<4x2xf32>
  %s = ds.aten "aten::sum"(%h, %n) : (tensor<4x2xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}
func.func @forward_eval(%x: tensor<4x3xf32> {ds.name = "x"}) -> tensor<f32> {
  %w = ds.get_param @w : tensor<2x3xf32>
  %n = ds.constant unit : !ds.none
  %h = ds.aten "aten::linear"(%x, %w, %n) : (tensor<4x3xf32>, tensor<2x3xf32>, !ds.none) -> tensor<4x2xf32>
  %s = ds.aten "aten::sum"(%h, %n) : (tensor<4x2xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// CHECK: "gradient_accumulation_steps": 4,
// CHECK: "eval": {
// CHECK: "train": {
// CHECK: "body": [
// CHECK: {"kind": "call", "op": "aten::sum", "args": [3, 2], "results": [4]
// CHECK-NEXT: {
// CHECK-NEXT: "kind": "constant",
// CHECK-NEXT: "result": 5,
// CHECK-NEXT: "value": {"dtype": "float32", "shape": [], "base64": "AACAPg=="}
// CHECK: {"kind": "grad", "name": "w", "arg": [[G:[0-9]+]]
// CHECK: "results": [4],
// CHECK-NEXT: "backward_start": 5
