// RUN: ds-opt %s -split-input-file -ds-check-parameter-use -verify-diagnostics | FileCheck %s

// Every trainable parameter is read, or frozen, or not trainable: nothing to
// say, and the module is unchanged.
// CHECK-LABEL: func.func @forward
// CHECK:       ds.get_param @fc.weight
module attributes {ds.traced} {
  ds.engine @model {module = ""}
  ds.engine @teacher {frozen, module = "teacher"}
  ds.param @fc.weight : tensor<4xf32> {engine = @model, module = "fc", module_class = "torch.nn.modules.linear.Linear", requires_grad}
  ds.param @fixed : tensor<4xf32> {engine = @model, module = "", module_class = "Net"}
  ds.param @teacher.w : tensor<4xf32> {engine = @teacher, module = "teacher", module_class = "Teacher", requires_grad}
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    %w = ds.get_param @fc.weight : tensor<4xf32>
    %y = ds.aten "aten::mul.Tensor"(%x, %w) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// A traced mixture of experts whose example chose experts 1 and 3: the
// others' parameters are never read, and would never train.
// expected-error @below {{4 trainable parameters of this traced model are never read by its forward, so they would never train (module 'moe.experts.0' (Expert): moe.experts.0.w1, moe.experts.0.w2; module 'moe.experts.2' (Expert): moe.experts.2.w1, moe.experts.2.w2). torch.jit.trace keeps only the path its example took}}
module attributes {ds.traced} {
  ds.param @moe.experts.0.w1 : tensor<4xf32> {module = "moe.experts.0", module_class = "Expert", requires_grad}
  ds.param @moe.experts.0.w2 : tensor<4xf32> {module = "moe.experts.0", module_class = "Expert", requires_grad}
  ds.param @moe.experts.1.w1 : tensor<4xf32> {module = "moe.experts.1", module_class = "Expert", requires_grad}
  ds.param @moe.experts.2.w1 : tensor<4xf32> {module = "moe.experts.2", module_class = "Expert", requires_grad}
  ds.param @moe.experts.2.w2 : tensor<4xf32> {module = "moe.experts.2", module_class = "Expert", requires_grad}
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    %w = ds.get_param @moe.experts.1.w1 : tensor<4xf32>
    %y = ds.aten "aten::mul.Tensor"(%x, %w) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// Scripted or exported models keep every branch: an unused submodule is
// legal, and a warning says its parameters do not train. A read inside a
// ds.if branch counts.
// expected-warning @below {{1 trainable parameter is never read by the forward and gets no gradient (module 'head' (Linear): head.weight)}}
module {
  ds.param @head.weight : tensor<4xf32> {module = "head", module_class = "Linear", requires_grad}
  ds.param @fc.weight : tensor<4xf32> {module = "fc", module_class = "Linear", requires_grad}
  func.func @forward(%x: tensor<4xf32>, %c: i1) -> tensor<4xf32> {
    %y = ds.if %c -> (tensor<4xf32>) {
      %w = ds.get_param @fc.weight : tensor<4xf32>
      %m = ds.aten "aten::mul.Tensor"(%x, %w) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      ds.yield %m : tensor<4xf32>
    } else {
      ds.yield %x : tensor<4xf32>
    }
    return %y : tensor<4xf32>
  }
}
