// RUN: ds-opt %s -split-input-file -verify-diagnostics

// Verifier messages of the ds dialect (lib/Dialect/DS/IR/DSOps.cpp), one
// section per message. Constants whose value and type disagree are written in
// the generic form: the custom form takes the type from a typed value.

//===----------------------------------------------------------------------===//
// ds.param / ds.buffer
//===----------------------------------------------------------------------===//

// expected-error @below {{'ds.param' op state must have a static shape, but fc.weight has type 'tensor<?x8xf32>'}}
ds.param @"fc.weight" : tensor<?x8xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}

// -----

// expected-error @below {{'ds.buffer' op state must have a static shape, but bn.running_mean has type 'tensor<?xf32>'}}
ds.buffer @"bn.running_mean" : tensor<?xf32> {module = "bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d"}

// -----

ds.buffer @"bn.running_var" : tensor<16xf32> {module = "bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d"}
// expected-error @below {{'ds.param' op names engine @bn.running_var, which is not a ds.engine in this module}}
ds.param @"fc.weight" : tensor<16x8xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", engine = @"bn.running_var"}

// -----

// expected-error @below {{'ds.buffer' op names engine @student, which is not a ds.engine in this module}}
ds.buffer @"bn.running_mean" : tensor<16xf32> {module = "bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d", engine = @student}

//===----------------------------------------------------------------------===//
// ds.get_param / ds.get_buffer / ds.set_buffer
//===----------------------------------------------------------------------===//

// -----

func.func @undeclared_param() {
  // expected-error @below {{'ds.get_param' op refers to undeclared param @fc.weight}}
  %0 = ds.get_param @"fc.weight" : tensor<16x8xf32>
  return
}

// -----

func.func @undeclared_buffer() {
  // expected-error @below {{'ds.get_buffer' op refers to undeclared buffer @bn.running_mean}}
  %0 = ds.get_buffer @"bn.running_mean" : tensor<16xf32>
  return
}

// -----

ds.buffer @"bn.running_mean" : tensor<16xf32> {module = "bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d"}
func.func @param_is_buffer() {
  // expected-error @below {{'ds.get_param' op expects @bn.running_mean to be a ds.param, but it is a 'ds.buffer'}}
  %0 = ds.get_param @"bn.running_mean" : tensor<16xf32>
  return
}

// -----

ds.param @"fc.weight" : tensor<16x8xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
func.func @buffer_is_param(%v: tensor<16x8xf32>) {
  // expected-error @below {{'ds.set_buffer' op expects @fc.weight to be a ds.buffer, but it is a 'ds.param'}}
  ds.set_buffer @"fc.weight", %v : tensor<16x8xf32>
  return
}

// -----

ds.param @"fc.weight" : tensor<16x8xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
func.func @get_param_type() {
  // expected-error @below {{'ds.get_param' op type 'tensor<8x16xf32>' does not match the declared type 'tensor<16x8xf32>' of param @fc.weight}}
  %0 = ds.get_param @"fc.weight" : tensor<8x16xf32>
  return
}

// -----

ds.buffer @"bn.num_batches_tracked" : tensor<i64> {module = "bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d"}
func.func @get_buffer_type() {
  // expected-error @below {{'ds.get_buffer' op type 'tensor<f32>' does not match the declared type 'tensor<i64>' of buffer @bn.num_batches_tracked}}
  %0 = ds.get_buffer @"bn.num_batches_tracked" : tensor<f32>
  return
}

// -----

ds.buffer @"bn.running_mean" : tensor<16xf32> {module = "bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d"}
func.func @set_buffer_type(%v: tensor<16xf16>) {
  // expected-error @below {{'ds.set_buffer' op type 'tensor<16xf16>' does not match the declared type 'tensor<16xf32>' of buffer @bn.running_mean}}
  ds.set_buffer @"bn.running_mean", %v : tensor<16xf16>
  return
}

//===----------------------------------------------------------------------===//
// ds.constant
//===----------------------------------------------------------------------===//

// -----

func.func @constant_none() {
  // expected-error @below {{'ds.constant' op expects 'unit' for a constant of type '!ds.none', but got "None"}}
  %0 = "ds.constant"() <{value = "None"}> : () -> !ds.none
  return
}

// -----

func.func @constant_str() {
  // expected-error @below {{'ds.constant' op expects a string for a constant of type '!ds.str', but got 0 : i64}}
  %0 = "ds.constant"() <{value = 0 : i64}> : () -> !ds.str
  return
}

// -----

func.func @constant_device() {
  // expected-error @below {{'ds.constant' op expects a string for a constant of type '!ds.device', but got unit}}
  %0 = "ds.constant"() <{value}> : () -> !ds.device
  return
}

// -----

func.func @constant_list() {
  // expected-error @below {{'ds.constant' op cannot hold a constant list (use ds.list_construct) of type '!ds.list<i64>', but got [1, 2]}}
  %0 = "ds.constant"() <{value = [1, 2]}> : () -> !ds.list<i64>
  return
}

// -----

func.func @constant_tensor_not_elements() {
  // expected-error @below {{'ds.constant' op expects an elements attribute for a constant of type 'tensor<2xf32>', but got 0.000000e+00 : f32}}
  %0 = "ds.constant"() <{value = 0.0 : f32}> : () -> tensor<2xf32>
  return
}

// -----

func.func @constant_tensor_type() {
  // expected-error @below {{'ds.constant' op expects an elements attribute of the same type for a constant of type 'tensor<3xf32>', but got dense<0.000000e+00> : tensor<2xf32>}}
  %0 = ds.constant dense<0.0> : tensor<2xf32> : tensor<3xf32>
  return
}

// -----

func.func @constant_i64() {
  // expected-error @below {{'ds.constant' op expects an integer for a constant of type 'i64', but got 1 : i32}}
  %0 = ds.constant 1 : i32 : i64
  return
}

// -----

func.func @constant_i1() {
  // expected-error @below {{'ds.constant' op expects 'true' or 'false' for a constant of type 'i1', but got 1 : i64}}
  %0 = "ds.constant"() <{value = 1 : i64}> : () -> i1
  return
}

// -----

func.func @constant_f64() {
  // expected-error @below {{'ds.constant' op expects a float for a constant of type 'f64', but got 1.000000e+00 : f32}}
  %0 = ds.constant 1.0 : f32 : f64
  return
}

// -----

func.func @constant_untyped_value() {
  // An untyped value needs the result type. The parser reports the missing
  // type at the token after the value, here on the next line.
  %0 = ds.constant unit
  // expected-error @below {{expected ':' and the constant's type}}
  return
}

//===----------------------------------------------------------------------===//
// ds.list_construct / ds.list_unpack
//===----------------------------------------------------------------------===//

// -----

func.func @list_construct_element(%a: i64, %b: f64) {
  // expected-error @below {{'ds.list_construct' op element #1 has type 'f64', but the list holds 'i64'}}
  %0 = ds.list_construct %a, %b : (i64, f64) -> !ds.list<i64>
  return
}

// -----

func.func @list_construct_tensor_kind(%a: tensor<2xf32>, %b: i64) {
  // expected-error @below {{'ds.list_construct' op element #1 has type 'i64', but the list holds 'tensor<*xf32>'}}
  %0 = ds.list_construct %a, %b : (tensor<2xf32>, i64) -> !ds.list<tensor<*xf32>>
  return
}

// -----

func.func @list_unpack_result(%l: !ds.list<i64>) {
  // expected-error @below {{'ds.list_unpack' op result #0 has type 'i1', but the list holds 'i64'}}
  %0, %1 = ds.list_unpack %l : (!ds.list<i64>) -> (i1, i64)
  return
}

//===----------------------------------------------------------------------===//
// ds.aten
//===----------------------------------------------------------------------===//

// -----

func.func @aten_unknown(%x: tensor<4xf32>) {
  // expected-error @below {{'ds.aten' op operator 'aten::relu.Frobnicate' is not in the supported operator registry}}
  %0 = ds.aten "aten::relu.Frobnicate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @aten_arity(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error @below {{'ds.aten' op operator 'aten::linear' takes 3 arguments, but 2 were given}}
  %0 = ds.aten "aten::linear"(%x, %w) : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @aten_too_few_results(%x: tensor<4x8xf32>, %dim: i64, %keepdim: i1) {
  // expected-error @below {{'ds.aten' op operator 'aten::max.dim' returns 2 values, but the op has 1 results}}
  %0 = ds.aten "aten::max.dim"(%x, %dim, %keepdim) : (tensor<4x8xf32>, i64, i1) -> tensor<4xf32>
  return
}

// -----

func.func @aten_no_results(%x: tensor<4xf32>) {
  // expected-error @below {{'ds.aten' op operator 'aten::relu' returns 1 values, but the op has 0 results}}
  ds.aten "aten::relu"(%x) : (tensor<4xf32>) -> ()
  return
}

//===----------------------------------------------------------------------===//
// ds.if / ds.yield
//===----------------------------------------------------------------------===//

// -----

func.func @if_then_count(%c: i1, %x: tensor<4xf32>) {
  // expected-error @below {{'ds.if' op 'then' branch yields 0 values, but the op has 1 results}}
  %0 = ds.if %c -> (tensor<4xf32>) {
    ds.yield
  } else {
    ds.yield %x : tensor<4xf32>
  }
  return
}

// -----

func.func @if_else_count(%c: i1, %x: tensor<4xf32>) {
  // expected-error @below {{'ds.if' op 'else' branch yields 2 values, but the op has 1 results}}
  %0 = ds.if %c -> (tensor<4xf32>) {
    ds.yield %x : tensor<4xf32>
  } else {
    ds.yield %x, %x : tensor<4xf32>, tensor<4xf32>
  }
  return
}

// -----

func.func @if_then_type(%c: i1, %x: tensor<4xf32>, %n: i64) {
  // expected-error @below {{'ds.if' op 'then' branch yields 'i64' as result #1, but the op has 'tensor<4xf32>'}}
  %0:2 = ds.if %c -> (tensor<4xf32>, tensor<4xf32>) {
    ds.yield %x, %n : tensor<4xf32>, i64
  } else {
    ds.yield %x, %x : tensor<4xf32>, tensor<4xf32>
  }
  return
}

// -----

func.func @if_else_type(%c: i1, %x: tensor<4xf32>, %y: tensor<2xf32>) {
  // expected-error @below {{'ds.if' op 'else' branch yields 'tensor<2xf32>' as result #0, but the op has 'tensor<4xf32>'}}
  %0 = ds.if %c -> (tensor<4xf32>) {
    ds.yield %x : tensor<4xf32>
  } else {
    ds.yield %y : tensor<2xf32>
  }
  return
}

// -----

func.func @yield_outside_if(%x: tensor<4xf32>) {
  // expected-error @below {{'ds.yield' op expects parent op 'ds.if'}}
  "ds.yield"(%x) : (tensor<4xf32>) -> ()
}

//===----------------------------------------------------------------------===//
// ds.optimizer_step
//===----------------------------------------------------------------------===//

// -----

func.func @step() {
  // expected-error @below {{'ds.optimizer_step' op names engine @model, which is not a ds.engine in this module}}
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}

// -----

ds.engine @teacher {module = "teacher", frozen}
func.func @step() {
  // expected-error @below {{'ds.optimizer_step' op updates engine @teacher, which is frozen (it has no optimizer and its parameters get no gradients)}}
  ds.optimizer_step @teacher {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}

// -----

ds.engine @model {module = ""}
func.func @step() {
  // expected-error @below {{unknown optimizer type 'lamb' (expected adamw, adam or sgd)}}
  ds.optimizer_step @model {type = lamb, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}

// -----

ds.engine @model {module = ""}
func.func @step() {
  // expected-error @below {{'ds.optimizer_step' op lr must be >= 0, but is -0.5}}
  ds.optimizer_step @model {type = adamw, lr = -0.5, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}

// -----

ds.engine @model {module = ""}
func.func @step() {
  // expected-error @below {{'ds.optimizer_step' op betas[1] must be in [0, 1), but is 1}}
  ds.optimizer_step @model {type = adam, lr = 0.001, betas = [0.9, 1.0], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}

// -----

ds.engine @model {module = ""}
func.func @step() {
  // expected-error @below {{'ds.optimizer_step' op betas must hold 2 values, but holds 1}}
  ds.optimizer_step @model {type = adam, lr = 0.001, betas = [0.9], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}

// -----

ds.engine @model {module = ""}
func.func @step() {
  // expected-error @below {{'ds.optimizer_step' op eps must be > 0, but is 0}}
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 0.0, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}

// -----

ds.engine @model {module = ""}
func.func @step() {
  // expected-error @below {{'ds.optimizer_step' op gradient_clipping must be >= 0, but is -1}}
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = -1.0}
  return
}

// -----

ds.engine @model {module = ""}
func.func @step() {
  // expected-error @below {{'ds.optimizer_step' op nesterov momentum requires momentum > 0 and dampening 0, but momentum is 0.9 and dampening 0.1}}
  ds.optimizer_step @model {type = sgd, lr = 0.1, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.9, dampening = 0.1, nesterov = true, gradient_clipping = 1.0}
  return
}

// -----

ds.engine @model {module = ""}
func.func @step() {
  // expected-error @below {{'ds.optimizer_step' op momentum, dampening and nesterov are SGD parameters; adamw needs 0, 0 and false, but they are 0.9, 0 and false}}
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.9, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}

// -----

ds.engine @model {module = ""}
func.func @step() {
  // expected-error @below {{duplicate or unknown struct parameter name: warmup_max}}
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0, scheduler = <kind = WarmupLR, warmup_max = 0.1, warmup_num_steps = 10>}
  return
}

// -----

ds.engine @model {module = ""}
func.func @step() {
  // expected-error @below {{scheduler WarmupDecayLR needs 'total_num_steps'}}
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0, scheduler = <kind = WarmupDecayLR, warmup_max_lr = 0.001, warmup_num_steps = 10>}
  return
}

// -----

ds.engine @model {module = ""}
func.func @step() {
  // expected-error @below {{'ds.optimizer_step' op scheduler warmup_num_steps must be >= 1, but is 0}}
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0, scheduler = <kind = WarmupLR, warmup_num_steps = 0>}
  return
}

// -----

ds.engine @model {module = ""}
func.func @step() {
  // expected-error @below {{'ds.optimizer_step' op scheduler cos_min_ratio must be in [0, 1], but is 2}}
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0, scheduler = <kind = WarmupCosineLR, warmup_num_steps = 10, total_num_steps = 20, cos_min_ratio = 2.0>}
  return
}

// -----

ds.engine @model {module = ""}
func.func @step() {
  // expected-error @below {{expected one of [log, linear] for the shape of a warmup, got: cosine}}
  // expected-error @below {{failed to parse DS_SchedulerAttr parameter 'warmup_type'}}
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0, scheduler = <kind = WarmupLR, warmup_num_steps = 10, warmup_type = cosine>}
  return
}

// -----

ds.engine @model {module = ""}
func.func @step(%c: i1) {
  ds.if %c {
    // expected-error @below {{'ds.optimizer_step' op is inside a ds.if; every rank must run the same updates in the same order, so it belongs at the top level of the function}}
    ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  } else {
  }
  return
}

// -----

ds.engine @model {module = ""}
func.func @step() {
  // expected-error @below {{unknown key 'learning_rate' (expected type, lr, betas, eps, weight_decay, momentum, dampening, nesterov, gradient_clipping, scheduler)}}
  ds.optimizer_step @model {type = adamw, learning_rate = 0.001}
  return
}

//===----------------------------------------------------------------------===//
// Partitioned engines: ds.engine, ds.param, ds.bucket
//===----------------------------------------------------------------------===//

// -----

// expected-error @below {{'ds.engine' op zero_stage and flat_numel describe a partition together, but only zero_stage is set}}
ds.engine @model {module = "", zero_stage = 1}

// -----

// expected-error @below {{'ds.engine' op is frozen (no optimizer, no gradients), but has zero_stage 0; a frozen engine is partitioned only at stage 3, where its parameters are sharded}}
ds.engine @teacher {module = "teacher", frozen, zero_stage = 0, flat_numel = 0}

// -----

// A frozen stage 3 engine shards every parameter, requires_grad or not.
// expected-error @below {{'ds.engine' op is partitioned, but its parameter @t.b has no flat_offset}}
ds.engine @teacher {module = "t", frozen, zero_stage = 3, flat_numel = 8}
ds.param @"t.w" : tensor<4xf32> {module = "t", module_class = "L", engine = @teacher, flat_offset = 0}
ds.param @"t.b" : tensor<4xf32> {module = "t", module_class = "L", engine = @teacher}
ds.bucket @b0 engine @teacher offset 0 numel 8

// -----

// expected-error @below {{'ds.engine' op zero_stage must be 0, 1, 2 or 3, but is 4}}
ds.engine @model {module = "", zero_stage = 4, flat_numel = 0}

// -----

// expected-error @below {{'ds.engine' op buckets must cover [0, 16) without gaps or overlaps, but bucket @b1 starts at 10 where 8 was expected}}
ds.engine @model {module = "", zero_stage = 0, flat_numel = 16}
ds.bucket @b0 engine @model offset 0 numel 8
ds.bucket @b1 engine @model offset 10 numel 6

// -----

// expected-error @below {{'ds.engine' op buckets must cover [0, 16) exactly, but they end at 8}}
ds.engine @model {module = "", zero_stage = 0, flat_numel = 16}
ds.bucket @b0 engine @model offset 0 numel 8

// -----

// expected-error @below {{'ds.engine' op is partitioned, but its trainable parameter @fc.bias has no flat_offset}}
ds.engine @model {module = "", zero_stage = 0, flat_numel = 8}
ds.param @"fc.weight" : tensor<2x3xf32> {module = "fc", module_class = "L", requires_grad, engine = @model, flat_offset = 0}
ds.param @"fc.bias" : tensor<2xf32> {module = "fc", module_class = "L", requires_grad, engine = @model}
ds.bucket @b0 engine @model offset 0 numel 8

// -----

// expected-error @below {{'ds.engine' op parameters @fc.weight ([0, 6)) and @fc.bias (from 4) overlap in the flat buffer}}
ds.engine @model {module = "", zero_stage = 0, flat_numel = 8}
ds.param @"fc.weight" : tensor<2x3xf32> {module = "fc", module_class = "L", requires_grad, engine = @model, flat_offset = 0}
ds.param @"fc.bias" : tensor<2xf32> {module = "fc", module_class = "L", requires_grad, engine = @model, flat_offset = 4}
ds.bucket @b0 engine @model offset 0 numel 8

// -----

ds.engine @model {module = ""}
// expected-error @below {{'ds.param' op has a flat_offset, but its engine @model is not partitioned (no zero_stage)}}
ds.param @"fc.bias" : tensor<2xf32> {module = "fc", module_class = "L", requires_grad, engine = @model, flat_offset = 0}

// -----

ds.engine @model {module = "", zero_stage = 0, flat_numel = 2}
// expected-error @below {{'ds.param' op has a flat_offset, but does not require grad; only trainable parameters (and every parameter of a frozen ZeRO stage 3 engine) are in the flat buffer}}
ds.param @"fc.bias" : tensor<2xf32> {module = "fc", module_class = "L", engine = @model, flat_offset = 0}
ds.bucket @b0 engine @model offset 0 numel 2

// -----

ds.engine @model {module = "", zero_stage = 0, flat_numel = 4}
// expected-error @below {{'ds.param' op occupies [3, 5) of the flat buffer, outside [0, 4) of engine @model}}
ds.param @"fc.bias" : tensor<2xf32> {module = "fc", module_class = "L", requires_grad, engine = @model, flat_offset = 3}
ds.bucket @b0 engine @model offset 0 numel 4

// -----

module attributes {ds.world_size = 4 : i64} {
  ds.engine @model {module = "", zero_stage = 1, flat_numel = 6}
  // expected-error @below {{'ds.bucket' op numel 6 is not a multiple of the world size 4 (every rank owns numel / world size elements)}}
  ds.bucket @b0 engine @model offset 0 numel 6
}

// -----

// expected-error @below {{'ds.bucket' op numel must be > 0, but is 0}}
ds.bucket @b0 engine @model offset 0 numel 0

// -----

// expected-error @below {{'ds.bucket' op names engine @model, which is not a ds.engine in this module}}
ds.bucket @b0 engine @model offset 0 numel 4

// -----

ds.engine @model {module = ""}
// expected-error @below {{'ds.bucket' op belongs to engine @model, which is not partitioned (no zero_stage)}}
ds.bucket @b0 engine @model offset 0 numel 4

//===----------------------------------------------------------------------===//
// Collectives and ds.wait
//===----------------------------------------------------------------------===//

// -----

func.func @undeclared_bucket() {
  // expected-error @below {{'ds.all_reduce' op refers to undeclared bucket @b0}}
  %t = ds.all_reduce @b0
  ds.wait %t
  return
}

// -----

ds.engine @model {module = ""}
func.func @not_a_bucket() {
  // expected-error @below {{'ds.all_gather' op expects @model to be a ds.bucket, but it is a 'ds.engine'}}
  %t = ds.all_gather @model
  ds.wait %t
  return
}

// -----

ds.engine @model {module = "", zero_stage = 1, flat_numel = 4}
ds.bucket @b0 engine @model offset 0 numel 4
func.func @all_reduce_at_stage_1() {
  // expected-error @below {{'ds.all_reduce' op belongs to ZeRO stage 0, but engine @model of bucket @b0 is at stage 1}}
  %t = ds.all_reduce @b0
  ds.wait %t
  return
}

// -----

ds.engine @model {module = "", zero_stage = 0, flat_numel = 4}
ds.bucket @b0 engine @model offset 0 numel 4
func.func @reduce_scatter_at_stage_0() {
  // expected-error @below {{'ds.reduce_scatter' op belongs to ZeRO stages 1 to 3, but engine @model of bucket @b0 is at stage 0}}
  %t = ds.reduce_scatter @b0
  ds.wait %t
  return
}

// -----

ds.engine @model {module = "", zero_stage = 2, flat_numel = 4}
ds.bucket @b0 engine @model offset 0 numel 4
func.func @collective_in_branch(%c: i1) {
  ds.if %c {
    // expected-error @below {{'ds.reduce_scatter' op is inside a ds.if; every rank must issue the same collectives in the same order, so it belongs at the top level of the function}}
    %t = ds.reduce_scatter @b0
    ds.wait %t
  } else {
  }
  return
}

// -----

ds.engine @model {module = "", zero_stage = 0, flat_numel = 4}
ds.bucket @b0 engine @model offset 0 numel 4
func.func @never_waited() {
  // expected-error @below {{'ds.all_reduce' op token must be waited by exactly one ds.wait, but it has 0 use(s)}}
  %t = ds.all_reduce @b0
  return
}

// -----

ds.engine @model {module = "", zero_stage = 0, flat_numel = 4}
ds.bucket @b0 engine @model offset 0 numel 4
func.func @waited_twice() {
  // expected-error @below {{'ds.all_reduce' op token must be waited by exactly one ds.wait, but it has 2 use(s)}}
  %t = ds.all_reduce @b0
  ds.wait %t
  ds.wait %t
  return
}

// -----

ds.engine @model {module = "", zero_stage = 0, flat_numel = 4}
ds.bucket @b0 engine @model offset 0 numel 4
func.func @token_escapes() -> !ds.token {
  // expected-error @below {{'ds.all_reduce' op token must be waited by exactly one ds.wait, but it has 1 use(s) (not a ds.wait)}}
  %t = ds.all_reduce @b0
  return %t : !ds.token
}

// -----

func.func @wait_on_argument(%t: !ds.token) {
  // expected-error @below {{'ds.wait' op expects the token of a ds.all_reduce, ds.reduce_scatter or ds.all_gather}}
  ds.wait %t
  return
}

// -----

ds.engine @model {module = "", zero_stage = 0, flat_numel = 4}
ds.bucket @b0 engine @model offset 0 numel 4
func.func @wait_in_branch(%c: i1) {
  %t = ds.all_reduce @b0
  ds.if %c {
    // expected-error @below {{'ds.wait' op is inside a ds.if; every rank must wait for the same collectives in the same order, so it belongs at the top level of the function}}
    ds.wait %t
  } else {
  }
  return
}

// -----

// Only stage 3 shards parameters, so only its buckets can be persistent.
ds.engine @model {module = "", zero_stage = 2, flat_numel = 4}
// expected-error @below {{'ds.bucket' op is persistent, but engine @model is at ZeRO stage 2; only stage 3 shards parameters, so only its buckets can be persistent}}
ds.bucket @b0 engine @model offset 0 numel 4 persistent

// -----

// A leaf module's bucket is sharded: a stage 3 engine's, not persistent.
ds.engine @model {module = "", zero_stage = 2, flat_numel = 4}
// expected-error @below {{'ds.bucket' op is the bucket of leaf module 'moe', but engine @model is at ZeRO stage 2; a leaf module's bucket is a sharded bucket of a stage 3 engine}}
ds.bucket @b0 engine @model offset 0 numel 4 leaf "moe"

// -----

ds.engine @model {module = "", zero_stage = 3, flat_numel = 4}
// expected-error @below {{'ds.bucket' op is the bucket of leaf module 'moe', but it is persistent; a leaf module's bucket is a sharded bucket of a stage 3 engine}}
ds.bucket @b0 engine @model offset 0 numel 4 persistent leaf "moe"

// -----

ds.engine @model {module = "", zero_stage = 3, flat_numel = 8}
ds.bucket @b0 engine @model offset 0 numel 4
ds.bucket @b1 engine @model offset 4 numel 4 persistent
func.func @release_persistent() {
  // expected-error @below {{'ds.release' op releases bucket @b1, whose parameters are not sharded (it is persistent); only the non-persistent buckets of a stage 3 engine are gathered and released}}
  ds.release @b1
  return
}

// -----

ds.engine @model {module = "", zero_stage = 2, flat_numel = 4}
ds.bucket @b0 engine @model offset 0 numel 4
func.func @release_at_stage_2() {
  // expected-error @below {{'ds.release' op releases bucket @b0, whose parameters are not sharded (engine @model is at ZeRO stage 2); only the non-persistent buckets of a stage 3 engine are gathered and released}}
  ds.release @b0
  return
}

// -----

ds.engine @model {module = "", zero_stage = 3, flat_numel = 4}
ds.bucket @b0 engine @model offset 0 numel 4
func.func @release_in_branch(%c: i1) {
  ds.if %c {
    // expected-error @below {{'ds.release' op is inside a ds.if; every rank must release the same buckets in the same order, so it belongs at the top level of the function}}
    ds.release @b0
    ds.yield
  } else {
    ds.yield
  }
  return
}

// -----

func.func @release_of_nothing() {
  // expected-error @below {{'ds.release' op refers to undeclared bucket @nothing}}
  ds.release @nothing
  return
}

//===----------------------------------------------------------------------===//
// ds.backward_prologue / ds.backward_epilogue
//===----------------------------------------------------------------------===//

// -----

func.func @forward() {
  ds.backward_begin
  // expected-error @below {{'ds.backward_prologue' op names engine @student, which is not a ds.engine in this module}}
  ds.backward_prologue @student
  return
}

// -----

ds.engine @teacher {module = "teacher", frozen}
func.func @forward() {
  ds.backward_begin
  // expected-error @below {{'ds.backward_epilogue' op marks the backward of engine @teacher, which is frozen: it has no gradients, so no share of the backward (only trainable engines have a prologue and an epilogue)}}
  ds.backward_epilogue @teacher
  return
}

// -----

ds.engine @student {module = "student"}
func.func @forward(%c: i1) {
  ds.backward_begin
  ds.if %c {
    // expected-error @below {{'ds.backward_prologue' op is inside a ds.if; every rank must run the same engine backwards in the same order, so it belongs at the top level of the function}}
    ds.backward_prologue @student
    ds.yield
  } else {
    ds.yield
  }
  return
}

// -----

// A frozen engine has no gradients to reduce.
module attributes {ds.world_size = 2 : i64} {
ds.engine @teacher {module = "t", frozen, zero_stage = 3, flat_numel = 4}
ds.param @"t.w" : tensor<4xf32> {module = "t", module_class = "L", engine = @teacher, flat_offset = 0}
ds.bucket @b0 engine @teacher offset 0 numel 4
func.func @forward() {
  // expected-error @below {{'ds.reduce_scatter' op reduces gradients of bucket @b0, but engine @teacher is frozen: it has no gradients (a frozen stage 3 engine only gathers and releases its parameters)}}
  %t = ds.reduce_scatter @b0
  ds.wait %t
  return
}
}

// -----

func.func @forward(%l: tensor<f32>) -> tensor<f32> {
  ds.backward_begin
  // expected-error @+1 {{'ds.cotangent' op is the cotangent of result 1, but @forward returns 1 result(s)}}
  %c = ds.cotangent 1 : tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @forward(%l: tensor<f32>) -> tensor<f32> {
  ds.backward_begin
  // expected-error @+1 {{'ds.cotangent' op has type 'tensor<f16>', but result 0 of @forward is 'tensor<f32>'}}
  %c = ds.cotangent 0 : tensor<f16>
  return %l : tensor<f32>
}

// -----

func.func @forward(%l: tensor<f32>, %i: tensor<2xi64>) -> (tensor<f32>, tensor<2xi64>) {
  ds.backward_begin
  // expected-error @+1 {{'ds.cotangent' op must be a float tensor (only float results have gradients), got 'tensor<2xi64>'}}
  %c = ds.cotangent 1 : tensor<2xi64>
  return %l, %i : tensor<f32>, tensor<2xi64>
}

// -----

func.func @forward(%l: tensor<f32>, %p: i1) -> tensor<f32> {
  ds.backward_begin
  ds.if %p {
    // expected-error @+1 {{'ds.cotangent' op is inside a ds.if; the cotangent of result 0 seeds the backward, so it belongs at the top level of the backward}}
    %c = ds.cotangent 0 : tensor<f32>
    ds.yield
  } else {
    ds.yield
  }
  return %l : tensor<f32>
}

// -----

func.func @forward(%l: tensor<f32>) -> tensor<f32> {
  ds.backward_begin
  // expected-error @+1 {{'ds.cotangent' op attribute 'index' failed to satisfy constraint}}
  %c = ds.cotangent -1 : tensor<f32>
  return %l : tensor<f32>
}
