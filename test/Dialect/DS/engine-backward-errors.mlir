// RUN: ds-opt %s -split-input-file -ds-engine-backward -verify-diagnostics

// -ds-engine-backward places the markers once: a backward that has them
// already is rejected (running the pass twice would mark every engine
// twice).

ds.engine @a {module = "a"}
ds.param @a.w : tensor<4xf32> {engine = @a, module = "a", module_class = "M", requires_grad}
func.func @forward(%g: tensor<4xf32>) {
  ds.backward_begin
  // expected-error @below {{@forward already has backward markers; -ds-engine-backward places them once}}
  ds.backward_prologue @a
  ds.grad @a.w, %g : tensor<4xf32>
  ds.backward_epilogue @a
  return
}
