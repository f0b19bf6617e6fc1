// RUN: ds-opt %s -split-input-file -ds-autodiff -canonicalize -cse -ds-lower-optimizer -ds-zero-partition -ds-verify-collectives -verify-diagnostics | FileCheck %s

// How zero_optimization.leaf_module picks the ZeRO-3 leaf modules of an
// engine (docs/leaf-modules.md): by class (bare, dotted, public alias), by
// path, by path suffix; the outermost match wins.

// A dotted class: Python's `__main__.` before a class of the script the model
// was defined in (TorchScript records `__torch__.SparseMoeBlock`).
// CHECK-LABEL: ds.bucket @model_bucket0 engine @model offset 0 numel 4{{$}}
// CHECK-NEXT: ds.bucket @model_bucket1 engine @model offset 4 numel 12 leaf "moe"
// CHECK-NOT: ds.bucket {{.*}} leaf
module attributes {ds.world_size = 2 : i64} {
  // expected-remark @+1 {{ZeRO-3 leaf module 'moe' (SparseMoeBlock), matched by zero_optimization.leaf_module.classes[0] "__main__.SparseMoeBlock": bucket @model_bucket1 holds its 3 parameters (12 elements), gathered at once and reduced once}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 4, stage3_param_persistence_threshold = 0, leaf_module = <classes = ["__main__.SparseMoeBlock"]>>>}
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

// An exact module path. A leaf inside a leaf (moe.experts.0) is part of
// the outer one: one bucket.
// CHECK-LABEL: ds.bucket @model_bucket0 engine @model offset 0 numel 4{{$}}
// CHECK-NEXT: ds.bucket @model_bucket1 engine @model offset 4 numel 12 leaf "moe"
// CHECK-NOT: ds.bucket {{.*}} leaf
module attributes {ds.world_size = 2 : i64} {
  // expected-remark @+1 {{ZeRO-3 leaf module 'moe' (SparseMoeBlock), matched by zero_optimization.leaf_module.names[1] "moe": bucket @model_bucket1 holds its 3 parameters (12 elements), gathered at once and reduced once}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 4, stage3_param_persistence_threshold = 0, leaf_module = <names = ["moe.experts.0", "moe"]>>>}
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

// A suffix on a `.` boundary: moe.experts, a ModuleList that no op or
// parameter names directly (so its class is unknown). The gate stays
// outside the leaf, in a bucket of its own.
// CHECK-LABEL: ds.bucket @model_bucket0 engine @model offset 0 numel 4{{$}}
// CHECK-NEXT: ds.bucket @model_bucket1 engine @model offset 4 numel 4{{$}}
// CHECK-NEXT: ds.bucket @model_bucket2 engine @model offset 8 numel 8 leaf "moe.experts"
module attributes {ds.world_size = 2 : i64} {
  // expected-remark @+1 {{ZeRO-3 leaf module 'moe.experts', matched by zero_optimization.leaf_module.name_suffixes[0] "experts": bucket @model_bucket2 holds its 2 parameters (8 elements), gathered at once and reduced once}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 4, stage3_param_persistence_threshold = 0, leaf_module = <name_suffixes = ["experts"]>>>}
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

// A public alias (`torch.nn.Linear` for torch.nn.modules.linear.Linear)
// matches both Linear modules: two leaves, two buckets, named in path order.
// CHECK-LABEL: ds.bucket @model_bucket0 engine @model offset 0 numel 4{{$}}
// CHECK-NEXT: ds.bucket @model_bucket1 engine @model offset 4 numel 4{{$}}
// CHECK-NEXT: ds.bucket @model_bucket2 engine @model offset 8 numel 4 leaf "head"
// CHECK-NEXT: ds.bucket @model_bucket3 engine @model offset 12 numel 4 leaf "moe.gate"
module attributes {ds.world_size = 2 : i64} {
  // expected-remark @+2 {{ZeRO-3 leaf module 'head' (torch.nn.modules.linear.Linear), matched by zero_optimization.leaf_module.classes[0] "torch.nn.Linear": bucket @model_bucket2 holds its 1 parameter (4 elements), gathered at once and reduced once}}
  // expected-remark @+1 {{ZeRO-3 leaf module 'moe.gate' (torch.nn.modules.linear.Linear), matched by zero_optimization.leaf_module.classes[0] "torch.nn.Linear": bucket @model_bucket3 holds its 1 parameter (4 elements), gathered at once and reduced once}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 4, stage3_param_persistence_threshold = 0, leaf_module = <classes = ["torch.nn.Linear"]>>>}
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

// DeepSpeed's default classes match nothing here, silently.
// CHECK-LABEL: ds.bucket @model_bucket0 engine @model offset 0 numel 4{{$}}
// CHECK-NOT: ds.bucket {{.*}} leaf
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 4, stage3_param_persistence_threshold = 0>>}
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

// Stages 0-2 ignore leaf modules.
// CHECK-LABEL: ds.bucket @model_bucket0 engine @model offset 0 numel 4{{$}}
// CHECK-NOT: ds.bucket {{.*}} leaf
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2, reduce_bucket_size = 4, stage3_param_persistence_threshold = 0, leaf_module = <names = ["nothing"]>>>}
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

// Several engines: names and suffixes are relative to the engine's module
// (`moe` is student.moe for @student; critic.moe is not the student's). A
// frozen stage 3 engine has leaves too: gathered at once, never reduced.
// CHECK-LABEL: ds.bucket @student_bucket0 engine @student offset 0 numel 8 leaf "moe"
// CHECK-NEXT:  ds.bucket @critic_bucket0 engine @critic offset 0 numel 8 leaf "moe"
// CHECK-LABEL: func.func @forward(
// CHECK:         ds.all_gather @student_bucket0
// CHECK:         ds.all_gather @critic_bucket0
// CHECK:         ds.reduce_scatter @student_bucket0
// CHECK-NOT:     ds.reduce_scatter
// CHECK:         return
module attributes {ds.world_size = 2 : i64} {
  // expected-remark @below {{ZeRO-3 leaf module 'moe', matched by zero_optimization.leaf_module.names[0] "moe": bucket @student_bucket0 holds its 2 parameters (8 elements), gathered at once and reduced once}}
  ds.engine @student {module = "student", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 4, stage3_param_persistence_threshold = 0, leaf_module = <names = ["moe"]>>>}
  // expected-remark @below {{ZeRO-3 leaf module 'moe' (Blk), matched by zero_optimization.leaf_module.classes[0] "Blk": bucket @critic_bucket0 holds its 2 parameters (8 elements), gathered at once}}
  ds.engine @critic {module = "critic", frozen, deepspeed = #ds.engine_config<train_batch_size = 2, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 4, stage3_param_persistence_threshold = 0, leaf_module = <classes = ["Blk"]>>>}
  ds.param @student.moe.a : tensor<4xf32> {module = "student.moe.a", module_class = "L", requires_grad, engine = @student}
  ds.param @student.moe.b : tensor<4xf32> {module = "student.moe.b", module_class = "L", requires_grad, engine = @student}
  ds.param @critic.moe.a : tensor<4xf32> {module = "critic.moe", module_class = "Blk", engine = @critic}
  ds.param @critic.moe.b : tensor<4xf32> {module = "critic.moe", module_class = "Blk", engine = @critic}
  func.func @forward(%x: tensor<4xf32> {ds.name = "x"}) -> tensor<f32> {
    %a = ds.get_param @student.moe.a : tensor<4xf32>
    %b = ds.get_param @student.moe.b : tensor<4xf32>
    %h = ds.aten "aten::mul.Tensor"(%x, %a) {module = "student.moe.a", module_class = "L"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %i = ds.aten "aten::mul.Tensor"(%h, %b) {module = "student.moe.b", module_class = "L"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %ca = ds.get_param @critic.moe.a : tensor<4xf32>
    %cb = ds.get_param @critic.moe.b : tensor<4xf32>
    %j = ds.aten "aten::mul.Tensor"(%i, %ca) {module = "critic.moe", module_class = "Blk"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %k = ds.aten "aten::mul.Tensor"(%j, %cb) {module = "critic.moe", module_class = "Blk"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%k, %n) {module = "", module_class = "Model"} : (tensor<4xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A leaf called inside a data-dependent ds.if of an enclosing module: the
// branch is not the leaf's own routing, so the remark about the gather
// hoisted out of it stays.
// CHECK-LABEL: ds.bucket @model_bucket0 engine @model offset 0 numel 4 leaf "moe"
// CHECK-LABEL: func.func @forward(
// CHECK:         ds.all_gather @model_bucket0
// CHECK-NEXT:    ds.wait
// CHECK-NEXT:    ds.if
module attributes {ds.world_size = 2 : i64} {
  // expected-remark @below {{ZeRO-3 leaf module 'moe' (SparseMoeBlock), matched by zero_optimization.leaf_module.names[0] "moe": bucket @model_bucket0 holds its 1 parameter (4 elements), gathered at once and reduced once}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, stage3_param_persistence_threshold = 0, leaf_module = <names = ["moe"]>>>}
  ds.param @moe.w : tensor<4xf32> {engine = @model, module = "moe", module_class = "SparseMoeBlock", requires_grad}
  func.func @forward(%x: tensor<4xf32> {ds.name = "x"}, %c: i1 {ds.name = "c", ds.unbatched}) -> tensor<f32> {
    // expected-remark @+2 {{ZeRO-3: the parameters of module 'moe' are read inside this data-dependent ds.if in the forward of @forward; bucket @model_bucket0 is gathered before it on every rank}}
    // expected-remark @+1 {{ZeRO-3: the parameters of module 'moe' are read inside this data-dependent ds.if in the backward of @forward; bucket @model_bucket0 is gathered before it on every rank}}
    %y = ds.if %c -> (tensor<4xf32>) {
      %w = ds.get_param @moe.w : tensor<4xf32>
      %e = ds.aten "aten::mul.Tensor"(%x, %w) {module = "moe", module_class = "SparseMoeBlock"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %r = ds.aten "aten::relu"(%e) {module = "", module_class = "Model"} : (tensor<4xf32>) -> tensor<4xf32>
      ds.yield %r : tensor<4xf32>
    } else {
      ds.yield %x : tensor<4xf32>
    }
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %n) {module = "", module_class = "Model"} : (tensor<4xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}
