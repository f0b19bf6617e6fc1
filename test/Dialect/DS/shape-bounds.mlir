// RUN: ds-opt %s -split-input-file -ds-test-print-shape-bounds -verify-diagnostics -o /dev/null

// Data-dependent producers: nonzero has at most numel(x) rows, torch.where(c)
// and a boolean mask at most numel(c) entries; what is indexed by them
// inherits the count.
func.func @producers(%x: tensor<4x8xf32>, %m: tensor<4x8xi1>, %v: tensor<8xi1>) -> tensor<f32> {
  %none = ds.constant unit : !ds.none
  %c0 = ds.constant 0 : i64
  %c1 = ds.constant 1 : i64
  // expected-remark @+1 {{result #0 <= [32, 2], numel <= 64}}
  %nz = ds.aten "aten::nonzero"(%m) : (tensor<4x8xi1>) -> tensor<?x2xi64>
  // expected-remark @+2 {{result #0 <= [32], numel <= 32}}
  // expected-remark @+1 {{result #1 <= [32], numel <= 32}}
  %w:2 = ds.aten "aten::where"(%m) : (tensor<4x8xi1>) -> (tensor<?xi64>, tensor<?xi64>)
  // The same as one list, unpacked.
  %wl = ds.aten "aten::where"(%m) : (tensor<4x8xi1>) -> !ds.list<tensor<*xi64>>
  // expected-remark @+2 {{result #0 <= [32], numel <= 32}}
  // expected-remark @+1 {{result #1 <= [32], numel <= 32}}
  %wu:2 = ds.list_unpack %wl : (!ds.list<tensor<*xi64>>) -> (tensor<?xi64>, tensor<?xi64>)
  // expected-remark @+1 {{result #0 <= [32], numel <= 32}}
  %sel = ds.aten "aten::masked_select"(%x, %m) : (tensor<4x8xf32>, tensor<4x8xi1>) -> tensor<?xf32>
  %ml = ds.list_construct %m : (tensor<4x8xi1>) -> !ds.list<tensor<*xi1>>
  // expected-remark @+1 {{result #0 <= [32], numel <= 32}}
  %xm = ds.aten "aten::index.Tensor"(%x, %ml) : (tensor<4x8xf32>, !ds.list<tensor<*xi1>>) -> tensor<?xf32>
  // Rows of x picked by a mask over its first dim keep the other dims.
  %vl = ds.list_construct %v : (tensor<8xi1>) -> !ds.list<tensor<*xi1>>
  %xt = ds.aten "aten::t"(%x) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  // expected-remark @+1 {{result #0 <= [8, 4], numel <= 32}}
  %rows = ds.aten "aten::index.Tensor"(%xt, %vl) : (tensor<8x4xf32>, !ds.list<tensor<*xi1>>) -> tensor<?x4xf32>
  // Indices after None: the indexed dim stays in place.
  %il = ds.list_construct %none, %w#1 : (!ds.none, tensor<?xi64>) -> !ds.list<tensor<*xi64>>
  // expected-remark @+1 {{result #0 <= [4, 32], numel <= 128}}
  %cols = ds.aten "aten::index.Tensor"(%x, %il) : (tensor<4x8xf32>, !ds.list<tensor<*xi64>>) -> tensor<4x?xf32>
  // expected-remark @+1 {{result #0 <= [32, 8], numel <= 256}}
  %picked = ds.aten "aten::index_select"(%x, %c0, %w#0) : (tensor<4x8xf32>, i64, tensor<?xi64>) -> tensor<?x?xf32>
  %s = ds.aten "aten::sum"(%picked, %none) : (tensor<?x?xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// The MoE expert path (test/models/moe.pt): a squeezed nonzero picks rows,
// linear / silu / mul keep the count, index_add writes back into a static
// tensor; the backward's reshapes and mm contract it away.
func.func @expert(%h: tensor<8x16xf32>, %top: tensor<8xi64>, %w1: tensor<32x16xf32>, %b1: tensor<32xf32>, %gate: tensor<8x1xf32>) -> tensor<8x16xf32> {
  %c0 = ds.constant 0 : i64
  %c1 = ds.constant 1 : i64
  %m1 = ds.constant -1 : i64
  %c16 = ds.constant 16 : i64
  %c32 = ds.constant 32 : i64
  %zero = ds.constant 0 : i64
  %eq = ds.aten "aten::eq.Scalar"(%top, %zero) : (tensor<8xi64>, i64) -> tensor<8xi1>
  // expected-remark @+1 {{result #0 <= [8, 1], numel <= 8}}
  %nz = ds.aten "aten::nonzero"(%eq) : (tensor<8xi1>) -> tensor<?x1xi64>
  // expected-remark @+1 {{result #0 <= [8], numel <= 8}}
  %sel = ds.aten "aten::squeeze.dim"(%nz, %c1) : (tensor<?x1xi64>, i64) -> tensor<?xi64>
  // expected-remark @+1 {{result #0 <= [8, 16], numel <= 128}}
  %x = ds.aten "aten::index_select"(%h, %c0, %sel) : (tensor<8x16xf32>, i64, tensor<?xi64>) -> tensor<?x?xf32>
  // expected-remark @+1 {{result #0 <= [8, 32], numel <= 256}}
  %y = ds.aten "aten::linear"(%x, %w1, %b1) : (tensor<?x?xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<?x?xf32>
  // expected-remark @+1 {{result #0 <= [8, 32], numel <= 256}}
  %a = ds.aten "aten::silu"(%y) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  // expected-remark @+1 {{result #0 <= [8, 1], numel <= 8}}
  %g = ds.aten "aten::index_select"(%gate, %c0, %sel) : (tensor<8x1xf32>, i64, tensor<?xi64>) -> tensor<?x?xf32>
  // expected-remark @+1 {{result #0 <= [8, 32], numel <= 256}}
  %p = ds.aten "aten::mul.Tensor"(%a, %g) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  // expected-remark @+1 {{result #0 <= [8, 32], numel <= 256}}
  %pb = ds.aten "aten::silu_backward"(%p, %y) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %sizes = ds.aten "aten::size"(%a) : (tensor<?x?xf32>) -> !ds.list<i64>
  // expected-remark @+1 {{result #0 <= [8, 32], numel <= 256}}
  %sum = ds.aten "aten::sum_to_size"(%pb, %sizes) : (tensor<?x?xf32>, !ds.list<i64>) -> tensor<?x?xf32>
  %shape = ds.list_construct %m1, %c32 : (i64, i64) -> !ds.list<i64>
  // expected-remark @+1 {{result #0 <= [8, 32], numel <= 256}}
  %r = ds.aten "aten::reshape"(%sum, %shape) : (tensor<?x?xf32>, !ds.list<i64>) -> tensor<?x32xf32>
  // expected-remark @+1 {{result #0 <= [32, 8], numel <= 256}}
  %rt = ds.aten "aten::transpose.int"(%r, %c0, %c1) : (tensor<?x32xf32>, i64, i64) -> tensor<32x?xf32>
  %dw = ds.aten "aten::mm"(%rt, %x) : (tensor<32x?xf32>, tensor<?x?xf32>) -> tensor<32x16xf32>
  // expected-remark @+1 {{result #0 <= [8, 16], numel <= 128}}
  %dx = ds.aten "aten::matmul"(%sum, %w1) : (tensor<?x?xf32>, tensor<32x16xf32>) -> tensor<?x?xf32>
  // The backward of a selection has the input's size, a loss gradient the
  // input's shape.
  // expected-remark @+1 {{result #0 <= [8], numel <= 8}}
  %col = ds.aten "aten::select.int"(%x, %c1, %c0) : (tensor<?x?xf32>, i64, i64) -> tensor<?xf32>
  %xs = ds.aten "aten::size"(%x) : (tensor<?x?xf32>) -> !ds.list<i64>
  // expected-remark @+1 {{result #0 <= [8, 16], numel <= 128}}
  %gx = ds.aten "aten::select_backward"(%col, %xs, %c1, %c0) : (tensor<?xf32>, !ds.list<i64>, i64, i64) -> tensor<?x?xf32>
  %none = ds.constant unit : !ds.none
  %seed = ds.constant dense<1.000000e+00> : tensor<f32>
  %m100 = ds.constant -100 : i64
  // expected-remark @+1 {{result #0 <= [8, 16], numel <= 128}}
  %gl = ds.aten "aten::nll_loss_backward"(%seed, %x, %sel, %none, %c1, %m100, %seed) : (tensor<f32>, tensor<?x?xf32>, tensor<?xi64>, !ds.none, i64, i64, tensor<f32>) -> tensor<?x?xf32>
  %out = ds.aten "aten::index_add"(%h, %c0, %sel, %dx, %c1) : (tensor<8x16xf32>, i64, tensor<?xi64>, tensor<?x?xf32>, i64) -> tensor<8x16xf32>
  return %out : tensor<8x16xf32>
}

// -----

// Views, joins, reductions and branches.
func.func @shapes(%m: tensor<4x8xi1>, %x: tensor<4x8xf32>, %c: i1) -> tensor<f32> {
  %none = ds.constant unit : !ds.none
  %c0 = ds.constant 0 : i64
  %c1 = ds.constant 1 : i64
  %m1 = ds.constant -1 : i64
  %c4 = ds.constant 4 : i64
  %false = ds.constant false
  %true = ds.constant true
  // expected-remark @+1 {{result #0 <= [32], numel <= 32}}
  %s = ds.aten "aten::masked_select"(%x, %m) : (tensor<4x8xf32>, tensor<4x8xi1>) -> tensor<?xf32>
  // expected-remark @+1 {{result #0 <= [1, 32], numel <= 32}}
  %u = ds.aten "aten::unsqueeze"(%s, %c0) : (tensor<?xf32>, i64) -> tensor<1x?xf32>
  // One inferred dim: numel over the static ones.
  %shape = ds.list_construct %m1, %c4 : (i64, i64) -> !ds.list<i64>
  // expected-remark @+1 {{result #0 <= [8, 4], numel <= 32}}
  %v = ds.aten "aten::view"(%u, %shape) : (tensor<1x?xf32>, !ds.list<i64>) -> tensor<?x4xf32>
  %perm = ds.list_construct %c1, %c0 : (i64, i64) -> !ds.list<i64>
  // expected-remark @+1 {{result #0 <= [4, 8], numel <= 32}}
  %p = ds.aten "aten::permute"(%v, %perm) : (tensor<?x4xf32>, !ds.list<i64>) -> tensor<4x?xf32>
  // A constant entry is exact: the inferred dim is numel over it.
  %c8 = ds.constant 8 : i64
  %rows = ds.list_construct %m1, %c8 : (i64, i64) -> !ds.list<i64>
  // expected-remark @+1 {{result #0 <= [4, 8], numel <= 32}}
  %v2 = ds.aten "aten::reshape"(%u, %rows) : (tensor<1x?xf32>, !ds.list<i64>) -> tensor<?x?xf32>
  // expected-remark @+1 {{result #0 <= [32], numel <= 32}}
  %f = ds.aten "aten::flatten.using_ints"(%p, %c0, %m1) : (tensor<4x?xf32>, i64, i64) -> tensor<?xf32>
  // cat sums along the dim.
  %pieces = ds.list_construct %v, %v, %x : (tensor<?x4xf32>, tensor<?x4xf32>, tensor<4x8xf32>) -> !ds.list<tensor<*xf32>>
  // expected-remark @+1 {{result #0 <= [20, 4], numel <= 80}}
  %cat = ds.aten "aten::cat"(%pieces, %c0) : (!ds.list<tensor<*xf32>>, i64) -> tensor<?x4xf32>
  %dims = ds.list_construct %c1 : (i64) -> !ds.list<i64>
  // expected-remark @+1 {{result #0 <= [20], numel <= 20}}
  %red = ds.aten "aten::sum.dim_IntList"(%cat, %dims, %false, %none) : (tensor<?x4xf32>, !ds.list<i64>, i1, !ds.none) -> tensor<?xf32>
  // expected-remark @+2 {{result #0 <= [8, 1], numel <= 8}}
  // expected-remark @+1 {{result #1 <= [8, 1], numel <= 8}}
  %mx:2 = ds.aten "aten::max.dim"(%v, %c1, %true) : (tensor<?x4xf32>, i64, i1) -> (tensor<?x1xf32>, tensor<?x1xi64>)
  // expected-remark @+1 {{result #0 <= [8, 4], numel <= 32}}
  %sm = ds.aten "aten::softmax.int"(%v, %m1, %none) : (tensor<?x4xf32>, i64, !ds.none) -> tensor<?x4xf32>
  // A branch result is the larger of the branches'.
  // expected-remark @+1 {{result #0 <= [20, 4], numel <= 80}}
  %r = ds.if %c -> (tensor<?x4xf32>) {
    ds.yield %sm : tensor<?x4xf32>
  } else {
    ds.yield %cat : tensor<?x4xf32>
  }
  %t = ds.aten "aten::sum"(%r, %none) : (tensor<?x4xf32>, !ds.none) -> tensor<f32>
  return %t : tensor<f32>
}

// -----

// A dynamic dim no rule bounds is unbounded, never 0: a function input, an
// operator without a rule, and what is computed from them.
func.func @unbounded(%x: tensor<?x4xf32>, %k: i64) -> tensor<f32> {
  %none = ds.constant unit : !ds.none
  // expected-remark @+1 {{result #0 <= [?, 4], unbounded}}
  %y = ds.aten "aten::relu"(%x) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // expected-remark @+1 {{result #0 <= [?, 4], unbounded}}
  %c = ds.aten "aten::gt.Scalar"(%y, %k) : (tensor<?x4xf32>, i64) -> tensor<?x4xi1>
  // expected-remark @+1 {{result #0 <= [?, 2], unbounded}}
  %nz = ds.aten "aten::nonzero"(%c) : (tensor<?x4xi1>) -> tensor<?x2xi64>
  %k2 = ds.constant dense<1> : tensor<4xi64>
  // expected-remark @+1 {{result #0 <= [?], unbounded}}
  %r = ds.aten "aten::repeat_interleave.Tensor"(%k2, %none) : (tensor<4xi64>, !ds.none) -> tensor<?xi64>
  %s = ds.aten "aten::sum"(%y, %none) : (tensor<?x4xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}
