// RUN: ds-opt %s -split-input-file -ds-verify-collectives -verify-diagnostics

// -ds-verify-collectives: the engine backward markers (-ds-engine-backward),
// checked as the plan validator checks them (docs/plan-format.md). Each case
// breaks one rule. A marker of a frozen or unknown engine, or inside a
// ds.if, is rejected by the ops' verifiers (errors.mlir).

// A marker in the forward.
ds.engine @a {module = "a"}
ds.param @a.w : tensor<4xf32> {engine = @a, module = "a", module_class = "M", requires_grad}
func.func @forward(%g: tensor<4xf32>) {
  // expected-error @below {{ds.backward_prologue @a comes before ds.backward_begin in @forward: it belongs to the backward}}
  ds.backward_prologue @a
  ds.backward_begin
  ds.grad @a.w, %g : tensor<4xf32>
  ds.backward_epilogue @a
  return
}

// -----

// A marker outside the training function.
ds.engine @a {module = "a"}
func.func @forward_eval() {
  // expected-error @below {{ds.backward_epilogue in @forward_eval: engine backward markers belong to the backward of the training function, at the top level}}
  ds.backward_epilogue @a
  return
}

// -----

// A gradient before the engine's prologue.
ds.engine @a {module = "a"}
ds.param @a.w : tensor<4xf32> {engine = @a, module = "a", module_class = "M", requires_grad}
func.func @forward(%g: tensor<4xf32>) {
  ds.backward_begin
  // expected-note @below {{the engine's first gradient}}
  ds.grad @a.w, %g : tensor<4xf32>
  // expected-error @below {{ds.backward_prologue @a comes after a gradient of the engine; the prologue precedes every gradient of its engine}}
  ds.backward_prologue @a
  ds.backward_epilogue @a
  return
}

// -----

// Two prologues.
ds.engine @a {module = "a"}
ds.param @a.w : tensor<4xf32> {engine = @a, module = "a", module_class = "M", requires_grad}
func.func @forward(%g: tensor<4xf32>) {
  ds.backward_begin
  ds.backward_prologue @a
  // expected-error @below {{ds.backward_prologue @a is the engine's second backward prologue}}
  ds.backward_prologue @a
  ds.grad @a.w, %g : tensor<4xf32>
  ds.backward_epilogue @a
  return
}

// -----

// An epilogue without a prologue.
ds.engine @a {module = "a"}
ds.param @a.w : tensor<4xf32> {engine = @a, module = "a", module_class = "M", requires_grad}
func.func @forward(%g: tensor<4xf32>) {
  ds.backward_begin
  // expected-error @below {{ds.backward_epilogue @a has no ds.backward_prologue of the engine before it}}
  ds.backward_epilogue @a
  return
}

// -----

// Two epilogues.
ds.engine @a {module = "a"}
ds.param @a.w : tensor<4xf32> {engine = @a, module = "a", module_class = "M", requires_grad}
func.func @forward(%g: tensor<4xf32>) {
  ds.backward_begin
  ds.backward_prologue @a
  ds.grad @a.w, %g : tensor<4xf32>
  ds.backward_epilogue @a
  // expected-error @below {{ds.backward_epilogue @a is the engine's second backward epilogue}}
  ds.backward_epilogue @a
  return
}

// -----

// A gradient after the epilogue, inside a ds.if.
ds.engine @a {module = "a"}
ds.param @a.w : tensor<4xf32> {engine = @a, module = "a", module_class = "M", requires_grad}
func.func @forward(%g: tensor<4xf32>, %c: i1) {
  ds.backward_begin
  ds.backward_prologue @a
  ds.grad @a.w, %g : tensor<4xf32>
  ds.backward_epilogue @a
  ds.if %c {
    // expected-error @below {{writes a gradient of engine @a after its ds.backward_epilogue; every gradient of an engine lies between its prologue and its epilogue}}
    ds.grad @a.w, %g : tensor<4xf32>
    ds.yield
  } else {
    ds.yield
  }
  return
}

// -----

// A prologue without an epilogue.
ds.engine @a {module = "a"}
ds.param @a.w : tensor<4xf32> {engine = @a, module = "a", module_class = "M", requires_grad}
func.func @forward(%g: tensor<4xf32>) {
  ds.backward_begin
  // expected-error @below {{engine @a has a ds.backward_prologue but no ds.backward_epilogue}}
  ds.backward_prologue @a
  ds.grad @a.w, %g : tensor<4xf32>
  return
}

// -----

// All or nothing: @b has gradients but no markers while @a has them.
ds.engine @a {module = "a"}
ds.engine @b {module = "b"}
ds.param @a.w : tensor<4xf32> {engine = @a, module = "a", module_class = "M", requires_grad}
ds.param @b.w : tensor<4xf32> {engine = @b, module = "b", module_class = "M", requires_grad}
func.func @forward(%g: tensor<4xf32>) {
  ds.backward_begin
  ds.backward_prologue @a
  ds.grad @a.w, %g : tensor<4xf32>
  ds.backward_epilogue @a
  // expected-error @below {{engine @b has gradients in @forward but no ds.backward_prologue, while other engines have backward markers (every trainable engine with gradients has them, or none does)}}
  ds.grad @b.w, %g : tensor<4xf32>
  return
}

// -----

// The epilogue before the wait of the engine's reduction.
module attributes {ds.world_size = 2 : i64} {
ds.engine @a {flat_numel = 4 : i64, module = "a", zero_stage = 2 : i64}
ds.param @a.w : tensor<4xf32> {engine = @a, flat_offset = 0 : i64, module = "a", module_class = "M", requires_grad}
ds.bucket @a_bucket0 engine @a offset 0 numel 4
func.func @forward(%g: tensor<4xf32>) {
  ds.backward_begin
  ds.backward_prologue @a
  ds.grad @a.w, %g : tensor<4xf32>
  %t = ds.reduce_scatter @a_bucket0
  // expected-error @below {{ds.backward_epilogue @a comes before the ds.wait of the ds.reduce_scatter of bucket @a_bucket0 (engine @a, ZeRO stage 2): the epilogue ends the engine's reductions}}
  ds.backward_epilogue @a
  ds.wait %t
  return
}
}

// -----

// A reduction of the engine after its epilogue.
module attributes {ds.world_size = 2 : i64} {
ds.engine @a {flat_numel = 8 : i64, module = "a", zero_stage = 2 : i64}
ds.param @a.w : tensor<4xf32> {engine = @a, flat_offset = 0 : i64, module = "a", module_class = "M", requires_grad}
ds.param @a.v : tensor<4xf32> {engine = @a, flat_offset = 4 : i64, module = "a", module_class = "M", requires_grad}
ds.bucket @a_bucket0 engine @a offset 0 numel 4
ds.bucket @a_bucket1 engine @a offset 4 numel 4
func.func @forward(%g: tensor<4xf32>) {
  ds.backward_begin
  ds.backward_prologue @a
  ds.grad @a.w, %g : tensor<4xf32>
  %t = ds.reduce_scatter @a_bucket0
  ds.wait %t
  ds.backward_epilogue @a
  // expected-error @below {{ds.reduce_scatter of bucket @a_bucket1 (engine @a, ZeRO stage 2) after the engine's ds.backward_epilogue: the epilogue ends the engine's reductions}}
  %u = ds.reduce_scatter @a_bucket1
  ds.wait %u
  return
}
}
