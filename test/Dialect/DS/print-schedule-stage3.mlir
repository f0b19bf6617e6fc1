// RUN: ds-opt %s -split-input-file -ds-autodiff -canonicalize -cse -ds-lower-optimizer -ds-zero-partition -ds-schedule-collectives -ds-verify-collectives -ds-print-schedule -o /dev/null | FileCheck %s

// -ds-print-schedule at ZeRO stage 3, after -ds-schedule-collectives: each
// gather points at its wait (the collective is in flight in between), the
// sharded buckets' gathers and releases give the elements then gathered
// ("live"), and the peak closes each function. The eval function gathers
// too, so it is printed.

// overlap_comm on (stage 3's default), stage3_max_reuse_distance 0 and
// stage3_prefetch_bucket_size 128: every bucket is released after the
// forward and gathered again in the backward; each gather starts once the
// previous one was waited (128 elements in flight at most), so bucket 1's
// gather overlaps fc1's compute and bucket 2's release; the reduce-scatters
// run until the end of the backward.
// CHECK-LABEL: schedule of @forward (identical on every rank: no collective is inside a ds.if)
// CHECK-NEXT:    1  all_gather @model bucket 2 (128 elements) -> wait at 3; live 128
// CHECK-NEXT:    2  forward: 9 ops
// CHECK-NEXT:    3  wait all_gather @model bucket 2
// CHECK-NEXT:    4  all_gather @model bucket 1 (128 elements) -> wait at 8; live 256
// CHECK-NEXT:    5  forward: 3 ops
// CHECK-NEXT:    6  release @model bucket 2; live 128
// CHECK-NEXT:    7  forward: 1 op
// CHECK-NEXT:    8  wait all_gather @model bucket 1
// CHECK-NEXT:    9  all_gather @model bucket 0 (32 elements) -> wait at 13; live 160
// CHECK-NEXT:   10  forward: 3 ops
// CHECK-NEXT:   11  release @model bucket 1; live 32
// CHECK-NEXT:   12  forward: 1 op
// CHECK-NEXT:   13  wait all_gather @model bucket 0
// CHECK-NEXT:   14  forward: 3 ops
// CHECK-NEXT:   15  release @model bucket 0; live 0
// CHECK-NEXT:   16  forward: 1 op
// CHECK-NEXT:   17  all_gather @model bucket 0 (32 elements) -> wait at 19; live 32
// CHECK-NEXT:   18  backward: 4 ops
// CHECK-NEXT:   19  wait all_gather @model bucket 0
// CHECK-NEXT:   20  all_gather @model bucket 1 (128 elements) -> wait at 26; live 160
// CHECK-NEXT:   21  backward: 2 ops
// CHECK-NEXT:   22  release @model bucket 0; live 128
// CHECK-NEXT:   23  backward: 10 ops (through grad @fc3.weight)
// CHECK-NEXT:   24  reduce_scatter @model bucket 0 (32 elements) -> wait at 35
// CHECK-NEXT:   25  backward: 1 op
// CHECK-NEXT:   26  wait all_gather @model bucket 1
// CHECK-NEXT:   27  backward: 2 ops
// CHECK-NEXT:   28  release @model bucket 1; live 0
// CHECK-NEXT:   29  backward: 9 ops (through grad @fc2.weight)
// CHECK-NEXT:   30  reduce_scatter @model bucket 1 (128 elements) -> wait at 36
// CHECK-NEXT:   31  backward: 8 ops (through grad @fc1.bias)
// CHECK-NEXT:   32  reduce_scatter @model bucket 3 (28 elements, persistent) -> wait at 37
// CHECK-NEXT:   33  backward: 1 op (through grad @fc1.weight)
// CHECK-NEXT:   34  reduce_scatter @model bucket 2 (128 elements) -> wait at 38
// CHECK-NEXT:   35  wait reduce_scatter @model bucket 0
// CHECK-NEXT:   36  wait reduce_scatter @model bucket 1
// CHECK-NEXT:   37  wait reduce_scatter @model bucket 3
// CHECK-NEXT:   38  wait reduce_scatter @model bucket 2
// CHECK-NEXT:   peak live gathered parameters: 256 elements (line 4)
// CHECK-LABEL: schedule of @forward_eval (identical on every rank: no collective is inside a ds.if)
// CHECK-NEXT:    1  all_gather @model bucket 2 (128 elements) -> wait at 2; live 128
// CHECK-NEXT:    2  wait all_gather @model bucket 2
// CHECK-NEXT:    3  all_gather @model bucket 1 (128 elements) -> wait at 7; live 256
// CHECK-NEXT:    4  forward: 3 ops
// CHECK-NEXT:    5  release @model bucket 2; live 128
// CHECK-NEXT:    6  forward: 1 op
// CHECK-NEXT:    7  wait all_gather @model bucket 1
// CHECK-NEXT:    8  all_gather @model bucket 0 (32 elements) -> wait at 12; live 160
// CHECK-NEXT:    9  forward: 3 ops
// CHECK-NEXT:   10  release @model bucket 1; live 32
// CHECK-NEXT:   11  forward: 1 op
// CHECK-NEXT:   12  wait all_gather @model bucket 0
// CHECK-NEXT:   13  forward: 3 ops
// CHECK-NEXT:   14  release @model bucket 0; live 0
// CHECK-NEXT:   peak live gathered parameters: 256 elements (line 3)
// CHECK-LABEL: schedule of @step (identical on every rank: no collective is inside a ds.if)
// CHECK-NEXT:    1  optimizer_step @model (adamw, lr 0.001)
// CHECK-NEXT:    2  all_gather @model bucket 3 (28 elements, persistent) -> wait at 3
// CHECK-NEXT:    3  wait all_gather @model bucket 3
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, overlap_comm = true, reduce_bucket_size = 128, stage3_prefetch_bucket_size = 128, stage3_param_persistence_threshold = 16, stage3_max_reuse_distance = 0>>}
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

// overlap_comm false, default reuse distance: nothing overlaps, every
// collective is waited right after it starts; fc3's and fc2's buckets stay
// gathered from the forward into the backward.
// CHECK-LABEL: schedule of @forward (identical on every rank: no collective is inside a ds.if)
// CHECK-NEXT:    1  forward: 9 ops
// CHECK-NEXT:    2  all_gather @model bucket 2 (128 elements) -> wait at 3; live 128
// CHECK-NEXT:    3  wait all_gather @model bucket 2
// CHECK-NEXT:    4  forward: 3 ops
// CHECK-NEXT:    5  release @model bucket 2; live 0
// CHECK-NEXT:    6  forward: 1 op
// CHECK-NEXT:    7  all_gather @model bucket 1 (128 elements) -> wait at 8; live 128
// CHECK-NEXT:    8  wait all_gather @model bucket 1
// CHECK-NEXT:    9  forward: 4 ops
// CHECK-NEXT:   10  all_gather @model bucket 0 (32 elements) -> wait at 11; live 160
// CHECK-NEXT:   11  wait all_gather @model bucket 0
// CHECK-NEXT:   12  forward: 4 ops
// CHECK-NEXT:   13  backward: 6 ops
// CHECK-NEXT:   14  release @model bucket 0; live 128
// CHECK-NEXT:   15  backward: 10 ops (through grad @fc3.weight)
// CHECK-NEXT:   16  reduce_scatter @model bucket 0 (32 elements) -> wait at 17
// CHECK-NEXT:   17  wait reduce_scatter @model bucket 0
// CHECK-NEXT:   18  backward: 3 ops
// CHECK-NEXT:   19  release @model bucket 1; live 0
// CHECK-NEXT:   20  backward: 9 ops (through grad @fc2.weight)
// CHECK-NEXT:   21  reduce_scatter @model bucket 1 (128 elements) -> wait at 22
// CHECK-NEXT:   22  wait reduce_scatter @model bucket 1
// CHECK-NEXT:   23  backward: 8 ops (through grad @fc1.bias)
// CHECK-NEXT:   24  reduce_scatter @model bucket 3 (28 elements, persistent) -> wait at 25
// CHECK-NEXT:   25  wait reduce_scatter @model bucket 3
// CHECK-NEXT:   26  backward: 1 op (through grad @fc1.weight)
// CHECK-NEXT:   27  reduce_scatter @model bucket 2 (128 elements) -> wait at 28
// CHECK-NEXT:   28  wait reduce_scatter @model bucket 2
// CHECK-NEXT:   peak live gathered parameters: 160 elements (line 10)
// CHECK-LABEL: schedule of @step (identical on every rank: no collective is inside a ds.if)
// CHECK-NEXT:    1  optimizer_step @model (adamw, lr 0.001)
// CHECK-NEXT:    2  all_gather @model bucket 3 (28 elements, persistent) -> wait at 3
// CHECK-NEXT:    3  wait all_gather @model bucket 3
// CHECK-NOT:   schedule
module attributes {ds.world_size = 2 : i64} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 2, optimizer = <kind = adamw>, zero = <stage = 3, reduce_bucket_size = 128, stage3_param_persistence_threshold = 16>>}
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
