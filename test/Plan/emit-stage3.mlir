// RUN: ds-opt %s -ds-autodiff -canonicalize -cse -ds-lower-optimizer -ds-zero-partition -ds-schedule-collectives -ds-verify-collectives | ds-translate --ds-mlir-to-plan | FileCheck %s

// The plan of a ZeRO stage 3 engine (docs/plan-format.md, "Stage 3"): its
// partition marks the persistent bucket, the train and eval programs gather
// and release the sharded buckets around their `state` ops (the backward
// gathers again: stage3_max_reuse_distance 0), and programs.step gathers
// only the persistent bucket after the update. overlap_comm (stage 3's
// default) with stage3_prefetch_bucket_size 128 starts each gather once the
// previous one was waited. The 16-bit save policy comes from the config.

// CHECK:      "zero_stage": 3,
// CHECK:      "gather_16bit_weights_on_model_save": true,
// CHECK:      "partition": {
// CHECK-NEXT:   "stage": 3,
// CHECK-NEXT:   "numel": 316,
// CHECK-NEXT:   "params": [{"name": "fc3.weight", "offset": 0}, {"name": "fc2.weight", "offset": 32}, {"name": "fc1.weight", "offset": 160}, {"name": "fc3.bias", "offset": 288}, {"name": "fc2.bias", "offset": 292}, {"name": "fc1.bias", "offset": 300}],
// CHECK-NEXT:   "buckets": [{"offset": 0, "numel": 32{{(, "persistent": false)?}}}, {"offset": 32, "numel": 128{{(, "persistent": false)?}}}, {"offset": 160, "numel": 128{{(, "persistent": false)?}}}, {"offset": 288, "numel": 28, "persistent": true}]

// CHECK-LABEL: "eval": {
// CHECK:        "body": [
// CHECK-NEXT:    {"kind": "input", "index": 0, "result": 0},
// CHECK-NEXT:    {"kind": "all_gather", "engine": "model", "bucket": 2, "result": 1},
// CHECK-NEXT:    {"kind": "wait", "arg": 1, "free": [1]},
// CHECK-NEXT:    {"kind": "all_gather", "engine": "model", "bucket": 1, "result": 2},
// CHECK-NEXT:    {"kind": "state", "name": "fc1.weight", "result": 3},
// CHECK-NEXT:    {"kind": "state", "name": "fc1.bias", "result": 4},
// CHECK-NEXT:    {"kind": "call", "op": "aten::linear", "args": [0, 3, 4], "results": [5], {{.*}}"free": [3, 4, 0]},
// CHECK-NEXT:    {"kind": "release", "engine": "model", "bucket": 2{{.*}}},
// CHECK-NEXT:    {"kind": "call", "op": "aten::relu"
// CHECK-NEXT:    {"kind": "wait", "arg": 2, "free": [2]},
// CHECK-NEXT:    {"kind": "all_gather", "engine": "model", "bucket": 0, "result": 7},
// CHECK-NEXT:    {"kind": "state", "name": "fc2.weight", "result": 8},
// CHECK-NEXT:    {"kind": "state", "name": "fc2.bias", "result": 9},
// CHECK-NEXT:    {"kind": "call", "op": "aten::linear"
// CHECK-NEXT:    {"kind": "release", "engine": "model", "bucket": 1{{.*}}},
// CHECK-NEXT:    {"kind": "call", "op": "aten::relu"
// CHECK-NEXT:    {"kind": "wait", "arg": 7, "free": [7]},
// CHECK-NEXT:    {"kind": "state", "name": "fc3.weight", "result": 12},
// CHECK-NEXT:    {"kind": "state", "name": "fc3.bias", "result": 13},
// CHECK-NEXT:    {"kind": "call", "op": "aten::linear"
// CHECK-NEXT:    {"kind": "release", "engine": "model", "bucket": 0{{.*}}}
// CHECK-NEXT:   ],

// CHECK-LABEL: "step": {
// CHECK:        "body": [
// CHECK-NEXT:    {"kind": "optimizer_step", "engine": "model"},
// CHECK-NEXT:    {"kind": "all_gather", "engine": "model", "bucket": 3, "result": 0},
// CHECK-NEXT:    {"kind": "wait", "arg": 0, "free": [0]}
// CHECK-NEXT:   ],

// The forward as in eval (constants come first after canonicalization); the
// backward starts by gathering fc3's bucket again.
// CHECK-LABEL: "train": {
// CHECK:        "body": [
// CHECK-NEXT:    {"kind": "input", "index": 0, "result": 0},
// CHECK-NEXT:    {"kind": "all_gather", "engine": "model", "bucket": 2, "result": 1},
// CHECK:         {"kind": "release", "engine": "model", "bucket": 0{{.*}}},
// CHECK-NEXT:    {"kind": "call", "op": "aten::sum"
// CHECK-NEXT:    {"kind": "all_gather", "engine": "model", "bucket": 0, "result": 25},
// CHECK:         {"kind": "wait", "arg": 25, "free": [25]},
// CHECK-NEXT:    {"kind": "all_gather", "engine": "model", "bucket": 1, "result": 30},
// CHECK-NEXT:    {"kind": "state", "name": "fc3.weight", "result": 31},
// CHECK-NEXT:    {"kind": "call", "op": "aten::matmul", "args": [29, 31], {{.*}}"free": [31]},
// CHECK-NEXT:    {"kind": "release", "engine": "model", "bucket": 0{{.*}}},
// CHECK:         {"kind": "reduce_scatter", "engine": "model", "bucket": 0, "result": 41},
// CHECK:         {"kind": "wait", "arg": 30, "free": [30]},
// CHECK-NEXT:    {"kind": "state", "name": "fc2.weight", "result": 43},
// CHECK-NEXT:    {"kind": "call", "op": "aten::matmul"
// CHECK-NEXT:    {"kind": "release", "engine": "model", "bucket": 1{{.*}}},
// CHECK:         {"kind": "reduce_scatter", "engine": "model", "bucket": 2, "result": 61},
// CHECK-NEXT:    {"kind": "wait", "arg": 41, "free": [41]},
// CHECK-NEXT:    {"kind": "wait", "arg": 52, "free": [52]},
// CHECK-NEXT:    {"kind": "wait", "arg": 60, "free": [60]},
// CHECK-NEXT:    {"kind": "wait", "arg": 61, "free": [61]}
// CHECK-NEXT:   ],
// CHECK-NEXT:   "results": [24],
// CHECK-NEXT:   "backward_start": 31
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"AdamW\"}, \"zero_optimization\": {\"stage\": 3, \"reduce_bucket_size\": 128, \"stage3_param_persistence_threshold\": 16, \"stage3_max_reuse_distance\": 0, \"stage3_prefetch_bucket_size\": 128, \"stage3_gather_16bit_weights_on_model_save\": true}}", deepspeed = #ds.engine_config<train_batch_size = 8, train_micro_batch_size_per_gpu = 4, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 128, stage3_prefetch_bucket_size = 128, stage3_param_persistence_threshold = 16, stage3_max_reuse_distance = 0, stage3_gather_16bit_weights_on_model_save = true>>}
ds.param @fc1.weight : tensor<16x8xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @fc1.bias : tensor<16xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @fc2.weight : tensor<8x16xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @fc2.bias : tensor<8xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @fc3.weight : tensor<4x8xf32> {engine = @model, module = "fc3", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @fc3.bias : tensor<4xf32> {engine = @model, module = "fc3", module_class = "torch.nn.modules.linear.Linear", requires_grad}
func.func @forward(%x: tensor<4x8xf32> {ds.name = "x"}) -> tensor<f32> {
  %w1 = ds.get_param @fc1.weight : tensor<16x8xf32>
  %b1 = ds.get_param @fc1.bias : tensor<16xf32>
  %h1 = ds.aten "aten::linear"(%x, %w1, %b1) {module = "fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %r1 = ds.aten "aten::relu"(%h1) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %w2 = ds.get_param @fc2.weight : tensor<8x16xf32>
  %b2 = ds.get_param @fc2.bias : tensor<8xf32>
  %h2 = ds.aten "aten::linear"(%r1, %w2, %b2) {module = "fc2", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r2 = ds.aten "aten::relu"(%h2) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %w3 = ds.get_param @fc3.weight : tensor<4x8xf32>
  %b3 = ds.get_param @fc3.bias : tensor<4xf32>
  %y = ds.aten "aten::linear"(%r2, %w3, %b3) {module = "fc3", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  %n = ds.constant unit : !ds.none
  %s = ds.aten "aten::sum"(%y, %n) : (tensor<4x4xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}
func.func @forward_eval(%x: tensor<4x8xf32> {ds.name = "x"}) -> tensor<4x4xf32> {
  %w1 = ds.get_param @fc1.weight : tensor<16x8xf32>
  %b1 = ds.get_param @fc1.bias : tensor<16xf32>
  %h1 = ds.aten "aten::linear"(%x, %w1, %b1) {module = "fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %r1 = ds.aten "aten::relu"(%h1) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %w2 = ds.get_param @fc2.weight : tensor<8x16xf32>
  %b2 = ds.get_param @fc2.bias : tensor<8xf32>
  %h2 = ds.aten "aten::linear"(%r1, %w2, %b2) {module = "fc2", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r2 = ds.aten "aten::relu"(%h2) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %w3 = ds.get_param @fc3.weight : tensor<4x8xf32>
  %b3 = ds.get_param @fc3.bias : tensor<4xf32>
  %y = ds.aten "aten::linear"(%r2, %w3, %b3) {module = "fc3", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}
}
