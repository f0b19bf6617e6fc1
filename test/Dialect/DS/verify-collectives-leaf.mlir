// RUN: ds-opt %s -split-input-file -ds-verify-collectives -verify-diagnostics | FileCheck %s

// -ds-verify-collectives and ZeRO-3 leaf modules (docs/leaf-modules.md).

// A leaf with data-dependent routing passes the order check: its bucket is
// gathered before the first read of the leaf, no collective is inside its
// ds.ifs, and the reads inside them lie between the gather and the release.
// CHECK-LABEL: ds.bucket @b0 engine @model offset 0 numel 8 leaf "moe"
// CHECK:       ds.all_gather @b0
// CHECK:       ds.if
// CHECK:       ds.release @b0
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 3, flat_numel = 8}
ds.param @g : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "moe.gate", module_class = "Linear", requires_grad}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 4 : i64, module = "moe.experts.0", module_class = "Expert", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8 leaf "moe"
func.func @forward_eval(%x: tensor<4xf32>, %c: i1) -> tensor<4xf32> {
  %t = ds.all_gather @b0
  ds.wait %t
  %g = ds.get_param @g : tensor<4xf32>
  %h = ds.aten "aten::mul.Tensor"(%x, %g) {module = "moe.gate", module_class = "Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = ds.if %c -> (tensor<4xf32>) {
    %a = ds.get_param @a : tensor<4xf32>
    %e = ds.aten "aten::mul.Tensor"(%h, %a) {module = "moe.experts.0", module_class = "Expert"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    ds.yield %e : tensor<4xf32>
  } else {
    ds.yield %h : tensor<4xf32>
  }
  ds.release @b0
  return %y : tensor<4xf32>
}
}

// -----

// A leaf's bucket released before its last ds.if: the read inside is
// rejected, naming the leaf.
module attributes {ds.world_size = 2 : i64} {
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2>, zero_stage = 3, flat_numel = 8}
ds.param @g : tensor<4xf32> {engine = @model, flat_offset = 0 : i64, module = "moe.gate", module_class = "Linear", requires_grad}
ds.param @a : tensor<4xf32> {engine = @model, flat_offset = 4 : i64, module = "moe.experts.0", module_class = "Expert", requires_grad}
ds.bucket @b0 engine @model offset 0 numel 8 leaf "moe"
func.func @forward_eval(%x: tensor<4xf32>, %c: i1) -> tensor<4xf32> {
  %t = ds.all_gather @b0
  ds.wait %t
  %g = ds.get_param @g : tensor<4xf32>
  %h = ds.aten "aten::mul.Tensor"(%x, %g) {module = "moe.gate", module_class = "Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  ds.release @b0
  %y = ds.if %c -> (tensor<4xf32>) {
    // expected-error @below {{reads parameter @a (module 'moe.experts.0') of bucket @b0 (engine @model, ZeRO stage 3, leaf 'moe') where the bucket is not gathered: it was released earlier in @forward_eval and not gathered again; the read is inside a data-dependent ds.if: gather the bucket before the ds.if (as -ds-zero-partition does), never inside it (a leaf module's bucket is gathered before the leaf's first read)}}
    %a = ds.get_param @a : tensor<4xf32>
    %e = ds.aten "aten::mul.Tensor"(%h, %a) {module = "moe.experts.0", module_class = "Expert"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    ds.yield %e : tensor<4xf32>
  } else {
    ds.yield %h : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}
}
