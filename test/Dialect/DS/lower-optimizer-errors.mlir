// RUN: ds-opt %s -split-input-file -ds-lower-optimizer -verify-diagnostics

// What -ds-lower-optimizer rejects: errors on the engine that name the key
// of its config. (What the config library rejects is checked where the
// config enters the IR: assign-engines-config-errors.mlir.)

// expected-error @below {{engine @model has no DeepSpeed config ('deepspeed'), which -ds-lower-optimizer reads (-ds-assign-engines attaches it from the config)}}
ds.engine @model {module = ""}

// -----

// A trainable engine must have an optimizer (one without is frozen).
// expected-error @below {{config of engine @model: optimizer: missing; an engine without an "optimizer" section is frozen (mark it `frozen`, or give an optimizer)}}
ds.engine @model {module = "", deepspeed = #ds.engine_config<>}

// -----

// Adam divides by sqrt(v) + eps: the config library accepts eps 0, the
// update does not.
// expected-error @below {{config of engine @model: optimizer.params.eps: must be > 0 for Adam (it divides by sqrt(v) + eps), got 0}}
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw, eps = 0.0>>}

// -----

ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>>}
// expected-error @below {{the module already has a @step; -ds-lower-optimizer creates it}}
func.func @step() {
  return
}
