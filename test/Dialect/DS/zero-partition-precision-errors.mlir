// RUN: ds-opt %s -split-input-file -verify-diagnostics

// A bucket's dtype is the dtype its collectives move: a float type.
ds.engine @model {module = "", deepspeed = #ds.engine_config<>, zero_stage = 2, flat_numel = 4}
ds.param @w : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad, flat_offset = 0}
// expected-error @+1 {{'ds.bucket' op bucket @model_bucket0 communicates in dtype 'i32', which is not a float type (its collectives move gradients and parameters)}}
ds.bucket @model_bucket0 engine @model offset 0 numel 4 dtype i32

// -----

ds.engine @model {module = "", deepspeed = #ds.engine_config<>, zero_stage = 2, flat_numel = 4}
ds.param @w : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad, flat_offset = 0}
// expected-error @+1 {{'ds.bucket' op bucket @model_bucket0 communicates in dtype 'tensor<4xf32>', which is not a float type (its collectives move gradients and parameters)}}
ds.bucket @model_bucket0 engine @model offset 0 numel 4 dtype tensor<4xf32>
