// RUN: ds-opt %s -split-input-file -ds-rematerialize | ds-opt -split-input-file | FileCheck %s --check-prefix=ROUND
// RUN: ds-opt %s -split-input-file -ds-autodiff=grad-scale=1 -canonicalize -cse -ds-rematerialize 2>/dev/null | FileCheck %s
// RUN: ds-opt %s -split-input-file -ds-autodiff=grad-scale=1 -canonicalize -cse -ds-rematerialize -verify-diagnostics -o /dev/null

// Round trip: without a backward, the attribute is kept and nothing changes.
// ROUND: module attributes {ds.checkpoint_modules = ["block"]}
// ROUND: ds.aten "aten::gelu"
// ROUND-NOT: ds.backward_begin

// A block (fc1, gelu, fc2) checkpointed under a head: fc1's and gelu's
// results, which the backward reads, are computed again from the block's
// input %x right before the first backward op that reads one (fc2's weight
// gradient); the backward reads the copies. The block's output %y, which the
// head reads in the forward, stays as it was.
// CHECK-LABEL: func.func @forward(%arg0: tensor<4x4xf32>
// CHECK:         %[[W1:.*]] = ds.get_param @block.fc1.weight
// CHECK-NEXT:    %[[H:.*]] = ds.aten "aten::linear"(%arg0, %[[W1]],
// CHECK-NEXT:    %[[A:.*]] = ds.aten "aten::gelu"(%[[H]],
// CHECK-NEXT:    %[[W2:.*]] = ds.get_param @block.fc2.weight
// CHECK-NEXT:    %[[Y:.*]] = ds.aten "aten::linear"(%[[A]], %[[W2]],
// CHECK:         ds.backward_begin
// CHECK-NOT:     %[[H]]
// CHECK-NOT:     %[[A]]
// CHECK:         ds.aten "aten::reshape"(%[[Y]],
// CHECK:         ds.grad @head.weight
// CHECK:         %[[H2:.*]] = ds.aten "aten::linear"(%arg0, %[[W1]], {{.*}}module = "block.fc1"
// CHECK-NEXT:    %[[A2:.*]] = ds.aten "aten::gelu"(%[[H2]], {{.*}}module = "block"
// CHECK-NEXT:    ds.aten "aten::reshape"(%[[A2]],
// CHECK:         ds.grad @block.fc2.weight
// CHECK-NEXT:    ds.aten "aten::gelu_backward"(%{{.*}}, %[[H2]],
// CHECK-NOT:     %[[H]]
// CHECK-NOT:     %[[A]]
// CHECK:         ds.grad @block.fc1.weight
// CHECK-NEXT:    return
module attributes {ds.checkpoint_modules = ["block"]} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 4, optimizer = <kind = sgd>>}
  ds.param @block.fc1.weight : tensor<8x4xf32> {engine = @model, module = "block.fc1", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @block.fc2.weight : tensor<4x8xf32> {engine = @model, module = "block.fc2", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @head.weight : tensor<2x4xf32> {engine = @model, module = "head", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  // expected-remark@+1 {{activation checkpoint 'block': 2 ops recomputed in the backward for 2 values; 1 values of the segment stay kept for the backward}}
  func.func @forward(%x: tensor<4x4xf32> {ds.name = "x"}) -> tensor<f32> {
    %n = ds.constant unit : !ds.none
    %approx = ds.constant "tanh" : !ds.str
    %w1 = ds.get_param @block.fc1.weight : tensor<8x4xf32>
    %h = ds.aten "aten::linear"(%x, %w1, %n) {module = "block.fc1", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x4xf32>, tensor<8x4xf32>, !ds.none) -> tensor<4x8xf32>
    %a = ds.aten "aten::gelu"(%h, %approx) {module = "block", module_class = "Block"} : (tensor<4x8xf32>, !ds.str) -> tensor<4x8xf32>
    %w2 = ds.get_param @block.fc2.weight : tensor<4x8xf32>
    %y = ds.aten "aten::linear"(%a, %w2, %n) {module = "block.fc2", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<4x8xf32>, !ds.none) -> tensor<4x4xf32>
    %wh = ds.get_param @head.weight : tensor<2x4xf32>
    %o = ds.aten "aten::linear"(%y, %wh, %n) {module = "head", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x4xf32>, tensor<2x4xf32>, !ds.none) -> tensor<4x2xf32>
    %s = ds.aten "aten::sum"(%o, %n) : (tensor<4x2xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Dropout inside a checkpointed module: the forward saves the generator's
// state right before the segment's draw (bernoulli); before the
// recomputation the backward saves its own state and sets the forward's, so
// the mask drawn again is the forward's, and sets its own back after it. No
// mask is kept from the forward.
// CHECK-LABEL: func.func @forward(%arg0: tensor<4x8xf32>
// CHECK:         %[[HX:.*]] = ds.aten "aten::linear"
// CHECK-NEXT:    %[[SAVED:.*]] = ds.rng_state_get : tensor<5056xui8>
// CHECK-NEXT:    %[[MASK:.*]] = ds.aten "aten::bernoulli.p"(%[[HX]],
// CHECK-NEXT:    %[[SCALED:.*]] = ds.aten "aten::div.Scalar"(%[[MASK]],
// CHECK-NEXT:    ds.aten "aten::mul.Tensor"(%[[HX]], %[[SCALED]])
// CHECK:         ds.backward_begin
// CHECK-NOT:     %[[MASK]]
// CHECK-NOT:     %[[SCALED]]
// CHECK:         %[[CURRENT:.*]] = ds.rng_state_get : tensor<5056xui8>
// CHECK-NEXT:    ds.rng_state_set %[[SAVED]] : tensor<5056xui8>
// CHECK-NEXT:    %[[MASK2:.*]] = ds.aten "aten::bernoulli.p"(%[[HX]], {{.*}}module = "drop"
// CHECK-NEXT:    %[[SCALED2:.*]] = ds.aten "aten::div.Scalar"(%[[MASK2]],
// CHECK-NEXT:    ds.rng_state_set %[[CURRENT]] : tensor<5056xui8>
// CHECK-NEXT:    ds.aten "aten::mul.Tensor"(%{{.*}}, %[[SCALED2]])
// CHECK-NOT:     %[[MASK]]
// CHECK-NOT:     %[[SCALED]]
// CHECK-NOT:     ds.rng_state
// CHECK-NOT:     "aten::bernoulli.p"
// CHECK:         return
module attributes {ds.checkpoint_modules = ["drop"]} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 4, optimizer = <kind = sgd>>}
  ds.param @fc.weight : tensor<2x8xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  // expected-remark@+1 {{activation checkpoint 'drop': 2 ops recomputed in the backward for 1 values; 1 values of the segment stay kept for the backward (outputs, random draws, side effects); 1 random draws replayed from the generator state saved before the first}}
  func.func @forward(%x: tensor<4x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %n = ds.constant unit : !ds.none
    %p = ds.constant 0.5 : f64
    %w = ds.get_param @fc.weight : tensor<2x8xf32>
    %hx = ds.aten "aten::linear"(%x, %w, %n) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<2x8xf32>, !ds.none) -> tensor<4x2xf32>
    %m = ds.aten "aten::bernoulli.p"(%hx, %p, %n) {module = "drop", module_class = "torch.nn.modules.dropout.Dropout"} : (tensor<4x2xf32>, f64, !ds.none) -> tensor<4x2xf32>
    %sc = ds.aten "aten::div.Scalar"(%m, %p) {module = "drop", module_class = "torch.nn.modules.dropout.Dropout"} : (tensor<4x2xf32>, f64) -> tensor<4x2xf32>
    %d = ds.aten "aten::mul.Tensor"(%hx, %sc) {module = "drop", module_class = "torch.nn.modules.dropout.Dropout"} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %sq = ds.aten "aten::mul.Tensor"(%d, %d) : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %s = ds.aten "aten::sum"(%sq, %n) : (tensor<4x2xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// The same for a module compiled for CUDA: the states saved and set are the
// CUDA generator's (seed and Philox offset, 16 bytes).
// CHECK-LABEL: func.func @forward(%arg0: tensor<4x8xf32>
// CHECK:         %[[HX:.*]] = ds.aten "aten::linear"
// CHECK-NEXT:    %[[SAVED:.*]] = ds.rng_state_get : tensor<16xui8>
// CHECK-NEXT:    %[[MASK:.*]] = ds.aten "aten::bernoulli.p"(%[[HX]],
// CHECK:         ds.backward_begin
// CHECK:         %[[CURRENT:.*]] = ds.rng_state_get : tensor<16xui8>
// CHECK-NEXT:    ds.rng_state_set %[[SAVED]] : tensor<16xui8>
// CHECK-NEXT:    %[[MASK2:.*]] = ds.aten "aten::bernoulli.p"(%[[HX]], {{.*}}module = "drop"
// CHECK-NEXT:    %[[SCALED2:.*]] = ds.aten "aten::div.Scalar"(%[[MASK2]],
// CHECK-NEXT:    ds.rng_state_set %[[CURRENT]] : tensor<16xui8>
// CHECK-NOT:     ds.rng_state
// CHECK:         return
module attributes {ds.checkpoint_modules = ["drop"], ds.target_device = "cuda"} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 4, optimizer = <kind = sgd>>}
  ds.param @fc.weight : tensor<2x8xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  // expected-remark@+1 {{activation checkpoint 'drop': 2 ops recomputed in the backward for 1 values; 1 values of the segment stay kept for the backward (outputs, random draws, side effects); 1 random draws replayed from the generator state saved before the first}}
  func.func @forward(%x: tensor<4x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %n = ds.constant unit : !ds.none
    %p = ds.constant 0.5 : f64
    %w = ds.get_param @fc.weight : tensor<2x8xf32>
    %hx = ds.aten "aten::linear"(%x, %w, %n) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<2x8xf32>, !ds.none) -> tensor<4x2xf32>
    %m = ds.aten "aten::bernoulli.p"(%hx, %p, %n) {module = "drop", module_class = "torch.nn.modules.dropout.Dropout"} : (tensor<4x2xf32>, f64, !ds.none) -> tensor<4x2xf32>
    %sc = ds.aten "aten::div.Scalar"(%m, %p) {module = "drop", module_class = "torch.nn.modules.dropout.Dropout"} : (tensor<4x2xf32>, f64) -> tensor<4x2xf32>
    %d = ds.aten "aten::mul.Tensor"(%hx, %sc) {module = "drop", module_class = "torch.nn.modules.dropout.Dropout"} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %sq = ds.aten "aten::mul.Tensor"(%d, %d) : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %s = ds.aten "aten::sum"(%sq, %n) : (tensor<4x2xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Two draws, of which the backward needs only the second's mask: the first
// is drawn again too, since it advances the generator to the second's state.
// CHECK-LABEL: func.func @forward(%arg0: tensor<4x8xf32>
// CHECK:         %[[SAVED:.*]] = ds.rng_state_get
// CHECK-NEXT:    ds.aten "aten::bernoulli.p"
// CHECK-NEXT:    ds.aten "aten::bernoulli.p"
// CHECK:         ds.backward_begin
// CHECK:         %[[CURRENT:.*]] = ds.rng_state_get
// CHECK-NEXT:    ds.rng_state_set %[[SAVED]]
// CHECK-NEXT:    ds.aten "aten::bernoulli.p"
// CHECK-NEXT:    %[[M2:.*]] = ds.aten "aten::bernoulli.p"
// CHECK-NEXT:    ds.aten "aten::div.Scalar"(%[[M2]],
// CHECK-NEXT:    ds.rng_state_set %[[CURRENT]]
// CHECK-NOT:     "aten::bernoulli.p"
// CHECK:         return
module attributes {ds.checkpoint_modules = ["drop"]} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 4, optimizer = <kind = sgd>>}
  ds.param @fc.weight : tensor<2x8xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  // expected-remark@+1 {{activation checkpoint 'drop': 3 ops recomputed in the backward for 1 values; 1 values of the segment stay kept for the backward (outputs, random draws, side effects); 2 random draws replayed from the generator state saved before the first}}
  func.func @forward(%x: tensor<4x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %n = ds.constant unit : !ds.none
    %p = ds.constant 0.5 : f64
    %one = ds.constant 1 : i64
    %w = ds.get_param @fc.weight : tensor<2x8xf32>
    %hx = ds.aten "aten::linear"(%x, %w, %n) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<2x8xf32>, !ds.none) -> tensor<4x2xf32>
    %m1 = ds.aten "aten::bernoulli.p"(%hx, %p, %n) {module = "drop", module_class = "Drop"} : (tensor<4x2xf32>, f64, !ds.none) -> tensor<4x2xf32>
    %m2 = ds.aten "aten::bernoulli.p"(%hx, %p, %n) {module = "drop", module_class = "Drop"} : (tensor<4x2xf32>, f64, !ds.none) -> tensor<4x2xf32>
    %s2 = ds.aten "aten::div.Scalar"(%m2, %p) {module = "drop", module_class = "Drop"} : (tensor<4x2xf32>, f64) -> tensor<4x2xf32>
    %d = ds.aten "aten::mul.Tensor"(%hx, %s2) {module = "drop", module_class = "Drop"} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %e = ds.aten "aten::add.Tensor"(%d, %m1, %one) {module = "drop", module_class = "Drop"} : (tensor<4x2xf32>, tensor<4x2xf32>, i64) -> tensor<4x2xf32>
    %sq = ds.aten "aten::mul.Tensor"(%e, %e) : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %s = ds.aten "aten::sum"(%sq, %n) : (tensor<4x2xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A draw outside the segment between two of its draws: from the state saved
// before the first, the recomputation would not draw the second again. The
// segment's draws stay kept, as every op that cannot run twice; the scaling
// is recomputed from the kept mask.
// CHECK-LABEL: func.func @forward(%arg0: tensor<4x8xf32>
// CHECK-NOT:     ds.rng_state
// CHECK:         %[[M1:.*]] = ds.aten "aten::bernoulli.p"
// CHECK:         ds.backward_begin
// CHECK-NOT:     ds.rng_state
// CHECK-NOT:     "aten::bernoulli.p"
// CHECK:         ds.aten "aten::div.Scalar"(%[[M1]],
// CHECK-NOT:     ds.rng_state
// CHECK-NOT:     "aten::bernoulli.p"
// CHECK:         return
module attributes {ds.checkpoint_modules = ["drop"]} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 4, optimizer = <kind = sgd>>}
  ds.param @fc.weight : tensor<2x8xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  // expected-remark@+1 {{activation checkpoint 'drop': 1 ops recomputed in the backward for 1 values; 2 values of the segment stay kept for the backward (outputs, random draws, side effects)}}
  func.func @forward(%x: tensor<4x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %n = ds.constant unit : !ds.none
    %p = ds.constant 0.5 : f64
    %w = ds.get_param @fc.weight : tensor<2x8xf32>
    %hx = ds.aten "aten::linear"(%x, %w, %n) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<2x8xf32>, !ds.none) -> tensor<4x2xf32>
    %m1 = ds.aten "aten::bernoulli.p"(%hx, %p, %n) {module = "drop", module_class = "Drop"} : (tensor<4x2xf32>, f64, !ds.none) -> tensor<4x2xf32>
    %m2 = ds.aten "aten::bernoulli.p"(%hx, %p, %n) {module = "noise", module_class = "Noise"} : (tensor<4x2xf32>, f64, !ds.none) -> tensor<4x2xf32>
    %m3 = ds.aten "aten::bernoulli.p"(%hx, %p, %n) {module = "drop", module_class = "Drop"} : (tensor<4x2xf32>, f64, !ds.none) -> tensor<4x2xf32>
    %s1 = ds.aten "aten::div.Scalar"(%m1, %p) {module = "drop", module_class = "Drop"} : (tensor<4x2xf32>, f64) -> tensor<4x2xf32>
    %a = ds.aten "aten::mul.Tensor"(%hx, %s1) {module = "drop", module_class = "Drop"} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %b = ds.aten "aten::mul.Tensor"(%a, %m3) {module = "drop", module_class = "Drop"} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %c = ds.aten "aten::mul.Tensor"(%b, %m2) : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %s = ds.aten "aten::sum"(%c, %n) : (tensor<4x2xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A checkpointed module whose values the backward does not read (its output
// is all the backward needs): a remark, no change.
// CHECK-LABEL: func.func @forward(%arg0: tensor<4x8xf32>
// CHECK:         ds.backward_begin
// CHECK-NOT:     "aten::relu"
// CHECK:         return
module attributes {ds.checkpoint_modules = ["act"]} {
  ds.engine @model {module = "", deepspeed = #ds.engine_config<train_batch_size = 4, optimizer = <kind = sgd>>}
  ds.param @fc.weight : tensor<2x8xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  // expected-remark@+1 {{activation checkpoint 'act': the backward reads none of its values; nothing to recompute}}
  func.func @forward(%x: tensor<4x8xf32> {ds.name = "x"}) -> tensor<f32> {
    %n = ds.constant unit : !ds.none
    %r = ds.aten "aten::relu"(%x) {module = "act", module_class = "torch.nn.modules.activation.ReLU"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %w = ds.get_param @fc.weight : tensor<2x8xf32>
    %o = ds.aten "aten::linear"(%r, %w, %n) {module = "fc", module_class = "torch.nn.modules.linear.Linear"} : (tensor<4x8xf32>, tensor<2x8xf32>, !ds.none) -> tensor<4x2xf32>
    %s = ds.aten "aten::sum"(%o, %n) : (tensor<4x2xf32>, !ds.none) -> tensor<f32>
    return %s : tensor<f32>
  }
}
