// RUN: ds-opt %s | ds-opt | FileCheck %s
// RUN: ds-opt %s --mlir-print-op-generic | ds-opt | FileCheck %s

// The precision attributes of ds.engine (-ds-assign-precision), printed and
// parsed again from the custom and from the generic form.

// CHECK:      ds.engine @native_bf16 {grad_accum_dtype = bf16, module = "a", precision = #ds.precision_mode<bf16>}
// CHECK-NEXT: ds.engine @accum_f32 {grad_accum_dtype = f32, module = "b", precision = #ds.precision_mode<bf16>}
// CHECK-NEXT: ds.engine @native_fp16 {grad_accum_dtype = f16, loss_scaler = #ds.loss_scaler<kind = dynamic>, module = "c", precision = #ds.precision_mode<fp16>}
// CHECK-NEXT: ds.engine @autocast {autocast_dtype = bf16, grad_accum_dtype = f32, module = "d", precision = #ds.precision_mode<autocast>}
// CHECK-NEXT: ds.engine @autocast_fp16 {autocast_dtype = f16, grad_accum_dtype = f32, loss_scaler = #ds.loss_scaler<kind = grad_scaler, scale_window = 2000, hysteresis = 1, min_scale = 0.0>, module = "e", precision = #ds.precision_mode<autocast>}
// CHECK-NEXT: ds.engine @fp32 {module = ""}
ds.engine @native_bf16 {module = "a", precision = #ds.precision_mode<bf16>, grad_accum_dtype = bf16}
ds.engine @accum_f32 {module = "b", precision = #ds.precision_mode<bf16>, grad_accum_dtype = f32}
ds.engine @native_fp16 {module = "c", precision = #ds.precision_mode<fp16>, grad_accum_dtype = f16, loss_scaler = #ds.loss_scaler<kind = dynamic>}
ds.engine @autocast {module = "d", precision = #ds.precision_mode<autocast>, grad_accum_dtype = f32, autocast_dtype = bf16}
ds.engine @autocast_fp16 {module = "e", precision = #ds.precision_mode<autocast>, grad_accum_dtype = f32, autocast_dtype = f16, loss_scaler = #ds.loss_scaler<kind = grad_scaler, scale_window = 2000, hysteresis = 1, min_scale = 0.0>}
ds.engine @fp32 {module = ""}
