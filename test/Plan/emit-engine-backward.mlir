// RUN: ds-translate --ds-mlir-to-plan %s | FileCheck %s

// Plan emission of the engine backward markers and of a frozen ZeRO stage 3
// engine (docs/plan-format.md): ds.backward_prologue / ds.backward_epilogue
// become backward_prologue / backward_epilogue ops of programs.train, at the
// top level, at or after backward_start; the frozen engine carries a
// partition (every parameter, requires_grad or not) and no optimizer, and
// its gathers and releases are emitted like a trainable engine's. The plan
// library validates what ds-translate writes, so this also shows that the
// plan validator accepts both.

// CHECK:       "name": "student",
// CHECK:       "optimizer": {"type": "adamw",
// CHECK:       "name": "teacher",
// CHECK-NEXT:  "module": "teacher",
// CHECK-NEXT:  "trainable": false,
// CHECK-NEXT:  "zero_stage": 3,
// CHECK-NEXT:  "seed": null,
// CHECK-NEXT:  "batch": {"train_batch_size": 8, "micro_batch_per_gpu": 4, "gradient_accumulation_steps": 1},
// CHECK-NEXT:  "gather_16bit_weights_on_model_save": false,
// CHECK-NEXT:  "ds_config": {"zero_optimization": {"stage": 3}},
// CHECK-NEXT:  "partition": {
// CHECK-NEXT:   "stage": 3,
// CHECK-NEXT:   "numel": 8,
// CHECK-NEXT:   "params": [{"name": "teacher.w", "offset": 0}, {"name": "teacher.b", "offset": 4}],
// CHECK-NEXT:   "buckets": [{"offset": 0, "numel": 8, "persistent": false}]
// CHECK-NEXT:  }
// CHECK-NEXT: }
// CHECK-LABEL: "train": {
// CHECK:        "body": [
// CHECK-NEXT:    {"kind": "input", "index": 0, "result": 0},
// CHECK-NEXT:    {"kind": "all_gather", "engine": "teacher", "bucket": 0, "result": 1},
// CHECK-NEXT:    {"kind": "wait", "arg": 1, "free": [1]},
// CHECK-NEXT:    {"kind": "state", "name": "teacher.w", "result": 2, "free": [2]},
// CHECK-NEXT:    {"kind": "release", "engine": "teacher", "bucket": 0},
// CHECK-NEXT:    {"kind": "backward_prologue", "engine": "student"},
// CHECK-NEXT:    {"kind": "grad", "name": "student.w", "arg": 0, "free": [0]},
// CHECK-NEXT:    {"kind": "reduce_scatter", "engine": "student", "bucket": 0, "result": 3},
// CHECK-NEXT:    {"kind": "wait", "arg": 3, "free": [3]},
// CHECK-NEXT:    {"kind": "backward_epilogue", "engine": "student"}
// CHECK-NEXT:  ],
// CHECK-NEXT:  "results": [],
// CHECK-NEXT:  "backward_start": 5
module attributes {ds.world_size = 2 : i64} {
ds.engine @student {module = "student", config = "{\"optimizer\": {\"type\": \"AdamW\"}}", zero_stage = 2, flat_numel = 4, deepspeed = #ds.engine_config<train_batch_size = 8, train_micro_batch_size_per_gpu = 4, optimizer = <kind = adamw>, zero = <stage = 2>>}
ds.engine @teacher {module = "teacher", config = "{\"zero_optimization\": {\"stage\": 3}}", frozen, zero_stage = 3, flat_numel = 8, deepspeed = #ds.engine_config<train_batch_size = 8, train_micro_batch_size_per_gpu = 4, zero = <stage = 3>>}
ds.param @"student.w" : tensor<4xf32> {module = "student", module_class = "M", requires_grad, engine = @student, flat_offset = 0}
ds.param @"teacher.w" : tensor<4xf32> {module = "teacher", module_class = "M", requires_grad, engine = @teacher, flat_offset = 0}
ds.param @"teacher.b" : tensor<4xf32> {module = "teacher", module_class = "M", engine = @teacher, flat_offset = 4}
ds.bucket @student_bucket0 engine @student offset 0 numel 4
ds.bucket @teacher_bucket0 engine @teacher offset 0 numel 8
func.func @forward_eval(%g: tensor<4xf32> {ds.name = "g"}) {
  return
}
func.func @forward(%g: tensor<4xf32> {ds.name = "g"}) {
  %t = ds.all_gather @teacher_bucket0
  ds.wait %t
  %w = ds.get_param @"teacher.w" : tensor<4xf32>
  ds.release @teacher_bucket0
  ds.backward_begin
  ds.backward_prologue @student
  ds.grad @"student.w", %g : tensor<4xf32>
  %r = ds.reduce_scatter @student_bucket0
  ds.wait %r
  ds.backward_epilogue @student
  return
}
func.func @step() {
  ds.optimizer_step @student {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  %a = ds.all_gather @student_bucket0
  ds.wait %a
  return
}
}
