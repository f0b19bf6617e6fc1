// RUN: ds-opt %s -ds-autodiff -ds-scale-loss -canonicalize -cse -ds-lower-optimizer -ds-zero-partition 2>/dev/null | ds-translate --ds-mlir-to-plan | FileCheck %s

// A bucket's dtype becomes the plan bucket's "dtype" (docs/plan-format.md,
// "Mixed precision"): torch_autocast puts the Linear's parameters in a
// bfloat16 bucket and the LayerNorm's in a float32 one.
// CHECK:       "name": "model",
// CHECK:       "partition": {
// CHECK-NEXT:   "stage": 2,
// CHECK-NEXT:   "numel": 14,
// CHECK-NEXT:   "params": [{"name": "fc.bias", "offset": 0}, {"name": "fc.weight", "offset": 2}, {"name": "ln.bias", "offset": 10}, {"name": "ln.weight", "offset": 12}],
// CHECK-NEXT:   "buckets": [{"offset": 0, "numel": 10, "dtype": "bfloat16"}, {"offset": 10, "numel": 4, "dtype": "float32"}]
// CHECK-NEXT:  }
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"AdamW\"}, \"torch_autocast\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": 2}}", deepspeed = #ds.engine_config<train_batch_size = 6, train_micro_batch_size_per_gpu = 3, optimizer = <kind = adamw>, zero = <stage = 2>, precision = <mode = autocast, autocast_dtype = bf16>>}
ds.param @ln.weight : tensor<2xf32> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
ds.param @ln.bias : tensor<2xf32> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
ds.param @fc.weight : tensor<2x4xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @fc.bias : tensor<2xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
func.func @forward(%x: tensor<3x2xf32> {ds.name = "x"}) -> tensor<f32> {
  %g = ds.get_param @ln.weight : tensor<2xf32>
  %b = ds.get_param @ln.bias : tensor<2xf32>
  %one = ds.constant 1 : i64
  %n = ds.aten "aten::mul.Tensor"(%x, %g) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<3x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %m = ds.aten "aten::add.Tensor"(%n, %b, %one) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<3x2xf32>, tensor<2xf32>, i64) -> tensor<3x2xf32>
  %w = ds.get_param @fc.weight : tensor<2x4xf32>
  %c = ds.get_param @fc.bias : tensor<2xf32>
  %t = ds.aten "aten::t"(%w) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %y = ds.aten "aten::linear"(%m, %t, %c) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<3x2xf32>, tensor<4x2xf32>, tensor<2xf32>) -> tensor<3x4xf32>
  %none = ds.constant unit : !ds.none
  %s = ds.aten "aten::sum"(%y, %none) : (tensor<3x4xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}
func.func @forward_eval(%x: tensor<3x2xf32> {ds.name = "x"}) -> tensor<f32> {
  %none = ds.constant unit : !ds.none
  %s = ds.aten "aten::sum"(%x, %none) : (tensor<3x2xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}
}
