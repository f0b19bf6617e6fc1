// RUN: ds-opt %s -split-input-file -ds-assign-precision -canonicalize | FileCheck %s
// RUN: ds-opt %s -split-input-file -ds-assign-precision -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: sed -e 's/ds.target_device = "cuda"/ds.target_device = "cpu"/' %s | ds-opt -split-input-file -ds-assign-precision -canonicalize | FileCheck %s --check-prefix=CPU

// -ds-assign-precision for a module compiled for CUDA: torch.autocast("cuda")'s
// lists (LibTorch's ATen/autocast_mode.h), which differ from the CPU's
// (assign-precision-autocast.mlir has the same first function on the CPU).
// aten::linear is lowered to bf16 on both. softmax of a bf16 input stays bf16
// on the CPU; CUDA's fp32_set_opt_dtype list runs it in f32 (its input cast,
// as dtype=torch.float32 does), so the add after it needs no cast. aten::cat
// is in the CPU's promote list but in no CUDA list: LibTorch's own type
// promotion widens the bf16 operand, which the pass makes explicit (the same
// f32 cast of %h is reused). mse_loss is in both fp32 lists. The CPU
// prefix checks the same functions compiled for the CPU.

// REMARK: remark: autocast (bf16): parameters stay f32; 1 op cast to bf16 (aten::linear), 2 ops cast to f32 (aten::softmax.int, aten::mse_loss), 0 ops cast to the widest type, 5 ops left in their inputs' dtype{{$}}
// CHECK: module attributes {ds.target_device = "cuda"}
// CHECK-LABEL: func.func @forward(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>) -> tensor<f32>
// CHECK-DAG:  %[[F32:.*]] = ds.constant 6 : i64
// CHECK-DAG:  %[[BF16:.*]] = ds.constant 15 : i64
// CHECK:      %[[W:.*]] = ds.get_param @fc.weight : tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = ds.get_param @fc.bias : tensor<4xf32>
// CHECK-NEXT: %[[X16:.*]] = ds.aten "aten::to.dtype"(%arg0, %[[BF16]], {{.*}} -> tensor<2x4xbf16>
// CHECK-NEXT: %[[W16:.*]] = ds.aten "aten::to.dtype"(%[[W]], %[[BF16]], {{.*}} -> tensor<4x4xbf16>
// CHECK-NEXT: %[[B16:.*]] = ds.aten "aten::to.dtype"(%[[B]], %[[BF16]], {{.*}} -> tensor<4xbf16>
// CHECK-NEXT: %[[H:.*]] = ds.aten "aten::linear"(%[[X16]], %[[W16]], %[[B16]]) {{.*}} -> tensor<2x4xbf16>
// CHECK-NEXT: %[[H32:.*]] = ds.aten "aten::to.dtype"(%[[H]], %[[F32]], {{.*}} -> tensor<2x4xf32>
// CHECK-NEXT: %[[S:.*]] = ds.aten "aten::softmax.int"(%[[H32]], {{.*}} : (tensor<2x4xf32>, i64, !ds.none) -> tensor<2x4xf32>
// CHECK-NEXT: %[[R:.*]] = ds.aten "aten::add.Tensor"(%[[S]], %arg0, {{.*}} : (tensor<2x4xf32>, tensor<2x4xf32>, i64) -> tensor<2x4xf32>
// CHECK-NEXT: %[[L1:.*]] = ds.list_construct %[[S]], %[[H32]] : (tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK-NEXT: %[[C:.*]] = ds.aten "aten::cat"(%[[L1]], {{.*}} -> tensor<4x4xf32>
// CHECK-NOT:  "aten::to.dtype"
// CHECK:      %[[L:.*]] = ds.aten "aten::mse_loss"({{.*}} -> tensor<f32>
// CHECK-NEXT: return %[[L]] : tensor<f32>
// CPU-LABEL: func.func @forward(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>) -> tensor<f32>
// CPU:       %[[H:.*]] = ds.aten "aten::linear"({{.*}} -> tensor<2x4xbf16>
// CPU-NEXT:  ds.aten "aten::softmax.int"(%[[H]], {{.*}} : (tensor<2x4xbf16>, i64, !ds.none) -> tensor<2x4xbf16>
module attributes {ds.target_device = "cuda"} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = autocast, autocast_dtype = bf16>>}
  ds.param @fc.weight : tensor<4x4xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc.bias : tensor<4xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}

  func.func @forward(%x: tensor<2x4xf32>, %y: tensor<2x4xf32>) -> tensor<f32> {
    %none = ds.constant unit : !ds.none
    %one = ds.constant 1 : i64
    %zero = ds.constant 0 : i64
    %m1 = ds.constant -1 : i64
    %w = ds.get_param @fc.weight : tensor<4x4xf32>
    %b = ds.get_param @fc.bias : tensor<4xf32>
    %h = ds.aten "aten::linear"(%x, %w, %b) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %s = ds.aten "aten::softmax.int"(%h, %m1, %none) {module_class = "Net"} : (tensor<2x4xf32>, i64, !ds.none) -> tensor<2x4xf32>
    %r = ds.aten "aten::add.Tensor"(%s, %x, %one) {module_class = "Net"} : (tensor<2x4xf32>, tensor<2x4xf32>, i64) -> tensor<2x4xf32>
    %list = ds.list_construct %s, %h : (tensor<2x4xf32>, tensor<2x4xf32>) -> !ds.list<tensor<*xf32>>
    %c = ds.aten "aten::cat"(%list, %zero) {module_class = "Net"} : (!ds.list<tensor<*xf32>>, i64) -> tensor<4x4xf32>
    %list2 = ds.list_construct %r, %s : (tensor<2x4xf32>, tensor<2x4xf32>) -> !ds.list<tensor<*xf32>>
    %c2 = ds.aten "aten::cat"(%list2, %zero) {module_class = "Net"} : (!ds.list<tensor<*xf32>>, i64) -> tensor<4x4xf32>
    %sum = ds.aten "aten::add.Tensor"(%c, %c2, %one) {module_class = "Net"} : (tensor<4x4xf32>, tensor<4x4xf32>, i64) -> tensor<4x4xf32>
    %yy = ds.aten "aten::cat"(%list2, %zero) {module_class = "Net"} : (!ds.list<tensor<*xf32>>, i64) -> tensor<4x4xf32>
    %loss = ds.aten "aten::mse_loss"(%sum, %yy, %one) {module_class = "Net"} : (tensor<4x4xf32>, tensor<4x4xf32>, i64) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Ops of CUDA's fp32 list that the CPU's lists leave in their inputs' dtype:
// exp and layer_norm of a bf16 activation run in f32 (their operands cast
// up), so does a sum of it (fp32_set_opt_dtype). A sum with an explicit
// dtype keeps it, and a sum of an f32 input needs no cast.
// REMARK: remark: autocast (bf16): parameters stay f32; 1 op cast to bf16 (aten::linear), 4 ops cast to f32 (aten::exp, aten::layer_norm, aten::sum), 0 ops cast to the widest type, 1 op left in their inputs' dtype{{$}}
// CHECK-LABEL: func.func @forward(
// CHECK:      %[[H:.*]] = ds.aten "aten::linear"({{.*}} -> tensor<2x4xbf16>
// CHECK-NEXT: %[[H32:.*]] = ds.aten "aten::to.dtype"(%[[H]], {{.*}} -> tensor<2x4xf32>
// CHECK-NEXT: %[[E:.*]] = ds.aten "aten::exp"(%[[H32]]) {{.*}} -> tensor<2x4xf32>
// CHECK-NEXT: %[[N:.*]] = ds.aten "aten::layer_norm"(%[[H32]], {{.*}} -> tensor<2x4xf32>
// CHECK-NEXT: ds.aten "aten::sum"(%[[H32]], {{.*}} -> tensor<f32>
// CHECK-NEXT: ds.aten "aten::sum"(%[[H]], %{{.*}}) {{.*}} : (tensor<2x4xbf16>, i64) -> tensor<bf16>
// CHECK-NEXT: ds.aten "aten::sum"(%[[E]], {{.*}} : (tensor<2x4xf32>, !ds.none) -> tensor<f32>
// On the CPU all of them stay bf16.
// CPU-LABEL: func.func @forward(
// CPU:       %[[H:.*]] = ds.aten "aten::linear"({{.*}} -> tensor<2x4xbf16>
// CPU-NEXT:  %[[E:.*]] = ds.aten "aten::exp"(%[[H]]) {{.*}} -> tensor<2x4xbf16>
// CPU-NEXT:  ds.aten "aten::layer_norm"(%[[H]], {{.*}} -> tensor<2x4xbf16>
// CPU-NEXT:  ds.aten "aten::sum"(%[[H]], {{.*}} : (tensor<2x4xbf16>, !ds.none) -> tensor<bf16>
// CPU-NEXT:  ds.aten "aten::sum"(%[[H]], {{.*}} : (tensor<2x4xbf16>, i64) -> tensor<bf16>
// CPU-NEXT:  ds.aten "aten::sum"(%[[E]], {{.*}} : (tensor<2x4xbf16>, !ds.none) -> tensor<bf16>
module attributes {ds.target_device = "cuda"} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = autocast, autocast_dtype = bf16>>}
  ds.param @fc.weight : tensor<4x4xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}

  func.func @forward(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) {
    %none = ds.constant unit : !ds.none
    %eps = ds.constant 1.000000e-05 : f64
    %false = ds.constant false
    %four = ds.constant 4 : i64
    %bf16 = ds.constant 15 : i64
    %shape = ds.list_construct %four : (i64) -> !ds.list<i64>
    %w = ds.get_param @fc.weight : tensor<4x4xf32>
    %h = ds.aten "aten::linear"(%x, %w, %none) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x4xf32>, tensor<4x4xf32>, !ds.none) -> tensor<2x4xf32>
    %e = ds.aten "aten::exp"(%h) {module_class = "Net"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %n = ds.aten "aten::layer_norm"(%h, %shape, %none, %none, %eps, %false) {module_class = "Net"} : (tensor<2x4xf32>, !ds.list<i64>, !ds.none, !ds.none, f64, i1) -> tensor<2x4xf32>
    %s = ds.aten "aten::sum"(%h, %none) {module_class = "Net"} : (tensor<2x4xf32>, !ds.none) -> tensor<f32>
    %s16 = ds.aten "aten::sum"(%h, %bf16) {module_class = "Net"} : (tensor<2x4xf32>, i64) -> tensor<f32>
    %se = ds.aten "aten::sum"(%e, %none) {module_class = "Net"} : (tensor<2x4xf32>, !ds.none) -> tensor<f32>
    return %e, %n, %s, %s16, %se : tensor<2x4xf32>, tensor<2x4xf32>, tensor<f32>, tensor<f32>, tensor<f32>
  }
}
