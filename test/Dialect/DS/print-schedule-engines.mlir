// RUN: ds-opt %s -ds-engine-backward -ds-print-schedule -o /dev/null | FileCheck %s

// -ds-print-schedule shows each engine's backward markers on a line of
// their own, between the compute and the collectives of its share.

// CHECK-LABEL: schedule of @forward (identical on every rank: no collective is inside a ds.if)
// CHECK-NEXT:     1  backward_prologue @s
// CHECK-NEXT:     2  backward: 1 op (through grad @s.w)
// CHECK-NEXT:     3  reduce_scatter @s bucket 0 (4 elements) -> wait at 4
// CHECK-NEXT:     4  wait reduce_scatter @s bucket 0
// CHECK-NEXT:     5  backward_epilogue @s
// CHECK-NEXT:     6  backward: 1 op
// CHECK-NEXT:     7  backward_prologue @r
// CHECK-NEXT:     8  backward: 1 op (through grad @r.w)
// CHECK-NEXT:     9  reduce_scatter @r bucket 0 (4 elements) -> wait at 10
// CHECK-NEXT:    10  wait reduce_scatter @r bucket 0
// CHECK-NEXT:    11  backward_epilogue @r
// CHECK-NOT:   backward
module attributes {ds.world_size = 2 : i64} {
  ds.engine @s {flat_numel = 4 : i64, module = "s", zero_stage = 2 : i64}
  ds.engine @r {flat_numel = 4 : i64, module = "r", zero_stage = 2 : i64}
  ds.param @s.w : tensor<4xf32> {engine = @s, flat_offset = 0 : i64, module = "s", module_class = "M", requires_grad}
  ds.param @r.w : tensor<4xf32> {engine = @r, flat_offset = 0 : i64, module = "r", module_class = "M", requires_grad}
  ds.bucket @s_bucket0 engine @s offset 0 numel 4
  ds.bucket @r_bucket0 engine @r offset 0 numel 4
  func.func @forward(%g: tensor<4xf32>) {
    ds.backward_begin
    ds.grad @s.w, %g : tensor<4xf32>
    %0 = ds.reduce_scatter @s_bucket0
    %1 = ds.aten "aten::neg"(%g) : (tensor<4xf32>) -> tensor<4xf32>
    ds.grad @r.w, %1 : tensor<4xf32>
    %2 = ds.reduce_scatter @r_bucket0
    ds.wait %0
    ds.wait %2
    return
  }
}
