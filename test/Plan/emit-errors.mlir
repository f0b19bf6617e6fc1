// RUN: ds-translate --ds-mlir-to-plan --split-input-file --verify-diagnostics %s

// What plan emission rejects: a training step without the boundary's work or
// without a partition, and collectives or updates in the wrong program.

// expected-error @below {{a training plan needs @step, the accumulation boundary's work (run -ds-lower-optimizer and -ds-zero-partition)}}
module {
  ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"AdamW\"}}", deepspeed = #ds.engine_config<optimizer = <kind = adamw>>}
  func.func @forward_eval() {
    return
  }
  func.func @forward() {
    ds.backward_begin
    return
  }
}

// -----

// expected-error @below {{'ds.engine' op is trainable, but not partitioned (run -ds-zero-partition)}}
ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"AdamW\"}}", deepspeed = #ds.engine_config<optimizer = <kind = adamw>>}
func.func @forward_eval() {
  return
}
func.func @forward() {
  ds.backward_begin
  return
}
func.func @step() {
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}

// -----

// expected-error @below {{'ds.engine' op is trainable, but @step has no ds.optimizer_step for it (run -ds-lower-optimizer)}}
ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"AdamW\"}}", deepspeed = #ds.engine_config<optimizer = <kind = adamw>>, zero_stage = 0, flat_numel = 0}
func.func @forward_eval() {
  return
}
func.func @forward() {
  ds.backward_begin
  return
}
func.func @step() {
  return
}

// -----

ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"AdamW\"}}", deepspeed = #ds.engine_config<optimizer = <kind = adamw>>, zero_stage = 0, flat_numel = 4}
ds.param @w : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad, flat_offset = 0}
ds.bucket @model_bucket0 engine @model offset 0 numel 4
func.func @forward_eval() {
  return
}
func.func @forward(%g: tensor<4xf32>) {
  ds.backward_begin
  ds.grad @w, %g : tensor<4xf32>
  // expected-error @below {{'ds.all_reduce' op on a bucket of engine @model (ZeRO stage 0) does not belong in the train program: it runs at the accumulation boundary, in @step}}
  %t = ds.all_reduce @model_bucket0
  ds.wait %t
  return
}
func.func @step() {
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}

// -----

ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"AdamW\"}}", deepspeed = #ds.engine_config<optimizer = <kind = adamw>>, zero_stage = 2, flat_numel = 4}
ds.param @w : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad, flat_offset = 0}
ds.bucket @model_bucket0 engine @model offset 0 numel 4
func.func @forward_eval() {
  return
}
func.func @forward(%g: tensor<4xf32>) {
  ds.backward_begin
  ds.grad @w, %g : tensor<4xf32>
  return
}
func.func @step() {
  // expected-error @below {{'ds.reduce_scatter' op on a bucket of engine @model (ZeRO stage 2) does not belong in the step program: stage 2 reduces in the backward}}
  %t = ds.reduce_scatter @model_bucket0
  ds.wait %t
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}

// -----

ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"AdamW\"}}", deepspeed = #ds.engine_config<optimizer = <kind = adamw>>, zero_stage = 0, flat_numel = 0}
func.func @forward_eval() {
  return
}
func.func @forward() {
  ds.backward_begin
  // expected-error @below {{'ds.optimizer_step' op belongs to @step (the accumulation boundary)}}
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}
func.func @step() {
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}

// -----

ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"AdamW\"}}", deepspeed = #ds.engine_config<optimizer = <kind = adamw>>, zero_stage = 1, flat_numel = 4}
ds.param @w : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad, flat_offset = 0}
ds.bucket @model_bucket0 engine @model offset 0 numel 4
func.func @forward_eval() {
  // expected-error @below {{'ds.all_gather' op on a bucket of engine @model (ZeRO stage 1) does not belong in the eval program: it runs at the accumulation boundary, in @step}}
  %t = ds.all_gather @model_bucket0
  ds.wait %t
  return
}

// -----

// Stage 3: a sharded bucket is gathered where it is read, never in @step.
ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"AdamW\"}}", deepspeed = #ds.engine_config<optimizer = <kind = adamw>>, zero_stage = 3, flat_numel = 8}
ds.param @w : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad, flat_offset = 0}
ds.param @b : tensor<1xf32> {engine = @model, module = "", module_class = "M", requires_grad, flat_offset = 4}
ds.bucket @model_bucket0 engine @model offset 0 numel 4
ds.bucket @model_bucket1 engine @model offset 4 numel 4 persistent
func.func @forward_eval() {
  return
}
func.func @forward(%g: tensor<4xf32>) {
  ds.backward_begin
  return
}
func.func @step() {
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  // expected-error @below {{'ds.all_gather' op on a bucket of engine @model (ZeRO stage 3) does not belong in the step program: a sharded bucket is gathered where its parameters are read, in the train and eval programs}}
  %t = ds.all_gather @model_bucket0
  ds.wait %t
  return
}

// -----

// ... and a persistent one only in @step.
ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"AdamW\"}}", deepspeed = #ds.engine_config<optimizer = <kind = adamw>>, zero_stage = 3, flat_numel = 8}
ds.param @w : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad, flat_offset = 0}
ds.param @b : tensor<1xf32> {engine = @model, module = "", module_class = "M", requires_grad, flat_offset = 4}
ds.bucket @model_bucket0 engine @model offset 0 numel 4
ds.bucket @model_bucket1 engine @model offset 4 numel 4 persistent
func.func @forward_eval() {
  // expected-error @below {{'ds.all_gather' op on a bucket of engine @model (ZeRO stage 3) does not belong in the eval program: it runs at the accumulation boundary, in @step}}
  %t = ds.all_gather @model_bucket1
  ds.wait %t
  return
}

// -----

// A release has no place in @step.
ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"AdamW\"}}", deepspeed = #ds.engine_config<optimizer = <kind = adamw>>, zero_stage = 3, flat_numel = 4}
ds.param @w : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad, flat_offset = 0}
ds.bucket @model_bucket0 engine @model offset 0 numel 4
func.func @forward_eval() {
  return
}
func.func @forward(%g: tensor<4xf32>) {
  ds.backward_begin
  return
}
func.func @step() {
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  // expected-error @below {{'ds.release' op on a bucket of engine @model does not belong in the step program: only the sharded buckets of a ZeRO stage 3 engine are released, in the train and eval programs}}
  ds.release @model_bucket0
  return
}

// -----

// A backward marker outside the training function's backward.
ds.engine @model {module = "", config = "{}", deepspeed = #ds.engine_config<>}
func.func @forward_eval() {
  // expected-error @below {{'ds.backward_prologue' op belongs to the top level of the training function's backward}}
  ds.backward_prologue @model
  return
}

// -----

// The plan's engine settings come from the typed config.
// expected-error @below {{engine @model has no DeepSpeed config ('deepspeed'), which plan emission reads (-ds-assign-engines attaches it from the config)}}
ds.engine @model {module = "", config = "{}"}
func.func @forward_eval() {
  return
}

// -----

// The engines of a plan share one accumulation window.
ds.engine @student {module = "student", config = "{}", deepspeed = #ds.engine_config<train_batch_size = 2, gradient_accumulation_steps = 2>}
// expected-error @below {{'ds.engine' op has gradient_accumulation_steps = 4, but engine @student has 2 (the engines of a plan step together)}}
ds.engine @teacher {module = "teacher", config = "{}", deepspeed = #ds.engine_config<train_batch_size = 4, gradient_accumulation_steps = 4>}
func.func @forward_eval() {
  return
}
