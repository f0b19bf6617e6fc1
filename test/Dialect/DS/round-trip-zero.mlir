// RUN: ds-opt %s -split-input-file | ds-opt -split-input-file | FileCheck %s
// RUN: ds-opt %s -split-input-file --mlir-print-op-generic | ds-opt -split-input-file | FileCheck %s

// The ops of the optimizer and of ZeRO partitioning (docs/zero.md), printed
// and parsed again from the custom and from the generic form: a partitioned
// engine (zero_stage, flat_numel), the flat offsets of its parameters, its
// buckets, the collectives on them with their waits, and optimizer_step.

// CHECK:      module attributes {ds.world_size = 2 : i64} {
// CHECK-NEXT:   ds.engine @model {flat_numel = 16 : i64, module = "", zero_stage = 2 : i64}
// CHECK-NEXT:   ds.engine @dp {flat_numel = 4 : i64, module = "dp", zero_stage = 0 : i64}
// CHECK-NEXT:   ds.engine @teacher {frozen, module = "teacher"}
// CHECK-NEXT:   ds.param @fc.weight : tensor<2x3xf32> {engine = @model, flat_offset = 8 : i64, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
// CHECK-NEXT:   ds.param @fc.bias : tensor<2xf32> {engine = @model, flat_offset = 0 : i64, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
// CHECK-NEXT:   ds.param @fc.frozen : tensor<2xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear"}
// CHECK-NEXT:   ds.param @dp.w : tensor<3xf32> {engine = @dp, flat_offset = 0 : i64, module = "dp", module_class = "M", requires_grad}
// CHECK-NEXT:   ds.param @teacher.w : tensor<3xf32> {engine = @teacher, module = "teacher", module_class = "M", requires_grad}
// CHECK-NEXT:   ds.bucket @model_bucket0 engine @model offset 0 numel 8
// CHECK-NEXT:   ds.bucket @model_bucket1 engine @model offset 8 numel 8
// CHECK-NEXT:   ds.bucket @dp_bucket0 engine @dp offset 0 numel 4
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", zero_stage = 2, flat_numel = 16}
ds.engine @dp {module = "dp", zero_stage = 0, flat_numel = 4}
ds.engine @teacher {module = "teacher", frozen}
ds.param @"fc.weight" : tensor<2x3xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad, engine = @model, flat_offset = 8}
ds.param @"fc.bias" : tensor<2xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad, engine = @model, flat_offset = 0}
ds.param @"fc.frozen" : tensor<2xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", engine = @model}
ds.param @"dp.w" : tensor<3xf32> {module = "dp", module_class = "M", requires_grad, engine = @dp, flat_offset = 0}
// A frozen engine's parameters stay outside every flat buffer, requires_grad
// or not.
ds.param @"teacher.w" : tensor<3xf32> {module = "teacher", module_class = "M", requires_grad, engine = @teacher}
ds.bucket @model_bucket0 engine @model offset 0 numel 8
ds.bucket @model_bucket1 engine @model offset 8 numel 8
ds.bucket @dp_bucket0 engine @dp offset 0 numel 4

// Stage 2 reduces inside the backward and waits at its end.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME:      %[[G:.*]]: tensor<2xf32>)
// CHECK-NEXT:    ds.backward_begin
// CHECK-NEXT:    ds.grad @fc.bias, %[[G]] : tensor<2xf32>
// CHECK-NEXT:    %[[T0:.*]] = ds.reduce_scatter @model_bucket0
// CHECK-NEXT:    ds.wait %[[T0]]
// CHECK-NEXT:    return
func.func @forward(%g: tensor<2xf32>) {
  ds.backward_begin
  ds.grad @"fc.bias", %g : tensor<2xf32>
  %t = ds.reduce_scatter @model_bucket0
  ds.wait %t
  return
}

// The hyperparameters print in a fixed order whatever order they are written
// in, numbers as the shortest float literal that reads back exactly.
// CHECK-LABEL: func.func @step()
// CHECK-NEXT:    %[[A:.*]] = ds.all_reduce @dp_bucket0
// CHECK-NEXT:    ds.wait %[[A]]
// CHECK-NEXT:    ds.optimizer_step @dp {type = sgd, lr = 0.1, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 0.0}
// CHECK-NEXT:    %[[R:.*]] = ds.reduce_scatter @model_bucket1
// CHECK-NEXT:    ds.wait %[[R]]
// CHECK-NEXT:    ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.0, 0.5], eps = 1.0e-06, weight_decay = 0.01, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0, scheduler = <kind = WarmupCosineLR, warmup_num_steps = 10, warmup_type = linear, total_num_steps = 100>}
// CHECK-NEXT:    %[[G0:.*]] = ds.all_gather @model_bucket0
// CHECK-NEXT:    %[[G1:.*]] = ds.all_gather @model_bucket1
// CHECK-NEXT:    ds.wait %[[G0]]
// CHECK-NEXT:    ds.wait %[[G1]]
// CHECK-NEXT:    return
func.func @step() {
  %a = ds.all_reduce @dp_bucket0
  ds.wait %a
  ds.optimizer_step @dp {nesterov = false, gradient_clipping = 0.0, type = sgd, lr = 0.1, betas = [0.9, 0.999], eps = 1.0e-8, weight_decay = 0.0, momentum = 0.0, dampening = 0.0}
  %r = ds.reduce_scatter @model_bucket1
  ds.wait %r
  ds.optimizer_step @model {type = adamw, lr = 1.0e-3, betas = [0.0, 0.5], eps = 1.0e-6, weight_decay = 0.01, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0, scheduler = <kind = WarmupCosineLR, warmup_num_steps = 10, warmup_type = linear, total_num_steps = 100>}
  %g0 = ds.all_gather @model_bucket0
  %g1 = ds.all_gather @model_bucket1
  ds.wait %g0
  ds.wait %g1
  return
}
}

// -----

// ZeRO stage 3: a sharded bucket is gathered where its parameters are read
// and released after; a persistent one is not sharded (stage 2's rules); a
// leaf one holds one leaf module's parameters.
// CHECK-LABEL: module attributes {ds.world_size = 2 : i64} {
// CHECK-NEXT:    ds.engine @model {flat_numel = 12 : i64, module = "", zero_stage = 3 : i64}
// CHECK:         ds.bucket @model_bucket0 engine @model offset 0 numel 4
// CHECK-NEXT:    ds.bucket @model_bucket1 engine @model offset 4 numel 4 persistent
// CHECK-NEXT:    ds.bucket @model_bucket2 engine @model offset 8 numel 4 leaf "moe"
// CHECK-LABEL:   func.func @forward_eval()
// CHECK-NEXT:      %[[T:.*]] = ds.all_gather @model_bucket0
// CHECK-NEXT:      ds.wait %[[T]]
// CHECK-NEXT:      ds.get_param @w
// CHECK-NEXT:      ds.aten "aten::relu"
// CHECK-NEXT:      ds.release @model_bucket0
// CHECK-NEXT:      return
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", zero_stage = 3, flat_numel = 12}
ds.param @w : tensor<4xf32> {module = "", module_class = "M", requires_grad, engine = @model, flat_offset = 0}
ds.param @b : tensor<1xf32> {module = "", module_class = "M", requires_grad, engine = @model, flat_offset = 4}
ds.param @moe.w : tensor<4xf32> {module = "moe", module_class = "SparseMoeBlock", requires_grad, engine = @model, flat_offset = 8}
ds.bucket @model_bucket0 engine @model offset 0 numel 4
ds.bucket @model_bucket1 engine @model offset 4 numel 4 persistent
ds.bucket @model_bucket2 engine @model offset 8 numel 4 leaf "moe"
func.func @forward_eval() -> tensor<4xf32> {
  %t = ds.all_gather @model_bucket0
  ds.wait %t
  %w = ds.get_param @w : tensor<4xf32>
  %y = ds.aten "aten::relu"(%w) : (tensor<4xf32>) -> tensor<4xf32>
  ds.release @model_bucket0
  return %y : tensor<4xf32>
}
}
