// RUN: ds-translate --ds-mlir-to-plan %s | FileCheck %s

// A data-dependent branch: an outer value used inside is freed by the `if`
// itself; values defined in a branch are freed in it unless yielded.
ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, train_micro_batch_size_per_gpu = 2>}
ds.param @w : tensor<4x4xf32> {module = "e", module_class = "E", requires_grad, engine = @model}
func.func @forward_eval(%in: tensor<2x4xf32> {ds.name = "x"}, %c: tensor<i1> {ds.name = "c", ds.unbatched}) -> tensor<f32> {
  %b = ds.aten "aten::Bool.Tensor"(%c) : (tensor<i1>) -> i1
  %m = ds.constant dense<true> : tensor<2xi1>
  %zero = ds.constant 0 : i64
  %i = ds.aten "aten::nonzero"(%m) : (tensor<2xi1>) -> tensor<?x1xi64>
  %idx = ds.aten "aten::squeeze.dim"(%i, %zero) : (tensor<?x1xi64>, i64) -> tensor<?xi64>
  %x = ds.aten "aten::index_select"(%in, %zero, %idx) : (tensor<2x4xf32>, i64, tensor<?xi64>) -> tensor<?x4xf32>
  %r = ds.if %b -> (tensor<?x4xf32>) {
    %w = ds.get_param @w : tensor<4x4xf32>
    %n = ds.constant unit : !ds.none
    %y = ds.aten "aten::linear"(%x, %w, %n) : (tensor<?x4xf32>, tensor<4x4xf32>, !ds.none) -> tensor<?x4xf32>
    %z = ds.aten "aten::relu"(%y) : (tensor<?x4xf32>) -> tensor<?x4xf32>
    ds.yield %z : tensor<?x4xf32>
  } else {
    ds.yield %x : tensor<?x4xf32>
  }
  %n = ds.constant unit : !ds.none
  %s = ds.aten "aten::sum"(%r, %n) : (tensor<?x4xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// Dynamic dims (nonzero) are carried as -1, with their bound: nonzero of 2
// flags has at most 2 rows; the squeezed dim 0 was 1, so index_select picks
// at most 1 row.
// CHECK: {"id": 5, "type": "tensor", "dtype": "int64", "shape": [-1, 1], "bound": [2, 1]}
// CHECK: {"id": 7, "type": "tensor", "dtype": "float32", "shape": [-1, 4], "bound": [1, 4]}
// CHECK: "body": [
// CHECK: {"kind": "call", "op": "aten::index_select", "args": [0, 4, 6], "results": [7], {{.*}}"free": [4, 6, 0]},
// CHECK-NEXT: {
// CHECK-NEXT: "kind": "if",
// CHECK-NEXT: "cond": 2,
// CHECK-NEXT: "then": {
// CHECK-NEXT: "body": [
// CHECK-NEXT: {"kind": "state", "name": "w", "result": 9},
// CHECK-NEXT: {"kind": "constant", "result": 10, "value": null},
// CHECK-NEXT: {"kind": "call", "op": "aten::linear", "args": [7, 9, 10], "results": [11], {{.*}}"free": [9, 10]},
// CHECK-NEXT: {"kind": "call", "op": "aten::relu", "args": [11], "results": [12], {{.*}}"free": [11]}
// CHECK-NEXT: ],
// CHECK-NEXT: "yield": [12]
// CHECK-NEXT: },
// CHECK-NEXT: "else": {"body": [], "yield": [7]},
// CHECK-NEXT: "results": [8],
// CHECK-NEXT: "free": [2, 7]
