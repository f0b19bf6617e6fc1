// RUN: ds-opt %s -split-input-file -ds-assign-precision -canonicalize | FileCheck %s
// RUN: ds-opt %s -split-input-file -ds-assign-precision -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: ds-opt %s -split-input-file -ds-assign-precision=no-kernel-ops=aten::gelu,aten::mse_loss -canonicalize | FileCheck %s --check-prefix=NOKERNEL
// RUN: ds-opt %s -split-input-file -ds-assign-precision=no-kernel-ops=aten::gelu,aten::mse_loss -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOKERNEL-REMARK

// -ds-assign-precision, native fp16 (`fp16.enabled`): parameters stored in
// f16; the f32 inputs are cast to f16 by the first op that reads them, and
// every op runs in f16 with LibTorch 2.15's Half CPU kernels (linear, gelu,
// view, mse_loss: PrecisionTables.def lists no op without one), so the loss
// is f16. The engine gets the dynamic loss scaler with DeepSpeed's defaults
// (scale 2^16).

// REMARK: remark: fp16: 2 parameters and 0 buffers stored in f16; 4 ops in f16, 0 ops computed in f32 and rounded to f16{{$}}
// CHECK: ds.engine @model {{{.*}}grad_accum_dtype = f16, loss_scaler = #ds.loss_scaler<kind = dynamic>, module = "", precision = #ds.precision_mode<fp16>}
// CHECK-NEXT: ds.param @fc.weight : tensor<4x8xf16>
// CHECK-NEXT: ds.param @fc.bias : tensor<4xf16>
// CHECK-LABEL: func.func @forward(%arg0: tensor<2x8xf32>, %arg1: tensor<8xf32>) -> tensor<f16>
// CHECK-DAG:  %[[F16:.*]] = ds.constant 5 : i64
// CHECK:      %[[W:.*]] = ds.get_param @fc.weight : tensor<4x8xf16>
// CHECK-NEXT: %[[B:.*]] = ds.get_param @fc.bias : tensor<4xf16>
// CHECK-NEXT: %[[X:.*]] = ds.aten "aten::to.dtype"(%arg0, %[[F16]], {{.*}}) {module = "fc", {{.*}} -> tensor<2x8xf16>
// CHECK-NEXT: %[[H:.*]] = ds.aten "aten::linear"(%[[X]], %[[W]], %[[B]]) {{.*}} : (tensor<2x8xf16>, tensor<4x8xf16>, tensor<4xf16>) -> tensor<2x4xf16>
// CHECK-NEXT: %[[G:.*]] = ds.aten "aten::gelu"(%[[H]], {{.*}} : (tensor<2x4xf16>, !ds.str) -> tensor<2x4xf16>
// CHECK-NEXT: ds.list_construct
// CHECK-NEXT: %[[V:.*]] = ds.aten "aten::view"(%[[G]], {{.*}} : (tensor<2x4xf16>, !ds.list<i64>) -> tensor<8xf16>
// CHECK-NEXT: %[[Y:.*]] = ds.aten "aten::to.dtype"(%arg1, %[[F16]], {{.*}} -> tensor<8xf16>
// CHECK-NEXT: %[[L:.*]] = ds.aten "aten::mse_loss"(%[[V]], %[[Y]], {{.*}} : (tensor<8xf16>, tensor<8xf16>, i64) -> tensor<f16>
// CHECK-NEXT: return %[[L]] : tensor<f16>

// The backward: assign-precision-fp16-backward.mlir.

// An op without a Half CPU kernel (none in LibTorch 2.15; here gelu and
// mse_loss named by `no-kernel-ops`) takes its f16 operands up to f32, runs
// in f32 and rounds each result back to f16; the other ops stay f16.
// NOKERNEL-REMARK: remark: fp16: 2 parameters and 0 buffers stored in f16; 2 ops in f16, 2 ops computed in f32 and rounded to f16 (no f16 CPU kernel: aten::gelu, aten::mse_loss)
// NOKERNEL-LABEL: func.func @forward(
// NOKERNEL-DAG:  %[[F32:.*]] = ds.constant 6 : i64
// NOKERNEL-DAG:  %[[F16:.*]] = ds.constant 5 : i64
// NOKERNEL:      %[[H:.*]] = ds.aten "aten::linear"({{.*}} -> tensor<2x4xf16>
// NOKERNEL-NEXT: %[[GI:.*]] = ds.aten "aten::to.dtype"(%[[H]], %[[F32]], {{.*}}) {module = "act", {{.*}} -> tensor<2x4xf32>
// NOKERNEL-NEXT: %[[G:.*]] = ds.aten "aten::gelu"(%[[GI]], {{.*}} -> tensor<2x4xf32>
// NOKERNEL-NEXT: %[[G16:.*]] = ds.aten "aten::to.dtype"(%[[G]], %[[F16]], {{.*}} -> tensor<2x4xf16>
// NOKERNEL-NEXT: ds.list_construct
// NOKERNEL-NEXT: %[[V:.*]] = ds.aten "aten::view"(%[[G16]], {{.*}} : (tensor<2x4xf16>, !ds.list<i64>) -> tensor<8xf16>
// NOKERNEL-NEXT: %[[A:.*]] = ds.aten "aten::to.dtype"(%[[V]], %[[F32]], {{.*}} -> tensor<8xf32>
// NOKERNEL-NEXT: %[[Y16:.*]] = ds.aten "aten::to.dtype"(%arg1, %[[F16]], {{.*}} -> tensor<8xf16>
// NOKERNEL-NEXT: %[[Y:.*]] = ds.aten "aten::to.dtype"(%[[Y16]], %[[F32]], {{.*}} -> tensor<8xf32>
// NOKERNEL-NEXT: %[[L:.*]] = ds.aten "aten::mse_loss"(%[[A]], %[[Y]], {{.*}} -> tensor<f32>
// NOKERNEL-NEXT: %[[L16:.*]] = ds.aten "aten::to.dtype"(%[[L]], %[[F16]], {{.*}} -> tensor<f16>
// NOKERNEL-NEXT: return %[[L16]] : tensor<f16>
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = fp16, loss_scaler = <kind = dynamic>>>}
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
// CHECK: ds.engine @model {{{.*}}grad_accum_dtype = f32, loss_scaler = #ds.loss_scaler<kind = static, scale = 128.0, scale_window = 50, hysteresis = 3, consecutive_hysteresis = true, min_scale = 0.25>, module = "", precision = #ds.precision_mode<fp16>}
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, zero = <stage = 1>, precision = <mode = fp16, grad_accum_dtype = f32, loss_scaler = <kind = static, scale = 128.0, scale_window = 50, hysteresis = 3, consecutive_hysteresis = true, min_scale = 0.25>>>}

// -----

// fp16 with a dynamic scale from initial_scale_power: 2^8.
// CHECK: loss_scaler = #ds.loss_scaler<kind = dynamic, scale = 256.0>
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = fp16, loss_scaler = <kind = dynamic, scale = 256.0>>>}
