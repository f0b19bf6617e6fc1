// RUN: ds-opt %s -ds-autodiff -ds-scale-loss -canonicalize -cse -ds-lower-optimizer -ds-zero-partition 2>/dev/null | not ds-translate --ds-mlir-to-plan 2>&1 | FileCheck %s

// ds.loss_scale becomes a loss_scale op of programs.train (engine, a
// float32 0-dim result), in the backward, top level. The plan validator
// accepts it only on an engine whose "precision" has a "loss_scaler"; that
// comes from -ds-assign-precision's attributes on ds.engine, which this
// hand-written engine does not have, so the validator's message is what
// shows the op that was emitted.
// CHECK: error: the emitted plan is invalid: <ds-translate>: programs.train.body[{{[0-9]+}}] (loss_scale): engine: engine "model" has no precision.loss_scaler (only fp16 and fp16 autocast engines scale their loss)
ds.engine @model {module = "", config = "{\"optimizer\": {\"type\": \"AdamW\"}, \"fp16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": 2}}", deepspeed = #ds.engine_config<train_batch_size = 3, train_micro_batch_size_per_gpu = 3, optimizer = <kind = adamw>, zero = <stage = 2>, precision = <mode = fp16, loss_scaler = <kind = dynamic>>>}
ds.param @fc.weight : tensor<2x4xf16> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @fc.bias : tensor<2xf16> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
func.func @forward(%x: tensor<3x4xf16> {ds.name = "x"}) -> tensor<f16> {
  %w = ds.get_param @fc.weight : tensor<2x4xf16>
  %b = ds.get_param @fc.bias : tensor<2xf16>
  %y = ds.aten "aten::linear"(%x, %w, %b) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<3x4xf16>, tensor<2x4xf16>, tensor<2xf16>) -> tensor<3x2xf16>
  %n = ds.constant unit : !ds.none
  %s = ds.aten "aten::sum"(%y, %n) : (tensor<3x2xf16>, !ds.none) -> tensor<f16>
  return %s : tensor<f16>
}
func.func @forward_eval(%x: tensor<3x4xf16> {ds.name = "x"}) -> tensor<f16> {
  %n = ds.constant unit : !ds.none
  %s = ds.aten "aten::sum"(%x, %n) : (tensor<3x4xf16>, !ds.none) -> tensor<f16>
  return %s : tensor<f16>
}
