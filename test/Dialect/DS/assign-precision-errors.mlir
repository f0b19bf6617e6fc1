// RUN: ds-opt %s -split-input-file -verify-diagnostics

// The verifier of the engine's precision attributes, then the errors of
// -ds-assign-precision itself.

// expected-error @+1 {{'precision' must be "bf16", "fp16" or "autocast", got "fp8"}}
ds.engine @model {module = "", precision = "fp8"}

// -----

// expected-error @+1 {{has 'grad_accum_dtype' but no 'precision' (an engine without 'precision' trains in fp32)}}
ds.engine @model {module = "", grad_accum_dtype = bf16}

// -----

// expected-error @+1 {{'grad_accum_dtype' must be f32, f16 or bf16, got 'i32'}}
ds.engine @model {module = "", precision = "bf16", grad_accum_dtype = i32}

// -----

// expected-error @+1 {{has precision "autocast" but no 'autocast_dtype'}}
ds.engine @model {module = "", precision = "autocast", grad_accum_dtype = f32}

// -----

// expected-error @+1 {{'autocast_dtype' must be bf16 or f16, got 'f32'}}
ds.engine @model {module = "", precision = "autocast", autocast_dtype = f32}

// -----

// expected-error @+1 {{'autocast_dtype' is only for precision "autocast", but precision is "bf16"}}
ds.engine @model {module = "", precision = "bf16", autocast_dtype = bf16}

// -----

// expected-error @+1 {{'loss_scaler' is only for precision "fp16" and for precision "autocast" with autocast_dtype f16 (bf16 needs no loss scaling), but precision is "bf16"}}
ds.engine @model {module = "", precision = "bf16", loss_scaler = {type = "dynamic", scale = 65536.0 : f64, scale_window = 1000 : i64, hysteresis = 2 : i64, consecutive_hysteresis = false, min_scale = 1.0 : f64}}

// -----

// bf16 autocast has no GradScaler (DeepSpeed creates it for float16 only).
// expected-error @+1 {{'loss_scaler' is only for precision "fp16" and for precision "autocast" with autocast_dtype f16 (bf16 needs no loss scaling), but precision is "autocast" with autocast_dtype bf16}}
ds.engine @model {module = "", precision = "autocast", autocast_dtype = bf16, grad_accum_dtype = f32, loss_scaler = {type = "grad_scaler", scale = 65536.0 : f64, scale_window = 2000 : i64, hysteresis = 1 : i64, consecutive_hysteresis = false, min_scale = 0.0 : f64}}

// -----

// fp16 autocast scales with torch.amp.GradScaler, not DeepSpeed's fp16 scaler.
// expected-error @+1 {{an fp16 autocast engine's loss_scaler must have type "grad_scaler" (DeepSpeed scales fp16 autocast with a torch.amp.GradScaler), got "dynamic"}}
ds.engine @model {module = "", precision = "autocast", autocast_dtype = f16, grad_accum_dtype = f32, loss_scaler = {type = "dynamic", scale = 65536.0 : f64, scale_window = 1000 : i64, hysteresis = 2 : i64, consecutive_hysteresis = false, min_scale = 1.0 : f64}}

// -----

// expected-error @+1 {{an fp16 engine's loss_scaler must have type "dynamic" or "static" ("grad_scaler" is for fp16 autocast), got "grad_scaler"}}
ds.engine @model {module = "", precision = "fp16", loss_scaler = {type = "grad_scaler", scale = 65536.0 : f64, scale_window = 2000 : i64, hysteresis = 1 : i64, consecutive_hysteresis = false, min_scale = 0.0 : f64}}

// -----

// torch.amp.GradScaler has no floor ...
// expected-error @+1 {{loss_scaler.min_scale must be 0.0 : f64 for a "grad_scaler" (torch.amp.GradScaler has no minimum scale), got 1.000000e+00 : f64}}
ds.engine @model {module = "", precision = "autocast", autocast_dtype = f16, loss_scaler = {type = "grad_scaler", scale = 65536.0 : f64, scale_window = 2000 : i64, hysteresis = 1 : i64, consecutive_hysteresis = false, min_scale = 1.0 : f64}}

// -----

// ... and no hysteresis.
// expected-error @+1 {{loss_scaler of type "grad_scaler" must have hysteresis 1 and consecutive_hysteresis false (torch.amp.GradScaler halves on every overflow)}}
ds.engine @model {module = "", precision = "autocast", autocast_dtype = f16, loss_scaler = {type = "grad_scaler", scale = 65536.0 : f64, scale_window = 2000 : i64, hysteresis = 2 : i64, consecutive_hysteresis = false, min_scale = 0.0 : f64}}

// -----

// DeepSpeed's fp16 scaler keeps its floor positive.
// expected-error @+1 {{loss_scaler.min_scale must be a finite f64 > 0, got 0.000000e+00 : f64}}
ds.engine @model {module = "", precision = "fp16", loss_scaler = {type = "dynamic", scale = 65536.0 : f64, scale_window = 1000 : i64, hysteresis = 2 : i64, consecutive_hysteresis = false, min_scale = 0.0 : f64}}

// -----

// expected-error @+1 {{loss_scaler is missing 'min_scale'}}
ds.engine @model {module = "", precision = "fp16", loss_scaler = {type = "dynamic", scale = 65536.0 : f64, scale_window = 1000 : i64, hysteresis = 2 : i64, consecutive_hysteresis = false}}

// -----

// expected-error @+1 {{loss_scaler has an unknown key 'initial_scale_power'}}
ds.engine @model {module = "", precision = "fp16", loss_scaler = {type = "dynamic", scale = 65536.0 : f64, scale_window = 1000 : i64, hysteresis = 2 : i64, consecutive_hysteresis = false, min_scale = 1.0 : f64, initial_scale_power = 16 : i64}}

// -----

// expected-error @+1 {{loss_scaler.type must be "dynamic", "static" or "grad_scaler", got "adaptive"}}
ds.engine @model {module = "", precision = "fp16", loss_scaler = {type = "adaptive", scale = 65536.0 : f64, scale_window = 1000 : i64, hysteresis = 2 : i64, consecutive_hysteresis = false, min_scale = 1.0 : f64}}

// -----

// expected-error @+1 {{loss_scaler.scale must be a finite f64 > 0, got 0.000000e+00 : f64}}
ds.engine @model {module = "", precision = "fp16", loss_scaler = {type = "static", scale = 0.0 : f64, scale_window = 1000 : i64, hysteresis = 2 : i64, consecutive_hysteresis = false, min_scale = 1.0 : f64}}

// -----

// expected-error @+1 {{loss_scaler.scale_window must be an i64 >= 1, got 0 : i64}}
ds.engine @model {module = "", precision = "fp16", loss_scaler = {type = "static", scale = 8.0 : f64, scale_window = 0 : i64, hysteresis = 2 : i64, consecutive_hysteresis = false, min_scale = 1.0 : f64}}

// -----

// expected-error @+1 {{loss_scaler.consecutive_hysteresis must be a bool, got 1 : i64}}
ds.engine @model {module = "", precision = "fp16", loss_scaler = {type = "static", scale = 8.0 : f64, scale_window = 10 : i64, hysteresis = 2 : i64, consecutive_hysteresis = 1 : i64, min_scale = 1.0 : f64}}
