// RUN: ds-opt %s | ds-opt | FileCheck %s
// RUN: ds-opt %s --mlir-print-op-generic | ds-opt | FileCheck %s

// Every op and type of the ds dialect, printed and parsed again, from the
// custom and from the generic form.

//===----------------------------------------------------------------------===//
// Engines, parameters, buffers
//===----------------------------------------------------------------------===//

// The default config "{}" is not printed; `frozen` is a unit attribute.
// CHECK:      ds.engine @model {module = ""}
// CHECK-NEXT: ds.engine @teacher {config = "{\22zero_optimization\22: {\22stage\22: 2}}", frozen, module = "teacher"}
ds.engine @model {module = "", config = "{}"}
ds.engine @teacher {module = "teacher", config = "{\"zero_optimization\": {\"stage\": 2}}", frozen}

// Qualified names are printed bare where MLIR allows it (`.` is part of a
// bare identifier) and quoted otherwise (`0.weight` starts with a digit).
// CHECK-NEXT: ds.param @fc1.weight : tensor<16x8xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
// CHECK-NEXT: ds.param @fc1.bias : tensor<16xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
// CHECK-NEXT: ds.param @"0.weight" : tensor<16xf32> {module = "0", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
// CHECK-NEXT: ds.param @teacher.fc.weight : tensor<16x8xf32> {engine = @teacher, module = "teacher.fc", module_class = "torch.nn.modules.linear.Linear"}
// CHECK-NEXT: ds.buffer @bn.running_mean : tensor<16xf32> {engine = @model, module = "bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d"}
// CHECK-NEXT: ds.buffer @bn.num_batches_tracked : tensor<i64> {module = "bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d"}
ds.param @"fc1.weight" : tensor<16x8xf32> {module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad, engine = @model}
ds.param @fc1.bias : tensor<16xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @"0.weight" : tensor<16xf32> {module = "0", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
ds.param @"teacher.fc.weight" : tensor<16x8xf32> {module = "teacher.fc", module_class = "torch.nn.modules.linear.Linear", engine = @teacher}
ds.buffer @"bn.running_mean" : tensor<16xf32> {module = "bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d", engine = @model}
ds.buffer @"bn.num_batches_tracked" : tensor<i64> {module = "bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d"}

// CHECK-LABEL: func.func @state(
// CHECK-SAME:      %[[X:.*]]: tensor<4x8xf32>, %[[NEW:.*]]: tensor<16xf32>)
// CHECK-NEXT:    %[[W:.*]] = ds.get_param @fc1.weight : tensor<16x8xf32>
// CHECK-NEXT:    %[[B:.*]] = ds.get_param @fc1.bias : tensor<16xf32>
// CHECK-NEXT:    %[[LN:.*]] = ds.get_param @"0.weight" : tensor<16xf32>
// CHECK-NEXT:    %[[MEAN:.*]] = ds.get_buffer @bn.running_mean : tensor<16xf32>
// CHECK-NEXT:    ds.set_buffer @bn.running_mean, %[[NEW]] : tensor<16xf32>
// CHECK-NEXT:    %[[Y:.*]] = ds.aten "aten::linear"(%[[X]], %[[W]], %[[B]]) {module = "fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    return %[[Y]], %[[LN]], %[[MEAN]]
func.func @state(%x: tensor<4x8xf32>, %new: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %w = ds.get_param @"fc1.weight" : tensor<16x8xf32>
  %b = ds.get_param @"fc1.bias" : tensor<16xf32>
  %ln = ds.get_param @"0.weight" : tensor<16xf32>
  %mean = ds.get_buffer @"bn.running_mean" : tensor<16xf32>
  ds.set_buffer @"bn.running_mean", %new : tensor<16xf32>
  %y = ds.aten "aten::linear"(%x, %w, %b) {module = "fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %y, %ln, %mean : tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>
}

//===----------------------------------------------------------------------===//
// Constants and lists
//===----------------------------------------------------------------------===//

// A value that carries its type prints without a trailing type (`1 : i64`,
// `true`); `unit` needs one.
// CHECK-LABEL: func.func @constants()
// CHECK-NEXT:    ds.constant 1 : i64
// CHECK-NEXT:    ds.constant -3 : i64
// CHECK-NEXT:    ds.constant 2.500000e-01 : f64
// CHECK-NEXT:    ds.constant true{{$}}
// CHECK-NEXT:    ds.constant false{{$}}
// CHECK-NEXT:    ds.constant "tanh" : !ds.str
// CHECK-NEXT:    ds.constant "cpu" : !ds.device
// CHECK-NEXT:    ds.constant unit : !ds.none
// CHECK-NEXT:    ds.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:    ds.constant dense<0> : tensor<2x3xi64>
func.func @constants() {
  %i = ds.constant 1 : i64
  %neg = ds.constant -3 : i64
  %f = ds.constant 0.25 : f64
  %t = ds.constant true
  %false = ds.constant false
  %s = ds.constant "tanh" : !ds.str
  %d = ds.constant "cpu" : !ds.device
  %n = ds.constant unit : !ds.none
  %dense = ds.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %zeros = ds.constant dense<0> : tensor<2x3xi64>
  return
}

// Tensor lists hold tensors of any shape, and None (`Tensor?[]`).
// CHECK-LABEL: func.func @lists(
// CHECK-SAME:      %[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<2x8xf32>, %[[I:.*]]: tensor<3xi64>)
// CHECK-NEXT:    %[[C0:.*]] = ds.constant 0 : i64
// CHECK-NEXT:    %[[C1:.*]] = ds.constant 1 : i64
// CHECK-NEXT:    %[[INTS:.*]] = ds.list_construct %[[C0]], %[[C1]] : (i64, i64) -> !ds.list<i64>
// CHECK-NEXT:    %[[TENSORS:.*]] = ds.list_construct %[[A]], %[[B]] : (tensor<4x8xf32>, tensor<2x8xf32>) -> !ds.list<tensor<*xf32>>
// CHECK-NEXT:    %[[NONE:.*]] = ds.constant unit : !ds.none
// CHECK-NEXT:    %[[INDICES:.*]] = ds.list_construct %[[NONE]], %[[I]] : (!ds.none, tensor<3xi64>) -> !ds.list<tensor<*xi64>>
// CHECK-NEXT:    %[[EMPTY:.*]] = ds.list_construct  : () -> !ds.list<i64>
// CHECK-NEXT:    %[[UNPACKED:.*]]:2 = ds.list_unpack %[[INTS]] : (!ds.list<i64>) -> (i64, i64)
// CHECK-NEXT:    %[[CAT:.*]] = ds.aten "aten::cat"(%[[TENSORS]], %[[C0]]) : (!ds.list<tensor<*xf32>>, i64) -> tensor<6x8xf32>
// CHECK-NEXT:    %[[INDEXED:.*]] = ds.aten "aten::index.Tensor"(%[[A]], %[[INDICES]]) : (tensor<4x8xf32>, !ds.list<tensor<*xi64>>) -> tensor<4x3xf32>
// CHECK-NEXT:    return %[[UNPACKED]]#0, %[[UNPACKED]]#1, %[[CAT]], %[[INDEXED]], %[[EMPTY]]
func.func @lists(%a: tensor<4x8xf32>, %b: tensor<2x8xf32>, %i: tensor<3xi64>) -> (i64, i64, tensor<6x8xf32>, tensor<4x3xf32>, !ds.list<i64>) {
  %c0 = ds.constant 0 : i64
  %c1 = ds.constant 1 : i64
  %ints = ds.list_construct %c0, %c1 : (i64, i64) -> !ds.list<i64>
  %tensors = ds.list_construct %a, %b : (tensor<4x8xf32>, tensor<2x8xf32>) -> !ds.list<tensor<*xf32>>
  %none = ds.constant unit : !ds.none
  %indices = ds.list_construct %none, %i : (!ds.none, tensor<3xi64>) -> !ds.list<tensor<*xi64>>
  %empty = ds.list_construct : () -> !ds.list<i64>
  %u0, %u1 = ds.list_unpack %ints : (!ds.list<i64>) -> (i64, i64)
  %cat = ds.aten "aten::cat"(%tensors, %c0) : (!ds.list<tensor<*xf32>>, i64) -> tensor<6x8xf32>
  %indexed = ds.aten "aten::index.Tensor"(%a, %indices) : (tensor<4x8xf32>, !ds.list<tensor<*xi64>>) -> tensor<4x3xf32>
  return %u0, %u1, %cat, %indexed, %empty : i64, i64, tensor<6x8xf32>, tensor<4x3xf32>, !ds.list<i64>
}

//===----------------------------------------------------------------------===//
// Operators
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @operators(
// CHECK-SAME:      %[[X:.*]]: tensor<4x8xf32>)
// CHECK:         %[[GELU:.*]] = ds.aten "aten::gelu"(%[[X]], %{{.*}}) {module = "blocks.0.mlp.act", module_class = "torch.nn.modules.activation.GELU"} : (tensor<4x8xf32>, !ds.str) -> tensor<4x8xf32>
// CHECK-NEXT:    %[[MAX:.*]]:2 = ds.aten "aten::max.dim"(%[[X]], %{{.*}}, %{{.*}}) : (tensor<4x8xf32>, i64, i1) -> (tensor<4xf32>, tensor<4xi64>)
// CHECK-NEXT:    %[[TOPK:.*]]:2 = ds.aten "aten::topk"(%[[X]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {module = "router", module_class = "Router"} : (tensor<4x8xf32>, i64, i64, i1, i1) -> (tensor<4x2xf32>, tensor<4x2xi64>)
// A list-returning operator unpacked into its elements.
// CHECK-NEXT:    %[[SPLIT:.*]]:2 = ds.aten "aten::split.Tensor"(%[[X]], %{{.*}}, %{{.*}}) : (tensor<4x8xf32>, i64, i64) -> (tensor<2x8xf32>, tensor<2x8xf32>)
// CHECK-NEXT:    %[[ADD:.*]] = ds.aten "aten::add.Tensor"(%[[SPLIT]]#0, %[[SPLIT]]#1, %{{.*}}) : (tensor<2x8xf32>, tensor<2x8xf32>, i64) -> tensor<2x8xf32>
// ... or kept as a list.
// CHECK-NEXT:    %[[CHUNKS:.*]] = ds.aten "aten::chunk"(%[[X]], %{{.*}}, %{{.*}}) : (tensor<4x8xf32>, i64, i64) -> !ds.list<tensor<*xf32>>
// CHECK-NEXT:    %[[DROP:.*]] = ds.aten "aten::dropout"(%[[X]], %{{.*}}, %{{.*}}) : (tensor<4x8xf32>, f64, i1) -> tensor<4x8xf32>
func.func @operators(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4xi64>, tensor<4x2xf32>, tensor<4x2xi64>, tensor<2x8xf32>, !ds.list<tensor<*xf32>>, tensor<4x8xf32>) {
  %tanh = ds.constant "tanh" : !ds.str
  %c1 = ds.constant 1 : i64
  %c2 = ds.constant 2 : i64
  %true = ds.constant true
  %false = ds.constant false
  %p = ds.constant 1.000000e-01 : f64
  %gelu = ds.aten "aten::gelu"(%x, %tanh) {module = "blocks.0.mlp.act", module_class = "torch.nn.modules.activation.GELU"} : (tensor<4x8xf32>, !ds.str) -> tensor<4x8xf32>
  %values, %indices = ds.aten "aten::max.dim"(%x, %c1, %false) : (tensor<4x8xf32>, i64, i1) -> (tensor<4xf32>, tensor<4xi64>)
  %top:2 = ds.aten "aten::topk"(%x, %c2, %c1, %true, %true) {module = "router", module_class = "Router"} : (tensor<4x8xf32>, i64, i64, i1, i1) -> (tensor<4x2xf32>, tensor<4x2xi64>)
  %lo, %hi = ds.aten "aten::split.Tensor"(%x, %c2, %c1) : (tensor<4x8xf32>, i64, i64) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  %sum = ds.aten "aten::add.Tensor"(%lo, %hi, %c1) : (tensor<2x8xf32>, tensor<2x8xf32>, i64) -> tensor<2x8xf32>
  %chunks = ds.aten "aten::chunk"(%x, %c2, %c1) : (tensor<4x8xf32>, i64, i64) -> !ds.list<tensor<*xf32>>
  %drop = ds.aten "aten::dropout"(%x, %p, %true) : (tensor<4x8xf32>, f64, i1) -> tensor<4x8xf32>
  return %gelu, %values, %indices, %top#0, %top#1, %sum, %chunks, %drop : tensor<4x8xf32>, tensor<4xf32>, tensor<4xi64>, tensor<4x2xf32>, tensor<4x2xi64>, tensor<2x8xf32>, !ds.list<tensor<*xf32>>, tensor<4x8xf32>
}

//===----------------------------------------------------------------------===//
// Control flow
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @conditionals(
// CHECK-SAME:      %[[C:.*]]: i1, %[[D:.*]]: i1, %[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<4x8xf32>)
// CHECK-NEXT:    %[[R:.*]]:2 = ds.if %[[C]] -> (tensor<4x8xf32>, i64) {
// CHECK-NEXT:      %[[ONE:.*]] = ds.constant 1 : i64
// CHECK-NEXT:      ds.yield %[[A]], %[[ONE]] : tensor<4x8xf32>, i64
// CHECK-NEXT:    } else {
// CHECK-NEXT:      %[[INNER:.*]] = ds.if %[[D]] -> (tensor<4x8xf32>) {
// CHECK-NEXT:        %[[RELU:.*]] = ds.aten "aten::relu"(%[[B]]) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:        ds.yield %[[RELU]] : tensor<4x8xf32>
// CHECK-NEXT:      } else {
// CHECK-NEXT:        ds.yield %[[B]] : tensor<4x8xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:      %[[TWO:.*]] = ds.constant 2 : i64
// CHECK-NEXT:      ds.yield %[[INNER]], %[[TWO]] : tensor<4x8xf32>, i64
// CHECK-NEXT:    }
// A ds.if without results: its terminators are implicit.
// CHECK-NEXT:    ds.if %[[C]] {
// CHECK-NEXT:      %[[ZEROS:.*]] = ds.constant dense<0.000000e+00> : tensor<16xf32>
// CHECK-NEXT:      ds.set_buffer @bn.running_mean, %[[ZEROS]] : tensor<16xf32>
// CHECK-NEXT:    } else {
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[R]]#0, %[[R]]#1
func.func @conditionals(%c: i1, %d: i1, %a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>, i64) {
  %r:2 = ds.if %c -> (tensor<4x8xf32>, i64) {
    %one = ds.constant 1 : i64
    ds.yield %a, %one : tensor<4x8xf32>, i64
  } else {
    %inner = ds.if %d -> (tensor<4x8xf32>) {
      %relu = ds.aten "aten::relu"(%b) : (tensor<4x8xf32>) -> tensor<4x8xf32>
      ds.yield %relu : tensor<4x8xf32>
    } else {
      ds.yield %b : tensor<4x8xf32>
    }
    %two = ds.constant 2 : i64
    ds.yield %inner, %two : tensor<4x8xf32>, i64
  }
  ds.if %c {
    %zeros = ds.constant dense<0.0> : tensor<16xf32>
    ds.set_buffer @"bn.running_mean", %zeros : tensor<16xf32>
  } else {
    ds.yield
  }
  return %r#0, %r#1 : tensor<4x8xf32>, i64
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func private @types(
// CHECK-SAME:      !ds.none, !ds.str, !ds.device, !ds.token, !ds.list<i64>, !ds.list<f64>, !ds.list<i1>, !ds.list<!ds.str>, !ds.list<tensor<*xf32>>, !ds.list<!ds.list<i64>>)
func.func private @types(!ds.none, !ds.str, !ds.device, !ds.token, !ds.list<i64>, !ds.list<f64>, !ds.list<i1>, !ds.list<!ds.str>, !ds.list<tensor<*xf32>>, !ds.list<!ds.list<i64>>)
