// RUN: ds-opt %s -ds-zero-partition -verify-diagnostics -o /dev/null

// A leaf's backward ds.if whose branch also holds an op without a
// TorchScript origin (no module and no module_class, as the backward's
// zeros of an untaken branch): still routing inside the leaf, so the only remark is the
// leaf's own (no "read inside this data-dependent ds.if" remark). The IR is
// zero-partition-leaf.mlir after -ds-autodiff -canonicalize -cse
// -ds-lower-optimizer, with that op added.

module attributes {ds.world_size = 2 : i64} {
  // expected-remark @below {{ZeRO-3 leaf module 'moe' (SparseMoeBlock), matched by zero_optimization.leaf_module.classes[0] "SparseMoeBlock"}}
  ds.engine @model {deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 4, stage3_param_persistence_threshold = 0, stage3_max_reuse_distance = 0, leaf_module = <classes = ["SparseMoeBlock"]>>>, module = ""}
  ds.param @moe.gate.w : tensor<4xf32> {engine = @model, module = "moe.gate", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @moe.experts.0.fc1.w : tensor<4xf32> {engine = @model, module = "moe.experts.0.fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @moe.experts.1.fc1.w : tensor<4xf32> {engine = @model, module = "moe.experts.1.fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @head.w : tensor<4xf32> {engine = @model, module = "head", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%arg0: tensor<4xf32> {ds.name = "x"}, %arg1: i1 {ds.name = "c", ds.unbatched}, %arg2: i1 {ds.name = "d", ds.unbatched}) -> tensor<f32> {
    %0 = ds.constant 0 : i64
    %1 = ds.constant false
    %2 = ds.constant 4 : i64
    %3 = ds.constant dense<1.000000e+00> : tensor<f32>
    %4 = ds.constant unit : !ds.none
    %5 = ds.get_param @moe.gate.w : tensor<4xf32>
    %6 = ds.aten "aten::mul.Tensor"(%arg0, %5) {module = "moe.gate", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %7 = ds.aten "aten::relu"(%6) {module = "moe", module_class = "SparseMoeBlock"} : (tensor<4xf32>) -> tensor<4xf32>
    %8 = ds.if %arg1 -> (tensor<4xf32>) {
      %21 = ds.get_param @moe.experts.0.fc1.w : tensor<4xf32>
      %22 = ds.aten "aten::mul.Tensor"(%7, %21) {module = "moe.experts.0.fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      ds.yield %22 : tensor<4xf32>
    } else {
      ds.yield %7 : tensor<4xf32>
    }
    %9 = ds.if %arg2 -> (tensor<4xf32>) {
      %21 = ds.get_param @moe.experts.1.fc1.w : tensor<4xf32>
      %22 = ds.aten "aten::mul.Tensor"(%8, %21) {module = "moe.experts.1.fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      ds.yield %22 : tensor<4xf32>
    } else {
      ds.yield %8 : tensor<4xf32>
    }
    %10 = ds.get_param @head.w : tensor<4xf32>
    %11 = ds.aten "aten::mul.Tensor"(%9, %10) {module = "head", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %12 = ds.aten "aten::sum"(%11, %4) {module_class = "Model"} : (tensor<4xf32>, !ds.none) -> tensor<f32>
    ds.backward_begin
    %13 = ds.list_construct %2 : (i64) -> !ds.list<i64>
    %14 = ds.aten "aten::expand"(%3, %13, %1) {module_class = "Model"} : (tensor<f32>, !ds.list<i64>, i1) -> tensor<4xf32>
    %15 = ds.aten "aten::mul.Tensor"(%14, %10) {module = "head", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %16 = ds.aten "aten::mul.Tensor"(%14, %9) {module = "head", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    ds.grad @head.w, %16 : tensor<4xf32>
    %17 = ds.if %arg2 -> (tensor<4xf32>) {
      %21 = ds.get_param @moe.experts.1.fc1.w : tensor<4xf32>
      %22 = ds.aten "aten::mul.Tensor"(%15, %21) {module = "moe.experts.1.fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %23 = ds.aten "aten::mul.Tensor"(%15, %8) {module = "moe.experts.1.fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      ds.grad @moe.experts.1.fc1.w, %23 : tensor<4xf32>
      ds.yield %22 : tensor<4xf32>
    } else {
      %z = ds.aten "aten::neg"(%15) : (tensor<4xf32>) -> tensor<4xf32>
      ds.yield %z : tensor<4xf32>
    }
    %18 = ds.if %arg1 -> (tensor<4xf32>) {
      %21 = ds.get_param @moe.experts.0.fc1.w : tensor<4xf32>
      %22 = ds.aten "aten::mul.Tensor"(%17, %21) {module = "moe.experts.0.fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %23 = ds.aten "aten::mul.Tensor"(%17, %7) {module = "moe.experts.0.fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      ds.grad @moe.experts.0.fc1.w, %23 : tensor<4xf32>
      ds.yield %22 : tensor<4xf32>
    } else {
      ds.yield %17 : tensor<4xf32>
    }
    %19 = ds.aten "aten::threshold_backward"(%18, %7, %0) {module = "moe", module_class = "SparseMoeBlock"} : (tensor<4xf32>, tensor<4xf32>, i64) -> tensor<4xf32>
    %20 = ds.aten "aten::mul.Tensor"(%19, %arg0) {module = "moe.gate", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    ds.grad @moe.gate.w, %20 : tensor<4xf32>
    return %12 : tensor<f32>
  }
  func.func @forward_eval(%arg0: tensor<4xf32> {ds.name = "x"}, %arg1: i1 {ds.name = "c", ds.unbatched}, %arg2: i1 {ds.name = "d", ds.unbatched}) -> tensor<4xf32> {
    %0 = ds.get_param @moe.gate.w : tensor<4xf32>
    %1 = ds.aten "aten::mul.Tensor"(%arg0, %0) {module = "moe.gate", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %2 = ds.aten "aten::relu"(%1) {module = "moe", module_class = "SparseMoeBlock"} : (tensor<4xf32>) -> tensor<4xf32>
    %3 = ds.if %arg1 -> (tensor<4xf32>) {
      %5 = ds.get_param @moe.experts.0.fc1.w : tensor<4xf32>
      %6 = ds.aten "aten::mul.Tensor"(%2, %5) {module = "moe.experts.0.fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      ds.yield %6 : tensor<4xf32>
    } else {
      ds.yield %2 : tensor<4xf32>
    }
    %4 = ds.if %arg2 -> (tensor<4xf32>) {
      %5 = ds.get_param @moe.experts.1.fc1.w : tensor<4xf32>
      %6 = ds.aten "aten::mul.Tensor"(%3, %5) {module = "moe.experts.1.fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      ds.yield %6 : tensor<4xf32>
    } else {
      ds.yield %3 : tensor<4xf32>
    }
    return %4 : tensor<4xf32>
  }
  func.func @step() {
    ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
    return
  }
}

