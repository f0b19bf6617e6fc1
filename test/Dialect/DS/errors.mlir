// RUN: ds-opt %s -split-input-file -verify-diagnostics

// Verifier messages of the ds dialect (lib/Dialect/DS/IR/DSOps.cpp), one
// section per message. Constants whose value and type disagree are written in
// the generic form: the custom form takes the type from a typed value.

//===----------------------------------------------------------------------===//
// ds.param / ds.buffer
//===----------------------------------------------------------------------===//

// expected-error @below {{'ds.param' op state must have a static shape, but fc.weight has type 'tensor<?x8xf32>'}}
ds.param @"fc.weight" : tensor<?x8xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}

// -----

// expected-error @below {{'ds.buffer' op state must have a static shape, but bn.running_mean has type 'tensor<?xf32>'}}
ds.buffer @"bn.running_mean" : tensor<?xf32> {module = "bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d"}

// -----

ds.buffer @"bn.running_var" : tensor<16xf32> {module = "bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d"}
// expected-error @below {{'ds.param' op names engine @bn.running_var, which is not a ds.engine in this module}}
ds.param @"fc.weight" : tensor<16x8xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", engine = @"bn.running_var"}

// -----

// expected-error @below {{'ds.buffer' op names engine @student, which is not a ds.engine in this module}}
ds.buffer @"bn.running_mean" : tensor<16xf32> {module = "bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d", engine = @student}

//===----------------------------------------------------------------------===//
// ds.get_param / ds.get_buffer / ds.set_buffer
//===----------------------------------------------------------------------===//

// -----

func.func @undeclared_param() {
  // expected-error @below {{'ds.get_param' op refers to undeclared param @fc.weight}}
  %0 = ds.get_param @"fc.weight" : tensor<16x8xf32>
  return
}

// -----

func.func @undeclared_buffer() {
  // expected-error @below {{'ds.get_buffer' op refers to undeclared buffer @bn.running_mean}}
  %0 = ds.get_buffer @"bn.running_mean" : tensor<16xf32>
  return
}

// -----

ds.buffer @"bn.running_mean" : tensor<16xf32> {module = "bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d"}
func.func @param_is_buffer() {
  // expected-error @below {{'ds.get_param' op expects @bn.running_mean to be a ds.param, but it is a 'ds.buffer'}}
  %0 = ds.get_param @"bn.running_mean" : tensor<16xf32>
  return
}

// -----

ds.param @"fc.weight" : tensor<16x8xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
func.func @buffer_is_param(%v: tensor<16x8xf32>) {
  // expected-error @below {{'ds.set_buffer' op expects @fc.weight to be a ds.buffer, but it is a 'ds.param'}}
  ds.set_buffer @"fc.weight", %v : tensor<16x8xf32>
  return
}

// -----

ds.param @"fc.weight" : tensor<16x8xf32> {module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
func.func @get_param_type() {
  // expected-error @below {{'ds.get_param' op type 'tensor<8x16xf32>' does not match the declared type 'tensor<16x8xf32>' of param @fc.weight}}
  %0 = ds.get_param @"fc.weight" : tensor<8x16xf32>
  return
}

// -----

ds.buffer @"bn.num_batches_tracked" : tensor<i64> {module = "bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d"}
func.func @get_buffer_type() {
  // expected-error @below {{'ds.get_buffer' op type 'tensor<f32>' does not match the declared type 'tensor<i64>' of buffer @bn.num_batches_tracked}}
  %0 = ds.get_buffer @"bn.num_batches_tracked" : tensor<f32>
  return
}

// -----

ds.buffer @"bn.running_mean" : tensor<16xf32> {module = "bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d"}
func.func @set_buffer_type(%v: tensor<16xf16>) {
  // expected-error @below {{'ds.set_buffer' op type 'tensor<16xf16>' does not match the declared type 'tensor<16xf32>' of buffer @bn.running_mean}}
  ds.set_buffer @"bn.running_mean", %v : tensor<16xf16>
  return
}

//===----------------------------------------------------------------------===//
// ds.constant
//===----------------------------------------------------------------------===//

// -----

func.func @constant_none() {
  // expected-error @below {{'ds.constant' op expects 'unit' for a constant of type '!ds.none', but got "None"}}
  %0 = "ds.constant"() <{value = "None"}> : () -> !ds.none
  return
}

// -----

func.func @constant_str() {
  // expected-error @below {{'ds.constant' op expects a string for a constant of type '!ds.str', but got 0 : i64}}
  %0 = "ds.constant"() <{value = 0 : i64}> : () -> !ds.str
  return
}

// -----

func.func @constant_device() {
  // expected-error @below {{'ds.constant' op expects a string for a constant of type '!ds.device', but got unit}}
  %0 = "ds.constant"() <{value}> : () -> !ds.device
  return
}

// -----

func.func @constant_list() {
  // expected-error @below {{'ds.constant' op cannot hold a constant list (use ds.list_construct) of type '!ds.list<i64>', but got [1, 2]}}
  %0 = "ds.constant"() <{value = [1, 2]}> : () -> !ds.list<i64>
  return
}

// -----

func.func @constant_tensor_not_elements() {
  // expected-error @below {{'ds.constant' op expects an elements attribute for a constant of type 'tensor<2xf32>', but got 0.000000e+00 : f32}}
  %0 = "ds.constant"() <{value = 0.0 : f32}> : () -> tensor<2xf32>
  return
}

// -----

func.func @constant_tensor_type() {
  // expected-error @below {{'ds.constant' op expects an elements attribute of the same type for a constant of type 'tensor<3xf32>', but got dense<0.000000e+00> : tensor<2xf32>}}
  %0 = ds.constant dense<0.0> : tensor<2xf32> : tensor<3xf32>
  return
}

// -----

func.func @constant_i64() {
  // expected-error @below {{'ds.constant' op expects an integer for a constant of type 'i64', but got 1 : i32}}
  %0 = ds.constant 1 : i32 : i64
  return
}

// -----

func.func @constant_i1() {
  // expected-error @below {{'ds.constant' op expects 'true' or 'false' for a constant of type 'i1', but got 1 : i64}}
  %0 = "ds.constant"() <{value = 1 : i64}> : () -> i1
  return
}

// -----

func.func @constant_f64() {
  // expected-error @below {{'ds.constant' op expects a float for a constant of type 'f64', but got 1.000000e+00 : f32}}
  %0 = ds.constant 1.0 : f32 : f64
  return
}

// -----

func.func @constant_untyped_value() {
  // An untyped value needs the result type. The parser reports the missing
  // type at the token after the value, here on the next line.
  %0 = ds.constant unit
  // expected-error @below {{expected ':' and the constant's type}}
  return
}

//===----------------------------------------------------------------------===//
// ds.list_construct / ds.list_unpack
//===----------------------------------------------------------------------===//

// -----

func.func @list_construct_element(%a: i64, %b: f64) {
  // expected-error @below {{'ds.list_construct' op element #1 has type 'f64', but the list holds 'i64'}}
  %0 = ds.list_construct %a, %b : (i64, f64) -> !ds.list<i64>
  return
}

// -----

func.func @list_construct_tensor_kind(%a: tensor<2xf32>, %b: i64) {
  // expected-error @below {{'ds.list_construct' op element #1 has type 'i64', but the list holds 'tensor<*xf32>'}}
  %0 = ds.list_construct %a, %b : (tensor<2xf32>, i64) -> !ds.list<tensor<*xf32>>
  return
}

// -----

func.func @list_unpack_result(%l: !ds.list<i64>) {
  // expected-error @below {{'ds.list_unpack' op result #0 has type 'i1', but the list holds 'i64'}}
  %0, %1 = ds.list_unpack %l : (!ds.list<i64>) -> (i1, i64)
  return
}

//===----------------------------------------------------------------------===//
// ds.aten
//===----------------------------------------------------------------------===//

// -----

func.func @aten_unknown(%x: tensor<4xf32>) {
  // expected-error @below {{'ds.aten' op operator 'aten::relu.Frobnicate' is not in the supported operator registry}}
  %0 = ds.aten "aten::relu.Frobnicate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @aten_arity(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error @below {{'ds.aten' op operator 'aten::linear' takes 3 arguments, but 2 were given}}
  %0 = ds.aten "aten::linear"(%x, %w) : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @aten_too_few_results(%x: tensor<4x8xf32>, %dim: i64, %keepdim: i1) {
  // expected-error @below {{'ds.aten' op operator 'aten::max.dim' returns 2 values, but the op has 1 results}}
  %0 = ds.aten "aten::max.dim"(%x, %dim, %keepdim) : (tensor<4x8xf32>, i64, i1) -> tensor<4xf32>
  return
}

// -----

func.func @aten_no_results(%x: tensor<4xf32>) {
  // expected-error @below {{'ds.aten' op operator 'aten::relu' returns 1 values, but the op has 0 results}}
  ds.aten "aten::relu"(%x) : (tensor<4xf32>) -> ()
  return
}

//===----------------------------------------------------------------------===//
// ds.if / ds.yield
//===----------------------------------------------------------------------===//

// -----

func.func @if_then_count(%c: i1, %x: tensor<4xf32>) {
  // expected-error @below {{'ds.if' op 'then' branch yields 0 values, but the op has 1 results}}
  %0 = ds.if %c -> (tensor<4xf32>) {
    ds.yield
  } else {
    ds.yield %x : tensor<4xf32>
  }
  return
}

// -----

func.func @if_else_count(%c: i1, %x: tensor<4xf32>) {
  // expected-error @below {{'ds.if' op 'else' branch yields 2 values, but the op has 1 results}}
  %0 = ds.if %c -> (tensor<4xf32>) {
    ds.yield %x : tensor<4xf32>
  } else {
    ds.yield %x, %x : tensor<4xf32>, tensor<4xf32>
  }
  return
}

// -----

func.func @if_then_type(%c: i1, %x: tensor<4xf32>, %n: i64) {
  // expected-error @below {{'ds.if' op 'then' branch yields 'i64' as result #1, but the op has 'tensor<4xf32>'}}
  %0:2 = ds.if %c -> (tensor<4xf32>, tensor<4xf32>) {
    ds.yield %x, %n : tensor<4xf32>, i64
  } else {
    ds.yield %x, %x : tensor<4xf32>, tensor<4xf32>
  }
  return
}

// -----

func.func @if_else_type(%c: i1, %x: tensor<4xf32>, %y: tensor<2xf32>) {
  // expected-error @below {{'ds.if' op 'else' branch yields 'tensor<2xf32>' as result #0, but the op has 'tensor<4xf32>'}}
  %0 = ds.if %c -> (tensor<4xf32>) {
    ds.yield %x : tensor<4xf32>
  } else {
    ds.yield %y : tensor<2xf32>
  }
  return
}

// -----

func.func @yield_outside_if(%x: tensor<4xf32>) {
  // expected-error @below {{'ds.yield' op expects parent op 'ds.if'}}
  "ds.yield"(%x) : (tensor<4xf32>) -> ()
}
