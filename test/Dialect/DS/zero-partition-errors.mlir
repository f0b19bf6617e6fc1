// RUN: ds-opt %s -split-input-file -ds-zero-partition -verify-diagnostics

// What -ds-zero-partition rejects.

// Stage 3 reduces in the backward too (and gathers where parameters are
// read): it needs the training function.
module attributes {ds.world_size = 2 : i64} {
  // expected-error @below {{ZeRO stage 3 reduces gradients in the backward of @forward, which the module does not have (run -ds-autodiff first)}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true>>}
  ds.param @a : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad}
  func.func @step() {
    ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
    return
  }
}

// -----

// The collectives go around the updates that -ds-lower-optimizer makes.
module attributes {ds.world_size = 2 : i64} {
  // expected-error @below {{engine @model has no ds.optimizer_step in @step (run -ds-lower-optimizer first)}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>>}
}

// -----

module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>>}
  func.func @step() {
    ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
    // expected-error @below {{engine @model is updated twice in @step}}
    ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
    return
  }
}

// -----

module attributes {ds.world_size = 2 : i64} {
  // expected-error @below {{engine @model is already partitioned}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>>, zero_stage = 0, flat_numel = 0}
  func.func @step() {
    ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
    return
  }
}

// -----

module attributes {ds.world_size = 2 : i64} {
  // expected-error @below {{engine @model mixes 'f32' (@a) and 'f64' (@b) trainable parameters; one flat buffer holds one dtype}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>>}
  ds.param @a : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad}
  ds.param @b : tensor<4xf64> {engine = @model, module = "", module_class = "M", requires_grad}
  func.func @step() {
    ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
    return
  }
}

// -----

module attributes {ds.world_size = 2 : i64} {
  // expected-error @below {{config of engine @model: zero_optimization.allgather_bucket_size: a bucket must hold at least 1 element, got 0}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 1, allgather_bucket_size = 0>>}
  ds.param @a : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad}
  func.func @step() {
    ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
    return
  }
}

// -----

// Stage 2 reduces in the backward: it needs one.
module attributes {ds.world_size = 2 : i64} {
  // expected-error @below {{ZeRO stage 2 reduces gradients in the backward of @forward, which the module does not have (run -ds-autodiff first)}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2>>}
  ds.param @a : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad}
  func.func @step() {
    ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
    return
  }
}

// -----

module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2>>}
  ds.param @a : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad}
  // expected-error @below {{ZeRO stage 2 reduces gradients in the backward, but @forward has no ds.backward_begin (run -ds-autodiff first)}}
  func.func @forward() {
    return
  }
  func.func @step() {
    ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
    return
  }
}
