// RUN: ds-opt %s -split-input-file -ds-assign-precision -verify-diagnostics

// -ds-assign-precision reports a config the config library rejects on the
// engine, naming the keys.

// expected-error @+1 {{config of engine @model: torch_autocast.enabled: torch_autocast.enabled cannot be true together with bf16.enabled}}
ds.engine @model {module = "", config = "{\"bf16\": {\"enabled\": true}, \"torch_autocast\": {\"enabled\": true}, \"optimizer\": {\"type\": \"AdamW\"}}"}

// -----

// expected-error @+1 {{config of engine @model: torch_autocast.enabled: torch_autocast.enabled cannot be true together with fp16.enabled}}
ds.engine @model {module = "", config = "{\"fp16\": {\"enabled\": true}, \"torch_autocast\": {\"enabled\": true}, \"optimizer\": {\"type\": \"AdamW\"}}"}

// -----

// (fp16 autocast is accepted on CPU: assign-precision-autocast.mlir.)
// expected-error @+1 {{config of engine @model: torch_autocast.dtype: autocast needs a lower-precision dtype (bfloat16 or float16), got float32}}
ds.engine @model {module = "", config = "{\"torch_autocast\": {\"enabled\": true, \"dtype\": \"float32\"}, \"optimizer\": {\"type\": \"AdamW\"}}"}

// -----

// expected-error @+1 {{config of engine @model: bf16.enabled: fp16 and bf16 cannot both be enabled}}
ds.engine @model {module = "", config = "{\"bf16\": {\"enabled\": true}, \"fp16\": {\"enabled\": true}, \"optimizer\": {\"type\": \"AdamW\"}}"}

// -----

// After -ds-autodiff the backward would keep the forward's dtypes.
ds.engine @model {module = "", config = "{\"bf16\": {\"enabled\": true}, \"optimizer\": {\"type\": \"AdamW\"}}"}
func.func @forward() {
  // expected-error @+1 {{-ds-assign-precision must run before -ds-autodiff}}
  ds.backward_begin
  return
}
