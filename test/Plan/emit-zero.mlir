// RUN: ds-opt %s -split-input-file -ds-autodiff -canonicalize -cse -ds-lower-optimizer -ds-zero-partition | ds-translate --split-input-file --ds-mlir-to-plan | FileCheck %s

// Plans of partitioned engines (docs/plan-format.md, "The accumulation
// boundary"): a trainable engine carries its optimizer and partition, a
// frozen one neither; collectives become ops with a token result that one
// wait uses and frees.

// ZeRO stage 2 on 2 ranks, a frozen teacher (at stage 2: nothing to shard,
// so no partition; a frozen stage 3 engine has one, compile-distill.test)
// beside the student. Each
// parameter has its own bucket (reduce_bucket_size 6), padded to a multiple
// of 2; the bucket of student.b is reduce-scattered right after its grad op,
// inside the backward.
// CHECK:      "world_size": 2,
// CHECK:       "name": "student",
// CHECK:       "optimizer": {"type": "adamw", "lr": 0.002, "betas": [0.9, 0.999], "eps": 1e-08, "weight_decay": 0.0, "momentum": 0.0, "dampening": 0.0, "nesterov": false, "gradient_clipping": 1.0, "scheduler": {"type": "WarmupLR", "warmup_min_lr": 0.0, "warmup_max_lr": 0.002, "warmup_num_steps": 10, "warmup_type": "log", "total_num_steps": null, "warmup_min_ratio": 0.0, "cos_min_ratio": 0.0001}},
// CHECK-NEXT:  "partition": {
// CHECK-NEXT:   "stage": 2,
// CHECK-NEXT:   "numel": 8,
// CHECK-NEXT:   "params": [{"name": "student.b", "offset": 0}, {"name": "student.w", "offset": 2}],
// CHECK-NEXT:   "buckets": [{"offset": 0, "numel": 2}, {"offset": 2, "numel": 6}]
// CHECK-NEXT:  }
// CHECK-NEXT: },
// CHECK-NEXT: {
// CHECK-NEXT:  "name": "teacher",
// CHECK-NEXT:  "module": "teacher",
// CHECK-NEXT:  "trainable": false,
// CHECK-NEXT:  "zero_stage": 2,
// CHECK-NEXT:  "seed": null,
// CHECK-NEXT:  "batch": {"train_batch_size": 8, "micro_batch_per_gpu": 4, "gradient_accumulation_steps": 1},
// CHECK-NEXT:  "gather_16bit_weights_on_model_save": false,
// CHECK-NEXT:  "ds_config": {"zero_optimization": {"stage": 2}}
// CHECK-NEXT: }
// CHECK-NEXT: ],
// CHECK:      "step": {
// CHECK-NEXT:  "values": [{"id": 0, "type": "token"}, {"id": 1, "type": "token"}],
// CHECK-NEXT:  "body": [
// CHECK-NEXT:   {"kind": "optimizer_step", "engine": "student"},
// CHECK-NEXT:   {"kind": "all_gather", "engine": "student", "bucket": 0, "result": 0},
// CHECK-NEXT:   {"kind": "all_gather", "engine": "student", "bucket": 1, "result": 1},
// CHECK-NEXT:   {"kind": "wait", "arg": 0, "free": [0]},
// CHECK-NEXT:   {"kind": "wait", "arg": 1, "free": [1]}
// CHECK-NEXT:  ],
// CHECK:      "train": {
// CHECK:        {"id": 27, "type": "token"},
// CHECK-NEXT:   {"id": 28, "type": "token"}
// CHECK-NEXT:  ],
// CHECK:        {"kind": "grad", "name": "student.b", "arg": 26, "free": [26]},
// CHECK-NEXT:   {"kind": "reduce_scatter", "engine": "student", "bucket": 0, "result": 27},
// CHECK-NEXT:   {"kind": "grad", "name": "student.w", "arg": 24, "free": [24]},
// CHECK-NEXT:   {"kind": "reduce_scatter", "engine": "student", "bucket": 1, "result": 28},
// CHECK-NEXT:   {"kind": "wait", "arg": 27, "free": [27]},
// CHECK-NEXT:   {"kind": "wait", "arg": 28, "free": [28]}
// CHECK-NEXT:  ],
// CHECK-NEXT:  "results": [14],
// CHECK-NEXT:  "backward_start": 15
module attributes {ds.world_size = 2 : i64} {
ds.engine @student {module = "student", config = "{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.002}}, \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 10}}, \"zero_optimization\": {\"stage\": 2, \"reduce_bucket_size\": 6}}", deepspeed = #ds.engine_config<train_batch_size = 8, train_micro_batch_size_per_gpu = 4, optimizer = <kind = adamw, lr = 0.002>, scheduler = <kind = WarmupLR, warmup_num_steps = 10>, zero = <stage = 2, reduce_bucket_size = 6>>}
ds.engine @teacher {module = "teacher", config = "{\"zero_optimization\": {\"stage\": 2}}", frozen, deepspeed = #ds.engine_config<train_batch_size = 8, train_micro_batch_size_per_gpu = 4, zero = <stage = 2>>}
ds.param @student.w : tensor<2x3xf32> {engine = @student, module = "student", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @student.b : tensor<2xf32> {engine = @student, module = "student", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @teacher.w : tensor<3x3xf32> {engine = @teacher, module = "teacher", module_class = "torch.nn.modules.linear.Linear"}
func.func @forward(%x: tensor<4x3xf32> {ds.name = "x"}) -> tensor<f32> {
  %tw = ds.get_param @teacher.w : tensor<3x3xf32>
  %n = ds.constant unit : !ds.none
  %t = ds.aten "aten::linear"(%x, %tw, %n) {module = "teacher", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x3xf32>, tensor<3x3xf32>, !ds.none) -> tensor<4x3xf32>
  %w = ds.get_param @student.w : tensor<2x3xf32>
  %b = ds.get_param @student.b : tensor<2xf32>
  %h = ds.aten "aten::linear"(%t, %w, %b) {module = "student", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %s = ds.aten "aten::sum"(%h, %n) : (tensor<4x2xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}
func.func @forward_eval(%x: tensor<4x3xf32> {ds.name = "x"}) -> tensor<f32> {
  %tw = ds.get_param @teacher.w : tensor<3x3xf32>
  %n = ds.constant unit : !ds.none
  %t = ds.aten "aten::linear"(%x, %tw, %n) {module = "teacher", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x3xf32>, tensor<3x3xf32>, !ds.none) -> tensor<4x3xf32>
  %w = ds.get_param @student.w : tensor<2x3xf32>
  %b = ds.get_param @student.b : tensor<2xf32>
  %h = ds.aten "aten::linear"(%t, %w, %b) {module = "student", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %s = ds.aten "aten::sum"(%h, %n) : (tensor<4x2xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}
}

// -----

// ZeRO stage 1: nothing in the backward; programs.step reduce-scatters,
// waits, updates and all-gathers.
// CHECK:      "partition": {
// CHECK-NEXT:   "stage": 1,
// CHECK-NEXT:   "numel": 4,
// CHECK-NEXT:   "params": [{"name": "w", "offset": 0}],
// CHECK-NEXT:   "buckets": [{"offset": 0, "numel": 4}]
// CHECK:      "step": {
// CHECK-NEXT:  "values": [{"id": 0, "type": "token"}, {"id": 1, "type": "token"}],
// CHECK-NEXT:  "body": [
// CHECK-NEXT:   {"kind": "reduce_scatter", "engine": "model", "bucket": 0, "result": 0},
// CHECK-NEXT:   {"kind": "wait", "arg": 0, "free": [0]},
// CHECK-NEXT:   {"kind": "optimizer_step", "engine": "model"},
// CHECK-NEXT:   {"kind": "all_gather", "engine": "model", "bucket": 0, "result": 1},
// CHECK-NEXT:   {"kind": "wait", "arg": 1, "free": [1]}
// CHECK-NEXT:  ],
// CHECK:      "train": {
// CHECK-NOT:    "reduce_scatter"
// CHECK:        "backward_start"
module attributes {ds.world_size = 4 : i64} {
ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 0.1}}, \"zero_optimization\": {\"stage\": 1}}", deepspeed = #ds.engine_config<train_batch_size = 8, train_micro_batch_size_per_gpu = 2, optimizer = <kind = sgd, lr = 0.1>, zero = <stage = 1>>}
ds.param @w : tensor<3xf32> {engine = @model, module = "", module_class = "M", requires_grad}
func.func @forward(%x: tensor<2x3xf32> {ds.name = "x"}) -> tensor<f32> {
  %w = ds.get_param @w : tensor<3xf32>
  %n = ds.constant unit : !ds.none
  %y = ds.aten "aten::mul.Tensor"(%x, %w) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %s = ds.aten "aten::sum"(%y, %n) : (tensor<2x3xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}
func.func @forward_eval(%x: tensor<2x3xf32> {ds.name = "x"}) -> tensor<f32> {
  %w = ds.get_param @w : tensor<3xf32>
  %n = ds.constant unit : !ds.none
  %y = ds.aten "aten::mul.Tensor"(%x, %w) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %s = ds.aten "aten::sum"(%y, %n) : (tensor<2x3xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}
}
