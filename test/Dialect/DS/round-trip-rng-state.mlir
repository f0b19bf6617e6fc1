// RUN: ds-opt %s -split-input-file | ds-opt -split-input-file | FileCheck %s
// RUN: ds-opt %s -split-input-file --mlir-print-op-generic | ds-opt -split-input-file | FileCheck %s
// RUN: ds-opt %s -split-input-file -canonicalize -cse | FileCheck %s --check-prefix=KEEP

// The generator's state saved, a draw, the state set back and the draw
// repeated, printed and parsed again from the custom and the generic form.
// CHECK-LABEL: func.func @replay(
// CHECK:         %[[S:.*]] = ds.rng_state_get : tensor<5056xui8>
// CHECK-NEXT:    ds.aten "aten::bernoulli.p"
// CHECK-NEXT:    ds.rng_state_set %[[S]] : tensor<5056xui8>
// CHECK-NEXT:    ds.aten "aten::bernoulli.p"

// Rewrites keep their order with the draws and do not merge the two draws;
// the state nothing reads is dropped.
// KEEP-LABEL: func.func @replay(
// KEEP:         %[[S:.*]] = ds.rng_state_get
// KEEP-NEXT:    %[[A:.*]] = ds.aten "aten::bernoulli.p"
// KEEP-NEXT:    ds.rng_state_set %[[S]]
// KEEP-NEXT:    %[[B:.*]] = ds.aten "aten::bernoulli.p"
// KEEP-NEXT:    ds.aten "aten::add.Tensor"(%[[A]], %[[B]],
// KEEP-LABEL: func.func @unused(
// KEEP-NEXT:    return
func.func @replay(%x: tensor<4xf32>) -> tensor<4xf32> {
  %p = ds.constant 5.000000e-01 : f64
  %n = ds.constant unit : !ds.none
  %one = ds.constant 1 : i64
  %s = ds.rng_state_get : tensor<5056xui8>
  %a = ds.aten "aten::bernoulli.p"(%x, %p, %n) : (tensor<4xf32>, f64, !ds.none) -> tensor<4xf32>
  ds.rng_state_set %s : tensor<5056xui8>
  %b = ds.aten "aten::bernoulli.p"(%x, %p, %n) : (tensor<4xf32>, f64, !ds.none) -> tensor<4xf32>
  %c = ds.aten "aten::add.Tensor"(%a, %b, %one) : (tensor<4xf32>, tensor<4xf32>, i64) -> tensor<4xf32>
  return %c : tensor<4xf32>
}
func.func @unused() {
  %s = ds.rng_state_get : tensor<5056xui8>
  return
}

// -----

// In a module compiled for CUDA the state is the CUDA generator's: its seed
// and Philox offset, 16 bytes.
// CHECK: module attributes {ds.target_device = "cuda"}
// CHECK-LABEL: func.func @replay_cuda(
// CHECK:         %[[S:.*]] = ds.rng_state_get : tensor<16xui8>
// CHECK-NEXT:    ds.aten "aten::bernoulli.p"
// CHECK-NEXT:    ds.rng_state_set %[[S]] : tensor<16xui8>
// CHECK-NEXT:    ds.aten "aten::bernoulli.p"
// KEEP-LABEL: func.func @replay_cuda(
// KEEP:         %[[S:.*]] = ds.rng_state_get : tensor<16xui8>
// KEEP-NEXT:    %[[A:.*]] = ds.aten "aten::bernoulli.p"
// KEEP-NEXT:    ds.rng_state_set %[[S]] : tensor<16xui8>
module attributes {ds.target_device = "cuda"} {
  func.func @replay_cuda(%x: tensor<4xf32>) -> tensor<4xf32> {
    %p = ds.constant 5.000000e-01 : f64
    %n = ds.constant unit : !ds.none
    %one = ds.constant 1 : i64
    %s = ds.rng_state_get : tensor<16xui8>
    %a = ds.aten "aten::bernoulli.p"(%x, %p, %n) : (tensor<4xf32>, f64, !ds.none) -> tensor<4xf32>
    ds.rng_state_set %s : tensor<16xui8>
    %b = ds.aten "aten::bernoulli.p"(%x, %p, %n) : (tensor<4xf32>, f64, !ds.none) -> tensor<4xf32>
    %c = ds.aten "aten::add.Tensor"(%a, %b, %one) : (tensor<4xf32>, tensor<4xf32>, i64) -> tensor<4xf32>
    return %c : tensor<4xf32>
  }
}
