// RUN: ds-opt %s -split-input-file -ds-autodiff | FileCheck %s

// The statistics that native_layer_norm and native_batch_norm hand to their
// backward are typed as the target device's kernels return them. On the CPU
// they keep the input's dtype (bf16 here).
// CHECK-LABEL: func.func @forward
// CHECK:      ds.backward_begin
// The batch norm's backward comes first (reverse order).
// CHECK:      %{{.*}}:3 = ds.aten "aten::native_batch_norm"({{.*}} -> (tensor<2x4xbf16>, tensor<4xbf16>, tensor<4xbf16>)
// CHECK:      %{{.*}}:3 = ds.aten "aten::native_batch_norm_backward"({{.*}} -> (tensor<2x4xbf16>, tensor<4xbf16>, tensor<4xbf16>)
// CHECK:      %{{.*}}:3 = ds.aten "aten::native_layer_norm"({{.*}} -> (tensor<2x4xbf16>, tensor<2x1xbf16>, tensor<2x1xbf16>)
// CHECK:      %{{.*}}:3 = ds.aten "aten::native_layer_norm_backward"({{.*}} : (tensor<2x4xbf16>, tensor<2x4xbf16>, !ds.list<i64>, tensor<2x1xbf16>, tensor<2x1xbf16>,
module {
  ds.param @ln.weight : tensor<4xbf16> {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @bn.weight : tensor<4xbf16> {module = "bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d", requires_grad}
  func.func @forward(%x: tensor<2x4xbf16>) -> tensor<bf16> {
    %none = ds.constant unit : !ds.none
    %true = ds.constant true
    %four = ds.constant 4 : i64
    %eps = ds.constant 1.000000e-05 : f64
    %mom = ds.constant 1.000000e-01 : f64
    %shape = ds.list_construct %four : (i64) -> !ds.list<i64>
    %lw = ds.get_param @ln.weight : tensor<4xbf16>
    %bw = ds.get_param @bn.weight : tensor<4xbf16>
    %y = ds.aten "aten::layer_norm"(%x, %shape, %lw, %none, %eps, %true) : (tensor<2x4xbf16>, !ds.list<i64>, tensor<4xbf16>, !ds.none, f64, i1) -> tensor<2x4xbf16>
    %z = ds.aten "aten::batch_norm"(%y, %bw, %none, %none, %none, %true, %mom, %eps, %true) : (tensor<2x4xbf16>, tensor<4xbf16>, !ds.none, !ds.none, !ds.none, i1, f64, f64, i1) -> tensor<2x4xbf16>
    %s = ds.aten "aten::sum"(%z, %none) : (tensor<2x4xbf16>, !ds.none) -> tensor<bf16>
    return %s : tensor<bf16>
  }
}

// -----

// On CUDA they are in the input's accumulate type, f32 for bf16
// (at::toAccumulateType(dtype, /*is_cuda=*/true)); the weights' gradients
// stay in the weights' dtype.
// CHECK-LABEL: func.func @forward
// CHECK:      ds.backward_begin
// CHECK:      %{{.*}}:3 = ds.aten "aten::native_batch_norm"({{.*}} -> (tensor<2x4xbf16>, tensor<4xf32>, tensor<4xf32>)
// CHECK:      %{{.*}}:3 = ds.aten "aten::native_batch_norm_backward"({{.*}} -> (tensor<2x4xbf16>, tensor<4xbf16>, tensor<4xbf16>)
// CHECK:      %{{.*}}:3 = ds.aten "aten::native_layer_norm"({{.*}} -> (tensor<2x4xbf16>, tensor<2x1xf32>, tensor<2x1xf32>)
// CHECK:      %{{.*}}:3 = ds.aten "aten::native_layer_norm_backward"({{.*}} : (tensor<2x4xbf16>, tensor<2x4xbf16>, !ds.list<i64>, tensor<2x1xf32>, tensor<2x1xf32>,
module attributes {ds.target_device = "cuda"} {
  ds.param @ln.weight : tensor<4xbf16> {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @bn.weight : tensor<4xbf16> {module = "bn", module_class = "torch.nn.modules.batchnorm.BatchNorm1d", requires_grad}
  func.func @forward(%x: tensor<2x4xbf16>) -> tensor<bf16> {
    %none = ds.constant unit : !ds.none
    %true = ds.constant true
    %four = ds.constant 4 : i64
    %eps = ds.constant 1.000000e-05 : f64
    %mom = ds.constant 1.000000e-01 : f64
    %shape = ds.list_construct %four : (i64) -> !ds.list<i64>
    %lw = ds.get_param @ln.weight : tensor<4xbf16>
    %bw = ds.get_param @bn.weight : tensor<4xbf16>
    %y = ds.aten "aten::layer_norm"(%x, %shape, %lw, %none, %eps, %true) : (tensor<2x4xbf16>, !ds.list<i64>, tensor<4xbf16>, !ds.none, f64, i1) -> tensor<2x4xbf16>
    %z = ds.aten "aten::batch_norm"(%y, %bw, %none, %none, %none, %true, %mom, %eps, %true) : (tensor<2x4xbf16>, tensor<4xbf16>, !ds.none, !ds.none, !ds.none, i1, f64, f64, i1) -> tensor<2x4xbf16>
    %s = ds.aten "aten::sum"(%z, %none) : (tensor<2x4xbf16>, !ds.none) -> tensor<bf16>
    return %s : tensor<bf16>
  }
}
