// RUN: ds-opt %s -split-input-file -ds-assign-precision -verify-diagnostics

// -ds-assign-precision reads each engine's typed config; the DeepSpeed
// config itself is checked where it enters the IR
// (assign-engines-config-errors.mlir).

// expected-error @below {{engine @model has no DeepSpeed config ('deepspeed'), which -ds-assign-precision reads (-ds-assign-engines attaches it from the config)}}
ds.engine @model {module = ""}

// -----

// After -ds-autodiff the backward would keep the forward's dtypes.
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = bf16>>}
func.func @forward() {
  // expected-error @+1 {{-ds-assign-precision must run before -ds-autodiff}}
  ds.backward_begin
  return
}
