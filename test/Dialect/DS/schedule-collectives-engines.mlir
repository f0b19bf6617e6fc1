// RUN: ds-opt %s -ds-schedule-collectives -ds-verify-collectives | FileCheck %s

// -ds-schedule-collectives with the engine backward markers of
// -ds-engine-backward: an engine with overlap_comm on waits its
// reduce-scatters right before its own ds.backward_epilogue (not at the end
// of the backward), so @early's reductions are done when @late's backward
// starts; @late, with overlap_comm off, waits each reduction right after it
// starts, before its epilogue. Nothing of an engine passes its
// epilogue. The input is what -ds-engine-backward makes after
// -ds-zero-partition (the waits gathered before each epilogue), shuffled to
// show that the pass puts them back in start order.

// CHECK-LABEL: func.func @forward(
// CHECK-NEXT:    ds.backward_begin
// CHECK-NEXT:    ds.backward_prologue @early
// CHECK-NEXT:    ds.grad @early.a
// CHECK-NEXT:    %[[E0:.*]] = ds.reduce_scatter @early_bucket0
// CHECK-NEXT:    ds.grad @early.b
// CHECK-NEXT:    %[[E1:.*]] = ds.reduce_scatter @early_bucket1
// CHECK-NEXT:    ds.wait %[[E0]]
// CHECK-NEXT:    ds.wait %[[E1]]
// CHECK-NEXT:    ds.backward_epilogue @early
// CHECK-NEXT:    ds.backward_prologue @late
// CHECK-NEXT:    ds.grad @late.a
// CHECK-NEXT:    %[[L0:.*]] = ds.reduce_scatter @late_bucket0
// CHECK-NEXT:    ds.wait %[[L0]]
// CHECK-NEXT:    ds.grad @late.b
// CHECK-NEXT:    %[[L1:.*]] = ds.reduce_scatter @late_bucket1
// CHECK-NEXT:    ds.wait %[[L1]]
// CHECK-NEXT:    ds.backward_epilogue @late
// CHECK-NEXT:    return
module attributes {ds.world_size = 2 : i64} {
  ds.engine @early {deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2, overlap_comm = true>>, flat_numel = 8 : i64, module = "early", zero_stage = 2 : i64}
  ds.engine @late {deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2>>, flat_numel = 8 : i64, module = "late", zero_stage = 2 : i64}
  ds.param @early.a : tensor<4xf32> {engine = @early, flat_offset = 0 : i64, module = "early", module_class = "M", requires_grad}
  ds.param @early.b : tensor<4xf32> {engine = @early, flat_offset = 4 : i64, module = "early", module_class = "M", requires_grad}
  ds.param @late.a : tensor<4xf32> {engine = @late, flat_offset = 0 : i64, module = "late", module_class = "M", requires_grad}
  ds.param @late.b : tensor<4xf32> {engine = @late, flat_offset = 4 : i64, module = "late", module_class = "M", requires_grad}
  ds.bucket @early_bucket0 engine @early offset 0 numel 4
  ds.bucket @early_bucket1 engine @early offset 4 numel 4
  ds.bucket @late_bucket0 engine @late offset 0 numel 4
  ds.bucket @late_bucket1 engine @late offset 4 numel 4
  func.func @forward(%g: tensor<4xf32>) {
    ds.backward_begin
    ds.backward_prologue @early
    ds.grad @early.a, %g : tensor<4xf32>
    %0 = ds.reduce_scatter @early_bucket0
    ds.grad @early.b, %g : tensor<4xf32>
    %1 = ds.reduce_scatter @early_bucket1
    ds.wait %1
    ds.wait %0
    ds.backward_epilogue @early
    ds.backward_prologue @late
    ds.grad @late.a, %g : tensor<4xf32>
    %2 = ds.reduce_scatter @late_bucket0
    ds.grad @late.b, %g : tensor<4xf32>
    %3 = ds.reduce_scatter @late_bucket1
    ds.wait %2
    ds.wait %3
    ds.backward_epilogue @late
    return
  }
}
