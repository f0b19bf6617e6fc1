// RUN: ds-opt %s | ds-opt | FileCheck %s
// RUN: ds-opt %s --mlir-print-op-generic | ds-opt | FileCheck %s

// The precision attributes of ds.engine (-ds-assign-precision), printed and
// parsed again from the custom and from the generic form.

// CHECK:      ds.engine @native_bf16 {grad_accum_dtype = bf16, module = "a", precision = "bf16"}
// CHECK-NEXT: ds.engine @accum_f32 {grad_accum_dtype = f32, module = "b", precision = "bf16"}
// CHECK-NEXT: ds.engine @native_fp16 {grad_accum_dtype = f16, loss_scaler = {consecutive_hysteresis = false, hysteresis = 2 : i64, min_scale = 1.000000e+00 : f64, scale = 6.553600e+04 : f64, scale_window = 1000 : i64, type = "dynamic"}, module = "c", precision = "fp16"}
// CHECK-NEXT: ds.engine @autocast {autocast_dtype = bf16, grad_accum_dtype = f32, module = "d", precision = "autocast"}
// CHECK-NEXT: ds.engine @autocast_fp16 {autocast_dtype = f16, grad_accum_dtype = f32, loss_scaler = {consecutive_hysteresis = false, hysteresis = 1 : i64, min_scale = 0.000000e+00 : f64, scale = 6.553600e+04 : f64, scale_window = 2000 : i64, type = "grad_scaler"}, module = "e", precision = "autocast"}
// CHECK-NEXT: ds.engine @fp32 {module = ""}
ds.engine @native_bf16 {module = "a", precision = "bf16", grad_accum_dtype = bf16}
ds.engine @accum_f32 {module = "b", precision = "bf16", grad_accum_dtype = f32}
ds.engine @native_fp16 {module = "c", precision = "fp16", grad_accum_dtype = f16, loss_scaler = {type = "dynamic", scale = 65536.0 : f64, scale_window = 1000 : i64, hysteresis = 2 : i64, consecutive_hysteresis = false, min_scale = 1.0 : f64}}
ds.engine @autocast {module = "d", precision = "autocast", grad_accum_dtype = f32, autocast_dtype = bf16}
ds.engine @autocast_fp16 {module = "e", precision = "autocast", grad_accum_dtype = f32, autocast_dtype = f16, loss_scaler = {type = "grad_scaler", scale = 65536.0 : f64, scale_window = 2000 : i64, hysteresis = 1 : i64, consecutive_hysteresis = false, min_scale = 0.0 : f64}}
ds.engine @fp32 {module = ""}
