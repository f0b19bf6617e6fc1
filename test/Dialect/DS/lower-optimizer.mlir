// RUN: ds-opt %s -split-input-file -ds-lower-optimizer | FileCheck %s

// -ds-lower-optimizer: each trainable engine's optimizer, gradient clipping
// and LR schedule, read from its config with every default resolved, become
// one ds.optimizer_step in a new @step.

// DeepSpeed's "Adam" decouples weight decay (adam_w_mode defaults to true):
// "adamw", weight_decay 0 (FusedAdam's default), gradient_clipping 1.0.
// CHECK-LABEL: func.func @step()
// CHECK-NEXT:    ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
// CHECK-NEXT:    return
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 4, train_micro_batch_size_per_gpu = 4, optimizer = <kind = adamw>>}

// -----

// "adam_w_mode": false is torch.optim.Adam: L2 decay added to the gradient.
// CHECK-LABEL: func.func @step()
// CHECK-NEXT:    ds.optimizer_step @model {type = adam, lr = 0.002, betas = [0.8, 0.99], eps = 1.0e-06, weight_decay = 0.01, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 0.5}
ds.engine @model {module = "", deepspeed = #ds.engine_config<gradient_clipping = 0.5, optimizer = <kind = adam, lr = 0.002, beta1 = 0.8, beta2 = 0.99, eps = 1.0e-06, weight_decay = 0.01>>}

// -----

// "torch_adam" with decoupled decay is torch.optim.AdamW: weight_decay 0.01
// by default. gradient_clipping 0 disables clipping.
// CHECK-LABEL: func.func @step()
// CHECK-NEXT:    ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.01, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 0.0}
ds.engine @model {module = "", deepspeed = #ds.engine_config<gradient_clipping = 0.0, optimizer = <kind = adamw, weight_decay = 0.01>>}

// -----

// SGD: momentum, dampening and nesterov are its own; betas and eps keep
// their (unused) defaults.
// CHECK-LABEL: func.func @step()
// CHECK-NEXT:    ds.optimizer_step @model {type = sgd, lr = 0.05, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.001, momentum = 0.9, dampening = 0.0, nesterov = true, gradient_clipping = 1.0}
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = sgd, lr = 0.05, weight_decay = 0.001, momentum = 0.9, nesterov = true>>}

// -----

// WarmupLR without warmup_max_lr warms up to the optimizer's lr.
// CHECK-LABEL: func.func @step()
// CHECK-NEXT:    ds.optimizer_step @model {type = adamw, lr = 0.003, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0, scheduler = <kind = WarmupLR, warmup_min_lr = 0.0001, warmup_max_lr = 0.003, warmup_num_steps = 3>}
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw, lr = 0.003>, scheduler = <kind = WarmupLR, warmup_min_lr = 0.0001, warmup_num_steps = 3>>}

// -----

// WarmupDecayLR's warmup_max_lr defaults to 0.001, whatever the lr.
// CHECK-LABEL: func.func @step()
// CHECK-NEXT:    ds.optimizer_step @model {{.*}}, scheduler = <kind = WarmupDecayLR, warmup_max_lr = 0.001, warmup_num_steps = 2, warmup_type = linear, total_num_steps = 6>}
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw, lr = 0.01>, scheduler = <kind = WarmupDecayLR, warmup_max_lr = 0.001, warmup_num_steps = 2, warmup_type = linear, total_num_steps = 6>>}

// -----

// WarmupCosineLR scales the lr: it has ratios, no warmup_max_lr.
// CHECK-LABEL: func.func @step()
// CHECK-NEXT:    ds.optimizer_step @model {{.*}}, scheduler = <kind = WarmupCosineLR, warmup_num_steps = 2, total_num_steps = 6, warmup_min_ratio = 0.1, cos_min_ratio = 0.01>}
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, scheduler = <kind = WarmupCosineLR, warmup_num_steps = 2, total_num_steps = 6, warmup_min_ratio = 0.1, cos_min_ratio = 0.01>>}

// -----

// Several engines: one update each, in engine order; a frozen engine (no
// optimizer) has none. The rest of the module is untouched.
// CHECK:       ds.engine @student
// CHECK:       ds.engine @teacher
// CHECK:       ds.engine @head
// CHECK:       func.func @forward
// CHECK-LABEL: func.func @step()
// CHECK-NEXT:    ds.optimizer_step @student {type = adamw, lr = 0.001,
// CHECK-NEXT:    ds.optimizer_step @head {type = sgd, lr = 0.1,
// CHECK-NEXT:    return
ds.engine @student {module = "student", deepspeed = #ds.engine_config<optimizer = <kind = adamw>>}
ds.engine @teacher {module = "teacher", deepspeed = #ds.engine_config<zero = <stage = 3, overlap_comm = true>>, frozen}
ds.engine @head {module = "head", deepspeed = #ds.engine_config<optimizer = <kind = sgd, lr = 0.1>>}
func.func @forward() {
  return
}

// -----

// Only frozen engines: nothing to update, no @step.
// CHECK-LABEL: module {
// CHECK-NEXT:    ds.engine @teacher {frozen, module = ""}
// CHECK-NEXT:  }{{$}}
ds.engine @teacher {module = "", frozen}
