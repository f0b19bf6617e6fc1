// RUN: ds-opt %s -ds-autodiff='grad-scale=0.25' -ds-lower-optimizer -ds-zero-partition | ds-translate --ds-mlir-to-plan | FileCheck %s

// The training program: forward, backward_start at the first backward op,
// and a grad op per parameter read. The engine carries the settings its
// config resolves to (seed, batch sizes: GAS 4 as the plan's), its resolved
// optimizer and its partition (stage 0: one bucket), and programs.step
// all-reduces that bucket, waits and updates.
ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"AdamW\"}, \"gradient_accumulation_steps\": 4, \"seed\": 7}", deepspeed = #ds.engine_config<train_batch_size = 16, train_micro_batch_size_per_gpu = 4, gradient_accumulation_steps = 4, seed = 7, optimizer = <kind = adamw>>}
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
// CHECK:      "trainable": true,
// CHECK-NEXT: "zero_stage": 0,
// CHECK-NEXT: "seed": 7,
// CHECK-NEXT: "batch": {"train_batch_size": 16, "micro_batch_per_gpu": 4, "gradient_accumulation_steps": 4},
// CHECK-NEXT: "gather_16bit_weights_on_model_save": false,
// CHECK-NEXT: "ds_config": {"optimizer": {"type": "AdamW"}, "gradient_accumulation_steps": 4, "seed": 7},
// CHECK-NEXT: "optimizer": {"type": "adamw", "lr": 0.001, "betas": [0.9, 0.999], "eps": 1e-08, "weight_decay": 0.0, "momentum": 0.0, "dampening": 0.0, "nesterov": false, "gradient_clipping": 1.0, "scheduler": null},
// CHECK-NEXT: "partition": {
// CHECK-NEXT:  "stage": 0,
// CHECK-NEXT:  "numel": 6,
// CHECK-NEXT:  "params": [{"name": "w", "offset": 0}],
// CHECK-NEXT:  "buckets": [{"offset": 0, "numel": 6}]
// CHECK-NEXT: }
// CHECK: "eval": {
// CHECK:      "step": {
// CHECK-NEXT:  "values": [{"id": 0, "type": "token"}],
// CHECK-NEXT:  "body": [
// CHECK-NEXT:   {"kind": "all_reduce", "engine": "model", "bucket": 0, "result": 0},
// CHECK-NEXT:   {"kind": "wait", "arg": 0, "free": [0]},
// CHECK-NEXT:   {"kind": "optimizer_step", "engine": "model"}
// CHECK-NEXT:  ],
// CHECK-NEXT:  "results": []
// CHECK: "train": {
// CHECK: "body": [
// CHECK: {"kind": "call", "op": "aten::sum", "args": [3, 2], "results": [4]
// CHECK-NEXT: {"kind": "cotangent", "index": 0, "result": 5},
// CHECK-NEXT: {
// CHECK-NEXT: "kind": "constant",
// CHECK-NEXT: "result": 6,
// CHECK-NEXT: "value": {"dtype": "float32", "shape": [], "base64": "AACAPg=="}
// CHECK-NEXT: },
// CHECK-NEXT: {"kind": "call", "op": "aten::mul.Tensor", "args": [5, 6], "results": [7]
// CHECK: {"kind": "grad", "name": "w", "arg": [[G:[0-9]+]]
// CHECK: "results": [4],
// CHECK-NEXT: "backward_start": 5
