//===- DSOps.td - ds dialect operations --------------------*- tablegen -*-===//

#ifndef DS_DIALECT_DS_IR_DSOPS_TD
#define DS_DIALECT_DS_IR_DSOPS_TD

include "ds/Dialect/DS/IR/DSDialect.td"
include "ds/Dialect/DS/IR/DSTypes.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

//===----------------------------------------------------------------------===//
// State: engines, parameters, buffers
//===----------------------------------------------------------------------===//

def DS_EngineOp : DS_Op<"engine", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "one DeepSpeed engine: a submodule trained with its own config";
  let description = [{
    Declares an engine: the submodule of the TorchScript root it owns
    (`module`, `""` for the root) and its DeepSpeed config as JSON text.
    Parameters and buffers name their engine with an `engine` attribute. An
    engine marked `frozen` has no optimizer: its parameters get no gradients.

    ```mlir
    ds.engine @student {module = "student", config = "{\"zero_optimization\": {\"stage\": 2}}"}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$module,
                       DefaultValuedStrAttr<StrAttr, "{}">:$config,
                       UnitAttr:$frozen);
  let assemblyFormat = "$sym_name attr-dict";
}

class DS_StateDeclOp<string mnemonic>
    : DS_Op<mnemonic, [Symbol, HasParent<"::mlir::ModuleOp">,
                       DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
}

def DS_ParamOp : DS_StateDeclOp<"param"> {
  let summary = "a parameter of the model";
  let description = [{
    Declares a parameter by its qualified name (`blocks.0.attn.qkv.weight`),
    with its static shape and dtype, the module that owns it directly, that
    module's demangled class, and whether it requires a gradient.

    ```mlir
    ds.param @"fc1.weight" : tensor<16x8xf32> {module = "fc1",
        module_class = "torch.nn.modules.linear.Linear", requires_grad}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<AnyRankedTensor>:$type, StrAttr:$module,
                       StrAttr:$module_class, UnitAttr:$requires_grad,
                       OptionalAttr<FlatSymbolRefAttr>:$engine);
}

def DS_BufferOp : DS_StateDeclOp<"buffer"> {
  let summary = "a buffer of the model (state without gradient)";
  let description = [{
    Declares a buffer (`bn.running_mean`, `attn.mask`). Buffers that the model
    updates in training (BatchNorm running statistics) are written with
    `ds.set_buffer`.

    ```mlir
    ds.buffer @"bn.running_mean" : tensor<16xf32> {module = "bn",
        module_class = "torch.nn.modules.batchnorm.BatchNorm1d"}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<AnyRankedTensor>:$type, StrAttr:$module,
                       StrAttr:$module_class,
                       OptionalAttr<FlatSymbolRefAttr>:$engine);
}

def DS_GetParamOp : DS_Op<"get_param", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "read a parameter";
  let description = [{
    ```mlir
    %w = ds.get_param @"fc1.weight" : tensor<16x8xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def DS_GetBufferOp : DS_Op<"get_buffer", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemRead]>]> {
  let summary = "read a buffer";
  let description = [{
    Reads the buffer's value as of the start of the step, or as last written
    by `ds.set_buffer` before this op.
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def DS_SetBufferOp : DS_Op<"set_buffer", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemWrite]>]> {
  let summary = "update a buffer (e.g. BatchNorm running statistics)";
  let description = [{
    ```mlir
    ds.set_buffer @"bn.running_mean", %new : tensor<16xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name, AnyRankedTensor:$value);
  let assemblyFormat = "$name `,` $value attr-dict `:` type($value)";
}

//===----------------------------------------------------------------------===//
// TorchScript values
//===----------------------------------------------------------------------===//

def DS_ConstantOp : DS_Op<"constant", [ConstantLike, Pure]> {
  let summary = "a constant TorchScript value";
  let description = [{
    An `i64`, `f64` or `i1` scalar, a string (`!ds.str`), None (`!ds.none`,
    written `unit`) or a tensor (a dense or resource elements attribute).

    ```mlir
    %c = ds.constant 1 : i64
    %s = ds.constant "none" : !ds.str
    %n = ds.constant unit : !ds.none
    ```
  }];
  let arguments = (ins AnyAttr:$value);
  let results = (outs DS_AnyValue:$result);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether `value` is a valid constant of `type`.
    static bool isValidConstant(::mlir::Attribute value, ::mlir::Type type);
  }];
  let hasFolder = 1;
}

def DS_ListConstructOp : DS_Op<"list_construct", [Pure]> {
  let summary = "build a TorchScript list";
  let description = [{
    ```mlir
    %l = ds.list_construct %a, %b : (i64, i64) -> !ds.list<i64>
    ```
  }];
  let arguments = (ins Variadic<DS_AnyValue>:$elements);
  let results = (outs DS_ListType:$result);
  let assemblyFormat =
      "$elements attr-dict `:` functional-type($elements, $result)";
  let hasVerifier = 1;
}

def DS_ListUnpackOp : DS_Op<"list_unpack", [Pure]> {
  let summary = "split a TorchScript list into its elements";
  let description = [{
    The list must have exactly as many elements as the op has results (checked
    at run time for lists whose length is not known statically).
  }];
  let arguments = (ins DS_ListType:$list);
  let results = (outs Variadic<DS_AnyValue>:$elements);
  let assemblyFormat = "$list attr-dict `:` functional-type($list, $elements)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

def DS_AtenOp : DS_Op<"aten", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "run an ATen / TorchScript operator";
  let description = [{
    Runs the operator named by `op` (schema name and overload, as
    `aten::add.Tensor`; no overload as `aten::linear`) on `args` in schema
    order. Non-tensor arguments are values too (`ds.constant`,
    `ds.list_construct`), so the op list maps one to one onto TorchScript's
    graph and onto the runtime's boxed calls. The operator must be in the
    dialect's operator registry, which fixes its arity.

    `module` is the qualified path of the module that ran the op (`""` for the
    root), `module_class` that module's demangled class; the op's location is
    the TorchScript source line.

    ```mlir
    %y = ds.aten "aten::linear"(%x, %w, %b) {module = "fc1",
        module_class = "torch.nn.modules.linear.Linear"}
        : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    ```
  }];
  let arguments = (ins StrAttr:$op, Variadic<DS_AnyValue>:$args,
                       DefaultValuedStrAttr<StrAttr, "">:$module,
                       DefaultValuedStrAttr<StrAttr, "">:$module_class);
  let results = (outs Variadic<DS_AnyValue>:$results);
  let assemblyFormat =
      "$op `(` $args `)` attr-dict `:` functional-type($args, $results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

def DS_BackwardBeginOp : DS_Op<"backward_begin", [
    MemoryEffects<[MemWrite]>]> {
  let summary = "the point where a training step's backward starts";
  let description = [{
    Placed by `-ds-autodiff` between the forward (which ends with the losses)
    and the backward it derives. The runtime's `forward(batch)` runs up to
    here and `backward()` from here on.
  }];
  let assemblyFormat = "attr-dict";
}

def DS_GradOp : DS_Op<"grad", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemWrite]>]> {
  let summary = "tie a gradient to its parameter";
  let description = [{
    Adds `value` to the gradient of parameter `param` for this micro-step
    (several `ds.grad` of one parameter add up, e.g. a weight used twice or an
    expert reached in a branch). A trainable parameter that no `ds.grad`
    reaches in a micro-step has a zero gradient.

    ```mlir
    ds.grad @"fc1.weight", %g : tensor<16x8xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, AnyRankedTensor:$value);
  let assemblyFormat = "$param `,` $value attr-dict `:` type($value)";
}

//===----------------------------------------------------------------------===//
// Control flow
//===----------------------------------------------------------------------===//

def DS_IfOp : DS_Op<"if", [RecursiveMemoryEffects, NoRegionArguments,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "data-dependent conditional (TorchScript prim::If)";
  let description = [{
    A branch on a value only known at run time (as in mixture-of-experts
    routing). Branches whose condition the specialised shapes decide are
    folded away by the importer, so every `ds.if` that remains is
    data-dependent. Each region yields the op's results.

    ```mlir
    %r = ds.if %c -> (tensor<4x8xf32>) {
      ds.yield %a : tensor<4x8xf32>
    } else {
      ds.yield %b : tensor<4x8xf32>
    }
    ```
  }];
  let arguments = (ins I1:$condition);
  let results = (outs Variadic<DS_AnyValue>:$results);
  let regions = (region SizedRegion<1>:$thenRegion, SizedRegion<1>:$elseRegion);
  let assemblyFormat = [{
    $condition (`->` `(` type($results)^ `)`)? $thenRegion `else` $elseRegion
    attr-dict
  }];
  let hasVerifier = 1;
}

def DS_YieldOp : DS_Op<"yield", [Pure, Terminator, ReturnLike,
    HasParent<"IfOp">]> {
  let summary = "yield the results of a `ds.if` branch";
  let arguments = (ins Variadic<DS_AnyValue>:$values);
  let builders = [OpBuilder<(ins), [{ /* no values */ }]>];
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

#endif // DS_DIALECT_DS_IR_DSOPS_TD
