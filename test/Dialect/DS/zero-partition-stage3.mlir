// RUN: ds-opt %s -split-input-file -ds-autodiff -canonicalize -cse -ds-lower-optimizer -ds-zero-partition -ds-verify-collectives | FileCheck %s

// ZeRO stage 3: parameters are sharded too. Each sharded bucket is gathered
// (and waited) right before the first top-level op that reads one of its
// parameters and released right after the last, in the forward and again in
// the backward, which reads the parameters through ds.get_params of its
// own; stage3_max_reuse_distance may keep a bucket gathered across the
// turn. Parameters of at most stage3_param_persistence_threshold elements
// live in persistent buckets that behave as at stage 2. The waits stay next
// to their gathers here: -ds-schedule-collectives moves them
// (schedule-collectives.mlir).

// A three-layer MLP. The backward's layout puts fc3 first; with
// reduce_bucket_size 128 each weight has a bucket of its own (fc3.weight 32,
// fc2.weight 128, fc1.weight 128 elements) and the biases (<= 16 elements)
// share persistent bucket 3. The default stage3_max_reuse_distance (1e9)
// keeps fc3's and fc2's buckets gathered from the forward into the backward;
// fc1.weight is not read in the backward (no gradient flows to the input),
// so its bucket is released in the forward. @step gathers only the
// persistent bucket. The eval function gathers and releases as the forward
// does.
// CHECK-LABEL: module attributes {ds.world_size = 2 : i64}
// CHECK:         ds.engine @model {{{.*}}flat_numel = 316 : i64, module = "", zero_stage = 3 : i64}
// CHECK:         ds.bucket @model_bucket0 engine @model offset 0 numel 32
// CHECK-NEXT:    ds.bucket @model_bucket1 engine @model offset 32 numel 128
// CHECK-NEXT:    ds.bucket @model_bucket2 engine @model offset 160 numel 128
// CHECK-NEXT:    ds.bucket @model_bucket3 engine @model offset 288 numel 28 persistent
// CHECK-LABEL:   func.func @forward(
// CHECK:           %[[G2:.*]] = ds.all_gather @model_bucket2
// CHECK-NEXT:      ds.wait %[[G2]]
// CHECK-NEXT:      ds.get_param @fc1.weight
// CHECK-NEXT:      ds.get_param @fc1.bias
// CHECK-NEXT:      ds.aten "aten::linear"
// CHECK-NEXT:      ds.release @model_bucket2
// CHECK-NEXT:      ds.aten "aten::relu"
// CHECK-NEXT:      %[[G1:.*]] = ds.all_gather @model_bucket1
// CHECK-NEXT:      ds.wait %[[G1]]
// CHECK-NEXT:      ds.get_param @fc2.weight
// CHECK-NEXT:      ds.get_param @fc2.bias
// CHECK-NEXT:      ds.aten "aten::linear"
// CHECK-NEXT:      ds.aten "aten::relu"
// CHECK-NEXT:      %[[G0:.*]] = ds.all_gather @model_bucket0
// CHECK-NEXT:      ds.wait %[[G0]]
// CHECK-NEXT:      ds.get_param @fc3.weight
// CHECK-NEXT:      ds.get_param @fc3.bias
// CHECK-NEXT:      ds.aten "aten::linear"
// CHECK-NEXT:      ds.aten "aten::sum"
// CHECK-NEXT:      ds.backward_begin
// CHECK-NOT:       ds.all_gather
// CHECK:           %[[W3:.*]] = ds.get_param @fc3.weight
// CHECK-NEXT:      ds.aten "aten::matmul"(%{{.*}}, %[[W3]])
// CHECK-NEXT:      ds.release @model_bucket0
// CHECK-NOT:       ds.all_gather
// CHECK:           ds.grad @fc3.weight
// CHECK-NEXT:      %[[R0:.*]] = ds.reduce_scatter @model_bucket0
// CHECK-NEXT:      ds.aten "aten::threshold_backward"
// CHECK-NEXT:      %[[W2:.*]] = ds.get_param @fc2.weight
// CHECK-NEXT:      ds.aten "aten::matmul"(%{{.*}}, %[[W2]])
// CHECK-NEXT:      ds.release @model_bucket1
// CHECK-NOT:       ds.get_param
// CHECK:           ds.grad @fc2.weight
// CHECK-NEXT:      %[[R1:.*]] = ds.reduce_scatter @model_bucket1
// CHECK-NOT:       ds.get_param
// CHECK:           ds.grad @fc1.bias
// CHECK-NEXT:      %[[R3:.*]] = ds.reduce_scatter @model_bucket3
// CHECK-NEXT:      ds.grad @fc1.weight
// CHECK-NEXT:      %[[R2:.*]] = ds.reduce_scatter @model_bucket2
// CHECK-NEXT:      ds.wait %[[R0]]
// CHECK-NEXT:      ds.wait %[[R1]]
// CHECK-NEXT:      ds.wait %[[R3]]
// CHECK-NEXT:      ds.wait %[[R2]]
// CHECK-NEXT:      return
// CHECK-LABEL:   func.func @forward_eval(
// CHECK-NEXT:      %[[E2:.*]] = ds.all_gather @model_bucket2
// CHECK-NEXT:      ds.wait %[[E2]]
// CHECK-NEXT:      ds.get_param @fc1.weight
// CHECK-NEXT:      ds.get_param @fc1.bias
// CHECK-NEXT:      ds.aten "aten::linear"
// CHECK-NEXT:      ds.release @model_bucket2
// CHECK-NEXT:      ds.aten "aten::relu"
// CHECK-NEXT:      %[[E1:.*]] = ds.all_gather @model_bucket1
// CHECK-NEXT:      ds.wait %[[E1]]
// CHECK-NEXT:      ds.get_param @fc2.weight
// CHECK-NEXT:      ds.get_param @fc2.bias
// CHECK-NEXT:      ds.aten "aten::linear"
// CHECK-NEXT:      ds.release @model_bucket1
// CHECK-NEXT:      ds.aten "aten::relu"
// CHECK-NEXT:      %[[E0:.*]] = ds.all_gather @model_bucket0
// CHECK-NEXT:      ds.wait %[[E0]]
// CHECK-NEXT:      ds.get_param @fc3.weight
// CHECK-NEXT:      ds.get_param @fc3.bias
// CHECK-NEXT:      ds.aten "aten::linear"
// CHECK-NEXT:      ds.release @model_bucket0
// CHECK-NEXT:      return
// CHECK-LABEL:   func.func @step()
// CHECK-NEXT:      ds.optimizer_step @model
// CHECK-NEXT:      %[[P:.*]] = ds.all_gather @model_bucket3
// CHECK-NEXT:      ds.wait %[[P]]
// CHECK-NEXT:      return
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 128, stage3_param_persistence_threshold = 16>>}
  ds.param @fc1.weight : tensor<16x8xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc1.bias : tensor<16xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc2.weight : tensor<8x16xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc2.bias : tensor<8xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc3.weight : tensor<4x8xf32> {engine = @model, module = "fc3", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc3.bias : tensor<4xf32> {engine = @model, module = "fc3", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<4x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %w1 = ds.get_param @fc1.weight : tensor<16x8xf32>
    %b1 = ds.get_param @fc1.bias : tensor<16xf32>
    %h1 = ds.aten "aten::linear"(%x, %w1, %b1) {module = "fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    %r1 = ds.aten "aten::relu"(%h1) : (tensor<4x16xf32>) -> tensor<4x16xf32>
    %w2 = ds.get_param @fc2.weight : tensor<8x16xf32>
    %b2 = ds.get_param @fc2.bias : tensor<8xf32>
    %h2 = ds.aten "aten::linear"(%r1, %w2, %b2) {module = "fc2", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %r2 = ds.aten "aten::relu"(%h2) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %w3 = ds.get_param @fc3.weight : tensor<4x8xf32>
    %b3 = ds.get_param @fc3.bias : tensor<4xf32>
    %y = ds.aten "aten::linear"(%r2, %w3, %b3) {module = "fc3", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x4xf32>
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %n) : (tensor<4x4xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
  func.func @forward_eval(%x: tensor<4x8xf32> {ds.name = "x"}) -> tensor<4x4xf32> {
    %w1 = ds.get_param @fc1.weight : tensor<16x8xf32>
    %b1 = ds.get_param @fc1.bias : tensor<16xf32>
    %h1 = ds.aten "aten::linear"(%x, %w1, %b1) {module = "fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    %r1 = ds.aten "aten::relu"(%h1) : (tensor<4x16xf32>) -> tensor<4x16xf32>
    %w2 = ds.get_param @fc2.weight : tensor<8x16xf32>
    %b2 = ds.get_param @fc2.bias : tensor<8xf32>
    %h2 = ds.aten "aten::linear"(%r1, %w2, %b2) {module = "fc2", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %r2 = ds.aten "aten::relu"(%h2) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %w3 = ds.get_param @fc3.weight : tensor<4x8xf32>
    %b3 = ds.get_param @fc3.bias : tensor<4xf32>
    %y = ds.aten "aten::linear"(%r2, %w3, %b3) {module = "fc3", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x4xf32>
    return %y : tensor<4x4xf32>
  }
}

// -----

// stage3_max_reuse_distance 0: every bucket is released after its last read
// in the forward and gathered again before its first read in the backward
// (the 3 Psi of communication: gather, gather, reduce-scatter).
// CHECK-LABEL:   func.func @forward(
// CHECK:           %[[G0:.*]] = ds.all_gather @model_bucket0
// CHECK-NEXT:      ds.wait %[[G0]]
// CHECK-NEXT:      ds.get_param @fc3.weight
// CHECK-NEXT:      ds.get_param @fc3.bias
// CHECK-NEXT:      ds.aten "aten::linear"
// CHECK-NEXT:      ds.release @model_bucket0
// CHECK-NEXT:      ds.aten "aten::sum"
// CHECK-NEXT:      ds.backward_begin
// CHECK:           %[[B0:.*]] = ds.all_gather @model_bucket0
// CHECK-NEXT:      ds.wait %[[B0]]
// CHECK-NEXT:      %[[W3:.*]] = ds.get_param @fc3.weight
// CHECK-NEXT:      ds.aten "aten::matmul"(%{{.*}}, %[[W3]])
// CHECK-NEXT:      ds.release @model_bucket0
// CHECK:           ds.aten "aten::threshold_backward"
// CHECK-NEXT:      %[[B1:.*]] = ds.all_gather @model_bucket1
// CHECK-NEXT:      ds.wait %[[B1]]
// CHECK-NEXT:      %[[W2:.*]] = ds.get_param @fc2.weight
// CHECK-NEXT:      ds.aten "aten::matmul"(%{{.*}}, %[[W2]])
// CHECK-NEXT:      ds.release @model_bucket1
// CHECK-NOT:       ds.all_gather
// CHECK:           return
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 128, stage3_param_persistence_threshold = 16, stage3_max_reuse_distance = 0>>}
  ds.param @fc1.weight : tensor<16x8xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc1.bias : tensor<16xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc2.weight : tensor<8x16xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc2.bias : tensor<8xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc3.weight : tensor<4x8xf32> {engine = @model, module = "fc3", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc3.bias : tensor<4xf32> {engine = @model, module = "fc3", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<4x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %w1 = ds.get_param @fc1.weight : tensor<16x8xf32>
    %b1 = ds.get_param @fc1.bias : tensor<16xf32>
    %h1 = ds.aten "aten::linear"(%x, %w1, %b1) {module = "fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    %r1 = ds.aten "aten::relu"(%h1) : (tensor<4x16xf32>) -> tensor<4x16xf32>
    %w2 = ds.get_param @fc2.weight : tensor<8x16xf32>
    %b2 = ds.get_param @fc2.bias : tensor<8xf32>
    %h2 = ds.aten "aten::linear"(%r1, %w2, %b2) {module = "fc2", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %r2 = ds.aten "aten::relu"(%h2) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %w3 = ds.get_param @fc3.weight : tensor<4x8xf32>
    %b3 = ds.get_param @fc3.bias : tensor<4xf32>
    %y = ds.aten "aten::linear"(%r2, %w3, %b3) {module = "fc3", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x4xf32>
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %n) : (tensor<4x4xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// stage3_max_reuse_distance 32: between fc3's forward release and its
// backward gather nothing else would be gathered, so bucket 0 stays
// gathered; between fc2's, bucket 0 would be gathered twice (64 elements >
// 32), so bucket 1 is released and gathered again.
// CHECK-LABEL:   func.func @forward(
// CHECK:           ds.get_param @fc2.weight
// CHECK-NEXT:      ds.get_param @fc2.bias
// CHECK-NEXT:      ds.aten "aten::linear"
// CHECK-NEXT:      ds.release @model_bucket1
// CHECK-NOT:       ds.release
// CHECK:           ds.backward_begin
// CHECK-NOT:       ds.all_gather
// CHECK:           %[[W3:.*]] = ds.get_param @fc3.weight
// CHECK-NEXT:      ds.aten "aten::matmul"(%{{.*}}, %[[W3]])
// CHECK-NEXT:      ds.release @model_bucket0
// CHECK:           %[[B1:.*]] = ds.all_gather @model_bucket1
// CHECK-NEXT:      ds.wait %[[B1]]
// CHECK-NEXT:      ds.get_param @fc2.weight
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 128, stage3_param_persistence_threshold = 16, stage3_max_reuse_distance = 32>>}
  ds.param @fc1.weight : tensor<16x8xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc1.bias : tensor<16xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc2.weight : tensor<8x16xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc2.bias : tensor<8xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc3.weight : tensor<4x8xf32> {engine = @model, module = "fc3", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc3.bias : tensor<4xf32> {engine = @model, module = "fc3", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<4x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %w1 = ds.get_param @fc1.weight : tensor<16x8xf32>
    %b1 = ds.get_param @fc1.bias : tensor<16xf32>
    %h1 = ds.aten "aten::linear"(%x, %w1, %b1) {module = "fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    %r1 = ds.aten "aten::relu"(%h1) : (tensor<4x16xf32>) -> tensor<4x16xf32>
    %w2 = ds.get_param @fc2.weight : tensor<8x16xf32>
    %b2 = ds.get_param @fc2.bias : tensor<8xf32>
    %h2 = ds.aten "aten::linear"(%r1, %w2, %b2) {module = "fc2", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %r2 = ds.aten "aten::relu"(%h2) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %w3 = ds.get_param @fc3.weight : tensor<4x8xf32>
    %b3 = ds.get_param @fc3.bias : tensor<4xf32>
    %y = ds.aten "aten::linear"(%r2, %w3, %b3) {module = "fc3", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x4xf32>
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %n) : (tensor<4x4xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// stage3_param_persistence_threshold 1e5 (DeepSpeed's default): every
// parameter of this small model is persistent, so stage 3 moves what stage 2
// moves; nothing is gathered or released in the forward.
// CHECK-LABEL: module attributes {ds.world_size = 2 : i64}
// CHECK:         ds.bucket @model_bucket0 engine @model offset 0 numel 44 persistent
// CHECK-NEXT:    ds.bucket @model_bucket1 engine @model offset 44 numel 128 persistent
// CHECK-NEXT:    ds.bucket @model_bucket2 engine @model offset 172 numel 16 persistent
// CHECK-NEXT:    ds.bucket @model_bucket3 engine @model offset 188 numel 128 persistent
// CHECK-LABEL:   func.func @forward(
// CHECK-NOT:       ds.all_gather
// CHECK-NOT:       ds.release
// CHECK:           return
// CHECK-LABEL:   func.func @step()
// CHECK-NEXT:      ds.optimizer_step @model
// CHECK-NEXT:      ds.all_gather @model_bucket0
// CHECK-NEXT:      ds.all_gather @model_bucket1
// CHECK-NEXT:      ds.all_gather @model_bucket2
// CHECK-NEXT:      ds.all_gather @model_bucket3
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 128>>}
  ds.param @fc1.weight : tensor<16x8xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc1.bias : tensor<16xf32> {engine = @model, module = "fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc2.weight : tensor<8x16xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc2.bias : tensor<8xf32> {engine = @model, module = "fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc3.weight : tensor<4x8xf32> {engine = @model, module = "fc3", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fc3.bias : tensor<4xf32> {engine = @model, module = "fc3", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  func.func @forward(%x: tensor<4x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %w1 = ds.get_param @fc1.weight : tensor<16x8xf32>
    %b1 = ds.get_param @fc1.bias : tensor<16xf32>
    %h1 = ds.aten "aten::linear"(%x, %w1, %b1) {module = "fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    %r1 = ds.aten "aten::relu"(%h1) : (tensor<4x16xf32>) -> tensor<4x16xf32>
    %w2 = ds.get_param @fc2.weight : tensor<8x16xf32>
    %b2 = ds.get_param @fc2.bias : tensor<8xf32>
    %h2 = ds.aten "aten::linear"(%r1, %w2, %b2) {module = "fc2", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %r2 = ds.aten "aten::relu"(%h2) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %w3 = ds.get_param @fc3.weight : tensor<4x8xf32>
    %b3 = ds.get_param @fc3.bias : tensor<4xf32>
    %y = ds.aten "aten::linear"(%r2, %w3, %b3) {module = "fc3", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x4xf32>
    %n = ds.constant unit : !ds.none
    %s = ds.aten "aten::sum"(%y, %n) : (tensor<4x4xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A frozen engine at stage 3 is partitioned too (all its parameters
// sharded), beside a stage 3 student: its bucket is gathered before the
// forward reads it and released after; the backward does not read it (no
// trainable parameter lies upstream of the teacher), so it is not gathered
// again, and it is never reduced.
// CHECK-LABEL: module attributes {ds.world_size = 2 : i64}
// CHECK:         ds.engine @teacher {deepspeed = {{.*}}, flat_numel = 4 : i64, frozen, module = "teacher", zero_stage = 3 : i64}
// CHECK:         ds.bucket @student_bucket0 engine @student offset 0 numel 4
// CHECK-NEXT:    ds.bucket @teacher_bucket0 engine @teacher offset 0 numel 4
// CHECK-NOT:     ds.bucket
// CHECK-LABEL:   func.func @forward(
// CHECK:           %[[T:.*]] = ds.all_gather @teacher_bucket0
// CHECK-NEXT:      ds.wait %[[T]]
// CHECK-NEXT:      ds.get_param @teacher.w
// CHECK-NEXT:      ds.aten "aten::mul.Tensor"
// CHECK-NEXT:      ds.release @teacher_bucket0
// CHECK:           %[[G:.*]] = ds.all_gather @student_bucket0
// CHECK-NEXT:      ds.wait %[[G]]
// CHECK-NEXT:      ds.get_param @student.w
// CHECK:           ds.backward_begin
// CHECK-NOT:       @teacher
// CHECK:           return
module attributes {ds.world_size = 2 : i64} {
  ds.engine @student {module = "student", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, stage3_param_persistence_threshold = 0>>}
  ds.engine @teacher {module = "teacher", deepspeed = #ds.engine_config<train_batch_size = 2, zero = <stage = 3, overlap_comm = true, stage3_param_persistence_threshold = 0>>, frozen}
  ds.param @student.w : tensor<4xf32> {engine = @student, module = "student", module_class = "S", requires_grad}
  ds.param @teacher.w : tensor<4xf32> {engine = @teacher, module = "teacher", module_class = "T", requires_grad}
  func.func @forward(%x: tensor<4xf32> {ds.name = "x"}) -> tensor<f32> {
    %tw = ds.get_param @teacher.w : tensor<4xf32>
    %t = ds.aten "aten::mul.Tensor"(%x, %tw) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %sw = ds.get_param @student.w : tensor<4xf32>
    %one = ds.constant 1 : i64
    %s = ds.aten "aten::mul.Tensor"(%x, %sw) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %d = ds.aten "aten::sub.Tensor"(%s, %t, %one) : (tensor<4xf32>, tensor<4xf32>, i64) -> tensor<4xf32>
    %n = ds.constant unit : !ds.none
    %l = ds.aten "aten::sum"(%d, %n) : (tensor<4xf32>, !ds.none) -> tensor<f32>
    return %l : tensor<f32>
  }
}
