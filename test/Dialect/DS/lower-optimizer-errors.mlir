// RUN: ds-opt %s -split-input-file -ds-lower-optimizer -verify-diagnostics

// What -ds-lower-optimizer rejects: errors on the engine that name the key
// of its config.

// expected-error @below {{config of engine @model: optimizer.params.lr: must be >= 0.0, got -1.0}}
ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": -1}}}"}

// -----

// expected-error @below {{config of engine @model: optimizer.params.learning_rate: unknown key for optimizer AdamW (see docs/config.md for the keys we accept)}}
ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"learning_rate\": 0.1}}}"}

// -----

// expected-error @below {{config of engine @model: optimizer.type: optimizer "Lamb" is not supported (supported: Adam, AdamW, SGD)}}
ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"Lamb\"}}"}

// -----

// expected-error @below {{config of engine @model: scheduler.params.total_num_steps: missing: required by WarmupDecayLR}}
ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"AdamW\"}, \"scheduler\": {\"type\": \"WarmupDecayLR\"}}"}

// -----

// A trainable engine must have an optimizer (one without is frozen).
// expected-error @below {{config of engine @model: optimizer: missing; an engine without an "optimizer" section is frozen (mark it `frozen`, or give an optimizer)}}
ds.engine @model {module = "", config = "{}"}

// -----

// Adam divides by sqrt(v) + eps: the config library accepts eps 0, the
// update does not.
// expected-error @below {{config of engine @model: optimizer.params.eps: must be > 0 for Adam (it divides by sqrt(v) + eps), got 0}}
ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"eps\": 0}}}"}

// -----

// expected-error @below {{config of engine @model: gradient_clipping: must be >= 0.0, got -1.0}}
ds.engine @model {module = "", config = "{\"gradient_clipping\": -1, \"optimizer\": {\"type\": \"Adam\"}}"}

// -----

// Batch sizes are checked against the world size, as in ds-compile.
module attributes {ds.world_size = 2 : i64} {
  // expected-error @below {{config of engine @model: train_batch_size: inconsistent batch sizes: train_batch_size (6) != train_micro_batch_size_per_gpu (2) * gradient_accumulation_steps (1) * world size (2)}}
  ds.engine @model {module = "", config = "{\"train_batch_size\": 6, \"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 1, \"optimizer\": {\"type\": \"Adam\"}}"}
}

// -----

// "auto" needs data to resolve from.
// expected-error @below {{config of engine @model: train_micro_batch_size_per_gpu: "auto" needs the global micro-batch B of the data, which was not given}}
ds.engine @model {module = "", config = "{\"train_micro_batch_size_per_gpu\": \"auto\", \"optimizer\": {\"type\": \"Adam\"}}"}

// -----

// expected-error @below {{config of engine @model: expected an object, got array}}
ds.engine @model {module = "", config = "[1, 2]"}

// -----

ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"Adam\"}}"}
// expected-error @below {{the module already has a @step; -ds-lower-optimizer creates it}}
func.func @step() {
  return
}
