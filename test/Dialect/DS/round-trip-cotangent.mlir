// RUN: ds-opt %s | ds-opt | FileCheck %s
// RUN: ds-opt %s --mlir-print-op-generic | ds-opt | FileCheck %s

// The cotangents of a loss and of the logits, printed and parsed again from
// the custom and from the generic form.

// CHECK-LABEL: func.func @forward(
// CHECK:        ds.backward_begin
// CHECK-NEXT:   %{{.*}} = ds.cotangent 0 : tensor<f32>
// CHECK-NEXT:   %{{.*}} = ds.cotangent 1 : tensor<2x?xbf16>
func.func @forward(%l: tensor<f32>, %logits: tensor<2x?xbf16>) -> (tensor<f32>, tensor<2x?xbf16>) {
  ds.backward_begin
  %c0 = ds.cotangent 0 : tensor<f32>
  %c1 = ds.cotangent 1 : tensor<2x?xbf16>
  return %l, %logits : tensor<f32>, tensor<2x?xbf16>
}
