// RUN: ds-opt %s -split-input-file -verify-diagnostics

// The verifier of the engine's precision attributes, then the errors of
// -ds-assign-precision itself.

// expected-error @+2 {{expected ::mlir::ds::PrecisionMode to be one of: fp32, bf16, fp16, autocast}}
// expected-error @+1 {{failed to parse DS_PrecisionModeAttr parameter 'value'}}
ds.engine @model {module = "", precision = #ds.precision_mode<fp8>}

// -----

// expected-error @+1 {{'precision' must be bf16, fp16 or autocast, got fp32 (an fp32 engine has no 'precision')}}
ds.engine @model {module = "", precision = #ds.precision_mode<fp32>}

// -----

// A string is no precision.
// expected-error @+1 {{attribute 'precision' failed to satisfy constraint: an engine's mixed-precision mode}}
ds.engine @model {module = "", precision = "bf16"}

// -----

// expected-error @+1 {{has 'grad_accum_dtype' but no 'precision' (an engine without 'precision' trains in fp32)}}
ds.engine @model {module = "", grad_accum_dtype = bf16}

// -----

// expected-error @+1 {{'grad_accum_dtype' must be f32, f16 or bf16, got 'i32'}}
ds.engine @model {module = "", precision = #ds.precision_mode<bf16>, grad_accum_dtype = i32}

// -----

// expected-error @+1 {{has precision autocast but no 'autocast_dtype'}}
ds.engine @model {module = "", precision = #ds.precision_mode<autocast>, grad_accum_dtype = f32}

// -----

// expected-error @+1 {{'autocast_dtype' must be bf16 or f16, got 'f32'}}
ds.engine @model {module = "", precision = #ds.precision_mode<autocast>, autocast_dtype = f32}

// -----

// expected-error @+1 {{'autocast_dtype' is only for precision autocast, but precision is bf16}}
ds.engine @model {module = "", precision = #ds.precision_mode<bf16>, autocast_dtype = bf16}

// -----

// expected-error @+1 {{'loss_scaler' is only for precision fp16 and for precision autocast with autocast_dtype f16 (bf16 needs no loss scaling), but precision is bf16}}
ds.engine @model {module = "", precision = #ds.precision_mode<bf16>, loss_scaler = #ds.loss_scaler<kind = dynamic>}

// -----

// bf16 autocast has no GradScaler (DeepSpeed creates it for float16 only).
// expected-error @+1 {{'loss_scaler' is only for precision fp16 and for precision autocast with autocast_dtype f16 (bf16 needs no loss scaling), but precision is autocast with autocast_dtype bf16}}
ds.engine @model {module = "", precision = #ds.precision_mode<autocast>, autocast_dtype = bf16, grad_accum_dtype = f32, loss_scaler = #ds.loss_scaler<kind = grad_scaler, scale_window = 2000, hysteresis = 1, min_scale = 0.0>}

// -----

// fp16 autocast scales with torch.amp.GradScaler, not DeepSpeed's fp16 scaler.
// expected-error @+1 {{an fp16 autocast engine's loss_scaler must have kind grad_scaler (DeepSpeed scales fp16 autocast with a torch.amp.GradScaler), got dynamic}}
ds.engine @model {module = "", precision = #ds.precision_mode<autocast>, autocast_dtype = f16, grad_accum_dtype = f32, loss_scaler = #ds.loss_scaler<kind = dynamic>}

// -----

// expected-error @+1 {{an fp16 engine's loss_scaler must have kind dynamic or static (grad_scaler is for fp16 autocast), got grad_scaler}}
ds.engine @model {module = "", precision = #ds.precision_mode<fp16>, loss_scaler = #ds.loss_scaler<kind = grad_scaler, scale_window = 2000, hysteresis = 1, min_scale = 0.0>}

// -----

// torch.amp.GradScaler has no floor ...
// expected-error @+1 {{loss_scaler min_scale of a grad_scaler must be 0.0 (torch.amp.GradScaler has no minimum scale), got 1}}
ds.engine @model {module = "", precision = #ds.precision_mode<autocast>, autocast_dtype = f16, loss_scaler = #ds.loss_scaler<kind = grad_scaler, scale_window = 2000, hysteresis = 1>}

// -----

// ... and no hysteresis.
// expected-error @+1 {{loss_scaler of kind grad_scaler must have hysteresis 1 and consecutive_hysteresis false (torch.amp.GradScaler halves on every overflow)}}
ds.engine @model {module = "", precision = #ds.precision_mode<autocast>, autocast_dtype = f16, loss_scaler = #ds.loss_scaler<kind = grad_scaler, scale_window = 2000, min_scale = 0.0>}

// -----

// DeepSpeed's fp16 scaler keeps its floor positive.
// expected-error @+1 {{loss_scaler min_scale of a dynamic scaler must be finite and > 0, got 0}}
ds.engine @model {module = "", precision = #ds.precision_mode<fp16>, loss_scaler = #ds.loss_scaler<kind = dynamic, min_scale = 0.0>}

// -----

// The scale is finite.
// expected-error @+1 {{loss_scaler scale must be finite, got inf}}
ds.engine @model {module = "", precision = #ds.precision_mode<fp16>, loss_scaler = #ds.loss_scaler<kind = static, scale = 0x7FF0000000000000>}

// -----

// The kind has no default.
// expected-error @+1 {{struct is missing required parameter: kind}}
ds.engine @model {module = "", precision = #ds.precision_mode<fp16>, loss_scaler = #ds.loss_scaler<scale = 8.0>}

// -----

// expected-error @+1 {{duplicate or unknown struct parameter name: initial_scale_power}}
ds.engine @model {module = "", precision = #ds.precision_mode<fp16>, loss_scaler = #ds.loss_scaler<kind = dynamic, initial_scale_power = 16>}

// -----

// A dictionary is no loss scaler.
// expected-error @+1 {{attribute 'loss_scaler' failed to satisfy constraint: an engine's loss scaler, every default resolved}}
ds.engine @model {module = "", precision = #ds.precision_mode<fp16>, loss_scaler = {type = "dynamic"}}

// -----

// expected-error @+2 {{expected ::mlir::ds::LossScalerKind to be one of: static, dynamic, grad_scaler}}
// expected-error @+1 {{failed to parse DS_LossScalerAttr parameter 'kind'}}
ds.engine @model {module = "", precision = #ds.precision_mode<fp16>, loss_scaler = #ds.loss_scaler<kind = adaptive>}

// -----

// expected-error @+1 {{loss scaler 'scale' must be > 0, got 0.000000e+00}}
ds.engine @model {module = "", precision = #ds.precision_mode<fp16>, loss_scaler = #ds.loss_scaler<kind = static, scale = 0.0>}

// -----

// expected-error @+1 {{loss scaler 'scale_window' must be >= 1, got 0}}
ds.engine @model {module = "", precision = #ds.precision_mode<fp16>, loss_scaler = #ds.loss_scaler<kind = static, scale = 8.0, scale_window = 0>}

// -----

// expected-error @+2 {{expected 'true' or 'false'}}
// expected-error @+1 {{failed to parse DS_LossScalerAttr parameter 'consecutive_hysteresis'}}
ds.engine @model {module = "", precision = #ds.precision_mode<fp16>, loss_scaler = #ds.loss_scaler<kind = static, scale = 8.0, scale_window = 10, consecutive_hysteresis = 1>}
