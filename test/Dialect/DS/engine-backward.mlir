// RUN: ds-opt %s -split-input-file -ds-engine-backward -ds-verify-collectives | FileCheck %s

// Two engines on one shared loss: the backward differentiates @b's
// gradients first, so @b's share ends before @a's begins. Each prologue
// lands right before the first top-level op holding a ds.grad of its engine
// (a ds.grad inside a ds.if counts at the ds.if), each epilogue right after
// the last. The frozen @t gets none, and the forward has none.

// CHECK-LABEL: func.func @forward(
// CHECK-NEXT:    ds.aten "aten::neg"
// CHECK-NEXT:    ds.backward_begin
// CHECK-NEXT:    ds.aten "aten::neg"
// CHECK-NEXT:    ds.backward_prologue @b
// CHECK-NEXT:    ds.grad @b.w
// CHECK-NEXT:    ds.aten "aten::neg"
// CHECK-NEXT:    ds.if
// CHECK-NEXT:      ds.grad @b.v
// CHECK-NEXT:    } else {
// CHECK-NEXT:    }
// CHECK-NEXT:    ds.backward_epilogue @b
// CHECK-NEXT:    ds.backward_prologue @a
// CHECK-NEXT:    ds.grad @a.w
// CHECK-NEXT:    ds.grad @a.v
// CHECK-NEXT:    ds.backward_epilogue @a
// CHECK-NEXT:    ds.aten "aten::neg"
// CHECK-NEXT:    return
// CHECK-NOT:   ds.backward_prologue
ds.engine @a {module = "a"}
ds.engine @b {module = "b"}
ds.engine @t {module = "t", frozen}
ds.param @a.w : tensor<4xf32> {engine = @a, module = "a", module_class = "M", requires_grad}
ds.param @a.v : tensor<4xf32> {engine = @a, module = "a", module_class = "M", requires_grad}
ds.param @b.w : tensor<4xf32> {engine = @b, module = "b", module_class = "M", requires_grad}
ds.param @b.v : tensor<4xf32> {engine = @b, module = "b", module_class = "M", requires_grad}
ds.param @t.w : tensor<4xf32> {engine = @t, module = "t", module_class = "M", requires_grad}
func.func @forward(%g: tensor<4xf32>, %c: i1) {
  %0 = ds.aten "aten::neg"(%g) : (tensor<4xf32>) -> tensor<4xf32>
  ds.backward_begin
  %1 = ds.aten "aten::neg"(%g) : (tensor<4xf32>) -> tensor<4xf32>
  ds.grad @b.w, %1 : tensor<4xf32>
  %2 = ds.aten "aten::neg"(%1) : (tensor<4xf32>) -> tensor<4xf32>
  ds.if %c {
    ds.grad @b.v, %2 : tensor<4xf32>
    ds.yield
  } else {
    ds.yield
  }
  ds.grad @a.w, %2 : tensor<4xf32>
  ds.grad @a.v, %2 : tensor<4xf32>
  %3 = ds.aten "aten::neg"(%2) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// The eval function is not the training function: nothing changes there.
// CHECK-LABEL: func.func @forward_eval(
// CHECK-NEXT:    return
func.func @forward_eval(%g: tensor<4xf32>) {
  return
}

// -----

// Three engines whose gradients interleave: a share spans from the engine's
// first gradient to its last, so shares may overlap. Engines are marked in
// declaration order (prologues of engines starting at the same op keep it).
// An engine without gradients (@d) gets no markers.

// CHECK-LABEL: func.func @forward(
// CHECK-NEXT:    ds.backward_begin
// CHECK-NEXT:    ds.backward_prologue @e0
// CHECK-NEXT:    ds.backward_prologue @e2
// CHECK-NEXT:    ds.if
// CHECK-NEXT:      ds.grad @e2.w
// CHECK-NEXT:      ds.grad @e0.w
// CHECK-NEXT:    } else {
// CHECK-NEXT:    }
// CHECK-NEXT:    ds.backward_prologue @e1
// CHECK-NEXT:    ds.grad @e1.w
// CHECK-NEXT:    ds.backward_epilogue @e1
// CHECK-NEXT:    ds.grad @e0.v
// CHECK-NEXT:    ds.backward_epilogue @e0
// CHECK-NEXT:    ds.grad @e2.v
// CHECK-NEXT:    ds.backward_epilogue @e2
// CHECK-NEXT:    return
// CHECK-NOT:   @d
ds.engine @e0 {module = "e0"}
ds.engine @e1 {module = "e1"}
ds.engine @e2 {module = "e2"}
ds.engine @d {module = "d"}
ds.param @e0.w : tensor<4xf32> {engine = @e0, module = "e0", module_class = "M", requires_grad}
ds.param @e0.v : tensor<4xf32> {engine = @e0, module = "e0", module_class = "M", requires_grad}
ds.param @e1.w : tensor<4xf32> {engine = @e1, module = "e1", module_class = "M", requires_grad}
ds.param @e2.w : tensor<4xf32> {engine = @e2, module = "e2", module_class = "M", requires_grad}
ds.param @e2.v : tensor<4xf32> {engine = @e2, module = "e2", module_class = "M", requires_grad}
ds.param @d.w : tensor<4xf32> {engine = @d, module = "d", module_class = "M", requires_grad}
func.func @forward(%g: tensor<4xf32>, %c: i1) {
  ds.backward_begin
  ds.if %c {
    ds.grad @e2.w, %g : tensor<4xf32>
    ds.grad @e0.w, %g : tensor<4xf32>
    ds.yield
  } else {
    ds.yield
  }
  ds.grad @e1.w, %g : tensor<4xf32>
  ds.grad @e0.v, %g : tensor<4xf32>
  ds.grad @e2.v, %g : tensor<4xf32>
  return
}

// -----

// With ZeRO reductions (-ds-zero-partition ran): the epilogue comes after
// the engine's reduce_scatters. A reduction that was left at the end of the
// backward (its bucket has no gradient: @s.unused) moves up behind the last
// one, and the waits of the engine's reductions move before its epilogue.
// @s's reductions are in flight while @r's backward runs, and are done
// when @s's epilogue runs.

// CHECK-LABEL: func.func @forward(
// CHECK-NEXT:    ds.backward_begin
// CHECK-NEXT:    ds.backward_prologue @s
// CHECK-NEXT:    ds.grad @s.w
// CHECK-NEXT:    %[[S0:.*]] = ds.reduce_scatter @s_bucket0
// CHECK-NEXT:    %[[S1:.*]] = ds.reduce_scatter @s_bucket1
// CHECK-NEXT:    ds.wait %[[S0]]
// CHECK-NEXT:    ds.wait %[[S1]]
// CHECK-NEXT:    ds.backward_epilogue @s
// CHECK-NEXT:    ds.backward_prologue @r
// CHECK-NEXT:    ds.grad @r.w
// CHECK-NEXT:    %[[R0:.*]] = ds.reduce_scatter @r_bucket0
// CHECK-NEXT:    ds.wait %[[R0]]
// CHECK-NEXT:    ds.backward_epilogue @r
// CHECK-NEXT:    return
module attributes {ds.world_size = 2 : i64} {
  ds.engine @s {flat_numel = 8 : i64, module = "s", zero_stage = 2 : i64}
  ds.engine @r {flat_numel = 4 : i64, module = "r", zero_stage = 2 : i64}
  ds.param @s.w : tensor<4xf32> {engine = @s, flat_offset = 0 : i64, module = "s", module_class = "M", requires_grad}
  ds.param @s.unused : tensor<4xf32> {engine = @s, flat_offset = 4 : i64, module = "s", module_class = "M", requires_grad}
  ds.param @r.w : tensor<4xf32> {engine = @r, flat_offset = 0 : i64, module = "r", module_class = "M", requires_grad}
  ds.bucket @s_bucket0 engine @s offset 0 numel 4
  ds.bucket @s_bucket1 engine @s offset 4 numel 4
  ds.bucket @r_bucket0 engine @r offset 0 numel 4
  func.func @forward(%g: tensor<4xf32>) {
    ds.backward_begin
    ds.grad @s.w, %g : tensor<4xf32>
    %0 = ds.reduce_scatter @s_bucket0
    ds.grad @r.w, %g : tensor<4xf32>
    %1 = ds.reduce_scatter @r_bucket0
    %2 = ds.reduce_scatter @s_bucket1
    ds.wait %0
    ds.wait %1
    ds.wait %2
    return
  }
}
