// RUN: ds-opt %s -split-input-file -ds-assign-precision -canonicalize | FileCheck %s
// RUN: ds-opt %s -split-input-file -ds-assign-precision -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK

// -ds-assign-precision, native fp16 (`fp16.enabled`): parameters stored in
// f16; LibTorch 1.13 has no Half CPU kernel for addmm or gelu, so those ops
// take their f16 operands up to f32, run in f32 and round each result back
// to f16 (fp16 storage, fp32 compute); aten::view (data movement, with a
// Half kernel) stays in f16; every other op (mse_loss) is computed in f32 by
// policy. The engine gets the dynamic loss scaler with DeepSpeed's defaults
// (scale 2^16).

// REMARK: remark: fp16: 2 parameters and 0 buffers stored in f16; 1 op in f16, 3 ops computed in f32 and rounded to f16 (no f16 CPU kernel: aten::linear, aten::gelu; fp32 compute by policy: aten::mse_loss)
// CHECK: ds.engine @model {{{.*}}grad_accum_dtype = f16, loss_scaler = {consecutive_hysteresis = false, hysteresis = 2 : i64, min_scale = 1.000000e+00 : f64, scale = 6.553600e+04 : f64, scale_window = 1000 : i64, type = "dynamic"}, module = "", precision = "fp16"}
// CHECK-NEXT: ds.param @fc.weight : tensor<4x8xf16>
// CHECK-NEXT: ds.param @fc.bias : tensor<4xf16>
// CHECK-LABEL: func.func @forward(%arg0: tensor<2x8xf32>, %arg1: tensor<8xf32>) -> tensor<f16>
// CHECK-DAG:  %[[F32:.*]] = ds.constant 6 : i64
// CHECK-DAG:  %[[F16:.*]] = ds.constant 5 : i64
// CHECK:      %[[W:.*]] = ds.get_param @fc.weight : tensor<4x8xf16>
// CHECK-NEXT: %[[B:.*]] = ds.get_param @fc.bias : tensor<4xf16>
// CHECK-NEXT: %[[X16:.*]] = ds.aten "aten::to.dtype"(%arg0, %[[F16]], {{.*}} -> tensor<2x8xf16>
// CHECK-NEXT: %[[X:.*]] = ds.aten "aten::to.dtype"(%[[X16]], %[[F32]], {{.*}} -> tensor<2x8xf32>
// CHECK-NEXT: %[[W32:.*]] = ds.aten "aten::to.dtype"(%[[W]], %[[F32]], {{.*}} -> tensor<4x8xf32>
// CHECK-NEXT: %[[B32:.*]] = ds.aten "aten::to.dtype"(%[[B]], %[[F32]], {{.*}} -> tensor<4xf32>
// CHECK-NEXT: %[[H:.*]] = ds.aten "aten::linear"(%[[X]], %[[W32]], %[[B32]]) {{.*}} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[H16:.*]] = ds.aten "aten::to.dtype"(%[[H]], %[[F16]], {{.*}}) {module = "fc", {{.*}} -> tensor<2x4xf16>
// CHECK-NEXT: %[[GI:.*]] = ds.aten "aten::to.dtype"(%[[H16]], %[[F32]], {{.*}}) {module = "act", {{.*}} -> tensor<2x4xf32>
// CHECK-NEXT: %[[G:.*]] = ds.aten "aten::gelu"(%[[GI]], {{.*}} -> tensor<2x4xf32>
// CHECK-NEXT: %[[G16:.*]] = ds.aten "aten::to.dtype"(%[[G]], %[[F16]], {{.*}} -> tensor<2x4xf16>
// CHECK-NEXT: ds.list_construct
// CHECK-NEXT: %[[V:.*]] = ds.aten "aten::view"(%[[G16]], {{.*}} : (tensor<2x4xf16>, !ds.list<i64>) -> tensor<8xf16>
// CHECK-NEXT: %[[A:.*]] = ds.aten "aten::to.dtype"(%[[V]], %[[F32]], {{.*}} -> tensor<8xf32>
// CHECK-NEXT: %[[Y16:.*]] = ds.aten "aten::to.dtype"(%arg1, %[[F16]], {{.*}} -> tensor<8xf16>
// CHECK-NEXT: %[[Y:.*]] = ds.aten "aten::to.dtype"(%[[Y16]], %[[F32]], {{.*}} -> tensor<8xf32>
// CHECK-NEXT: %[[L:.*]] = ds.aten "aten::mse_loss"(%[[A]], %[[Y]], {{.*}} -> tensor<f32>
// CHECK-NEXT: %[[L16:.*]] = ds.aten "aten::to.dtype"(%[[L]], %[[F16]], {{.*}} -> tensor<f16>
// CHECK-NEXT: return %[[L16]] : tensor<f16>
ds.engine @model {module = "", config = "{\"fp16\": {\"enabled\": true}, \"optimizer\": {\"type\": \"AdamW\"}}"}
ds.param @fc.weight : tensor<4x8xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @fc.bias : tensor<4xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}

func.func @forward(%x: tensor<2x8xf32>, %y: tensor<8xf32>) -> tensor<f32> {
  %one = ds.constant 1 : i64
  %w = ds.get_param @fc.weight : tensor<4x8xf32>
  %b = ds.get_param @fc.bias : tensor<4xf32>
  %h = ds.aten "aten::linear"(%x, %w, %b) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %approx = ds.constant "none" : !ds.str
  %g = ds.aten "aten::gelu"(%h, %approx) {module = "act", module_class = "torch.nn.modules.activation.GELU"} : (tensor<2x4xf32>, !ds.str) -> tensor<2x4xf32>
  %m8 = ds.constant 8 : i64
  %shape = ds.list_construct %m8 : (i64) -> !ds.list<i64>
  %v = ds.aten "aten::view"(%g, %shape) {module_class = "Net"} : (tensor<2x4xf32>, !ds.list<i64>) -> tensor<8xf32>
  %loss = ds.aten "aten::mse_loss"(%v, %y, %one) {module_class = "Net"} : (tensor<8xf32>, tensor<8xf32>, i64) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A static loss scale (`loss_scale` > 0), the other settings as given, and
// data_types.grad_accum_dtype overriding the model dtype (with ZeRO, as
// DeepSpeed requires).
// CHECK: ds.engine @model {{{.*}}grad_accum_dtype = f32, loss_scaler = {consecutive_hysteresis = true, hysteresis = 3 : i64, min_scale = 2.500000e-01 : f64, scale = 1.280000e+02 : f64, scale_window = 50 : i64, type = "static"}, module = "", precision = "fp16"}
ds.engine @model {module = "", config = "{\"fp16\": {\"enabled\": true, \"loss_scale\": 128, \"loss_scale_window\": 50, \"hysteresis\": 3, \"consecutive_hysteresis\": true, \"min_loss_scale\": 0.25}, \"data_types\": {\"grad_accum_dtype\": \"fp32\"}, \"zero_optimization\": {\"stage\": 1}, \"optimizer\": {\"type\": \"AdamW\"}}"}

// -----

// fp16 with a dynamic scale from initial_scale_power: 2^8.
// CHECK: loss_scaler = {{{.*}}scale = 2.560000e+02 : f64{{.*}}type = "dynamic"}
ds.engine @model {module = "", config = "{\"fp16\": {\"enabled\": true, \"initial_scale_power\": 8}, \"optimizer\": {\"type\": \"AdamW\"}}"}
