// RUN: ds-opt %s -split-input-file -ds-assign-precision -canonicalize | FileCheck %s

// The dtype inference -ds-assign-precision runs after its casts
// (DTypeInference.h), seen on functions whose arguments already have mixed
// dtypes (no engine asks for a precision mode, so only inference and the
// explicit promotion casts act). The declared result types are all f32:
// the pass recomputes them as LibTorch would.

// CHECK-LABEL: func.func @rules(%arg0: tensor<4xbf16>, %arg1: tensor<f32>, %arg2: tensor<bf16>, %arg3: tensor<4xf16>, %arg4: tensor<4xf32>, %arg5: tensor<2x4xbf16>)
// CHECK-SAME:      -> (tensor<4xbf16>, tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>, tensor<3xf32>, tensor<4xi1>, tensor<4xbf16>, tensor<bf16>, tensor<2x4xbf16>)
// A dimensioned tensor decides over a 0-dim one: no cast, bf16.
// CHECK:      %[[MUL:.*]] = ds.aten "aten::mul.Tensor"(%arg0, %arg1) : (tensor<4xbf16>, tensor<f32>) -> tensor<4xbf16>
// Only 0-dim tensors: they decide; the bf16 one is cast up.
// CHECK-NEXT: %[[A32:.*]] = ds.aten "aten::to.dtype"(%arg2, {{.*}} : (tensor<bf16>, {{.*}}) -> tensor<f32>
// CHECK-NEXT: %[[ADD0:.*]] = ds.aten "aten::add.Tensor"(%[[A32]], %arg1, {{.*}} : (tensor<f32>, tensor<f32>, i64) -> tensor<f32>
// f16 with bf16 promotes to f32: both are cast.
// CHECK-NEXT: %[[H32:.*]] = ds.aten "aten::to.dtype"(%arg3, {{.*}} -> tensor<4xf32>
// CHECK-NEXT: %[[B32:.*]] = ds.aten "aten::to.dtype"(%arg0, {{.*}} -> tensor<4xf32>
// CHECK-NEXT: %[[MIX:.*]] = ds.aten "aten::add.Tensor"(%[[H32]], %[[B32]], {{.*}} -> tensor<4xf32>
// An explicit dtype argument decides (6: f32).
// CHECK-NEXT: %[[SM:.*]] = ds.aten "aten::softmax.int"(%arg0, {{.*}} : (tensor<4xbf16>, i64, i64) -> tensor<4xf32>
// dtype None follows the operand.
// CHECK-NEXT: %[[ZL:.*]] = ds.aten "aten::zeros_like"(%arg0, {{.*}} -> tensor<4xbf16>
// No float operand: the declared type stands (aten::zeros, default dtype).
// CHECK-NEXT: ds.list_construct
// CHECK-NEXT: %[[Z:.*]] = ds.aten "aten::zeros"({{.*}} -> tensor<3xf32>
// Integer and bool results never change.
// CHECK-NEXT: %[[EQ:.*]] = ds.aten "aten::eq.Tensor"(%arg0, %arg0) : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xi1>
// aten::type_as takes the other operand's dtype.
// CHECK-NEXT: %[[TA:.*]] = ds.aten "aten::type_as"(%arg4, %arg0) : (tensor<4xf32>, tensor<4xbf16>) -> tensor<4xbf16>
// A reduction of a bf16 tensor with dtype None stays bf16.
// CHECK-NEXT: %[[SUM:.*]] = ds.aten "aten::sum"(%arg0, {{.*}} -> tensor<bf16>
// LibTorch's CPU batch norm takes a bf16 input with f32 weights and
// statistics and returns bf16: no cast, the input's dtype.
// CHECK-NEXT: %[[BN:.*]] = ds.aten "aten::batch_norm"(%arg5, %arg4, %arg4, %arg4, %arg4, {{.*}} : (tensor<2x4xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, i1, f64, f64, i1) -> tensor<2x4xbf16>
// CHECK-NEXT: return %[[MUL]], %[[ADD0]], %[[MIX]], %[[SM]], %[[ZL]], %[[Z]], %[[EQ]], %[[TA]], %[[SUM]], %[[BN]]
func.func @rules(%b: tensor<4xbf16>, %s: tensor<f32>, %sb: tensor<bf16>, %h: tensor<4xf16>, %f: tensor<4xf32>, %x: tensor<2x4xbf16>)
    -> (tensor<4xf32>, tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xi1>, tensor<4xf32>, tensor<f32>, tensor<2x4xf32>) {
  %one = ds.constant 1 : i64
  %none = ds.constant unit : !ds.none
  %m1 = ds.constant -1 : i64
  %f32 = ds.constant 6 : i64
  %three = ds.constant 3 : i64
  %mul = ds.aten "aten::mul.Tensor"(%b, %s) : (tensor<4xbf16>, tensor<f32>) -> tensor<4xf32>
  %add0 = ds.aten "aten::add.Tensor"(%sb, %s, %one) : (tensor<bf16>, tensor<f32>, i64) -> tensor<f32>
  %mix = ds.aten "aten::add.Tensor"(%h, %b, %one) : (tensor<4xf16>, tensor<4xbf16>, i64) -> tensor<4xf32>
  %sm = ds.aten "aten::softmax.int"(%b, %m1, %f32) : (tensor<4xbf16>, i64, i64) -> tensor<4xf32>
  %zl = ds.aten "aten::zeros_like"(%b, %none, %none, %none, %none, %none) : (tensor<4xbf16>, !ds.none, !ds.none, !ds.none, !ds.none, !ds.none) -> tensor<4xf32>
  %size = ds.list_construct %three : (i64) -> !ds.list<i64>
  %z = ds.aten "aten::zeros"(%size, %none, %none, %none, %none) : (!ds.list<i64>, !ds.none, !ds.none, !ds.none, !ds.none) -> tensor<3xf32>
  %eq = ds.aten "aten::eq.Tensor"(%b, %b) : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xi1>
  %ta = ds.aten "aten::type_as"(%f, %b) : (tensor<4xf32>, tensor<4xbf16>) -> tensor<4xf32>
  %sum = ds.aten "aten::sum"(%b, %none) : (tensor<4xbf16>, !ds.none) -> tensor<f32>
  %true = ds.constant true
  %mom = ds.constant 0.1 : f64
  %eps = ds.constant 1.0e-05 : f64
  %bn = ds.aten "aten::batch_norm"(%x, %f, %f, %f, %f, %true, %mom, %eps, %true) : (tensor<2x4xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, i1, f64, f64, i1) -> tensor<2x4xf32>
  return %mul, %add0, %mix, %sm, %zl, %z, %eq, %ta, %sum, %bn : tensor<4xf32>, tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xi1>, tensor<4xf32>, tensor<f32>, tensor<2x4xf32>
}

// -----

// A ds.if takes the promoted type of what its branches yield; the branch
// that yields the narrower type casts it up before its ds.yield. The ops
// inside the branches are inferred first.
// CHECK-LABEL: func.func @branches(%arg0: i1, %arg1: tensor<4xbf16>, %arg2: tensor<4xf32>) -> tensor<4xf32>
// CHECK:      %[[IF:.*]] = ds.if %arg0 -> (tensor<4xf32>) {
// CHECK-NEXT:   %[[R:.*]] = ds.aten "aten::relu"(%arg1) : (tensor<4xbf16>) -> tensor<4xbf16>
// CHECK-NEXT:   %[[R32:.*]] = ds.aten "aten::to.dtype"(%[[R]], {{.*}} : (tensor<4xbf16>, {{.*}}) -> tensor<4xf32>
// CHECK-NEXT:   ds.yield %[[R32]] : tensor<4xf32>
// CHECK-NEXT: } else {
// CHECK-NEXT:   ds.yield %arg2 : tensor<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[IF]] : tensor<4xf32>
func.func @branches(%c: i1, %b: tensor<4xbf16>, %f: tensor<4xf32>) -> tensor<4xf32> {
  %y = ds.if %c -> (tensor<4xf32>) {
    %r = ds.aten "aten::relu"(%b) : (tensor<4xbf16>) -> tensor<4xf32>
    ds.yield %r : tensor<4xf32>
  } else {
    ds.yield %f : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}

// -----

// The CPU flash attention kernel returns its logsumexp in f32 for bf16 / f16
// inputs (LibTorch 2.15), its output in the inputs' dtype; _safe_softmax's
// dtype argument decides its result (6: f32).
// CHECK-LABEL: func.func @attention(%arg0: tensor<2x2x4x8xbf16>, %arg1: tensor<4x8xbf16>) -> (tensor<2x2x4x8xbf16>, tensor<2x2x4xf32>, tensor<4x8xf32>, tensor<4x8xbf16>)
// CHECK:      ds.aten "aten::_scaled_dot_product_flash_attention_for_cpu"({{.*}} -> (tensor<2x2x4x8xbf16>, tensor<2x2x4xf32>)
// CHECK-NEXT: ds.aten "aten::_safe_softmax"(%arg1, %{{.*}}, %{{.*}}) : (tensor<4x8xbf16>, i64, i64) -> tensor<4x8xf32>
// CHECK-NEXT: ds.aten "aten::_safe_softmax"(%arg1, %{{.*}}, %{{.*}}) : (tensor<4x8xbf16>, i64, !ds.none) -> tensor<4x8xbf16>
func.func @attention(%q: tensor<2x2x4x8xbf16>, %x: tensor<4x8xbf16>) -> (tensor<2x2x4x8xf32>, tensor<2x2x4xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %none = ds.constant unit : !ds.none
  %zero = ds.constant 0.0 : f64
  %true = ds.constant true
  %m1 = ds.constant -1 : i64
  %f32 = ds.constant 6 : i64
  %o:2 = ds.aten "aten::_scaled_dot_product_flash_attention_for_cpu"(%q, %q, %q, %zero, %true, %none, %none) : (tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>, f64, i1, !ds.none, !ds.none) -> (tensor<2x2x4x8xf32>, tensor<2x2x4xf32>)
  %s = ds.aten "aten::_safe_softmax"(%x, %m1, %f32) : (tensor<4x8xbf16>, i64, i64) -> tensor<4x8xf32>
  %s2 = ds.aten "aten::_safe_softmax"(%x, %m1, %none) : (tensor<4x8xbf16>, i64, !ds.none) -> tensor<4x8xf32>
  return %o#0, %o#1, %s, %s2 : tensor<2x2x4x8xf32>, tensor<2x2x4xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
