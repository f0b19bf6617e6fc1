// RUN: ds-opt %s -canonicalize -cse | FileCheck %s

// Collectives, waits and updates read and write memory: canonicalization
// and CSE keep every one of them, in order, even two identical collectives
// and a collective whose token is only waited.

// CHECK-LABEL: func.func @step()
// CHECK-NEXT:    %[[R:.*]] = ds.reduce_scatter @model_bucket0
// CHECK-NEXT:    ds.wait %[[R]]
// CHECK-NEXT:    ds.optimizer_step @model
// CHECK-NEXT:    %[[G0:.*]] = ds.all_gather @model_bucket0
// CHECK-NEXT:    %[[G1:.*]] = ds.all_gather @model_bucket0
// CHECK-NEXT:    ds.wait %[[G1]]
// CHECK-NEXT:    ds.wait %[[G0]]
// CHECK-NEXT:    return
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", zero_stage = 1, flat_numel = 4}
  ds.param @w : tensor<4xf32> {engine = @model, module = "", module_class = "M", requires_grad, flat_offset = 0}
  ds.bucket @model_bucket0 engine @model offset 0 numel 4
  func.func @step() {
    %r = ds.reduce_scatter @model_bucket0
    ds.wait %r
    ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999], eps = 1.0e-08, weight_decay = 0.0, momentum = 0.0, dampening = 0.0, nesterov = false, gradient_clipping = 1.0}
    %g0 = ds.all_gather @model_bucket0
    %g1 = ds.all_gather @model_bucket0
    ds.wait %g1
    ds.wait %g0
    return
  }
}
