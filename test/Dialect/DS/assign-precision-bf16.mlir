// RUN: ds-opt %s -split-input-file -ds-assign-precision -canonicalize | FileCheck %s
// RUN: ds-opt %s -split-input-file -ds-assign-precision -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: ds-opt %s -split-input-file -ds-assign-precision -ds-autodiff -canonicalize -cse | FileCheck %s --check-prefix=GRAD
// RUN: ds-opt %s -split-input-file -ds-assign-precision=no-kernel-ops=aten::mse_loss -canonicalize | FileCheck %s --check-prefix=NOKERNEL
// RUN: ds-opt %s -split-input-file -ds-assign-precision=no-kernel-ops=aten::mse_loss -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOKERNEL-REMARK
// RUN: ds-opt %s -split-input-file -ds-assign-precision=no-kernel-ops=aten::mse_loss -ds-autodiff -canonicalize -cse | FileCheck %s --check-prefix=NOKERNEL-GRAD

// -ds-assign-precision, native bf16 (`bf16.enabled`): the engine's float
// parameters and buffers are stored in bf16 (an i64 buffer stays i64), every
// op of the engine casts its float operands to bf16 first (the f32 inputs
// enter that way), and every op runs in bf16 with LibTorch 2.15's BFloat16
// CPU kernels (mse_loss included, which 1.13 lacked): the loss is bf16.
// (-canonicalize only gathers the casts' constants at the top.)

// REMARK: remark: bf16: 2 parameters and 1 buffer stored in bf16; 3 ops in bf16, 0 ops computed in f32 and rounded to bf16{{$}}
// CHECK: ds.engine @model {{{.*}}grad_accum_dtype = bf16, module = "", precision = #ds.precision_mode<bf16>}
// CHECK-NEXT: ds.param @fc.weight : tensor<4x8xbf16>
// CHECK-NEXT: ds.param @fc.bias : tensor<4xbf16>
// CHECK-NEXT: ds.buffer @scale : tensor<4xbf16>
// CHECK-NEXT: ds.buffer @steps : tensor<i64>
// CHECK-LABEL: func.func @forward(%arg0: tensor<2x8xf32>, %arg1: tensor<2x4xf32>) -> tensor<bf16>
// CHECK-DAG:  %[[BF16:.*]] = ds.constant 15 : i64
// CHECK:      %[[W:.*]] = ds.get_param @fc.weight : tensor<4x8xbf16>
// CHECK-NEXT: %[[B:.*]] = ds.get_param @fc.bias : tensor<4xbf16>
// CHECK-NEXT: %[[X:.*]] = ds.aten "aten::to.dtype"(%arg0, %[[BF16]], {{.*}}) {module = "fc", {{.*}}} : (tensor<2x8xf32>, {{.*}}) -> tensor<2x8xbf16>
// CHECK-NEXT: %[[H:.*]] = ds.aten "aten::linear"(%[[X]], %[[W]], %[[B]]) {{.*}} : (tensor<2x8xbf16>, tensor<4x8xbf16>, tensor<4xbf16>) -> tensor<2x4xbf16>
// CHECK-NEXT: %[[S:.*]] = ds.get_buffer @scale : tensor<4xbf16>
// CHECK-NEXT: %[[HS:.*]] = ds.aten "aten::mul.Tensor"(%[[H]], %[[S]]) {{.*}} -> tensor<2x4xbf16>
// CHECK-NEXT: %[[Y:.*]] = ds.aten "aten::to.dtype"(%arg1, %[[BF16]], {{.*}} -> tensor<2x4xbf16>
// CHECK-NEXT: %[[L:.*]] = ds.aten "aten::mse_loss"(%[[HS]], %[[Y]], {{.*}}) {{.*}} : (tensor<2x4xbf16>, tensor<2x4xbf16>, i64) -> tensor<bf16>
// CHECK-NEXT: %[[N:.*]] = ds.get_buffer @steps : tensor<i64>
// CHECK-NEXT: %[[N1:.*]] = ds.aten "aten::add.Scalar"(%[[N]], {{.*}} -> tensor<i64>
// CHECK-NEXT: ds.set_buffer @steps, %[[N1]] : tensor<i64>
// CHECK-NEXT: return %[[L]] : tensor<bf16>

// The backward -ds-autodiff derives is typed: the seed has the loss's type,
// mse_loss's gradient is bf16, the parameters' gradients are bf16.
// GRAD-LABEL: func.func @forward(
// GRAD:      ds.backward_begin
// GRAD-NEXT: %[[C:.*]] = ds.cotangent 0 : tensor<bf16>
// GRAD-NEXT: %[[SEED:.*]] = ds.aten "aten::mul.Tensor"(%[[C]], %{{.*}}) : (tensor<bf16>, tensor<bf16>) -> tensor<bf16>
// GRAD-NEXT: %[[G:.*]] = ds.aten "aten::mse_loss_backward"({{.*}} : (tensor<bf16>, tensor<2x4xbf16>, tensor<2x4xbf16>, i64) -> tensor<2x4xbf16>
// GRAD-NOT:  aten::to.dtype
// GRAD:      ds.grad @fc.bias, %{{.*}} : tensor<4xbf16>
// GRAD-NEXT: ds.grad @fc.weight, %{{.*}} : tensor<4x8xbf16>

// An op without a BFloat16 CPU kernel (none in LibTorch 2.15; here mse_loss
// named by `no-kernel-ops`) runs in f32 on operands rounded to bf16, its
// result rounded back: the loss is still bf16, and the backward of the
// casts brings mse_loss's f32 gradient back to bf16.
// NOKERNEL-REMARK: remark: bf16: 2 parameters and 1 buffer stored in bf16; 2 ops in bf16, 1 op computed in f32 and rounded to bf16 (no bf16 CPU kernel: aten::mse_loss)
// NOKERNEL-LABEL: func.func @forward(%arg0: tensor<2x8xf32>, %arg1: tensor<2x4xf32>) -> tensor<bf16>
// NOKERNEL-DAG:  %[[F32:.*]] = ds.constant 6 : i64
// NOKERNEL-DAG:  %[[BF16:.*]] = ds.constant 15 : i64
// NOKERNEL:      %[[HS:.*]] = ds.aten "aten::mul.Tensor"({{.*}} -> tensor<2x4xbf16>
// NOKERNEL-NEXT: %[[A:.*]] = ds.aten "aten::to.dtype"(%[[HS]], %[[F32]], {{.*}} : (tensor<2x4xbf16>, {{.*}}) -> tensor<2x4xf32>
// NOKERNEL-NEXT: %[[Y16:.*]] = ds.aten "aten::to.dtype"(%arg1, %[[BF16]], {{.*}} -> tensor<2x4xbf16>
// NOKERNEL-NEXT: %[[Y:.*]] = ds.aten "aten::to.dtype"(%[[Y16]], %[[F32]], {{.*}} -> tensor<2x4xf32>
// NOKERNEL-NEXT: %[[L:.*]] = ds.aten "aten::mse_loss"(%[[A]], %[[Y]], {{.*}}) {{.*}} : (tensor<2x4xf32>, tensor<2x4xf32>, i64) -> tensor<f32>
// NOKERNEL-NEXT: %[[L16:.*]] = ds.aten "aten::to.dtype"(%[[L]], %[[BF16]], {{.*}} : (tensor<f32>, {{.*}}) -> tensor<bf16>
// NOKERNEL:      return %[[L16]] : tensor<bf16>
// NOKERNEL-GRAD-LABEL: func.func @forward(
// NOKERNEL-GRAD:      ds.backward_begin
// NOKERNEL-GRAD-NEXT: %[[C:.*]] = ds.cotangent 0 : tensor<bf16>
// NOKERNEL-GRAD-NEXT: %[[SEEDED:.*]] = ds.aten "aten::mul.Tensor"(%[[C]], %{{.*}}) : (tensor<bf16>, tensor<bf16>) -> tensor<bf16>
// NOKERNEL-GRAD-NEXT: %[[SEED:.*]] = ds.aten "aten::to.dtype"(%{{.*}}) {{.*}} : (tensor<bf16>, {{.*}}) -> tensor<f32>
// NOKERNEL-GRAD-NEXT: %[[G:.*]] = ds.aten "aten::mse_loss_backward"(%[[SEED]], {{.*}} -> tensor<2x4xf32>
// NOKERNEL-GRAD-NEXT: ds.aten "aten::to.dtype"(%[[G]], {{.*}} : (tensor<2x4xf32>, {{.*}}) -> tensor<2x4xbf16>
// NOKERNEL-GRAD:      ds.grad @fc.bias, %{{.*}} : tensor<4xbf16>
// NOKERNEL-GRAD-NEXT: ds.grad @fc.weight, %{{.*}} : tensor<4x8xbf16>
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = bf16>>}
ds.param @fc.weight : tensor<4x8xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @fc.bias : tensor<4xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.buffer @scale : tensor<4xf32> {engine = @model, module = "", module_class = "Net"}
ds.buffer @steps : tensor<i64> {engine = @model, module = "", module_class = "Net"}

func.func @forward(%x: tensor<2x8xf32>, %y: tensor<2x4xf32>) -> tensor<f32> {
  %w = ds.get_param @fc.weight : tensor<4x8xf32>
  %b = ds.get_param @fc.bias : tensor<4xf32>
  %h = ds.aten "aten::linear"(%x, %w, %b) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %s = ds.get_buffer @scale : tensor<4xf32>
  %one = ds.constant 1 : i64
  %hs = ds.aten "aten::mul.Tensor"(%h, %s) {module_class = "Net"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %loss = ds.aten "aten::mse_loss"(%hs, %y, %one) {module_class = "Net"} : (tensor<2x4xf32>, tensor<2x4xf32>, i64) -> tensor<f32>
  %n = ds.get_buffer @steps : tensor<i64>
  %n1 = ds.aten "aten::add.Scalar"(%n, %one, %one) {module_class = "Net"} : (tensor<i64>, i64, i64) -> tensor<i64>
  ds.set_buffer @steps, %n1 : tensor<i64>
  return %loss : tensor<f32>
}

// -----

// Two engines: the bf16 student's ops cast what the fp32 teacher hands them
// (and the teacher, in fp32, is left alone); a root op with no engine of its
// own (no engine is keyed "") sees a bf16 and an f32 operand and casts the
// bf16 one up, as LibTorch's promotion would. A float buffer update is
// rounded to the buffer's dtype.
// REMARK: remark: bf16: 1 parameter and 1 buffer stored in bf16; 2 ops in bf16, 0 ops computed in f32 and rounded to bf16{{$}}
// NOKERNEL-REMARK: remark: bf16: 1 parameter and 1 buffer stored in bf16; 2 ops in bf16, 0 ops computed in f32 and rounded to bf16{{$}}
// CHECK: ds.engine @student {{{.*}}precision = #ds.precision_mode<bf16>}
// CHECK-NEXT: ds.engine @teacher {deepspeed = #ds.engine_config<>, module = "teacher"}
// CHECK-NEXT: ds.param @student.fc.weight : tensor<4x4xbf16>
// CHECK-NEXT: ds.buffer @student.avg : tensor<4xbf16>
// CHECK-NEXT: ds.param @teacher.fc.weight : tensor<4x4xf32>
// CHECK-LABEL: func.func @forward(%arg0: tensor<2x4xf32>) -> tensor<f32>
// CHECK:      %[[TW:.*]] = ds.get_param @teacher.fc.weight : tensor<4x4xf32>
// CHECK-NEXT: %[[T:.*]] = ds.aten "aten::linear"(%arg0, %[[TW]], {{.*}} -> tensor<2x4xf32>
// CHECK-NEXT: %[[SW:.*]] = ds.get_param @student.fc.weight : tensor<4x4xbf16>
// CHECK-NEXT: %[[T16:.*]] = ds.aten "aten::to.dtype"(%[[T]], {{.*}}) {module = "student.fc", {{.*}} -> tensor<2x4xbf16>
// CHECK-NEXT: %[[S:.*]] = ds.aten "aten::linear"(%[[T16]], %[[SW]], {{.*}} -> tensor<2x4xbf16>
// CHECK-NEXT: ds.list_construct
// CHECK-NEXT: %[[M:.*]] = ds.aten "aten::mean.dim"(%[[S]], {{.*}} -> tensor<4xbf16>
// CHECK-NEXT: ds.set_buffer @student.avg, %[[M]] : tensor<4xbf16>
// CHECK-NEXT: %[[S32:.*]] = ds.aten "aten::to.dtype"(%[[S]], {{.*}}) {module_class = "Distill"} : (tensor<2x4xbf16>, {{.*}}) -> tensor<2x4xf32>
// CHECK-NEXT: %[[D:.*]] = ds.aten "aten::sub.Tensor"(%[[S32]], %[[T]], {{.*}}) {{.*}} -> tensor<2x4xf32>
// CHECK-NEXT: %[[L:.*]] = ds.aten "aten::mean"(%[[D]], {{.*}} -> tensor<f32>
// CHECK-NEXT: return %[[L]] : tensor<f32>
ds.engine @student {module = "student", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = bf16>>}
ds.engine @teacher {module = "teacher", deepspeed = #ds.engine_config<>}
ds.param @student.fc.weight : tensor<4x4xf32> {engine = @student, module = "student.fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.buffer @student.avg : tensor<4xf32> {engine = @student, module = "student", module_class = "Student"}
ds.param @teacher.fc.weight : tensor<4x4xf32> {engine = @teacher, module = "teacher.fc", module_class = "torch.nn.modules.linear.Linear"}

func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
  %none = ds.constant unit : !ds.none
  %one = ds.constant 1 : i64
  %zero = ds.constant 0 : i64
  %false = ds.constant false
  %tw = ds.get_param @teacher.fc.weight : tensor<4x4xf32>
  %t = ds.aten "aten::linear"(%x, %tw, %none) {module = "teacher.fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x4xf32>, tensor<4x4xf32>, !ds.none) -> tensor<2x4xf32>
  %sw = ds.get_param @student.fc.weight : tensor<4x4xf32>
  %s = ds.aten "aten::linear"(%t, %sw, %none) {module = "student.fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x4xf32>, tensor<4x4xf32>, !ds.none) -> tensor<2x4xf32>
  %dims = ds.list_construct %zero : (i64) -> !ds.list<i64>
  %m = ds.aten "aten::mean.dim"(%s, %dims, %false, %none) {module = "student", module_class = "Student"} : (tensor<2x4xf32>, !ds.list<i64>, i1, !ds.none) -> tensor<4xf32>
  ds.set_buffer @student.avg, %m : tensor<4xf32>
  %d = ds.aten "aten::sub.Tensor"(%s, %t, %one) {module_class = "Distill"} : (tensor<2x4xf32>, tensor<2x4xf32>, i64) -> tensor<2x4xf32>
  %loss = ds.aten "aten::mean"(%d, %none) {module_class = "Distill"} : (tensor<2x4xf32>, !ds.none) -> tensor<f32>
  return %loss : tensor<f32>
}
