// RUN: ds-opt %s -split-input-file -ds-scale-loss -verify-diagnostics

// -ds-scale-loss and ds.loss_scale: what they reject. Each case breaks one rule.

// Two fp16 engines on the one backward.
ds.engine @a {module = "a", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = fp16, loss_scaler = <kind = dynamic>>>}
// expected-error @+1 {{engine @a trains in fp16 (fp16.enabled) and engine @b trains with a loss scale too on the one backward of @forward: the loss scale multiplies that backward's one seed, so @b's gradients would carry @a's scale (DeepSpeed scales each engine's own loss); an engine with a loss scale (fp16, fp16 autocast) must be the only trainable engine of its plan (bf16 and bf16 autocast need none)}}
ds.engine @b {module = "b", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = fp16, loss_scaler = <kind = static, scale = 128.0>>>}
ds.param @a.w : tensor<4xf32> {engine = @a, module = "a", module_class = "A", requires_grad}
ds.param @b.w : tensor<4xf32> {engine = @b, module = "b", module_class = "B", requires_grad}
func.func @forward(%x: tensor<4xf32> {ds.name = "x"}) -> tensor<f32> {
  %wa = ds.get_param @a.w : tensor<4xf32>
  %wb = ds.get_param @b.w : tensor<4xf32>
  %p = ds.aten "aten::mul.Tensor"(%x, %wa) {module = "a", module_class = "A"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %q = ds.aten "aten::mul.Tensor"(%p, %wb) {module = "b", module_class = "B"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %n = ds.constant unit : !ds.none
  %s = ds.aten "aten::sum"(%q, %n) : (tensor<4xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// An fp16 engine next to a trainable fp32 engine: the fp32 engine's gradients
// would carry the fp16 engine's loss scale.
// expected-error @+1 {{engine @b trains in fp16 (fp16.enabled) and engine @a trains as well on the one backward of @forward: the loss scale multiplies that backward's one seed, so @a's gradients would carry @b's scale (DeepSpeed scales each engine's own loss); an engine with a loss scale (fp16, fp16 autocast) must be the only trainable engine of its plan (bf16 and bf16 autocast need none)}}
ds.engine @a {module = "a", deepspeed = #ds.engine_config<optimizer = <kind = adamw>>}
ds.engine @b {module = "b", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = fp16, loss_scaler = <kind = dynamic>>>}
ds.param @a.w : tensor<4xf32> {engine = @a, module = "a", module_class = "A", requires_grad}
ds.param @b.w : tensor<4xf32> {engine = @b, module = "b", module_class = "B", requires_grad}
func.func @forward(%x: tensor<4xf32> {ds.name = "x"}) -> tensor<f32> {
  %wa = ds.get_param @a.w : tensor<4xf32>
  %wb = ds.get_param @b.w : tensor<4xf32>
  %p = ds.aten "aten::mul.Tensor"(%x, %wa) {module = "a", module_class = "A"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %q = ds.aten "aten::mul.Tensor"(%p, %wb) {module = "b", module_class = "B"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %n = ds.constant unit : !ds.none
  %s = ds.aten "aten::sum"(%q, %n) : (tensor<4xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// An fp16 autocast engine (torch.amp.GradScaler) next to a trainable bf16
// autocast engine: the same rule.
// expected-error @+1 {{engine @b trains in fp16 autocast (torch_autocast.dtype float16) and engine @a trains as well on the one backward of @forward: the loss scale multiplies that backward's one seed, so @a's gradients would carry @b's scale (DeepSpeed scales each engine's own loss); an engine with a loss scale (fp16, fp16 autocast) must be the only trainable engine of its plan (bf16 and bf16 autocast need none)}}
ds.engine @a {module = "a", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = autocast, autocast_dtype = bf16>>}
ds.engine @b {module = "b", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = autocast, autocast_dtype = f16, loss_scaler = <kind = grad_scaler, scale_window = 2000, hysteresis = 1, min_scale = 0.0>>>}
ds.param @a.w : tensor<4xf32> {engine = @a, module = "a", module_class = "A", requires_grad}
ds.param @b.w : tensor<4xf32> {engine = @b, module = "b", module_class = "B", requires_grad}
func.func @forward(%x: tensor<4xf32> {ds.name = "x"}) -> tensor<f32> {
  %wa = ds.get_param @a.w : tensor<4xf32>
  %wb = ds.get_param @b.w : tensor<4xf32>
  %p = ds.aten "aten::mul.Tensor"(%x, %wa) {module = "a", module_class = "A"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %q = ds.aten "aten::mul.Tensor"(%p, %wb) {module = "b", module_class = "B"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %n = ds.constant unit : !ds.none
  %s = ds.aten "aten::sum"(%q, %n) : (tensor<4xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Two fp16 autocast engines.
ds.engine @a {module = "a", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = autocast, autocast_dtype = f16, loss_scaler = <kind = grad_scaler, scale_window = 2000, hysteresis = 1, min_scale = 0.0>>>}
// expected-error @+1 {{engine @a trains in fp16 autocast (torch_autocast.dtype float16) and engine @b trains with a loss scale too on the one backward of @forward}}
ds.engine @b {module = "b", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = autocast, autocast_dtype = f16, loss_scaler = <kind = grad_scaler, scale_window = 2000, hysteresis = 1, min_scale = 0.0>>>}
ds.param @a.w : tensor<4xf32> {engine = @a, module = "a", module_class = "A", requires_grad}
ds.param @b.w : tensor<4xf32> {engine = @b, module = "b", module_class = "B", requires_grad}
func.func @forward(%x: tensor<4xf32> {ds.name = "x"}) -> tensor<f32> {
  %wa = ds.get_param @a.w : tensor<4xf32>
  %wb = ds.get_param @b.w : tensor<4xf32>
  %p = ds.aten "aten::mul.Tensor"(%x, %wa) {module = "a", module_class = "A"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %q = ds.aten "aten::mul.Tensor"(%p, %wb) {module = "b", module_class = "B"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %n = ds.constant unit : !ds.none
  %s = ds.aten "aten::sum"(%q, %n) : (tensor<4xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// An fp16 autocast engine without a backward.
// expected-error @+1 {{engine @model trains in fp16 autocast, but @forward has no backward (ds.backward_begin) to scale: run -ds-autodiff first}}
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = autocast, autocast_dtype = f16, loss_scaler = <kind = grad_scaler, scale_window = 2000, hysteresis = 1, min_scale = 0.0>>>}
ds.param @w : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad}
func.func @forward(%x: tensor<4xf32> {ds.name = "x"}) -> tensor<f32> {
  %w = ds.get_param @w : tensor<4xf32>
  %n = ds.constant unit : !ds.none
  %s = ds.aten "aten::sum"(%w, %n) : (tensor<4xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// No marked seed: the backward was not made by -ds-autodiff right before.
// expected-error @+1 {{engine @model trains in fp16, but the backward of @forward has no seed to scale (a ds.constant marked ds.backward_seed after ds.backward_begin): run -ds-scale-loss right after -ds-autodiff, before -canonicalize merges the seed into other constants}}
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = fp16, loss_scaler = <kind = dynamic>>>}
ds.param @w : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad}
func.func @forward(%x: tensor<4xf32> {ds.name = "x"}) -> tensor<f32> {
  %w = ds.get_param @w : tensor<4xf32>
  %n = ds.constant unit : !ds.none
  %s = ds.aten "aten::sum"(%w, %n) : (tensor<4xf32>, !ds.none) -> tensor<f32>
  ds.backward_begin
  %g = ds.constant dense<1.0> : tensor<4xf32>
  ds.grad @w, %g : tensor<4xf32>
  return %s : tensor<f32>
}

// -----

// No backward at all.
// expected-error @+1 {{engine @model trains in fp16, but @forward has no backward (ds.backward_begin) to scale: run -ds-autodiff first}}
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = fp16, loss_scaler = <kind = dynamic>>>}
ds.param @w : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad}
func.func @forward(%x: tensor<4xf32> {ds.name = "x"}) -> tensor<f32> {
  %w = ds.get_param @w : tensor<4xf32>
  %n = ds.constant unit : !ds.none
  %s = ds.aten "aten::sum"(%w, %n) : (tensor<4xf32>, !ds.none) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Already scaled.
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = fp16, loss_scaler = <kind = dynamic>>>}
ds.param @w : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad}
func.func @forward(%x: tensor<4xf32> {ds.name = "x"}) -> tensor<f32> {
  %w = ds.get_param @w : tensor<4xf32>
  %n = ds.constant unit : !ds.none
  %s = ds.aten "aten::sum"(%w, %n) : (tensor<4xf32>, !ds.none) -> tensor<f32>
  ds.backward_begin
  // expected-error @+1 {{the backward of @forward is already scaled by the loss scale of engine @model}}
  %scale = ds.loss_scale @model : tensor<f32>
  %g = ds.constant dense<1.0> : tensor<4xf32> {ds.backward_seed}
  ds.grad @w, %g : tensor<4xf32>
  return %s : tensor<f32>
}

// -----

// The op: a frozen engine has no loss scale.
ds.engine @teacher {module = "", frozen}
func.func @forward() {
  ds.backward_begin
  // expected-error @+1 {{'ds.loss_scale' op reads the loss scale of engine @teacher, which is frozen: it has no gradients, so no loss scale (only trainable fp16 and fp16 autocast engines scale their loss)}}
  %s = ds.loss_scale @teacher : tensor<f32>
  return
}

// -----


func.func @forward() {
  // expected-error @+1 {{'ds.loss_scale' op names engine @nope, which is not a ds.engine in this module}}
  %s = ds.loss_scale @nope : tensor<f32>
  return
}

// -----


ds.engine @model {module = ""}
func.func @forward(%c: i1) {
  ds.backward_begin
  ds.if %c {
    // expected-error @+1 {{'ds.loss_scale' op is inside a ds.if; the loss scale of engine @model multiplies the backward's seed, so it belongs at the top level of the backward}}
    %s = ds.loss_scale @model : tensor<f32>
  } else {
  }
  return
}

// -----


ds.engine @model {module = ""}
func.func @forward() {
  // expected-error @+1 {{'ds.loss_scale' op result #0 must be 0D tensor of 32-bit float values, but got 'tensor<f16>'}}
  %s = ds.loss_scale @model : tensor<f16>
  return
}
