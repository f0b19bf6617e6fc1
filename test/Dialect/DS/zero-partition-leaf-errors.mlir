// RUN: ds-opt %s -split-input-file -ds-autodiff -canonicalize -cse -ds-lower-optimizer -ds-zero-partition -verify-diagnostics

// A user-given zero_optimization.leaf_module entry that matches no module of
// the engine is an error naming the key and the entry (DeepSpeed only warns).

// A path that no module has.
module attributes {ds.world_size = 2 : i64} {
  // expected-error @below {{config of engine @model: zero_optimization.leaf_module.names[0]: "blocks.9.moe" matches no module}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 4, stage3_param_persistence_threshold = 0, leaf_module = <names = ["blocks.9.moe"]>>>}
  ds.param @moe.gate.w : tensor<4xf32> {engine = @model, module = "moe.gate", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @moe.experts.0.w : tensor<4xf32> {engine = @model, module = "moe.experts.0", module_class = "Expert", requires_grad}
  ds.param @moe.experts.1.w : tensor<4xf32> {engine = @model, module = "moe.experts.1", module_class = "Expert", requires_grad}
  ds.param @head.w : tensor<4xf32> {engine = @model, module = "head", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<4xf32> {ds.name = "x"}) -> tensor<f32> {
    %wg = ds.get_param @moe.gate.w : tensor<4xf32>
    %g = ds.aten "aten::mul.Tensor"(%x, %wg) {module = "moe.gate", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %h = ds.aten "aten::relu"(%g) {module = "moe", module_class = "SparseMoeBlock"} : (tensor<4xf32>) -> tensor<4xf32>
    %w0 = ds.get_param @moe.experts.0.w : tensor<4xf32>
    %e0 = ds.aten "aten::mul.Tensor"(%h, %w0) {module = "moe.experts.0", module_class = "Expert"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %w1 = ds.get_param @moe.experts.1.w : tensor<4xf32>
    %e1 = ds.aten "aten::mul.Tensor"(%e0, %w1) {module = "moe.experts.1", module_class = "Expert"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %wh = ds.get_param @head.w : tensor<4xf32>
    %o = ds.aten "aten::mul.Tensor"(%e1, %wh) {module = "head", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%o, %n) {module = "", module_class = "Model"} : (tensor<4xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A user-given class list must match: no module is a MixtralSparseMoeBlock.
module attributes {ds.world_size = 2 : i64} {
  // expected-error @below {{config of engine @model: zero_optimization.leaf_module.classes[1]: "MixtralSparseMoeBlock" matches no module}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 4, stage3_param_persistence_threshold = 0, leaf_module = <classes = ["SparseMoeBlock", "MixtralSparseMoeBlock"]>>>}
  ds.param @moe.gate.w : tensor<4xf32> {engine = @model, module = "moe.gate", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @moe.experts.0.w : tensor<4xf32> {engine = @model, module = "moe.experts.0", module_class = "Expert", requires_grad}
  ds.param @moe.experts.1.w : tensor<4xf32> {engine = @model, module = "moe.experts.1", module_class = "Expert", requires_grad}
  ds.param @head.w : tensor<4xf32> {engine = @model, module = "head", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<4xf32> {ds.name = "x"}) -> tensor<f32> {
    %wg = ds.get_param @moe.gate.w : tensor<4xf32>
    %g = ds.aten "aten::mul.Tensor"(%x, %wg) {module = "moe.gate", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %h = ds.aten "aten::relu"(%g) {module = "moe", module_class = "SparseMoeBlock"} : (tensor<4xf32>) -> tensor<4xf32>
    %w0 = ds.get_param @moe.experts.0.w : tensor<4xf32>
    %e0 = ds.aten "aten::mul.Tensor"(%h, %w0) {module = "moe.experts.0", module_class = "Expert"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %w1 = ds.get_param @moe.experts.1.w : tensor<4xf32>
    %e1 = ds.aten "aten::mul.Tensor"(%e0, %w1) {module = "moe.experts.1", module_class = "Expert"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %wh = ds.get_param @head.w : tensor<4xf32>
    %o = ds.aten "aten::mul.Tensor"(%e1, %wh) {module = "head", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%o, %n) {module = "", module_class = "Model"} : (tensor<4xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Classes match exactly, never as a prefix or a subclass.
module attributes {ds.world_size = 2 : i64} {
  // expected-error @below {{config of engine @model: zero_optimization.leaf_module.classes[0]: "SparseMoe" matches no module}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 4, stage3_param_persistence_threshold = 0, leaf_module = <classes = ["SparseMoe"]>>>}
  ds.param @moe.gate.w : tensor<4xf32> {engine = @model, module = "moe.gate", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @moe.experts.0.w : tensor<4xf32> {engine = @model, module = "moe.experts.0", module_class = "Expert", requires_grad}
  ds.param @moe.experts.1.w : tensor<4xf32> {engine = @model, module = "moe.experts.1", module_class = "Expert", requires_grad}
  ds.param @head.w : tensor<4xf32> {engine = @model, module = "head", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<4xf32> {ds.name = "x"}) -> tensor<f32> {
    %wg = ds.get_param @moe.gate.w : tensor<4xf32>
    %g = ds.aten "aten::mul.Tensor"(%x, %wg) {module = "moe.gate", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %h = ds.aten "aten::relu"(%g) {module = "moe", module_class = "SparseMoeBlock"} : (tensor<4xf32>) -> tensor<4xf32>
    %w0 = ds.get_param @moe.experts.0.w : tensor<4xf32>
    %e0 = ds.aten "aten::mul.Tensor"(%h, %w0) {module = "moe.experts.0", module_class = "Expert"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %w1 = ds.get_param @moe.experts.1.w : tensor<4xf32>
    %e1 = ds.aten "aten::mul.Tensor"(%e0, %w1) {module = "moe.experts.1", module_class = "Expert"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %wh = ds.get_param @head.w : tensor<4xf32>
    %o = ds.aten "aten::mul.Tensor"(%e1, %wh) {module = "head", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%o, %n) {module = "", module_class = "Model"} : (tensor<4xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A dotted class names the class's package: `other.SparseMoeBlock` is not
// the script's class.
module attributes {ds.world_size = 2 : i64} {
  // expected-error @below {{config of engine @model: zero_optimization.leaf_module.classes[0]: "other.SparseMoeBlock" matches no module}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 4, stage3_param_persistence_threshold = 0, leaf_module = <classes = ["other.SparseMoeBlock"]>>>}
  ds.param @moe.gate.w : tensor<4xf32> {engine = @model, module = "moe.gate", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @moe.experts.0.w : tensor<4xf32> {engine = @model, module = "moe.experts.0", module_class = "Expert", requires_grad}
  ds.param @moe.experts.1.w : tensor<4xf32> {engine = @model, module = "moe.experts.1", module_class = "Expert", requires_grad}
  ds.param @head.w : tensor<4xf32> {engine = @model, module = "head", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<4xf32> {ds.name = "x"}) -> tensor<f32> {
    %wg = ds.get_param @moe.gate.w : tensor<4xf32>
    %g = ds.aten "aten::mul.Tensor"(%x, %wg) {module = "moe.gate", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %h = ds.aten "aten::relu"(%g) {module = "moe", module_class = "SparseMoeBlock"} : (tensor<4xf32>) -> tensor<4xf32>
    %w0 = ds.get_param @moe.experts.0.w : tensor<4xf32>
    %e0 = ds.aten "aten::mul.Tensor"(%h, %w0) {module = "moe.experts.0", module_class = "Expert"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %w1 = ds.get_param @moe.experts.1.w : tensor<4xf32>
    %e1 = ds.aten "aten::mul.Tensor"(%e0, %w1) {module = "moe.experts.1", module_class = "Expert"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %wh = ds.get_param @head.w : tensor<4xf32>
    %o = ds.aten "aten::mul.Tensor"(%e1, %wh) {module = "head", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%o, %n) {module = "", module_class = "Model"} : (tensor<4xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A suffix matches on a `.` boundary only.
module attributes {ds.world_size = 2 : i64} {
  // expected-error @below {{config of engine @model: zero_optimization.leaf_module.name_suffixes[0]: "xperts" matches no module}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 4, stage3_param_persistence_threshold = 0, leaf_module = <name_suffixes = ["xperts"]>>>}
  ds.param @moe.gate.w : tensor<4xf32> {engine = @model, module = "moe.gate", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @moe.experts.0.w : tensor<4xf32> {engine = @model, module = "moe.experts.0", module_class = "Expert", requires_grad}
  ds.param @moe.experts.1.w : tensor<4xf32> {engine = @model, module = "moe.experts.1", module_class = "Expert", requires_grad}
  ds.param @head.w : tensor<4xf32> {engine = @model, module = "head", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<4xf32> {ds.name = "x"}) -> tensor<f32> {
    %wg = ds.get_param @moe.gate.w : tensor<4xf32>
    %g = ds.aten "aten::mul.Tensor"(%x, %wg) {module = "moe.gate", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %h = ds.aten "aten::relu"(%g) {module = "moe", module_class = "SparseMoeBlock"} : (tensor<4xf32>) -> tensor<4xf32>
    %w0 = ds.get_param @moe.experts.0.w : tensor<4xf32>
    %e0 = ds.aten "aten::mul.Tensor"(%h, %w0) {module = "moe.experts.0", module_class = "Expert"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %w1 = ds.get_param @moe.experts.1.w : tensor<4xf32>
    %e1 = ds.aten "aten::mul.Tensor"(%e0, %w1) {module = "moe.experts.1", module_class = "Expert"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %wh = ds.get_param @head.w : tensor<4xf32>
    %o = ds.aten "aten::mul.Tensor"(%e1, %wh) {module = "head", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%o, %n) {module = "", module_class = "Model"} : (tensor<4xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}
