// RUN: ds-opt %s -split-input-file -ds-verify-collectives -verify-diagnostics

// -ds-verify-collectives: what it rejects. A collective, wait or release
// inside a ds.if and a token not waited exactly once are rejected already
// by the ops' verifiers (errors.mlir); the pass checks them again for IR
// that skipped verification. Everything else needs the order of the
// function: each case below breaks one rule.

// A read with no gather before it.
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 3, flat_numel = 16}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.param @p : tensor<4xf32> {engine = @model, flat_offset = 8 : i64, module = "p", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
ds.bucket @b1 engine @model offset 8 numel 8 persistent
func.func @forward_eval(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{reads parameter @a (module 'a') of bucket @b0 (engine @model, ZeRO stage 3) where the bucket is not gathered: no ds.all_gather of the bucket precedes the read in @forward_eval}}
  %a = ds.get_param @a : tensor<4xf32>
  %y = ds.aten "aten::mul.Tensor"(%x, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
}

// -----

// A read before the gather's wait: the data may not be there yet.
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 3, flat_numel = 16}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.param @p : tensor<4xf32> {engine = @model, flat_offset = 8 : i64, module = "p", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
ds.bucket @b1 engine @model offset 8 numel 8 persistent
func.func @forward_eval(%x: tensor<4xf32>) -> tensor<4xf32> {
  %t = ds.all_gather @b0
  // expected-error @below {{reads parameter @a (module 'a') of bucket @b0 (engine @model, ZeRO stage 3) where the bucket is not gathered: its ds.all_gather has not been waited yet}}
  %a = ds.get_param @a : tensor<4xf32>
  ds.wait %t
  %y = ds.aten "aten::mul.Tensor"(%x, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  ds.release @b0
  return %y : tensor<4xf32>
}
}

// -----

// A use of the parameter's value after the release (what -cse would make of
// the backward's own ds.get_param).
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 3, flat_numel = 16}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.param @p : tensor<4xf32> {engine = @model, flat_offset = 8 : i64, module = "p", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
ds.bucket @b1 engine @model offset 8 numel 8 persistent
func.func @forward_eval(%x: tensor<4xf32>) -> tensor<4xf32> {
  %t = ds.all_gather @b0
  ds.wait %t
  %a = ds.get_param @a : tensor<4xf32>
  %y = ds.aten "aten::mul.Tensor"(%x, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  ds.release @b0
  // expected-error @below {{reads parameter @a (module 'a') of bucket @b0 (engine @model, ZeRO stage 3) where the bucket is not gathered: it was released earlier in @forward_eval and not gathered again}}
  %z = ds.aten "aten::mul.Tensor"(%y, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %z : tensor<4xf32>
}
}

// -----

// ... also when the bucket is gathered again: the value belongs to the
// buffer of the first gather (what -cse makes of the backward's ds.get_param
// when it runs after -ds-zero-partition).
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 3, flat_numel = 16}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.param @p : tensor<4xf32> {engine = @model, flat_offset = 8 : i64, module = "p", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
ds.bucket @b1 engine @model offset 8 numel 8 persistent
func.func @forward_eval(%x: tensor<4xf32>) -> tensor<4xf32> {
  %t = ds.all_gather @b0
  ds.wait %t
  %a = ds.get_param @a : tensor<4xf32>
  %y = ds.aten "aten::mul.Tensor"(%x, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  ds.release @b0
  %u = ds.all_gather @b0
  ds.wait %u
  // expected-error @below {{reads parameter @a (module 'a') of bucket @b0 (engine @model, ZeRO stage 3) through a value read before the bucket was released: read the parameter again (ds.get_param) after the bucket is gathered again (-cse merges such reads; run it before -ds-zero-partition)}}
  %z = ds.aten "aten::mul.Tensor"(%y, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  ds.release @b0
  return %z : tensor<4xf32>
}
}

// -----

// A read inside a data-dependent branch whose bucket is not gathered: the
// gather belongs before the ds.if (a gather inside would hang the ranks that
// skip the branch); the branch's module is the leaf-module candidate.
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 3, flat_numel = 16}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "moe.experts.0", module_class = "Expert", requires_grad}
ds.param @p : tensor<4xf32> {engine = @model, flat_offset = 8 : i64, module = "p", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
ds.bucket @b1 engine @model offset 8 numel 8 persistent
func.func @forward_eval(%x: tensor<4xf32>, %c: i1) -> tensor<4xf32> {
  %one = ds.constant 1 : i64
  %y = ds.if %c -> (tensor<4xf32>) {
    // expected-error @below {{reads parameter @a (module 'moe.experts.0') of bucket @b0 (engine @model, ZeRO stage 3) where the bucket is not gathered: no ds.all_gather of the bucket precedes the read in @forward_eval; the read is inside a data-dependent ds.if: gather the bucket before the ds.if (as -ds-zero-partition does), never inside it, or declare 'moe' (SparseMoeBlock) a ZeRO-3 leaf module (zero_optimization.leaf_module) so that its parameters are gathered together before the branch}}
    %a = ds.get_param @a : tensor<4xf32>
    %e = ds.aten "aten::mul.Tensor"(%x, %a) {module = "moe.experts.0", module_class = "Expert"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %o = ds.aten "aten::add.Tensor"(%x, %e, %one) {module = "moe", module_class = "SparseMoeBlock"} : (tensor<4xf32>, tensor<4xf32>, i64) -> tensor<4xf32>
    ds.yield %o : tensor<4xf32>
  } else {
    ds.yield %x : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}
}

// -----

// Gathered twice without a release between.
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 3, flat_numel = 16}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.param @p : tensor<4xf32> {engine = @model, flat_offset = 8 : i64, module = "p", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
ds.bucket @b1 engine @model offset 8 numel 8 persistent
func.func @forward_eval() {
  %t = ds.all_gather @b0
  ds.wait %t
  // expected-error @below {{ds.all_gather of bucket @b0 (engine @model, ZeRO stage 3), which is already gathered: release it before gathering it again}}
  %u = ds.all_gather @b0
  ds.wait %u
  ds.release @b0
  return
}
}

// -----

// Released while its gather is still in flight.
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 3, flat_numel = 16}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.param @p : tensor<4xf32> {engine = @model, flat_offset = 8 : i64, module = "p", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
ds.bucket @b1 engine @model offset 8 numel 8 persistent
func.func @forward_eval() {
  %t = ds.all_gather @b0
  // expected-error @below {{ds.release of bucket @b0 (engine @model, ZeRO stage 3), which is not gathered here (its ds.all_gather has not been waited)}}
  ds.release @b0
  ds.wait %t
  return
}
}

// -----

// Released without a gather.
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 3, flat_numel = 16}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.param @p : tensor<4xf32> {engine = @model, flat_offset = 8 : i64, module = "p", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
ds.bucket @b1 engine @model offset 8 numel 8 persistent
func.func @forward_eval() {
  // expected-error @below {{ds.release of bucket @b0 (engine @model, ZeRO stage 3), which is not gathered here}}
  ds.release @b0
  return
}
}

// -----

// Still gathered when the function returns.
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 3, flat_numel = 16}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.param @p : tensor<4xf32> {engine = @model, flat_offset = 8 : i64, module = "p", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
ds.bucket @b1 engine @model offset 8 numel 8 persistent
func.func @forward_eval() {
  // expected-error @below {{ds.all_gather of bucket @b0 (engine @model, ZeRO stage 3) is never released before @forward_eval returns: release the bucket after its last read}}
  %t = ds.all_gather @b0
  ds.wait %t
  return
}
}

// -----

// A persistent bucket is whole on every rank: it is gathered in @step only.
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 3, flat_numel = 16}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.param @p : tensor<4xf32> {engine = @model, flat_offset = 8 : i64, module = "p", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
ds.bucket @b1 engine @model offset 8 numel 8 persistent
func.func @forward_eval() {
  // expected-error @below {{ds.all_gather of bucket @b1 (engine @model, ZeRO stage 3, persistent) in @forward_eval: the bucket's parameters are whole on every rank; it is gathered in @step, after the engine's optimizer_step}}
  %t = ds.all_gather @b1
  ds.wait %t
  return
}
}

// -----

// A sharded bucket is gathered where it is read, never in @step.
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 3, flat_numel = 16}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.param @p : tensor<4xf32> {engine = @model, flat_offset = 8 : i64, module = "p", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
ds.bucket @b1 engine @model offset 8 numel 8 persistent
func.func @step() {
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  // expected-error @below {{ds.all_gather of sharded bucket @b0 (engine @model, ZeRO stage 3) in @step: a sharded bucket is gathered where its parameters are read (the next forward), not at the accumulation boundary}}
  %t = ds.all_gather @b0
  ds.wait %t
  return
}
}

// -----

// The persistent bucket's gather must follow the update.
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 3, flat_numel = 16}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.param @p : tensor<4xf32> {engine = @model, flat_offset = 8 : i64, module = "p", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
ds.bucket @b1 engine @model offset 8 numel 8 persistent
func.func @step() {
  // expected-error @below {{ds.all_gather of bucket @b1 (engine @model, ZeRO stage 3, persistent) runs before the engine's ds.optimizer_step: it would gather the parameters before they are updated}}
  %t = ds.all_gather @b1
  ds.wait %t
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}
}

// -----

// ... and must be there: the ranks would keep stale parameters.
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 3, flat_numel = 16}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.param @p : tensor<4xf32> {engine = @model, flat_offset = 8 : i64, module = "p", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
ds.bucket @b1 engine @model offset 8 numel 8 persistent
// expected-error @below {{bucket @b1 (engine @model, ZeRO stage 3, persistent) is never all_gathered in @step after the engine's update: the ranks would keep stale parameters}}
func.func @step() {
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}
}

// -----

// Stage 1: the update reads the reduced gradients, so it waits for them.
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 1, flat_numel = 8}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
func.func @step() {
  %r = ds.reduce_scatter @b0
  // expected-error @below {{ds.optimizer_step of engine @model runs before the ds.reduce_scatter of bucket @b0 (engine @model, ZeRO stage 1) was waited: the update would read gradients that are still being reduced}}
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  ds.wait %r
  %g = ds.all_gather @b0
  ds.wait %g
  return
}
}

// -----

// Stage 1 reduces every bucket at the boundary, before the update.
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 1, flat_numel = 8}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
func.func @step() {
  // expected-error @below {{ds.optimizer_step of engine @model runs before bucket @b0 (engine @model, ZeRO stage 1) was reduced: ZeRO stage 1 reduces every bucket in @step before the update}}
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  %g = ds.all_gather @b0
  ds.wait %g
  return
}
}

// -----

// Stage 1 does not reduce in the backward.
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 1, flat_numel = 8}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
func.func @forward() {
  ds.backward_begin
  // expected-error @below {{ds.reduce_scatter of bucket @b0 (engine @model, ZeRO stage 1) in @forward: stages 0 and 1 reduce at the accumulation boundary, in @step}}
  %r = ds.reduce_scatter @b0
  ds.wait %r
  return
}
}

// -----

// Stage 2: a gradient written after its bucket's reduce-scatter is lost.
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 2, flat_numel = 8}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
func.func @forward(%g: tensor<4xf32>) {
  ds.backward_begin
  %r = ds.reduce_scatter @b0
  // expected-error @below {{writes the gradient of @a (module 'a') into bucket @b0 (engine @model, ZeRO stage 2) after the bucket's ds.reduce_scatter: the reduction would miss it}}
  ds.grad @a, %g : tensor<4xf32>
  ds.wait %r
  return
}
}

// -----

// Stage 2: every bucket is reduce-scattered in the backward.
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 2, flat_numel = 8}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
// expected-error @below {{bucket @b0 (engine @model, ZeRO stage 2) is never reduce-scattered in @forward: its gradients would not reach the shards}}
func.func @forward(%g: tensor<4xf32>) {
  ds.backward_begin
  ds.grad @a, %g : tensor<4xf32>
  return
}
}

// -----

// ... once.
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 2, flat_numel = 8}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
func.func @forward(%g: tensor<4xf32>) {
  ds.backward_begin
  ds.grad @a, %g : tensor<4xf32>
  %r = ds.reduce_scatter @b0
  ds.wait %r
  // expected-error @below {{ds.reduce_scatter of bucket @b0 (engine @model, ZeRO stage 2) a second time in @forward}}
  %s = ds.reduce_scatter @b0
  ds.wait %s
  return
}
}

// -----

// The eval function has no gradients to reduce.
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 2, flat_numel = 8}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
func.func @forward_eval() {
  // expected-error @below {{ds.reduce_scatter of bucket @b0 (engine @model, ZeRO stage 2) in @forward_eval: stages 2 and 3 reduce in the backward of the training function}}
  %r = ds.reduce_scatter @b0
  ds.wait %r
  return
}
}
