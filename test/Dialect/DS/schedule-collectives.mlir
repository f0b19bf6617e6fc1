// RUN: ds-opt %s -split-input-file -ds-schedule-collectives -ds-verify-collectives | FileCheck %s

// -ds-schedule-collectives: where the waits go, and how far stage 3's
// gathers are prefetched, as each engine's overlap_comm asks. The input is
// what -ds-zero-partition makes: four sharded buckets of 8 elements read one
// after the other (a, b, c, d), each gathered and waited right before its
// read and released after it; the backward gathers d and c again; every
// bucket is reduce-scattered after its gradient, waited at the end. Each
// result is checked by -ds-verify-collectives too.

// Stage 3 defaults (overlap_comm true, stage3_prefetch_bucket_size 5e7,
// stage3_max_live_parameters 1e9): every gather starts at the top of its
// part of the function, in the order the buckets are needed (never above
// another gather, its bucket's release or ds.backward_begin), and is waited
// right before its read; reduce-scatters are waited at the end.
// CHECK-LABEL: func.func @forward(
// CHECK-NEXT:    %[[A:.*]] = ds.all_gather @b0
// CHECK-NEXT:    %[[B:.*]] = ds.all_gather @b1
// CHECK-NEXT:    %[[C:.*]] = ds.all_gather @b2
// CHECK-NEXT:    %[[D:.*]] = ds.all_gather @b3
// CHECK-NEXT:    ds.wait %[[A]]
// CHECK-NEXT:    ds.get_param @a
// CHECK-NEXT:    ds.aten "aten::mul.Tensor"
// CHECK-NEXT:    ds.release @b0
// CHECK-NEXT:    ds.wait %[[B]]
// CHECK-NEXT:    ds.get_param @b
// CHECK-NEXT:    ds.aten "aten::mul.Tensor"
// CHECK-NEXT:    ds.release @b1
// CHECK-NEXT:    ds.wait %[[C]]
// CHECK-NEXT:    ds.get_param @c
// CHECK-NEXT:    ds.aten "aten::mul.Tensor"
// CHECK-NEXT:    ds.release @b2
// CHECK-NEXT:    ds.wait %[[D]]
// CHECK-NEXT:    ds.get_param @d
// CHECK-NEXT:    ds.aten "aten::mul.Tensor"
// CHECK-NEXT:    ds.release @b3
// CHECK-NEXT:    ds.backward_begin
// CHECK-NEXT:    %[[D2:.*]] = ds.all_gather @b3
// CHECK-NEXT:    %[[C2:.*]] = ds.all_gather @b2
// CHECK-NEXT:    ds.wait %[[D2]]
// CHECK-NEXT:    ds.get_param @d
// CHECK-NEXT:    ds.aten "aten::mul.Tensor"
// CHECK-NEXT:    ds.release @b3
// CHECK-NEXT:    ds.grad @d
// CHECK-NEXT:    %[[R3:.*]] = ds.reduce_scatter @b3
// CHECK-NEXT:    ds.grad @c
// CHECK-NEXT:    %[[R2:.*]] = ds.reduce_scatter @b2
// CHECK-NEXT:    ds.wait %[[C2]]
// CHECK-NEXT:    ds.get_param @c
// CHECK-NEXT:    ds.aten "aten::mul.Tensor"
// CHECK-NEXT:    ds.release @b2
// CHECK-NEXT:    ds.grad @b
// CHECK-NEXT:    %[[R1:.*]] = ds.reduce_scatter @b1
// CHECK-NEXT:    ds.grad @a
// CHECK-NEXT:    %[[R0:.*]] = ds.reduce_scatter @b0
// CHECK-NEXT:    ds.wait %[[R3]]
// CHECK-NEXT:    ds.wait %[[R2]]
// CHECK-NEXT:    ds.wait %[[R1]]
// CHECK-NEXT:    ds.wait %[[R0]]
// CHECK-NEXT:    return
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true>>, zero_stage = 3, flat_numel = 32}
ds.param @a : tensor<8xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.param @b : tensor<8xf32> {engine = @model, flat_offset = 8 : i64, module = "b", module_class = "L", requires_grad}
ds.param @c : tensor<8xf32> {engine = @model, flat_offset = 16 : i64, module = "c", module_class = "L", requires_grad}
ds.param @d : tensor<8xf32> {engine = @model, flat_offset = 24 : i64, module = "d", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
ds.bucket @b1 engine @model offset 8 numel 8
ds.bucket @b2 engine @model offset 16 numel 8
ds.bucket @b3 engine @model offset 24 numel 8
func.func @forward(%x: tensor<8xf32>) -> tensor<8xf32> {
  %ta = ds.all_gather @b0
  ds.wait %ta
  %a = ds.get_param @a : tensor<8xf32>
  %ya = ds.aten "aten::mul.Tensor"(%x, %a) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b0
  %tb = ds.all_gather @b1
  ds.wait %tb
  %b = ds.get_param @b : tensor<8xf32>
  %yb = ds.aten "aten::mul.Tensor"(%ya, %b) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b1
  %tc = ds.all_gather @b2
  ds.wait %tc
  %c = ds.get_param @c : tensor<8xf32>
  %yc = ds.aten "aten::mul.Tensor"(%yb, %c) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b2
  %td = ds.all_gather @b3
  ds.wait %td
  %d = ds.get_param @d : tensor<8xf32>
  %yd = ds.aten "aten::mul.Tensor"(%yc, %d) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b3
  ds.backward_begin
  %td2 = ds.all_gather @b3
  ds.wait %td2
  %d2 = ds.get_param @d : tensor<8xf32>
  %gd = ds.aten "aten::mul.Tensor"(%x, %d2) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b3
  ds.grad @d, %gd : tensor<8xf32>
  %r3 = ds.reduce_scatter @b3
  ds.grad @c, %gd : tensor<8xf32>
  %r2 = ds.reduce_scatter @b2
  %tc2 = ds.all_gather @b2
  ds.wait %tc2
  %c2 = ds.get_param @c : tensor<8xf32>
  %gb = ds.aten "aten::mul.Tensor"(%gd, %c2) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b2
  ds.grad @b, %gb : tensor<8xf32>
  %r1 = ds.reduce_scatter @b1
  ds.grad @a, %gb : tensor<8xf32>
  %r0 = ds.reduce_scatter @b0
  ds.wait %r3
  ds.wait %r2
  ds.wait %r1
  ds.wait %r0
  return %yd : tensor<8xf32>
}
func.func @step() {
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}
}

// -----

// stage3_prefetch_bucket_size 16: at most 16 elements of gathers in flight
// (started, not yet waited). b1's gather may start with b0's; b2's only once
// b0's is waited, b3's once b1's is.
// CHECK-LABEL: func.func @forward(
// CHECK-NEXT:    %[[A:.*]] = ds.all_gather @b0
// CHECK-NEXT:    %[[B:.*]] = ds.all_gather @b1
// CHECK-NEXT:    ds.wait %[[A]]
// CHECK-NEXT:    %[[C:.*]] = ds.all_gather @b2
// CHECK-NEXT:    ds.get_param @a
// CHECK-NEXT:    ds.aten "aten::mul.Tensor"
// CHECK-NEXT:    ds.release @b0
// CHECK-NEXT:    ds.wait %[[B]]
// CHECK-NEXT:    %[[D:.*]] = ds.all_gather @b3
// CHECK-NEXT:    ds.get_param @b
// CHECK:         ds.backward_begin
// CHECK-NEXT:    %[[D2:.*]] = ds.all_gather @b3
// CHECK-NEXT:    %[[C2:.*]] = ds.all_gather @b2
// CHECK-NEXT:    ds.wait %[[D2]]
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, stage3_prefetch_bucket_size = 16>>, zero_stage = 3, flat_numel = 32}
ds.param @a : tensor<8xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.param @b : tensor<8xf32> {engine = @model, flat_offset = 8 : i64, module = "b", module_class = "L", requires_grad}
ds.param @c : tensor<8xf32> {engine = @model, flat_offset = 16 : i64, module = "c", module_class = "L", requires_grad}
ds.param @d : tensor<8xf32> {engine = @model, flat_offset = 24 : i64, module = "d", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
ds.bucket @b1 engine @model offset 8 numel 8
ds.bucket @b2 engine @model offset 16 numel 8
ds.bucket @b3 engine @model offset 24 numel 8
func.func @forward(%x: tensor<8xf32>) -> tensor<8xf32> {
  %ta = ds.all_gather @b0
  ds.wait %ta
  %a = ds.get_param @a : tensor<8xf32>
  %ya = ds.aten "aten::mul.Tensor"(%x, %a) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b0
  %tb = ds.all_gather @b1
  ds.wait %tb
  %b = ds.get_param @b : tensor<8xf32>
  %yb = ds.aten "aten::mul.Tensor"(%ya, %b) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b1
  %tc = ds.all_gather @b2
  ds.wait %tc
  %c = ds.get_param @c : tensor<8xf32>
  %yc = ds.aten "aten::mul.Tensor"(%yb, %c) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b2
  %td = ds.all_gather @b3
  ds.wait %td
  %d = ds.get_param @d : tensor<8xf32>
  %yd = ds.aten "aten::mul.Tensor"(%yc, %d) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b3
  ds.backward_begin
  %td2 = ds.all_gather @b3
  ds.wait %td2
  %d2 = ds.get_param @d : tensor<8xf32>
  %gd = ds.aten "aten::mul.Tensor"(%x, %d2) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b3
  ds.grad @d, %gd : tensor<8xf32>
  %r3 = ds.reduce_scatter @b3
  ds.grad @c, %gd : tensor<8xf32>
  %r2 = ds.reduce_scatter @b2
  %tc2 = ds.all_gather @b2
  ds.wait %tc2
  %c2 = ds.get_param @c : tensor<8xf32>
  %gb = ds.aten "aten::mul.Tensor"(%gd, %c2) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b2
  ds.grad @b, %gb : tensor<8xf32>
  %r1 = ds.reduce_scatter @b1
  ds.grad @a, %gb : tensor<8xf32>
  %r0 = ds.reduce_scatter @b0
  ds.wait %r3
  ds.wait %r2
  ds.wait %r1
  ds.wait %r0
  return %yd : tensor<8xf32>
}
func.func @step() {
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}
}

// -----

// stage3_max_live_parameters 16: at most 16 elements of sharded buckets
// gathered at any point (from the gather's start to the release). b1 joins
// b0 at the top; b2 waits for b0's release, b3 for b1's.
// CHECK-LABEL: func.func @forward(
// CHECK-NEXT:    %[[A:.*]] = ds.all_gather @b0
// CHECK-NEXT:    %[[B:.*]] = ds.all_gather @b1
// CHECK-NEXT:    ds.wait %[[A]]
// CHECK-NEXT:    ds.get_param @a
// CHECK-NEXT:    ds.aten "aten::mul.Tensor"
// CHECK-NEXT:    ds.release @b0
// CHECK-NEXT:    %[[C:.*]] = ds.all_gather @b2
// CHECK-NEXT:    ds.wait %[[B]]
// CHECK-NEXT:    ds.get_param @b
// CHECK-NEXT:    ds.aten "aten::mul.Tensor"
// CHECK-NEXT:    ds.release @b1
// CHECK-NEXT:    %[[D:.*]] = ds.all_gather @b3
// CHECK-NEXT:    ds.wait %[[C]]
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, stage3_max_live_parameters = 16>>, zero_stage = 3, flat_numel = 32}
ds.param @a : tensor<8xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.param @b : tensor<8xf32> {engine = @model, flat_offset = 8 : i64, module = "b", module_class = "L", requires_grad}
ds.param @c : tensor<8xf32> {engine = @model, flat_offset = 16 : i64, module = "c", module_class = "L", requires_grad}
ds.param @d : tensor<8xf32> {engine = @model, flat_offset = 24 : i64, module = "d", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
ds.bucket @b1 engine @model offset 8 numel 8
ds.bucket @b2 engine @model offset 16 numel 8
ds.bucket @b3 engine @model offset 24 numel 8
func.func @forward(%x: tensor<8xf32>) -> tensor<8xf32> {
  %ta = ds.all_gather @b0
  ds.wait %ta
  %a = ds.get_param @a : tensor<8xf32>
  %ya = ds.aten "aten::mul.Tensor"(%x, %a) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b0
  %tb = ds.all_gather @b1
  ds.wait %tb
  %b = ds.get_param @b : tensor<8xf32>
  %yb = ds.aten "aten::mul.Tensor"(%ya, %b) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b1
  %tc = ds.all_gather @b2
  ds.wait %tc
  %c = ds.get_param @c : tensor<8xf32>
  %yc = ds.aten "aten::mul.Tensor"(%yb, %c) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b2
  %td = ds.all_gather @b3
  ds.wait %td
  %d = ds.get_param @d : tensor<8xf32>
  %yd = ds.aten "aten::mul.Tensor"(%yc, %d) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b3
  ds.backward_begin
  %td2 = ds.all_gather @b3
  ds.wait %td2
  %d2 = ds.get_param @d : tensor<8xf32>
  %gd = ds.aten "aten::mul.Tensor"(%x, %d2) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b3
  ds.grad @d, %gd : tensor<8xf32>
  %r3 = ds.reduce_scatter @b3
  ds.grad @c, %gd : tensor<8xf32>
  %r2 = ds.reduce_scatter @b2
  %tc2 = ds.all_gather @b2
  ds.wait %tc2
  %c2 = ds.get_param @c : tensor<8xf32>
  %gb = ds.aten "aten::mul.Tensor"(%gd, %c2) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b2
  ds.grad @b, %gb : tensor<8xf32>
  %r1 = ds.reduce_scatter @b1
  ds.grad @a, %gb : tensor<8xf32>
  %r0 = ds.reduce_scatter @b0
  ds.wait %r3
  ds.wait %r2
  ds.wait %r1
  ds.wait %r0
  return %yd : tensor<8xf32>
}
func.func @step() {
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}
}

// -----

// overlap_comm false: nothing overlaps. Each collective is waited right
// after it starts: the gathers stay where they are read, and every
// reduce-scatter is waited where it starts, inside the backward.
// CHECK-LABEL: func.func @forward(
// CHECK-NEXT:    %[[A:.*]] = ds.all_gather @b0
// CHECK-NEXT:    ds.wait %[[A]]
// CHECK-NEXT:    ds.get_param @a
// CHECK:         ds.release @b3
// CHECK-NEXT:    ds.backward_begin
// CHECK-NEXT:    %[[D2:.*]] = ds.all_gather @b3
// CHECK-NEXT:    ds.wait %[[D2]]
// CHECK:         ds.grad @d
// CHECK-NEXT:    %[[R3:.*]] = ds.reduce_scatter @b3
// CHECK-NEXT:    ds.wait %[[R3]]
// CHECK-NEXT:    ds.grad @c
// CHECK-NEXT:    %[[R2:.*]] = ds.reduce_scatter @b2
// CHECK-NEXT:    ds.wait %[[R2]]
// CHECK-NEXT:    %[[C2:.*]] = ds.all_gather @b2
// CHECK-NEXT:    ds.wait %[[C2]]
// CHECK:         ds.grad @a
// CHECK-NEXT:    %[[R0:.*]] = ds.reduce_scatter @b0
// CHECK-NEXT:    ds.wait %[[R0]]
// CHECK-NEXT:    return
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3>>, zero_stage = 3, flat_numel = 32}
ds.param @a : tensor<8xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.param @b : tensor<8xf32> {engine = @model, flat_offset = 8 : i64, module = "b", module_class = "L", requires_grad}
ds.param @c : tensor<8xf32> {engine = @model, flat_offset = 16 : i64, module = "c", module_class = "L", requires_grad}
ds.param @d : tensor<8xf32> {engine = @model, flat_offset = 24 : i64, module = "d", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
ds.bucket @b1 engine @model offset 8 numel 8
ds.bucket @b2 engine @model offset 16 numel 8
ds.bucket @b3 engine @model offset 24 numel 8
func.func @forward(%x: tensor<8xf32>) -> tensor<8xf32> {
  %ta = ds.all_gather @b0
  ds.wait %ta
  %a = ds.get_param @a : tensor<8xf32>
  %ya = ds.aten "aten::mul.Tensor"(%x, %a) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b0
  %tb = ds.all_gather @b1
  ds.wait %tb
  %b = ds.get_param @b : tensor<8xf32>
  %yb = ds.aten "aten::mul.Tensor"(%ya, %b) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b1
  %tc = ds.all_gather @b2
  ds.wait %tc
  %c = ds.get_param @c : tensor<8xf32>
  %yc = ds.aten "aten::mul.Tensor"(%yb, %c) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b2
  %td = ds.all_gather @b3
  ds.wait %td
  %d = ds.get_param @d : tensor<8xf32>
  %yd = ds.aten "aten::mul.Tensor"(%yc, %d) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b3
  ds.backward_begin
  %td2 = ds.all_gather @b3
  ds.wait %td2
  %d2 = ds.get_param @d : tensor<8xf32>
  %gd = ds.aten "aten::mul.Tensor"(%x, %d2) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b3
  ds.grad @d, %gd : tensor<8xf32>
  %r3 = ds.reduce_scatter @b3
  ds.grad @c, %gd : tensor<8xf32>
  %r2 = ds.reduce_scatter @b2
  %tc2 = ds.all_gather @b2
  ds.wait %tc2
  %c2 = ds.get_param @c : tensor<8xf32>
  %gb = ds.aten "aten::mul.Tensor"(%gd, %c2) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b2
  ds.grad @b, %gb : tensor<8xf32>
  %r1 = ds.reduce_scatter @b1
  ds.grad @a, %gb : tensor<8xf32>
  %r0 = ds.reduce_scatter @b0
  ds.wait %r3
  ds.wait %r2
  ds.wait %r1
  ds.wait %r0
  return %yd : tensor<8xf32>
}
func.func @step() {
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}
}

// -----

// stage3_prefetch_bucket_size 0: no gather is started ahead of its read, but
// overlap_comm still lets the reduce-scatters run until the end.
// CHECK-LABEL: func.func @forward(
// CHECK-NEXT:    %[[A:.*]] = ds.all_gather @b0
// CHECK-NEXT:    ds.wait %[[A]]
// CHECK-NEXT:    ds.get_param @a
// CHECK-NEXT:    ds.aten "aten::mul.Tensor"
// CHECK-NEXT:    ds.release @b0
// CHECK-NEXT:    %[[B:.*]] = ds.all_gather @b1
// CHECK-NEXT:    ds.wait %[[B]]
// CHECK:         %[[R0:.*]] = ds.reduce_scatter @b0
// CHECK-NEXT:    ds.wait
// CHECK-NEXT:    ds.wait
// CHECK-NEXT:    ds.wait
// CHECK-NEXT:    ds.wait %[[R0]]
// CHECK-NEXT:    return
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, stage3_prefetch_bucket_size = 0>>, zero_stage = 3, flat_numel = 32}
ds.param @a : tensor<8xf32> {engine = @model, flat_offset = 0 : i64, module = "a", module_class = "L", requires_grad}
ds.param @b : tensor<8xf32> {engine = @model, flat_offset = 8 : i64, module = "b", module_class = "L", requires_grad}
ds.param @c : tensor<8xf32> {engine = @model, flat_offset = 16 : i64, module = "c", module_class = "L", requires_grad}
ds.param @d : tensor<8xf32> {engine = @model, flat_offset = 24 : i64, module = "d", module_class = "L", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8
ds.bucket @b1 engine @model offset 8 numel 8
ds.bucket @b2 engine @model offset 16 numel 8
ds.bucket @b3 engine @model offset 24 numel 8
func.func @forward(%x: tensor<8xf32>) -> tensor<8xf32> {
  %ta = ds.all_gather @b0
  ds.wait %ta
  %a = ds.get_param @a : tensor<8xf32>
  %ya = ds.aten "aten::mul.Tensor"(%x, %a) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b0
  %tb = ds.all_gather @b1
  ds.wait %tb
  %b = ds.get_param @b : tensor<8xf32>
  %yb = ds.aten "aten::mul.Tensor"(%ya, %b) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b1
  %tc = ds.all_gather @b2
  ds.wait %tc
  %c = ds.get_param @c : tensor<8xf32>
  %yc = ds.aten "aten::mul.Tensor"(%yb, %c) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b2
  %td = ds.all_gather @b3
  ds.wait %td
  %d = ds.get_param @d : tensor<8xf32>
  %yd = ds.aten "aten::mul.Tensor"(%yc, %d) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b3
  ds.backward_begin
  %td2 = ds.all_gather @b3
  ds.wait %td2
  %d2 = ds.get_param @d : tensor<8xf32>
  %gd = ds.aten "aten::mul.Tensor"(%x, %d2) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b3
  ds.grad @d, %gd : tensor<8xf32>
  %r3 = ds.reduce_scatter @b3
  ds.grad @c, %gd : tensor<8xf32>
  %r2 = ds.reduce_scatter @b2
  %tc2 = ds.all_gather @b2
  ds.wait %tc2
  %c2 = ds.get_param @c : tensor<8xf32>
  %gb = ds.aten "aten::mul.Tensor"(%gd, %c2) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  ds.release @b2
  ds.grad @b, %gb : tensor<8xf32>
  %r1 = ds.reduce_scatter @b1
  ds.grad @a, %gb : tensor<8xf32>
  %r0 = ds.reduce_scatter @b0
  ds.wait %r3
  ds.wait %r2
  ds.wait %r1
  ds.wait %r0
  return %yd : tensor<8xf32>
}
func.func @step() {
  ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  return
}
}

// -----

// Stages 0-2 default to overlap_comm false (DeepSpeed's default): stage 2's
// reduce-scatters are waited right after they start, and so are the
// all-gathers of @step. Engine @fast asks for overlap: its collectives stay
// where -ds-zero-partition put them.
// CHECK-LABEL: func.func @forward(
// CHECK-NEXT:    ds.backward_begin
// CHECK-NEXT:    ds.grad @f.w
// CHECK-NEXT:    %[[F:.*]] = ds.reduce_scatter @fast_bucket0
// CHECK-NEXT:    ds.grad @s.w
// CHECK-NEXT:    %[[S:.*]] = ds.reduce_scatter @slow_bucket0
// CHECK-NEXT:    ds.wait %[[S]]
// CHECK-NEXT:    ds.wait %[[F]]
// CHECK-NEXT:    return
// CHECK-LABEL: func.func @step()
// CHECK-NEXT:    ds.optimizer_step @slow
// CHECK-NEXT:    %[[GS:.*]] = ds.all_gather @slow_bucket0
// CHECK-NEXT:    ds.wait %[[GS]]
// CHECK-NEXT:    ds.optimizer_step @fast
// CHECK-NEXT:    %[[GF:.*]] = ds.all_gather @fast_bucket0
// CHECK-NEXT:    ds.wait %[[GF]]
// CHECK-NEXT:    return
module attributes {ds.world_size = 2 : i64} {
ds.engine @slow {module = "s", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2>>, zero_stage = 2, flat_numel = 4}
ds.engine @fast {module = "f", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2, overlap_comm = true>>, zero_stage = 2, flat_numel = 4}
ds.param @s.w : tensor<4xf32> {engine = @slow, flat_offset = 0 : i64, module = "s", module_class = "L", requires_grad}
ds.param @f.w : tensor<4xf32> {engine = @fast, flat_offset = 0 : i64, module = "f", module_class = "L", requires_grad}
ds.bucket @slow_bucket0 engine @slow offset 0 numel 4
ds.bucket @fast_bucket0 engine @fast offset 0 numel 4
func.func @forward(%g: tensor<4xf32>) {
  ds.backward_begin
  ds.grad @f.w, %g : tensor<4xf32>
  %f = ds.reduce_scatter @fast_bucket0
  ds.grad @s.w, %g : tensor<4xf32>
  %s = ds.reduce_scatter @slow_bucket0
  ds.wait %f
  ds.wait %s
  return
}
func.func @step() {
  ds.optimizer_step @slow {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  %gs = ds.all_gather @slow_bucket0
  ds.optimizer_step @fast {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
  %gf = ds.all_gather @fast_bucket0
  ds.wait %gs
  ds.wait %gf
  return
}
}
