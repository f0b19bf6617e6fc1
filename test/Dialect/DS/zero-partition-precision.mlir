// RUN: ds-opt %s -split-input-file -ds-autodiff -canonicalize -cse -ds-lower-optimizer -ds-zero-partition -ds-verify-collectives -verify-diagnostics | FileCheck %s

// -ds-zero-partition: communication dtypes (docs/zero.md, "Communication
// dtypes"). The model: fc1 (Linear), ln (a LayerNorm, written as a mul and
// an add), fc2 (Linear); reduce_bucket_size 40, two ranks.

// Native bf16 (bf16.enabled; the parameters are bf16 already): every bucket
// communicates in the model dtype, bf16, unless communication_data_type
// says otherwise. Bucket sizes as without a dtype.
// CHECK:      ds.bucket @model_bucket0 engine @model offset 0 numel 22 dtype bf16{{$}}
// CHECK-NEXT: ds.bucket @model_bucket1 engine @model offset 22 numel 32 dtype bf16{{$}}
// CHECK-NOT:  ds.bucket
module attributes {ds.world_size = 2 : i64} {
  // expected-remark @+1 {{engine @model reduces and gathers every bucket (@model_bucket0, @model_bucket1) in bf16 (the model dtype: no communication_data_type)}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2, reduce_bucket_size = 40>, precision = <mode = bf16>>}
  ds.param @fc1.weight : tensor<4x8xbf16> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc1.bias : tensor<4xbf16> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @ln.weight : tensor<4xbf16> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @ln.bias : tensor<4xbf16> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @fc2.weight : tensor<2x4xbf16> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc2.bias : tensor<2xbf16> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<2x8xbf16> {ds.name = "x"}) -> tensor<bf16> {
    %w1 = ds.get_param @fc1.weight : tensor<4x8xbf16>
    %b1 = ds.get_param @fc1.bias : tensor<4xbf16>
    %h = ds.aten "aten::linear"(%x, %w1, %b1) {module = "fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x8xbf16>, tensor<4x8xbf16>, tensor<4xbf16>) -> tensor<2x4xbf16>
    %g = ds.get_param @ln.weight : tensor<4xbf16>
    %be = ds.get_param @ln.bias : tensor<4xbf16>
    %n = ds.aten "aten::mul.Tensor"(%h, %g) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xbf16>, tensor<4xbf16>) -> tensor<2x4xbf16>
    %one = ds.constant 1 : i64
    %m = ds.aten "aten::add.Tensor"(%n, %be, %one) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xbf16>, tensor<4xbf16>, i64) -> tensor<2x4xbf16>
    %w2 = ds.get_param @fc2.weight : tensor<2x4xbf16>
    %b2 = ds.get_param @fc2.bias : tensor<2xbf16>
    %y = ds.aten "aten::linear"(%m, %w2, %b2) {module = "fc2", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2xbf16>) -> tensor<2x2xbf16>
    %none = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %none) : (tensor<2x2xbf16>, !ds.none) -> tensor<bf16>
    return %s : tensor<bf16>
  }
}

// -----

// communication_data_type fp32 on a bf16 engine (stage 1).
// CHECK-LABEL: {{//[ ]-----}}
// CHECK:      ds.bucket @model_bucket0 engine @model offset 0 numel 22 dtype f32{{$}}
// CHECK-NEXT: ds.bucket @model_bucket1 engine @model offset 22 numel 32 dtype f32{{$}}
// CHECK-NOT:  ds.bucket
module attributes {ds.world_size = 2 : i64} {
  // expected-remark @+1 {{engine @model reduces and gathers every bucket (@model_bucket0, @model_bucket1) in f32 (communication_data_type)}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 1, reduce_bucket_size = 40>, precision = <mode = bf16, communication_data_type = f32>>}
  ds.param @fc1.weight : tensor<4x8xbf16> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc1.bias : tensor<4xbf16> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @ln.weight : tensor<4xbf16> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @ln.bias : tensor<4xbf16> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @fc2.weight : tensor<2x4xbf16> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc2.bias : tensor<2xbf16> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<2x8xbf16> {ds.name = "x"}) -> tensor<bf16> {
    %w1 = ds.get_param @fc1.weight : tensor<4x8xbf16>
    %b1 = ds.get_param @fc1.bias : tensor<4xbf16>
    %h = ds.aten "aten::linear"(%x, %w1, %b1) {module = "fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x8xbf16>, tensor<4x8xbf16>, tensor<4xbf16>) -> tensor<2x4xbf16>
    %g = ds.get_param @ln.weight : tensor<4xbf16>
    %be = ds.get_param @ln.bias : tensor<4xbf16>
    %n = ds.aten "aten::mul.Tensor"(%h, %g) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xbf16>, tensor<4xbf16>) -> tensor<2x4xbf16>
    %one = ds.constant 1 : i64
    %m = ds.aten "aten::add.Tensor"(%n, %be, %one) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xbf16>, tensor<4xbf16>, i64) -> tensor<2x4xbf16>
    %w2 = ds.get_param @fc2.weight : tensor<2x4xbf16>
    %b2 = ds.get_param @fc2.bias : tensor<2xbf16>
    %y = ds.aten "aten::linear"(%m, %w2, %b2) {module = "fc2", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2xbf16>) -> tensor<2x2xbf16>
    %none = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %none) : (tensor<2x2xbf16>, !ds.none) -> tensor<bf16>
    return %s : tensor<bf16>
  }
}

// -----

// torch_autocast at stage 2: the Linear parameters communicate in bf16, the
// LayerNorm's in f32, never in one bucket. Each dtype fills its own bucket
// in backward order (fc2.bias, fc2.weight, ln.bias, ln.weight, fc1.bias,
// fc1.weight): fc1.weight does not fit the open bf16 bucket (14 + 32 > 40),
// which closes first at offset 0; the LayerNorm's bucket was started
// before fc1.weight's, so it comes next. Each bucket is reduced when its
// last gradient is there: the LayerNorm's first.
// CHECK-LABEL: {{//[ ]-----}}
// CHECK:      ds.param @fc1.weight : tensor<4x8xf32> {engine = @model, flat_offset = 22 : i64
// CHECK-NEXT: ds.param @fc1.bias : tensor<4xf32> {engine = @model, flat_offset = 10 : i64
// CHECK-NEXT: ds.param @ln.weight : tensor<4xf32> {engine = @model, flat_offset = 18 : i64
// CHECK-NEXT: ds.param @ln.bias : tensor<4xf32> {engine = @model, flat_offset = 14 : i64
// CHECK-NEXT: ds.param @fc2.weight : tensor<2x4xf32> {engine = @model, flat_offset = 2 : i64
// CHECK-NEXT: ds.param @fc2.bias : tensor<2xf32> {engine = @model, flat_offset = 0 : i64
// CHECK-NEXT: ds.bucket @model_bucket0 engine @model offset 0 numel 14 dtype bf16{{$}}
// CHECK-NEXT: ds.bucket @model_bucket1 engine @model offset 14 numel 8 dtype f32{{$}}
// CHECK-NEXT: ds.bucket @model_bucket2 engine @model offset 22 numel 32 dtype bf16{{$}}
// CHECK-NOT:  ds.bucket
// CHECK:      ds.grad @ln.weight
// CHECK-NEXT: ds.reduce_scatter @model_bucket1
// CHECK:      ds.grad @fc1.bias
// CHECK-NEXT: ds.reduce_scatter @model_bucket0
// CHECK:      ds.grad @fc1.weight
// CHECK-NEXT: ds.reduce_scatter @model_bucket2
module attributes {ds.world_size = 2 : i64} {
  // expected-remark @+1 {{torch_autocast engine @model reduces and gathers the parameters of lower-precision-safe modules in bf16, the others in f32: @model_bucket0 (fc2.bias, fc2.weight, fc1.bias: torch.nn.Linear) in bf16; @model_bucket1 (ln.bias, ln.weight) in f32; @model_bucket2 (fc1.weight: torch.nn.Linear) in bf16}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2, reduce_bucket_size = 40>, precision = <mode = autocast, autocast_dtype = bf16>>}
  ds.param @fc1.weight : tensor<4x8xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc1.bias : tensor<4xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @ln.weight : tensor<4xf32> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @ln.bias : tensor<4xf32> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @fc2.weight : tensor<2x4xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc2.bias : tensor<2xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<2x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %w1 = ds.get_param @fc1.weight : tensor<4x8xf32>
    %b1 = ds.get_param @fc1.bias : tensor<4xf32>
    %h = ds.aten "aten::linear"(%x, %w1, %b1) {module = "fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %g = ds.get_param @ln.weight : tensor<4xf32>
    %be = ds.get_param @ln.bias : tensor<4xf32>
    %n = ds.aten "aten::mul.Tensor"(%h, %g) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %one = ds.constant 1 : i64
    %m = ds.aten "aten::add.Tensor"(%n, %be, %one) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xf32>, tensor<4xf32>, i64) -> tensor<2x4xf32>
    %w2 = ds.get_param @fc2.weight : tensor<2x4xf32>
    %b2 = ds.get_param @fc2.bias : tensor<2xf32>
    %y = ds.aten "aten::linear"(%m, %w2, %b2) {module = "fc2", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<2x2xf32>
    %none = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %none) : (tensor<2x2xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// torch_autocast at stage 3: the sharded weights share a bf16 bucket; the
// persistent parameters (at most 4 elements) split by dtype too.
// CHECK-LABEL: {{//[ ]-----}}
// CHECK:      ds.bucket @model_bucket0 engine @model offset 0 numel 40 dtype bf16{{$}}
// CHECK-NEXT: ds.bucket @model_bucket1 engine @model offset 40 numel 6 persistent dtype bf16{{$}}
// CHECK-NEXT: ds.bucket @model_bucket2 engine @model offset 46 numel 8 persistent dtype f32{{$}}
// CHECK-NOT:  ds.bucket
// CHECK:      ds.all_gather @model_bucket0
module attributes {ds.world_size = 2 : i64} {
  // expected-remark @+1 {{torch_autocast engine @model reduces and gathers the parameters of lower-precision-safe modules in bf16, the others in f32: @model_bucket0 (fc2.weight, fc1.weight: torch.nn.Linear) in bf16; @model_bucket1 (fc2.bias, fc1.bias: torch.nn.Linear) in bf16; @model_bucket2 (ln.bias, ln.weight) in f32}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 40, stage3_param_persistence_threshold = 4>, precision = <mode = autocast, autocast_dtype = bf16>>}
  ds.param @fc1.weight : tensor<4x8xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc1.bias : tensor<4xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @ln.weight : tensor<4xf32> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @ln.bias : tensor<4xf32> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @fc2.weight : tensor<2x4xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc2.bias : tensor<2xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<2x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %w1 = ds.get_param @fc1.weight : tensor<4x8xf32>
    %b1 = ds.get_param @fc1.bias : tensor<4xf32>
    %h = ds.aten "aten::linear"(%x, %w1, %b1) {module = "fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %g = ds.get_param @ln.weight : tensor<4xf32>
    %be = ds.get_param @ln.bias : tensor<4xf32>
    %n = ds.aten "aten::mul.Tensor"(%h, %g) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %one = ds.constant 1 : i64
    %m = ds.aten "aten::add.Tensor"(%n, %be, %one) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xf32>, tensor<4xf32>, i64) -> tensor<2x4xf32>
    %w2 = ds.get_param @fc2.weight : tensor<2x4xf32>
    %b2 = ds.get_param @fc2.bias : tensor<2xf32>
    %y = ds.aten "aten::linear"(%m, %w2, %b2) {module = "fc2", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<2x2xf32>
    %none = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %none) : (tensor<2x2xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A custom lower_precision_safe_modules by bare class: the LayerNorm is safe,
// the Linears are not.
// CHECK-LABEL: {{//[ ]-----}}
// CHECK:      ds.bucket @model_bucket0 engine @model offset 0 numel 14 dtype f32{{$}}
// CHECK-NEXT: ds.bucket @model_bucket1 engine @model offset 14 numel 8 dtype bf16{{$}}
// CHECK-NEXT: ds.bucket @model_bucket2 engine @model offset 22 numel 32 dtype f32{{$}}
// CHECK-NOT:  ds.bucket
module attributes {ds.world_size = 2 : i64} {
  // expected-remark @+1 {{torch_autocast engine @model reduces and gathers the parameters of lower-precision-safe modules in bf16, the others in f32: @model_bucket0 (fc2.bias, fc2.weight, fc1.bias) in f32; @model_bucket1 (ln.bias, ln.weight: LayerNorm) in bf16; @model_bucket2 (fc1.weight) in f32}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2, reduce_bucket_size = 40>, precision = <mode = autocast, autocast_dtype = bf16, lower_precision_safe_modules = ["LayerNorm"]>>}
  ds.param @fc1.weight : tensor<4x8xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc1.bias : tensor<4xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @ln.weight : tensor<4xf32> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @ln.bias : tensor<4xf32> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @fc2.weight : tensor<2x4xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc2.bias : tensor<2xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<2x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %w1 = ds.get_param @fc1.weight : tensor<4x8xf32>
    %b1 = ds.get_param @fc1.bias : tensor<4xf32>
    %h = ds.aten "aten::linear"(%x, %w1, %b1) {module = "fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %g = ds.get_param @ln.weight : tensor<4xf32>
    %be = ds.get_param @ln.bias : tensor<4xf32>
    %n = ds.aten "aten::mul.Tensor"(%h, %g) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %one = ds.constant 1 : i64
    %m = ds.aten "aten::add.Tensor"(%n, %be, %one) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xf32>, tensor<4xf32>, i64) -> tensor<2x4xf32>
    %w2 = ds.get_param @fc2.weight : tensor<2x4xf32>
    %b2 = ds.get_param @fc2.bias : tensor<2xf32>
    %y = ds.aten "aten::linear"(%m, %w2, %b2) {module = "fc2", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<2x2xf32>
    %none = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %none) : (tensor<2x2xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// The same by public alias (torch.nn.LayerNorm for
// torch.nn.modules.normalization.LayerNorm).
// CHECK-LABEL: {{//[ ]-----}}
// CHECK:      ds.bucket @model_bucket0 engine @model offset 0 numel 14 dtype f32{{$}}
// CHECK-NEXT: ds.bucket @model_bucket1 engine @model offset 14 numel 8 dtype bf16{{$}}
// CHECK-NEXT: ds.bucket @model_bucket2 engine @model offset 22 numel 32 dtype f32{{$}}
// CHECK-NOT:  ds.bucket
module attributes {ds.world_size = 2 : i64} {
  // expected-remark @+1 {{@model_bucket1 (ln.bias, ln.weight: torch.nn.LayerNorm) in bf16}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2, reduce_bucket_size = 40>, precision = <mode = autocast, autocast_dtype = bf16, lower_precision_safe_modules = ["torch.nn.LayerNorm"]>>}
  ds.param @fc1.weight : tensor<4x8xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc1.bias : tensor<4xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @ln.weight : tensor<4xf32> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @ln.bias : tensor<4xf32> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @fc2.weight : tensor<2x4xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc2.bias : tensor<2xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<2x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %w1 = ds.get_param @fc1.weight : tensor<4x8xf32>
    %b1 = ds.get_param @fc1.bias : tensor<4xf32>
    %h = ds.aten "aten::linear"(%x, %w1, %b1) {module = "fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %g = ds.get_param @ln.weight : tensor<4xf32>
    %be = ds.get_param @ln.bias : tensor<4xf32>
    %n = ds.aten "aten::mul.Tensor"(%h, %g) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %one = ds.constant 1 : i64
    %m = ds.aten "aten::add.Tensor"(%n, %be, %one) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xf32>, tensor<4xf32>, i64) -> tensor<2x4xf32>
    %w2 = ds.get_param @fc2.weight : tensor<2x4xf32>
    %b2 = ds.get_param @fc2.bias : tensor<2xf32>
    %y = ds.aten "aten::linear"(%m, %w2, %b2) {module = "fc2", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<2x2xf32>
    %none = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %none) : (tensor<2x2xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Classes match exactly, never as subclasses: fc2 is a
// NonDynamicallyQuantizableLinear (a subclass of Linear, as
// MultiheadAttention's out_proj), so the default list does not make it safe.
// CHECK-LABEL: {{//[ ]-----}}
// CHECK:      ds.bucket @model_bucket0 engine @model offset 0 numel 18 dtype f32{{$}}
// CHECK-NEXT: ds.bucket @model_bucket1 engine @model offset 18 numel 36 dtype bf16{{$}}
// CHECK-NOT:  ds.bucket
module attributes {ds.world_size = 2 : i64} {
  // expected-remark @+1 {{@model_bucket0 (fc2.bias, fc2.weight, ln.bias, ln.weight) in f32; @model_bucket1 (fc1.bias, fc1.weight: torch.nn.Linear) in bf16}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2, reduce_bucket_size = 40>, precision = <mode = autocast, autocast_dtype = bf16>>}
  ds.param @fc1.weight : tensor<4x8xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc1.bias : tensor<4xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @ln.weight : tensor<4xf32> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @ln.bias : tensor<4xf32> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @fc2.weight : tensor<2x4xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.NonDynamicallyQuantizableLinear", requires_grad}
  ds.param @fc2.bias : tensor<2xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.NonDynamicallyQuantizableLinear", requires_grad}
  func.func @forward(%x: tensor<2x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %w1 = ds.get_param @fc1.weight : tensor<4x8xf32>
    %b1 = ds.get_param @fc1.bias : tensor<4xf32>
    %h = ds.aten "aten::linear"(%x, %w1, %b1) {module = "fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %g = ds.get_param @ln.weight : tensor<4xf32>
    %be = ds.get_param @ln.bias : tensor<4xf32>
    %n = ds.aten "aten::mul.Tensor"(%h, %g) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %one = ds.constant 1 : i64
    %m = ds.aten "aten::add.Tensor"(%n, %be, %one) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xf32>, tensor<4xf32>, i64) -> tensor<2x4xf32>
    %w2 = ds.get_param @fc2.weight : tensor<2x4xf32>
    %b2 = ds.get_param @fc2.bias : tensor<2xf32>
    %y = ds.aten "aten::linear"(%m, %w2, %b2) {module = "fc2", module_class = "torch.nn.modules.linear.NonDynamicallyQuantizableLinear"} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<2x2xf32>
    %none = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %none) : (tensor<2x2xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A ZeRO-3 leaf module whose subtree holds safe (blk.fc1) and other (blk.ln)
// parameters: its one bucket communicates in f32, and the remark says why.
// CHECK-LABEL: {{//[ ]-----}}
// CHECK:      ds.bucket @model_bucket0 engine @model offset 0 numel 10 dtype bf16{{$}}
// CHECK-NEXT: ds.bucket @model_bucket1 engine @model offset 10 numel 44 leaf "blk" dtype f32{{$}}
// CHECK-NOT:  ds.bucket
module attributes {ds.world_size = 2 : i64} {
  // expected-remark @+2 {{ZeRO-3 leaf module 'blk', matched by zero_optimization.leaf_module.names[0] "blk": bucket @model_bucket1 holds its 4 parameters (44 elements), gathered at once and reduced once}}
  // expected-remark @+1 {{torch_autocast engine @model reduces and gathers the parameters of lower-precision-safe modules in bf16, the others in f32: @model_bucket0 (fc2.bias, fc2.weight: torch.nn.Linear) in bf16; @model_bucket1 (blk.ln.bias, blk.ln.weight, blk.fc1.bias, blk.fc1.weight: leaf module 'blk' mixes safe and other parameters, so its one bucket stays in f32) in f32}}
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 40, stage3_param_persistence_threshold = 0, leaf_module = <names = ["blk"]>>, precision = <mode = autocast, autocast_dtype = bf16>>}
  ds.param @blk.fc1.weight : tensor<4x8xf32> {engine = @model, module = "blk.fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @blk.fc1.bias : tensor<4xf32> {engine = @model, module = "blk.fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @blk.ln.weight : tensor<4xf32> {engine = @model, module = "blk.ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @blk.ln.bias : tensor<4xf32> {engine = @model, module = "blk.ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @fc2.weight : tensor<2x4xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc2.bias : tensor<2xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<2x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %w1 = ds.get_param @blk.fc1.weight : tensor<4x8xf32>
    %b1 = ds.get_param @blk.fc1.bias : tensor<4xf32>
    %h = ds.aten "aten::linear"(%x, %w1, %b1) {module = "blk.fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %g = ds.get_param @blk.ln.weight : tensor<4xf32>
    %be = ds.get_param @blk.ln.bias : tensor<4xf32>
    %n = ds.aten "aten::mul.Tensor"(%h, %g) {module = "blk.ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %one = ds.constant 1 : i64
    %m = ds.aten "aten::add.Tensor"(%n, %be, %one) {module = "blk.ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xf32>, tensor<4xf32>, i64) -> tensor<2x4xf32>
    %w2 = ds.get_param @fc2.weight : tensor<2x4xf32>
    %b2 = ds.get_param @fc2.bias : tensor<2xf32>
    %y = ds.aten "aten::linear"(%m, %w2, %b2) {module = "fc2", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<2x2xf32>
    %none = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %none) : (tensor<2x2xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// An fp32 engine: no dtype, no remark.
// CHECK-LABEL: {{//[ ]-----}}
// CHECK:      ds.bucket @model_bucket0 engine @model offset 0 numel 22{{$}}
// CHECK-NEXT: ds.bucket @model_bucket1 engine @model offset 22 numel 32{{$}}
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 2, reduce_bucket_size = 40>>}
  ds.param @fc1.weight : tensor<4x8xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc1.bias : tensor<4xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @ln.weight : tensor<4xf32> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @ln.bias : tensor<4xf32> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
  ds.param @fc2.weight : tensor<2x4xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc2.bias : tensor<2xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<2x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %w1 = ds.get_param @fc1.weight : tensor<4x8xf32>
    %b1 = ds.get_param @fc1.bias : tensor<4xf32>
    %h = ds.aten "aten::linear"(%x, %w1, %b1) {module = "fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %g = ds.get_param @ln.weight : tensor<4xf32>
    %be = ds.get_param @ln.bias : tensor<4xf32>
    %n = ds.aten "aten::mul.Tensor"(%h, %g) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %one = ds.constant 1 : i64
    %m = ds.aten "aten::add.Tensor"(%n, %be, %one) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xf32>, tensor<4xf32>, i64) -> tensor<2x4xf32>
    %w2 = ds.get_param @fc2.weight : tensor<2x4xf32>
    %b2 = ds.get_param @fc2.bias : tensor<2xf32>
    %y = ds.aten "aten::linear"(%m, %w2, %b2) {module = "fc2", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<2x2xf32>
    %none = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %none) : (tensor<2x2xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}


