// RUN: ds-translate --ds-mlir-to-plan %s | FileCheck %s

// A module compiled for CUDA: the plan's device is the module's
// ds.target_device, and a factory op's device argument (the device the model
// was traced on) is still written as None, since the runtime runs every
// operator on the run's device.
module attributes {ds.target_device = "cuda"} {
  ds.engine @model {module = "", config = "{\22train_batch_size\22: 2}", deepspeed = #ds.engine_config<train_batch_size = 2, train_micro_batch_size_per_gpu = 2>}
  func.func @forward_eval(%x: tensor<2x3xf32> {ds.name = "x"}) -> tensor<f32> {
    %n = ds.constant unit : !ds.none
    %d = ds.constant "cuda:0" : !ds.device
    %two = ds.constant 2 : i64
    %three = ds.constant 3 : i64
    %size = ds.list_construct %two, %three : (i64, i64) -> !ds.list<i64>
    %z = ds.aten "aten::zeros"(%size, %n, %n, %d, %n) : (!ds.list<i64>, !ds.none, !ds.none, !ds.device, !ds.none) -> tensor<2x3xf32>
    %one = ds.constant 1 : i64
    %a = ds.aten "aten::add.Tensor"(%x, %z, %one) : (tensor<2x3xf32>, tensor<2x3xf32>, i64) -> tensor<2x3xf32>
    %s = ds.aten "aten::sum"(%a, %n) : (tensor<2x3xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// CHECK: "format": "ds-plan",
// CHECK-NEXT: "version": 9,
// CHECK-NEXT: "producer": "ds-translate",
// CHECK-NEXT: "device": "cuda",
// CHECK: "body": [
// CHECK-NEXT: {"kind": "input", "index": 0, "result": 0},
// CHECK-NEXT: {"kind": "constant", "result": [[NONE:[0-9]+]], "value": null},
// CHECK-NEXT: {"kind": "constant", "result": [[DEVICE:[0-9]+]], "value": null},
// CHECK:      {"kind": "call", "op": "aten::zeros", "args": [{{[0-9]+}}, [[NONE]], [[NONE]], [[DEVICE]], [[NONE]]]
