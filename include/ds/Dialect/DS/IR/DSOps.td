//===- DSOps.td - ds dialect operations --------------------*- tablegen -*-===//

#ifndef DS_DIALECT_DS_IR_DSOPS_TD
#define DS_DIALECT_DS_IR_DSOPS_TD

include "ds/Dialect/DS/IR/DSDialect.td"
include "ds/Dialect/DS/IR/DSAttrs.td"
include "ds/Dialect/DS/IR/DSTypes.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

/// An i64 attribute read as a signed int64_t (I64Attr reads uint64_t), so
/// that verifiers see negative sizes and offsets as negative.
def DS_I64Attr : SignlessIntegerAttrBase<I64, "64-bit signless integer attribute"> {
  let returnType = "int64_t";
  let convertFromStorage = "$_self.getValue().getSExtValue()";
}

//===----------------------------------------------------------------------===//
// State: engines, parameters, buffers
//===----------------------------------------------------------------------===//

def DS_EngineOp : DS_Op<"engine", [Symbol, HasParent<"::mlir::ModuleOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "one DeepSpeed engine: a submodule trained with its own config";
  let description = [{
    Declares an engine: the submodule of the TorchScript root it owns
    (`module`, `""` for the root) and its DeepSpeed config, typed
    (`deepspeed`, `#ds.engine_config`: what the passes read, every default
    resolved) and as given (`config`, JSON text the plan keeps as provenance;
    no pass reads it). `-ds-assign-engines` attaches both from the config
    file; an engine without `deepspeed` is an error in the passes that need
    it. Parameters and buffers name their engine with an `engine` attribute.
    An engine marked `frozen` has no optimizer: its parameters get no
    gradients.

    ```mlir
    ds.engine @student {module = "student",
        config = "{\"optimizer\": {\"type\": \"AdamW\"}, \"zero_optimization\": {\"stage\": 2}}",
        deepspeed = #ds.engine_config<optimizer = <kind = adamw>, zero = <stage = 2>>}
    ```

    Once `-ds-zero-partition` has laid the engine out, it also carries its
    ZeRO stage (`zero_stage`, 0 to 3) and the number of elements of its flat
    gradient (and, stages 1-3, parameter) buffer, padding included
    (`flat_numel`). The layout itself is the `flat_offset` of each trainable
    `ds.param` of the engine and the engine's `ds.bucket`s:

    ```mlir
    ds.engine @model {flat_numel = 1088 : i64, module = "", zero_stage = 2 : i64}
    ds.param @fc1.weight : tensor<16x32xf32> {engine = @model, flat_offset = 0 : i64, ...}
    ds.bucket @model_bucket0 engine @model offset 0 numel 544
    ds.bucket @model_bucket1 engine @model offset 544 numel 544
    ```

    A frozen engine is partitioned only at ZeRO stage 3, where its
    parameters are sharded (gathered for its forward, released after); its
    flat buffer then holds every parameter of the engine, `requires_grad` or
    not, and it has no gradients, reductions or update.

    The verifier checks that the two attributes come together (on a frozen
    engine only with `zero_stage = 3`), and that the engine's buckets are
    sorted, disjoint and cover `[0, flat_numel)` exactly, that every
    trainable parameter of the engine (of a frozen engine: every parameter)
    has a `flat_offset` and that no two parameters overlap.

    `-ds-assign-precision` records the engine's mixed-precision mode from its
    config (docs/precision.md). Without `precision` the engine trains in
    fp32. With it:

    - `precision` (`#ds.precision_mode`): `bf16` or `fp16` (the config's
      `bf16.enabled` / `fp16.enabled`: the engine's float parameters and
      buffers are stored in that type) or `autocast`
      (`torch_autocast.enabled`: parameters stay f32, ops follow
      torch.autocast's CPU policy);
    - `grad_accum_dtype`: the element type of the engine's gradient buffers
      (`data_types.grad_accum_dtype`, by default the model dtype: `bf16` /
      `f16` in the native modes, `f32` under autocast);
    - `autocast_dtype` (autocast only): the lower-precision type of the
      autocast policy (`torch_autocast.dtype`);
    - `loss_scaler` (`#ds.loss_scaler`; fp16, and autocast with
      `autocast_dtype = f16`): the loss scaler's settings, every default
      resolved (parameters at the attribute's defaults are elided): `kind`
      (`dynamic` or `static`: DeepSpeed's fp16 scaler; `grad_scaler`: the
      `torch.amp.GradScaler` DeepSpeed creates for fp16 autocast), `scale`
      (the first step's scale: `loss_scale`, or `2^initial_scale_power` when
      dynamic; 2^16 for a grad_scaler), `scale_window` (a grad_scaler's
      `growth_interval`, 2000), `hysteresis`, `consecutive_hysteresis`,
      `min_scale` (a grad_scaler: 1, false and 0.0, no floor).

    ```mlir
    ds.engine @model {module = "", precision = #ds.precision_mode<fp16>,
        grad_accum_dtype = f16, loss_scaler = #ds.loss_scaler<kind = dynamic>}
    ds.engine @student {module = "student",
        precision = #ds.precision_mode<autocast>, grad_accum_dtype = f32,
        autocast_dtype = bf16}
    ds.engine @teacher {module = "teacher",
        precision = #ds.precision_mode<autocast>, grad_accum_dtype = f32,
        autocast_dtype = f16,
        loss_scaler = #ds.loss_scaler<kind = grad_scaler, scale_window = 2000,
                                      hysteresis = 1, min_scale = 0.0>}
    ```

    The attributes' types fix their spelling and the loss scaler's ranges
    (`scale` > 0, `scale_window` and `hysteresis` >= 1, `min_scale` >= 0).
    The verifier checks that `precision` is not `fp32` (an fp32 engine has
    none), that the other three come only with it (`autocast_dtype` only
    and always with `autocast`, `loss_scaler` only with `fp16`, kind
    `dynamic` or `static`, or with `autocast` and `autocast_dtype = f16`,
    kind `grad_scaler`), that the types are `f32`, `f16` or `bf16`
    (`autocast_dtype`: `bf16` or `f16`), that the scale is finite, that a
    `dynamic` or `static` scaler's `min_scale` is finite and > 0, and that a
    `grad_scaler` has hysteresis 1, no consecutive hysteresis and
    `min_scale` 0.0.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$module,
                       DefaultValuedStrAttr<StrAttr, "{}">:$config,
                       UnitAttr:$frozen,
                       OptionalAttr<DS_I64Attr>:$zero_stage,
                       OptionalAttr<DS_I64Attr>:$flat_numel,
                       OptionalAttr<DS_PrecisionModeAttr>:$precision,
                       OptionalAttr<TypeAttr>:$grad_accum_dtype,
                       OptionalAttr<TypeAttr>:$autocast_dtype,
                       OptionalAttr<DS_LossScalerAttr>:$loss_scaler,
                       OptionalAttr<DS_EngineConfigAttr>:$deepspeed);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "::llvm::StringRef":$sym_name, "::llvm::StringRef":$module,
                   "::llvm::StringRef":$config, "bool":$frozen), [{
      build($_builder, $_state, sym_name, module, config, frozen,
            /*zero_stage=*/nullptr, /*flat_numel=*/nullptr,
            /*precision=*/nullptr, /*grad_accum_dtype=*/nullptr,
            /*autocast_dtype=*/nullptr, /*loss_scaler=*/nullptr,
            /*deepspeed=*/nullptr);
    }]>
  ];
  let extraClassDeclaration = [{
    /// Whether -ds-zero-partition has laid this engine out.
    bool isPartitioned() { return getZeroStage().has_value(); }
    /// The typed config (`deepspeed`) that `pass` needs; without one, emits
    /// an error naming the engine and fails.
    ::mlir::FailureOr<EngineConfigAttr> requireConfig(::llvm::StringRef pass);
  }];
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

    `flat_offset` (set by `-ds-zero-partition` on every trainable parameter
    of a partitioned engine) is the element offset of the parameter in its
    engine's flat buffers; the parameter occupies
    `[flat_offset, flat_offset + numel)`, inside `[0, flat_numel)` of the
    engine.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<AnyRankedTensor>:$type, StrAttr:$module,
                       StrAttr:$module_class, UnitAttr:$requires_grad,
                       OptionalAttr<FlatSymbolRefAttr>:$engine,
                       OptionalAttr<DS_I64Attr>:$flat_offset);
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
// Random number generator state
//===----------------------------------------------------------------------===//

/// A generator's state as LibTorch 2.x serialises it (`get_rng_state()`):
/// its byte count is fixed by the layout of the target device's generator.
def DS_RngStateType : 1DTensorOf<[UI8]>;

def DS_RngStateGetOp : DS_Op<"rng_state_get", [MemoryEffects<[MemRead]>]> {
  let summary = "save the state of the random number generator";
  let description = [{
    Returns the state of the generator the random operators draw from (the
    default generator of the device the module is compiled for, its
    `ds.target_device`, which the runtime seeds per micro-step), as
    `torch.get_rng_state()` and `torch.cuda.get_rng_state()` do: a
    `tensor<5056xui8>` for the CPU generator (Mersenne Twister), a
    `tensor<16xui8>` for the CUDA one (Philox: seed and offset, 8 bytes
    each). With `ds.rng_state_set` it replays random draws:
    `-ds-rematerialize` saves the state before a checkpointed segment's
    first random draw in the forward and restores it before the segment's
    recomputation in the backward, so the recomputed dropout masks are the
    forward's (docs/activation-checkpointing.md).

    ```mlir
    %state = ds.rng_state_get : tensor<5056xui8>
    // in a module with ds.target_device = "cuda"
    %state = ds.rng_state_get : tensor<16xui8>
    ```

    It reads the memory the random operators (`ds.aten` with a random draw)
    write, so no rewrite moves it across one. The verifier checks the type
    against the module's target device.
  }];
  let results = (outs DS_RngStateType:$state);
  let assemblyFormat = "attr-dict `:` type($state)";
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "::mlir::ds::TargetDevice":$device), [{
      build($_builder, $_state, getStateType($_builder.getContext(), device));
    }]>
  ];
  let extraClassDeclaration = [{
    /// Bytes of the CPU generator's state (`torch.get_rng_state().numel()`).
    static constexpr int64_t kCPUStateBytes = 5056;
    /// Bytes of the CUDA generator's state
    /// (`torch.cuda.get_rng_state().numel()`: CUDAGeneratorImpl::get_state
    /// writes the uint64 seed and the int64 Philox offset).
    static constexpr int64_t kCUDAStateBytes = 16;
    /// The byte count of `device`'s generator state.
    static int64_t getStateBytes(::mlir::ds::TargetDevice device);
    /// `tensor<5056xui8>` (CPU) or `tensor<16xui8>` (CUDA).
    static ::mlir::RankedTensorType
    getStateType(::mlir::MLIRContext *context, ::mlir::ds::TargetDevice device);
  }];
}

def DS_RngStateSetOp : DS_Op<"rng_state_set", [MemoryEffects<[MemWrite]>]> {
  let summary = "restore a saved state of the random number generator";
  let description = [{
    Sets the state of the generator the random operators draw from to
    `state`, as `torch.set_rng_state(state)` does: the next draws repeat
    those that followed the `ds.rng_state_get` that saved it. The type is
    the target device's state, as for `ds.rng_state_get`.

    ```mlir
    ds.rng_state_set %state : tensor<5056xui8>
    ```

    It writes the memory the random operators read, so no rewrite moves it
    across one or drops it. The state must come from a `ds.rng_state_get`:
    its bytes are the generator's own layout, which nothing else produces.
  }];
  let arguments = (ins DS_RngStateType:$state);
  let assemblyFormat = "$state attr-dict `:` type($state)";
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

class DS_BackwardMarkerOp<string mnemonic>
    : DS_Op<mnemonic, [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
                       MemoryEffects<[MemRead, MemWrite]>]> {
  let arguments = (ins FlatSymbolRefAttr:$engine);
  let assemblyFormat = "$engine attr-dict";
  let hasVerifier = 1;
  code commonDescription = [{

    `-ds-engine-backward` places one `ds.backward_prologue` and one
    `ds.backward_epilogue` for every trainable engine that has `ds.grad` ops
    in the backward of the training function, at the top level, after
    `ds.backward_begin`:

    ```mlir
    ds.backward_begin
    ...
    ds.backward_prologue @e1
    ds.grad @e1.fc2.weight, %g0 : tensor<4x24xf32>
    ...
    %t = ds.reduce_scatter @e1_bucket0
    ds.wait %t
    ds.backward_epilogue @e1
    ```

    The engine must exist and not be frozen (a frozen engine has no
    gradients, hence no share of the backward); the op is never inside a
    `ds.if`. Like a collective it reads and writes memory, so no rewrite
    moves an engine's gradients or reductions across it.
    `-ds-verify-collectives` checks the placement (docs/plan-format.md).
  }];
}

def DS_BackwardPrologueOp : DS_BackwardMarkerOp<"backward_prologue"> {
  let summary = "the start of one engine's share of the joint backward";
  let description = [{
    DeepSpeed's `_backward_prologue` for `engine`: it comes before every
    `ds.grad` of the engine's parameters. The runtime runs nothing here; the
    marker states, in the IR and in the plan, where the engine's backward
    begins.
  }] # commonDescription;
}

def DS_BackwardEpilogueOp : DS_BackwardMarkerOp<"backward_epilogue"> {
  let summary = "the end of one engine's share of the joint backward";
  let description = [{
    DeepSpeed's `_backward_epilogue` for `engine`: it comes after every
    `ds.grad` of the engine's parameters and after the `ds.wait` of each of
    its `ds.reduce_scatter`s, and no gradient or reduction of the engine
    follows it. The user never calls it: it is placed in the backward, right
    after the engine's last gradient and the flush of its reductions, so
    the engine's communication overlaps the backward of the engines after
    it.
  }] # commonDescription;
}

def DS_CotangentOp : DS_Op<"cotangent", [MemoryEffects<[MemRead]>]> {
  let summary = "the gradient the caller gives for one result of the forward";
  let description = [{
    The cotangent of result `index` of the training function: the gradient
    of the caller's objective with respect to that result, which the runtime
    receives with `backward()` (dsopt: the gradient PyTorch's autograd
    computed for the engine's output; `ds-run`: 1 for a scalar loss, zeros
    for any other result). `-ds-autodiff` seeds the backward with it, times
    the seed scale (1 / gradient_accumulation_steps, a `ds.constant` marked
    `ds.backward_seed`):

    ```mlir
    ds.backward_begin
    %c = ds.cotangent 1 : tensor<4x16x64xf32>
    %s = ds.constant dense<5.000000e-01> : tensor<f32> {ds.backward_seed}
    %g = ds.aten "aten::mul.Tensor"(%c, %s)
        : (tensor<4x16x64xf32>, tensor<f32>) -> tensor<4x16x64xf32>
    ```

    The enclosing function must return at least `index + 1` results, and the
    op's type is that of result `index`, a float tensor. The op is never
    inside a `ds.if` (the runtime sets it once per backward). It reads what
    the runtime was given, so rewrites do not move it ahead of
    `ds.backward_begin`.
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntNonNegative]>:$index);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$index attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def DS_LossScaleOp : DS_Op<"loss_scale", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemRead]>]> {
  let summary = "the current fp16 loss scale of an engine";
  let description = [{
    Reads the loss scale of `engine` for this micro-step as a 0-dim f32
    tensor: DeepSpeed's (static or dynamic) loss scaler, which the runtime
    keeps and updates at the engine's `ds.optimizer_step` (overflow check,
    skipped step, scale lowered or raised). `-ds-scale-loss` places it, for
    every trainable fp16 engine, right after `ds.backward_begin` and
    multiplies the backward's seed by it:

    ```mlir
    ds.backward_begin
    %scale = ds.loss_scale @model : tensor<f32>
    ```

    The engine must exist and not be frozen (a frozen engine has no
    gradients to scale); the op is never inside a `ds.if`. It only reads
    (the scale changes at the accumulation boundary, not in the backward),
    so it is not a collective and rewrites keep it where its uses need it.
  }];
  let arguments = (ins FlatSymbolRefAttr:$engine);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = "$engine attr-dict `:` type($result)";
  let hasVerifier = 1;
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

def DS_OptimizerStepOp : DS_Op<"optimizer_step", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "the update of one engine at the accumulation boundary";
  let description = [{
    Updates the parameters of `engine` from its gradients: clips them by
    their global L2 norm (`gradient_clipping`; 0 disables clipping), applies
    the optimizer at the scheduled learning rate, advances the schedule and
    zeroes the gradients. On a partitioned engine (stages 1-3) each rank
    updates its shard, and the norm is taken over all shards.

    Every hyperparameter is resolved (`-ds-lower-optimizer` writes DeepSpeed's
    defaults where the config is silent), so the op alone says what the
    update computes:

    - `type` (`#ds.optimizer_kind`): `adamw` (decoupled weight decay:
      DeepSpeed's AdamW, and Adam with `adam_w_mode`), `adam` (L2 decay
      added to the gradient: `torch.optim.Adam`) or `sgd`;
    - `lr` >= 0; `betas` (two values in [0, 1)) and `eps` > 0 for Adam;
      `weight_decay` >= 0; `momentum` >= 0, `dampening` and `nesterov` for
      SGD (nesterov needs momentum > 0 and dampening 0). Fields of the other
      optimizer keep their defaults (the verifier insists for Adam's
      `momentum`, `dampening` and `nesterov`);
    - `gradient_clipping` >= 0;
    - `scheduler` (optional, `#ds.scheduler`): DeepSpeed's schedule, with
      `kind` (`WarmupLR`, `WarmupDecayLR`, `WarmupCosineLR`),
      `warmup_min_lr` (>= 0), `warmup_max_lr` (>= 0; absent: the
      optimizer's lr; `-ds-lower-optimizer` resolves it for the warmup
      schedules and leaves it out of the cosine one, which has no maximum),
      `warmup_num_steps` (>= 1), `warmup_type` (`log` or `linear`),
      `total_num_steps` (>= 1, required by WarmupDecayLR and
      WarmupCosineLR), `warmup_min_ratio`, `cos_min_ratio` (in [0, 1]);
      parameters at the attribute's defaults are elided.

    The custom form lists the hyperparameters in this order, the optimizer
    kind as a bare keyword, numbers as plain floats and the schedule without
    its `#ds.scheduler` prefix (the generic form holds them as
    `#ds.optimizer_kind`, `f64` attributes, `betas` as an `array<f64: ...>`
    and `#ds.scheduler`):

    ```mlir
    ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999],
        eps = 1.0e-08, weight_decay = 0.01, momentum = 0.0, dampening = 0.0,
        nesterov = false, gradient_clipping = 1.0,
        scheduler = <kind = WarmupLR, warmup_max_lr = 0.001,
                     warmup_num_steps = 10>}
    ```

    The engine must exist and not be frozen; the op is never inside a
    `ds.if` (every rank takes part in the norm's all-reduce).
  }];
  let arguments = (ins FlatSymbolRefAttr:$engine, DS_OptimizerKindAttr:$type,
                       F64Attr:$lr,
                       DenseF64ArrayAttr:$betas, F64Attr:$eps,
                       F64Attr:$weight_decay, F64Attr:$momentum,
                       F64Attr:$dampening, BoolAttr:$nesterov,
                       F64Attr:$gradient_clipping,
                       OptionalAttr<DS_SchedulerAttr>:$scheduler);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Distribution: buckets and collectives
//===----------------------------------------------------------------------===//

def DS_BucketOp : DS_Op<"bucket", [Symbol, HasParent<"::mlir::ModuleOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a slice of an engine's flat buffers that one collective moves";
  let description = [{
    The elements `[offset, offset + numel)` of the flat gradient (and, at
    stages 1-3, parameter) buffer of `engine`. `numel` is a multiple of the
    world size (the module's `ds.world_size`, 1 when absent): rank `r` owns
    the block `[offset + r * numel / W, offset + (r + 1) * numel / W)`.
    Buckets of one engine are numbered by offset (`bucket 0` is the one at
    offset 0), which is how the plan names them. Made by
    `-ds-zero-partition` (docs/zero.md has the rules).

    ```mlir
    ds.bucket @model_bucket1 engine @model offset 544 numel 544
    ```

    At ZeRO stage 3 the parameters of a bucket are sharded too: between
    steps every rank holds only its block, `ds.all_gather` materialises the
    whole bucket before its parameters are read and `ds.release` drops it
    after. A `persistent` bucket (its parameters are at most
    `stage3_param_persistence_threshold` elements each) stays whole on every
    rank and behaves as at stage 2; only stage 3 engines have them.

    ```mlir
    ds.bucket @model_bucket2 engine @model offset 1088 numel 48 persistent
    ```

    A `leaf` bucket holds every parameter of one ZeRO-3 leaf module's
    subtree (`zero_optimization.leaf_module`), and nothing else, whatever
    its size: the leaf is gathered at once before its first read and
    released after its last, so nothing inside it (a data-dependent
    `ds.if`) needs a collective, and its gradients are reduced together.
    The string is the leaf's module path, relative to the engine's module.
    Only sharded buckets of stage 3 engines are leaves.

    ```mlir
    ds.bucket @model_bucket1 engine @model offset 288 numel 4160 leaf "moe"
    ```

    `dtype` (a float type) is the dtype the bucket's collectives move: a
    reduction casts the bucket's gradients to it and the result back into
    the gradient buffer, a stage 3 gather casts the parameters to it and
    back. Absent, the bucket communicates in the gradient buffer's dtype (an
    fp32 engine: f32, no cast). `-ds-zero-partition` sets it on every bucket
    of a native bf16 / fp16 engine (`communication_data_type`, by default
    the model dtype) and, under `torch_autocast`, to the autocast dtype for
    the parameters of lower-precision-safe modules and f32 for the others
    (one bucket never mixes the two):

    ```mlir
    ds.bucket @model_bucket0 engine @model offset 0 numel 544 dtype bf16
    ds.bucket @model_bucket1 engine @model offset 544 numel 64 dtype f32
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, FlatSymbolRefAttr:$engine,
                       DS_I64Attr:$offset, DS_I64Attr:$numel,
                       UnitAttr:$persistent, OptionalAttr<StrAttr>:$leaf,
                       OptionalAttr<TypeAttr>:$dtype);
  let assemblyFormat = [{
    $sym_name `engine` $engine `offset` $offset `numel` $numel
    (`persistent` $persistent^)? (`leaf` $leaf^)? (`dtype` $dtype^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether this is a stage 3 bucket whose parameters are sharded
    /// (gathered before they are read, released after): not persistent and
    /// of a stage 3 engine. `stage` is the engine's zero_stage.
    bool isShardedAt(int64_t stage) { return stage == 3 && !getPersistent(); }
  }];
}

class DS_CollectiveOp<string mnemonic>
    : DS_Op<mnemonic, [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
                       MemoryEffects<[MemRead, MemWrite]>]> {
  let arguments = (ins FlatSymbolRefAttr:$bucket);
  let results = (outs DS_TokenType:$token);
  let assemblyFormat = "$bucket attr-dict";
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "::mlir::FlatSymbolRefAttr":$bucket), [{
      build($_builder, $_state,
            ::mlir::ds::TokenType::get($_builder.getContext()), bucket);
    }]>
  ];
  code commonDescription = [{

    The collective is asynchronous: it starts here and its token is waited by
    exactly one later `ds.wait` in the same block. Every rank must issue the
    same collectives in the same order, so a collective is never inside a
    `ds.if`. The op reads and writes memory (the flat buffers), so no rewrite
    drops, merges or reorders it.
  }];
}

def DS_AllReduceOp : DS_CollectiveOp<"all_reduce"> {
  let summary = "start averaging a bucket of gradients over the ranks";
  let description = [{
    Averages the bucket's slice of the engine's full gradient buffer over the
    ranks, in place (ZeRO stage 0: the engine's `zero_stage` must be 0).

    ```mlir
    %t = ds.all_reduce @model_bucket0
    ds.wait %t
    ```
  }] # commonDescription;
}

def DS_ReduceScatterOp : DS_CollectiveOp<"reduce_scatter"> {
  let summary = "start reducing a bucket of gradients into the ranks' shards";
  let description = [{
    Averages the bucket's slice of the full gradient buffer over the ranks;
    when waited, this rank's block of the result is added into its shard of
    the gradient and the slice of the full buffer is zeroed (ZeRO stages 1
    to 3).

    ```mlir
    %t = ds.reduce_scatter @model_bucket1
    ds.wait %t
    ```
  }] # commonDescription;
}

def DS_AllGatherOp : DS_CollectiveOp<"all_gather"> {
  let summary = "start gathering a bucket of parameters";
  let description = [{
    Gathers every rank's block of the bucket's slice of the flat parameter
    buffer, so that every rank holds the whole slice: at stages 1 and 2 (and
    for the persistent buckets of stage 3) in `@step`, after the optimizer
    updated the shards; at stage 3, for a sharded bucket, in the training or
    eval function before the bucket's parameters are read (the gathered
    buffer lives until the bucket's `ds.release`).

    ```mlir
    %t = ds.all_gather @model_bucket0
    ds.wait %t
    %w = ds.get_param @fc1.weight : tensor<16x8xf32>
    ...
    ds.release @model_bucket0
    ```
  }] # commonDescription;
}

def DS_ReleaseOp : DS_Op<"release", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "drop the gathered parameters of a sharded bucket";
  let description = [{
    ZeRO stage 3: frees the whole-bucket parameter buffer that the last
    `ds.all_gather` of the bucket materialised; every rank keeps only its
    block. The bucket's parameters may not be read (`ds.get_param`, or a use
    of its result) until the bucket is gathered again. Only for buckets of a
    stage 3 engine that are not `persistent`; never inside a `ds.if` (every
    rank releases the same buckets at the same point), and, like a
    collective, never reordered by rewrites.

    ```mlir
    ds.release @model_bucket0
    ```

    `-ds-verify-collectives` checks that the releases and gathers of every
    bucket alternate and enclose every read of its parameters.
  }];
  let arguments = (ins FlatSymbolRefAttr:$bucket);
  let assemblyFormat = "$bucket attr-dict";
  let hasVerifier = 1;
}

def DS_WaitOp : DS_Op<"wait", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "wait for an asynchronous collective";
  let description = [{
    Blocks until the collective that produced `token` has finished; its
    results are visible after this op. The token comes from `ds.all_reduce`,
    `ds.reduce_scatter` or `ds.all_gather` in the same block, and the wait,
    like the collective, is never inside a `ds.if`.
  }];
  let arguments = (ins DS_TokenType:$token);
  let assemblyFormat = "$token attr-dict";
  let hasVerifier = 1;
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
