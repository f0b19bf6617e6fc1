// RUN: split-file %s %t
// RUN: ds-translate --ds-mlir-to-plan %t/export.mlir | FileCheck %s --check-prefix=EXPORT
// RUN: ds-translate --ds-mlir-to-plan %t/script.mlir | FileCheck %s --check-prefix=SCRIPT
// RUN: ds-translate --ds-mlir-to-plan %t/default.mlir | FileCheck %s --check-prefix=SCRIPT

// The plan's weights are the imported file, read in place: a module imported
// from torch.export (ds.frontend = "torch.export") names its .pt2 as kind
// "pt2" (plan version 8); a TorchScript module ("torchscript", or no
// ds.frontend) names its archive as kind "torchscript".

// EXPORT: "version": 9,
// EXPORT: "weights": {"kind": "pt2", "path": "/models/m.pt2"},
// SCRIPT: "version": 9,
// SCRIPT: "weights": {"kind": "torchscript", "path": "/models/m.pt"},

//--- export.mlir
module attributes {ds.frontend = "torch.export", ds.source = "/models/m.pt2"} {
  ds.engine @model {module = "", config = "{\22train_batch_size\22: 2}", deepspeed = #ds.engine_config<train_batch_size = 2, train_micro_batch_size_per_gpu = 2>}
  func.func @forward_eval(%x: tensor<2x3xf32> {ds.name = "x"}) -> tensor<f32> {
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%x, %n) : (tensor<2x3xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

//--- script.mlir
module attributes {ds.frontend = "torchscript", ds.source = "/models/m.pt"} {
  ds.engine @model {module = "", config = "{\22train_batch_size\22: 2}", deepspeed = #ds.engine_config<train_batch_size = 2, train_micro_batch_size_per_gpu = 2>}
  func.func @forward_eval(%x: tensor<2x3xf32> {ds.name = "x"}) -> tensor<f32> {
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%x, %n) : (tensor<2x3xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

//--- default.mlir
module attributes {ds.source = "/models/m.pt"} {
  ds.engine @model {module = "", config = "{\22train_batch_size\22: 2}", deepspeed = #ds.engine_config<train_batch_size = 2, train_micro_batch_size_per_gpu = 2>}
  func.func @forward_eval(%x: tensor<2x3xf32> {ds.name = "x"}) -> tensor<f32> {
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%x, %n) : (tensor<2x3xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}
