//===- DSDialect.td - the ds dialect ------------------------*- tablegen -*-===//
//
// The `ds` dialect: a training step of a TorchScript model, with its state,
// made explicit so that distribution decisions are graph rewrites.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_IR_DSDIALECT_TD
#define DS_DIALECT_DS_IR_DSDIALECT_TD

include "mlir/IR/OpBase.td"

def DS_Dialect : Dialect {
  let name = "ds";
  let cppNamespace = "::mlir::ds";
  let summary = "Distributed training of TorchScript models";
  let description = [{
    The `ds` dialect holds one model's training step. State (parameters and
    buffers) is declared at module level with `ds.param` / `ds.buffer` and
    grouped into engines (`ds.engine`). Compute is a generic `ds.aten` op that
    names the ATen / TorchScript operator it runs (schema name with overload),
    so that every operator PyTorch has keeps its exact semantics; values of
    TorchScript's non-tensor types use builtin `i64`, `f64`, `i1` and this
    dialect's `!ds.none`, `!ds.str` and `!ds.list<T>`. Data-dependent control
    flow is the region op `ds.if`.

    Every compute op carries the qualified path of the module that ran it
    (`blocks.0.attn.qkv`) and that module's class with TorchScript's
    `__torch__.` prefix and `___torch_mangle_N` segments removed
    (`torch.nn.modules.linear.Linear`).

    The dialect's one discardable attribute with a meaning of its own is
    `ds.world_size` on the `builtin.module`: the number of data-parallel
    ranks the module is compiled for, an `i64` >= 1 (absent: 1). The
    importer sets it, `-ds-assign-engines` checks the config against it and
    every later pass and the plan read it from there.

    ```mlir
    module attributes {ds.world_size = 2 : i64} { ... }
    ```

    `ds.eval_modules` on the `builtin.module` lists the submodules (by path,
    `""` for the root) that the archive holds in eval mode: saved after
    `.eval()`, their `training` flag is false in the training step too
    (dropout off, BatchNorm on its running statistics). The importer sets it
    when there are any; `-ds-assign-engines` refuses a trainable engine whose
    root is among them.

    ```mlir
    module attributes {ds.eval_modules = ["teacher"]} { ... }
    ```

    `ds.checkpoint_modules` lists the modules (by path) whose activations
    `-ds-rematerialize` recomputes in the backward instead of keeping them
    from the forward (activation checkpointing).

    ```mlir
    module attributes {ds.checkpoint_modules = ["blocks.0", "blocks.1"]} { ... }
    ```

    `ds.target_device` on the `builtin.module` is the device the module is
    compiled for: `"cpu"` or `"cuda"` (absent: `"cpu"`). `-ds-assign-engines`
    sets it (its `device` option: `ds-compile --device`); the passes whose decisions depend on the device read
    it (`-ds-assign-precision`: the autocast lists and kernels of that
    device; `-ds-rematerialize` and the verifier of `ds.rng_state_get` /
    `ds.rng_state_set`: the size of that device's generator state), and the
    plan records it as its `device`.

    ```mlir
    module attributes {ds.target_device = "cuda"} { ... }
    ```
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    void registerTypes();
    void registerAttributes();

    /// The module attribute holding the world size (getWorldSize).
    static constexpr ::llvm::StringLiteral getWorldSizeAttrName() {
      return ::llvm::StringLiteral("ds.world_size");
    }

    /// The module attribute listing the submodules in eval mode
    /// (getEvalModules).
    static constexpr ::llvm::StringLiteral getEvalModulesAttrName() {
      return ::llvm::StringLiteral("ds.eval_modules");
    }

    /// The module attribute listing the activation-checkpointed modules
    /// (getCheckpointModules).
    static constexpr ::llvm::StringLiteral getCheckpointModulesAttrName() {
      return ::llvm::StringLiteral("ds.checkpoint_modules");
    }

    /// The module attribute naming the device the module is compiled for
    /// (getTargetDevice).
    static constexpr ::llvm::StringLiteral getTargetDeviceAttrName() {
      return ::llvm::StringLiteral("ds.target_device");
    }
  }];
}

class DS_Op<string mnemonic, list<Trait> traits = []>
    : Op<DS_Dialect, mnemonic, traits>;

#endif // DS_DIALECT_DS_IR_DSDIALECT_TD
