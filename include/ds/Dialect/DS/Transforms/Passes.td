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

#endif // DS_DIALECT_DS_TRANSFORMS_PASSES_TD
