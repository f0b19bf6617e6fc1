// RUN: ds-opt %s -split-input-file -ds-assign-precision -canonicalize | FileCheck %s
// RUN: ds-opt %s -split-input-file -ds-assign-precision -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK

// -ds-assign-precision, `torch_autocast` (default dtype on CPU: bf16), as
// LibTorch 2.15's CPU autocast tables say: parameters stay f32; aten::linear
// (lower-precision list) casts its operands to bf16; softmax of a bf16 input
// stays bf16 (no list); the add of a bf16 and an f32 tensor promotes, and
// the promotion is an explicit cast; aten::cat (promote list) casts to the
// widest type among its inputs (bf16 when all are bf16, f32 otherwise; a
// list two cats read is copied so that each sees its own casts); aten::mse_loss
// (fp32 list) casts to f32.

// REMARK: remark: autocast (bf16): parameters stay f32; 1 op cast to bf16 (aten::linear), 1 op cast to f32 (aten::mse_loss), 3 ops cast to the widest type (aten::cat), 3 ops left in their inputs' dtype
// CHECK: ds.engine @model {autocast_dtype = bf16, {{.*}}grad_accum_dtype = f32, module = "", precision = #ds.precision_mode<autocast>}
// CHECK-NEXT: ds.param @fc.weight : tensor<4x4xf32>
// CHECK-NEXT: ds.param @fc.bias : tensor<4xf32>
// CHECK-LABEL: func.func @forward(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>) -> tensor<f32>
// CHECK-DAG:  %[[F32:.*]] = ds.constant 6 : i64
// CHECK-DAG:  %[[BF16:.*]] = ds.constant 15 : i64
// CHECK:      %[[W:.*]] = ds.get_param @fc.weight : tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = ds.get_param @fc.bias : tensor<4xf32>
// CHECK-NEXT: %[[X16:.*]] = ds.aten "aten::to.dtype"(%arg0, %[[BF16]], {{.*}} -> tensor<2x4xbf16>
// CHECK-NEXT: %[[W16:.*]] = ds.aten "aten::to.dtype"(%[[W]], %[[BF16]], {{.*}} -> tensor<4x4xbf16>
// CHECK-NEXT: %[[B16:.*]] = ds.aten "aten::to.dtype"(%[[B]], %[[BF16]], {{.*}} -> tensor<4xbf16>
// CHECK-NEXT: %[[H:.*]] = ds.aten "aten::linear"(%[[X16]], %[[W16]], %[[B16]]) {{.*}} -> tensor<2x4xbf16>
// CHECK-NEXT: %[[S:.*]] = ds.aten "aten::softmax.int"(%[[H]], {{.*}} : (tensor<2x4xbf16>, i64, !ds.none) -> tensor<2x4xbf16>
// CHECK-NEXT: %[[S32:.*]] = ds.aten "aten::to.dtype"(%[[S]], %[[F32]], {{.*}} -> tensor<2x4xf32>
// CHECK-NEXT: %[[R:.*]] = ds.aten "aten::add.Tensor"(%[[S32]], %arg0, {{.*}} : (tensor<2x4xf32>, tensor<2x4xf32>, i64) -> tensor<2x4xf32>
// CHECK-NEXT: %[[L1:.*]] = ds.list_construct %[[S]], %[[H]] : (tensor<2x4xbf16>, tensor<2x4xbf16>)
// CHECK-NEXT: %[[C:.*]] = ds.aten "aten::cat"(%[[L1]], {{.*}} -> tensor<4x4xbf16>
// CHECK-NEXT: %[[L2:.*]] = ds.list_construct %[[R]], %[[S32]] : (tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK-NEXT: %[[L2COPY:.*]] = ds.list_construct %[[R]], %[[S32]] : (tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK-NEXT: %[[C2:.*]] = ds.aten "aten::cat"(%[[L2COPY]], {{.*}} -> tensor<4x4xf32>
// CHECK-NEXT: %[[C32:.*]] = ds.aten "aten::to.dtype"(%[[C]], %[[F32]], {{.*}} -> tensor<4x4xf32>
// CHECK-NEXT: %[[SUM:.*]] = ds.aten "aten::add.Tensor"(%[[C32]], %[[C2]], {{.*}} -> tensor<4x4xf32>
// CHECK-NEXT: %[[YY:.*]] = ds.aten "aten::cat"(%[[L2]], {{.*}} -> tensor<4x4xf32>
// CHECK-NEXT: %[[L:.*]] = ds.aten "aten::mse_loss"(%[[SUM]], %[[YY]], {{.*}} -> tensor<f32>
// CHECK-NEXT: return %[[L]] : tensor<f32>
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

// -----

// Under autocast an f64 operand is not eligible (torch.autocast leaves
// doubles alone); the f32 one still goes to bf16, and the result follows
// LibTorch's promotion (f64). A conv2d is in the lower-precision list, a
// cross_entropy_loss in the fp32 list: its bf16 input is cast to f32 before
// the log_softmax inside it.
// REMARK: remark: autocast (bf16): parameters stay f32; 2 ops cast to bf16 (aten::matmul, aten::conv2d), 1 op cast to f32 (aten::cross_entropy_loss), 0 ops cast to the widest type, 1 op left in their inputs' dtype{{$}}
// CHECK-LABEL: func.func @forward(
// CHECK:      %[[A16:.*]] = ds.aten "aten::to.dtype"(%arg1, {{.*}} -> tensor<4x4xbf16>
// CHECK-NEXT: ds.aten "aten::matmul"(%arg0, %[[A16]]) {{.*}} : (tensor<4x4xf64>, tensor<4x4xbf16>) -> tensor<4x4xf64>
// CHECK:      ds.aten "aten::conv2d"({{.*}} : (tensor<1x1x4x4xbf16>, tensor<2x1x3x3xbf16>, !ds.none, {{.*}}) -> tensor<1x2x2x2xbf16>
// CHECK:      %[[CE:.*]] = ds.aten "aten::to.dtype"(%{{.*}}) {{.*}} : (tensor<1x8xbf16>, {{.*}}) -> tensor<1x8xf32>
// CHECK-NEXT: ds.aten "aten::cross_entropy_loss"(%[[CE]], {{.*}} -> tensor<f32>
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = autocast, autocast_dtype = bf16>>}
ds.param @conv.weight : tensor<2x1x3x3xf32> {engine = @model, module = "conv", module_class = "torch.nn.modules.conv.Conv2d", requires_grad}

func.func @forward(%d: tensor<4x4xf64>, %a: tensor<4x4xf32>, %img: tensor<1x1x4x4xf32>, %t: tensor<1xi64>) -> (tensor<4x4xf64>, tensor<f32>) {
  %none = ds.constant unit : !ds.none
  %m = ds.aten "aten::matmul"(%d, %a) {module_class = "Net"} : (tensor<4x4xf64>, tensor<4x4xf32>) -> tensor<4x4xf64>
  %w = ds.get_param @conv.weight : tensor<2x1x3x3xf32>
  %one = ds.constant 1 : i64
  %zero = ds.constant 0 : i64
  %ones = ds.list_construct %one, %one : (i64, i64) -> !ds.list<i64>
  %zeros = ds.list_construct %zero, %zero : (i64, i64) -> !ds.list<i64>
  %c = ds.aten "aten::conv2d"(%img, %w, %none, %ones, %zeros, %ones, %one) {module = "conv", module_class = "torch.nn.modules.conv.Conv2d"} : (tensor<1x1x4x4xf32>, tensor<2x1x3x3xf32>, !ds.none, !ds.list<i64>, !ds.list<i64>, !ds.list<i64>, i64) -> tensor<1x2x2x2xf32>
  %m8 = ds.constant 8 : i64
  %shape = ds.list_construct %one, %m8 : (i64, i64) -> !ds.list<i64>
  %flat = ds.aten "aten::view"(%c, %shape) {module_class = "Net"} : (tensor<1x2x2x2xf32>, !ds.list<i64>) -> tensor<1x8xf32>
  %m100 = ds.constant -100 : i64
  %ls = ds.constant 0.0 : f64
  %ce = ds.aten "aten::cross_entropy_loss"(%flat, %t, %none, %one, %m100, %ls) {module_class = "Net"} : (tensor<1x8xf32>, tensor<1xi64>, !ds.none, i64, i64, f64) -> tensor<f32>
  return %m, %ce : tensor<4x4xf64>, tensor<f32>
}

// -----

// fp16 autocast (`"dtype": "float16"`, accepted on CPU since LibTorch 2.x
// autocasts to float16 with the same tables): the lower-precision list casts
// to f16 (code 5): linear, and conv_transpose2d, which LibTorch 2.15 lists
// (1.13 ran it in f32); batch_norm keeps its f16 input's dtype with f32 weights; a
// layer_norm fed f16 with f32 weights gets its input cast up (the compiler's
// choice, docs/precision.md); nll_loss_nd (fp32 list) casts to f32.
// REMARK: remark: autocast (f16): parameters stay f32; 2 ops cast to f16 (aten::linear, aten::conv_transpose2d.input), 1 op cast to f32 (aten::nll_loss_nd), 0 ops cast to the widest type, 2 ops left in their inputs' dtype{{$}}
// DeepSpeed scales fp16 autocast's loss with a torch.amp.GradScaler: the
// engine gets its loss_scaler, with torch's defaults.
// CHECK: ds.engine @model {autocast_dtype = f16, {{.*}}grad_accum_dtype = f32, loss_scaler = #ds.loss_scaler<kind = grad_scaler, scale_window = 2000, hysteresis = 1, min_scale = 0.0>, module = "", precision = #ds.precision_mode<autocast>}
// CHECK-LABEL: func.func @forward(
// CHECK-DAG:  %[[F16:.*]] = ds.constant 5 : i64
// CHECK-DAG:  %[[F32:.*]] = ds.constant 6 : i64
// CHECK:      %[[X16:.*]] = ds.aten "aten::to.dtype"(%arg0, %[[F16]], {{.*}} -> tensor<2x4xf16>
// CHECK-NEXT: %[[W16:.*]] = ds.aten "aten::to.dtype"(%{{.*}}, %[[F16]], {{.*}} -> tensor<4x4xf16>
// CHECK-NEXT: %[[H:.*]] = ds.aten "aten::linear"(%[[X16]], %[[W16]], {{.*}} -> tensor<2x4xf16>
// CHECK:      %[[H32:.*]] = ds.aten "aten::to.dtype"(%[[H]], %[[F32]], {{.*}} -> tensor<2x4xf32>
// CHECK-NEXT: %[[LN:.*]] = ds.aten "aten::layer_norm"(%[[H32]], {{.*}} : (tensor<2x4xf32>, !ds.list<i64>, tensor<4xf32>, tensor<4xf32>, f64, i1) -> tensor<2x4xf32>
// CHECK:      ds.aten "aten::batch_norm"(%[[H]], {{.*}} : (tensor<2x4xf16>, tensor<4xf32>, tensor<4xf32>, !ds.none, !ds.none, i1, f64, f64, i1) -> tensor<2x4xf16>
// CHECK:      ds.aten "aten::conv_transpose2d.input"({{.*}} : (tensor<1x2x3x3xf16>, tensor<2x1x2x2xf16>, !ds.none, {{.*}}) -> tensor<1x1x4x4xf16>
// The cast of the linear's result to f32 is made once (for the layer_norm)
// and reused by the nll_loss_nd.
// CHECK-NEXT: ds.aten "aten::nll_loss_nd"(%[[H32]], {{.*}} -> tensor<f32>
ds.engine @model {module = "", deepspeed = #ds.engine_config<optimizer = <kind = adamw>, precision = <mode = autocast, autocast_dtype = f16, loss_scaler = <kind = grad_scaler, scale_window = 2000, hysteresis = 1, min_scale = 0.0>>>}
ds.param @fc.weight : tensor<4x4xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
ds.param @ln.weight : tensor<4xf32> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
ds.param @ln.bias : tensor<4xf32> {engine = @model, module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm", requires_grad}
ds.param @up.weight : tensor<2x1x2x2xf32> {engine = @model, module = "up", module_class = "torch.nn.modules.conv.ConvTranspose2d", requires_grad}

func.func @forward(%x: tensor<2x4xf32>, %img: tensor<1x2x3x3xf32>, %t: tensor<2xi64>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<1x1x4x4xf32>, tensor<f32>) {
  %none = ds.constant unit : !ds.none
  %true = ds.constant true
  %one = ds.constant 1 : i64
  %zero = ds.constant 0 : i64
  %four = ds.constant 4 : i64
  %m100 = ds.constant -100 : i64
  %eps = ds.constant 1.0e-05 : f64
  %mom = ds.constant 0.1 : f64
  %w = ds.get_param @fc.weight : tensor<4x4xf32>
  %h = ds.aten "aten::linear"(%x, %w, %none) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<2x4xf32>, tensor<4x4xf32>, !ds.none) -> tensor<2x4xf32>
  %lnw = ds.get_param @ln.weight : tensor<4xf32>
  %lnb = ds.get_param @ln.bias : tensor<4xf32>
  %shape = ds.list_construct %four : (i64) -> !ds.list<i64>
  %ln = ds.aten "aten::layer_norm"(%h, %shape, %lnw, %lnb, %eps, %true) {module = "ln", module_class = "torch.nn.modules.normalization.LayerNorm"} : (tensor<2x4xf32>, !ds.list<i64>, tensor<4xf32>, tensor<4xf32>, f64, i1) -> tensor<2x4xf32>
  %bn = ds.aten "aten::batch_norm"(%h, %lnw, %lnb, %none, %none, %true, %mom, %eps, %true) {module_class = "Net"} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, !ds.none, !ds.none, i1, f64, f64, i1) -> tensor<2x4xf32>
  %uw = ds.get_param @up.weight : tensor<2x1x2x2xf32>
  %ones = ds.list_construct %one, %one : (i64, i64) -> !ds.list<i64>
  %zeros = ds.list_construct %zero, %zero : (i64, i64) -> !ds.list<i64>
  %up = ds.aten "aten::conv_transpose2d.input"(%img, %uw, %none, %ones, %zeros, %zeros, %one, %ones) {module = "up", module_class = "torch.nn.modules.conv.ConvTranspose2d"} : (tensor<1x2x3x3xf32>, tensor<2x1x2x2xf32>, !ds.none, !ds.list<i64>, !ds.list<i64>, !ds.list<i64>, i64, !ds.list<i64>) -> tensor<1x1x4x4xf32>
  %nl = ds.aten "aten::nll_loss_nd"(%h, %t, %none, %one, %m100) {module_class = "Net"} : (tensor<2x4xf32>, tensor<2xi64>, !ds.none, i64, i64) -> tensor<f32>
  return %ln, %bn, %up, %nl : tensor<2x4xf32>, tensor<2x4xf32>, tensor<1x1x4x4xf32>, tensor<f32>
}
