// RUN: ds-translate --ds-mlir-to-plan %s | FileCheck %s

// A linear + relu + sum forward: state, inputs, one op per line, and each
// value freed by the op that uses it last.
ds.engine @model {module = "", config = "{\22train_batch_size\22: 2}", deepspeed = #ds.engine_config<train_batch_size = 2, train_micro_batch_size_per_gpu = 2>}
ds.param @fc.weight : tensor<4x3xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad, engine = @model}
ds.buffer @bn.running_mean : tensor<4xf32> {module = "bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d", engine = @model}
func.func @forward_eval(%x: tensor<2x3xf32> {ds.name = "x"}, %t: tensor<3x3xf32> {ds.name = "table", ds.unbatched}) -> tensor<f32> {
  %w = ds.get_param @fc.weight : tensor<4x3xf32>
  %n = ds.constant unit : !ds.none
  %h = ds.aten "aten::linear"(%x, %w, %n) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x3xf32>, tensor<4x3xf32>, !ds.none) -> tensor<2x4xf32> loc("model.py":12:4)
  %r = ds.aten "aten::relu"(%h) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %s = ds.aten "aten::sum"(%r, %n) : (tensor<2x4xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// CHECK: "format": "ds-plan",
// CHECK-NEXT: "version": 9,
// CHECK-NEXT: "producer": "ds-translate",
// CHECK-NEXT: "device": "cpu",
// CHECK-NEXT: "torch_version": "",
// CHECK: "micro_batch_per_rank": 2,
// CHECK: "engines": [
// CHECK-NEXT: {"name": "model", "module": "", "trainable": true, "zero_stage": 0, "seed": null, "batch": {"train_batch_size": 2, "micro_batch_per_gpu": 2, "gradient_accumulation_steps": 1}, "gather_16bit_weights_on_model_save": false, "ds_config": {"train_batch_size": 2}}
// CHECK: "state": [
// CHECK-NEXT: {"name": "fc.weight", "kind": "param", "dtype": "float32", "shape": [4, 3], "requires_grad": true, "engine": "model", "module": "fc", "module_class": "torch.nn.modules.linear.Linear"},
// CHECK-NEXT: {"name": "bn.running_mean", "kind": "buffer", "dtype": "float32", "shape": [4]
// CHECK: "inputs": [
// CHECK-NEXT: {"name": "x", "dtype": "float32", "shape": [2, 3], "batched": true},
// CHECK-NEXT: {"name": "table", "dtype": "float32", "shape": [3, 3], "batched": false}
// CHECK: "outputs": [{"name": "loss", "kind": "loss"}]
// CHECK: "eval": {
// CHECK: "body": [
// CHECK-NEXT: {"kind": "input", "index": 0, "result": 0},
// CHECK-NEXT: {"kind": "input", "index": 1, "result": 1, "free": [1]},
// CHECK-NEXT: {"kind": "state", "name": "fc.weight", "result": 2},
// CHECK-NEXT: {"kind": "constant", "result": 3, "value": null},
// CHECK-NEXT: {"kind": "call", "op": "aten::linear", "args": [0, 2, 3], "results": [4], "module": "fc", "module_class": "torch.nn.modules.linear.Linear", "loc": "model.py:12", "free": [2, 0]},
// CHECK-NEXT: {"kind": "call", "op": "aten::relu", "args": [4], "results": [5], {{.*}}"free": [4]}
// CHECK-NEXT: {"kind": "call", "op": "aten::sum", "args": [5, 3], "results": [6], {{.*}}"free": [3, 5]}
// CHECK: "results": [6]
// CHECK-NOT: "train"
