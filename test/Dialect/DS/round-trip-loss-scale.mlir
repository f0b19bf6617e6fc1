// RUN: ds-opt %s | ds-opt | FileCheck %s
// RUN: ds-opt %s --mlir-print-op-generic | ds-opt | FileCheck %s

// A bucket's communication dtype and the fp16 loss scale, printed and
// parsed again from the custom and from the generic form.

// CHECK:      ds.bucket @model_bucket0 engine @model offset 0 numel 8 dtype bf16{{$}}
// CHECK-NEXT: ds.bucket @model_bucket1 engine @model offset 8 numel 4 persistent dtype f32{{$}}
// CHECK-NEXT: ds.bucket @model_bucket2 engine @model offset 12 numel 4 leaf "blk" dtype f16{{$}}
// CHECK-NEXT: ds.bucket @model_bucket3 engine @model offset 16 numel 4{{$}}
// CHECK-LABEL: func.func @forward(
// CHECK:        ds.backward_begin
// CHECK-NEXT:   %[[S:.*]] = ds.loss_scale @model : tensor<f32>
// CHECK-NEXT:   ds.aten "aten::mul.Tensor"(%{{.*}}, %[[S]])
ds.engine @model {module = "", config = "{}", zero_stage = 3, flat_numel = 20}
ds.param @a : tensor<8xf32> {engine = @model, module = "", module_class = "M", requires_grad, flat_offset = 0}
ds.param @b : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad, flat_offset = 8}
ds.param @c : tensor<4xf32> {engine = @model, module = "blk", module_class = "M", requires_grad, flat_offset = 12}
ds.param @d : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad, flat_offset = 16}
ds.bucket @model_bucket0 engine @model offset 0 numel 8 dtype bf16
ds.bucket @model_bucket1 engine @model offset 8 numel 4 persistent dtype f32
ds.bucket @model_bucket2 engine @model offset 12 numel 4 leaf "blk" dtype f16
ds.bucket @model_bucket3 engine @model offset 16 numel 4
func.func @forward(%x: tensor<f32>) -> tensor<f32> {
  ds.backward_begin
  %s = ds.loss_scale @model : tensor<f32>
  %y = ds.aten "aten::mul.Tensor"(%x, %s) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %y : tensor<f32>
}
