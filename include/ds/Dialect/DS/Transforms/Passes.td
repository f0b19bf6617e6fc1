//===- Passes.td - ds dialect passes -----------------------*- tablegen -*-===//

#ifndef DS_DIALECT_DS_TRANSFORMS_PASSES_TD
#define DS_DIALECT_DS_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def DSAssignEngines : Pass<"ds-assign-engines", "::mlir::ModuleOp"> {
  let summary = "Group parameters and buffers into engines";
  let description = [{
    Declares one `ds.engine` per entry of `engines` (`NAME=PREFIX`, in order)
    and sets the `engine` attribute of every `ds.param` and `ds.buffer` whose
    qualified name lies under PREFIX (`PREFIX.` is a name prefix; the empty
    prefix, the root, takes what no other engine takes). Without `engines`,
    one engine `@model` owns everything.

    Rejects: two engines whose prefixes overlap, a prefix that owns no state,
    and state that no engine owns.
  }];
  let options = [
    ListOption<"engines", "engines", "std::string",
               "Engines as NAME=PREFIX, in config order">,
    ListOption<"frozen", "frozen", "std::string",
               "Names of engines without an optimizer">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DSAutodiff : Pass<"ds-autodiff", "::mlir::ModuleOp"> {
  let summary = "Derive the backward of a forward function";
  let description = [{
    Appends to `func` (default `@forward`) the backward of its losses: a
    `ds.backward_begin` marker, the seed gradient `grad-scale` (1 / gradient
    accumulation steps) for every returned loss, then the vector-Jacobian
    product of every op that depends on a trainable parameter, in reverse
    order, and a `ds.grad` for every trainable parameter read. Gradients
    through broadcasting are summed to the operand's shape; `aten::detach`
    stops them; parameters without `requires_grad`, and those of frozen
    engines, get none and cost no backward work.

    A data-dependent `ds.if` is differentiated by a `ds.if` on the same
    condition whose branches recompute their forward and then run its
    backward, so no value leaves a branch only to serve the backward.

    Each operator's rule lives in lib/Dialect/DS/Transforms/Gradients; an
    operator that needs a gradient but has no rule is an error naming it.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"forward\"",
           "Function to differentiate">,
    Option<"gradScale", "grad-scale", "double", "1.0",
           "Seed of the backward (1 / gradient_accumulation_steps)">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

#endif // DS_DIALECT_DS_TRANSFORMS_PASSES_TD
