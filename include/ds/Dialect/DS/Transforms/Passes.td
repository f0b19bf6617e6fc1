//===- Passes.td - ds dialect passes -----------------------*- tablegen -*-===//

#ifndef DS_DIALECT_DS_TRANSFORMS_PASSES_TD
#define DS_DIALECT_DS_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def DSAssignEngines : Pass<"ds-assign-engines", "::mlir::ModuleOp"> {
  let summary = "Declare the engines of a DeepSpeed config and group state into them";
  let description = [{
    Declares one `ds.engine` per engine and sets the `engine` attribute of
    every `ds.param` and `ds.buffer` whose qualified name lies under the
    engine's module PREFIX (`PREFIX.` is a name prefix; the empty prefix, the
    root, takes what no other engine takes).

    With `config` (a JSON file) or `config-json` (its text), the engines are
    those of the DeepSpeed config (docs/config.md): one `@model` for a plain
    config, one per key of its `"engines"` (dots become underscores in the
    name, `@root` for the key `""`). This is where the config enters the IR,
    parsed once: each engine gets its config as typed attributes
    (`deepspeed = #ds.engine_config<...>`, every default resolved, which is
    what later passes read) and as given (`config`, JSON text kept for the
    plan's provenance), and is `frozen` when it has no optimizer. The config
    is checked for the module's world size (`ds.world_size`, 1 when unset)
    and, when the module has `@forward_eval` (or `@forward`), against the
    global micro-batch of its first batched argument; a bad config is an
    error naming the file and the key. `mixed-precision` and `set` resolve
    "auto" values and override keys as ds-compile's options of the same
    names do; "auto" bucket sizes use each engine's hidden size, the most
    common last dimension of the 2-D parameters it owns. The config
    library's warnings (an "auto" that fell to a default, a trailing comma)
    and remarks (how a value was resolved) become diagnostics at the file.

    Without a config, `engines` (`NAME=PREFIX`, in order) and `frozen` name
    the engines, which get no config; without either, one engine `@model`
    owns everything.

    `device` (cpu or cuda) is the compile target: it becomes the module's
    `ds.target_device`, which later passes read (docs/dialect.md). Without
    it the module keeps its own, else gets `"cpu"`: after this pass the
    target is explicit.

    Rejects: two engines whose prefixes overlap, a prefix that owns no state,
    state that no engine owns, `engines` together with a config, and a
    `device` other than cpu and cuda or other than the module's
    `ds.target_device`.
  }];
  let options = [
    Option<"configPath", "config", "std::string", "",
           "DeepSpeed config (JSON file); relative engine config files "
           "resolve against its folder">,
    Option<"configJson", "config-json", "std::string", "",
           "The DeepSpeed config as JSON text, for drivers that hold the text "
           "(the Python package)">,
    Option<"configName", "config-name", "std::string", "\"<config>\"",
           "The name errors give config-json">,
    Option<"configBaseDir", "config-base-dir", "std::string", "",
           "Where relative engine config files of config-json resolve (the "
           "current directory when empty)">,
    Option<"worldSize", "world-size", "int64_t", "0",
           "Data-parallel ranks the config is checked for (0: the module's "
           "ds.world_size, else 1); set as the module's ds.world_size, which "
           "it must match when the module has one">,
    Option<"mixedPrecision", "mixed-precision", "std::string", "",
           "bf16, fp16 or no: resolves \"auto\" in bf16.enabled and "
           "fp16.enabled (not given: false, with a warning)">,
    ListOption<"overrides", "set", "std::string",
               "KEY=VALUE settings of the config (dotted paths; "
               "engines.NAME.PATH for one engine), applied before parsing">,
    Option<"dataMicroBatch", "data-micro-batch", "int64_t", "0",
           "The global micro-batch B that \"auto\" batch sizes and the "
           "batch consistency check use (0: the first batched argument's "
           "rows times the world size). ds-compile sets it to the first "
           "shape's B for the further shapes of one plan (a short last "
           "batch)">,
    ListOption<"engines", "engines", "std::string",
               "Without a config: engines as NAME=PREFIX, in order">,
    ListOption<"frozen", "frozen", "std::string",
               "Without a config: names of engines without an optimizer">,
    Option<"device", "device", "std::string", "",
           "The device the module is compiled for, cpu or cuda: set as the "
           "module's ds.target_device, which it must match when the module "
           "has one (empty: the module's, else cpu)">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DSCheckParameterUse : Pass<"ds-check-parameter-use", "::mlir::ModuleOp"> {
  let summary = "Refuse a traced model whose trainable parameters the forward never reads";
  let description = [{
    A trainable parameter (`requires_grad`, not in a frozen engine) that no
    `ds.get_param` of `@forward` reads gets no gradient and never trains. In
    a model made by `torch.jit.trace` (the importer marks it `ds.traced`:
    its archive holds `traced_inputs.pkl`) that is the sign of a frozen
    path: the trace kept only the branch its example took, as when a
    mixture of experts is traced on a batch that chose some of its experts.
    There it is an error naming the modules and their parameters, and what
    to do (script, export with `torch.cond`, trace on a batch that takes
    every path, or `requires_grad=False` for parameters unused on purpose).
    In a scripted or exported model, which keeps every branch, an unused
    submodule is legal: a warning.
  }];
}

def DSLowerDropout : Pass<"ds-lower-dropout", "::mlir::ModuleOp"> {
  let summary = "Training-mode dropout as the target device's kernel draws it";
  let description = [{
    Rewrites every training-mode dropout with a constant p in (0, 1) into
    the form whose mask is a value, drawn as eager PyTorch draws it on the
    module's `ds.target_device` from the same generator state, so that the
    backward reuses the forward's mask and -ds-rematerialize can replay it:

    - CPU (ATen's `_dropout_impl`): `aten::dropout(x, p, true)`, and an
      `aten::native_dropout` whose mask nothing reads (a core-ATen program's
      spelling), become

      ```mlir
      %bits = ds.aten "aten::bernoulli.p"(%x, %keep, %none)   // keep = 1 - p
      %noise = ds.aten "aten::div.Scalar"(%bits, %keep)
      %out = ds.aten "aten::mul.Tensor"(%x, %noise)
      ```

    - CUDA (`at::dropout` calls the fused kernel): `aten::dropout(x, p, true)`
      becomes `%out, %mask = ds.aten "aten::native_dropout"(%x, %p, %true)`,
      whose gradient rule reads the mask (`native_dropout_backward`).

    Dropout in eval mode, with p = 0 or 1, or with a p computed at run time
    is left alone (the autodiff rule of `aten::dropout` decides about it).
  }];
}

def DSAssignPrecision : Pass<"ds-assign-precision", "::mlir::ModuleOp"> {
  let summary = "Run every op in the dtype of its engine's fp16 / bf16 / torch_autocast config";
  let description = [{
    Reads the precision of every engine's typed config (`deepspeed`: the
    `bf16`, `fp16`, `torch_autocast` and `data_types.grad_accum_dtype`
    sections as `#ds.precision`) and rewrites
    every function of the module (`@forward`, `@forward_eval`, ...) so that
    each op runs in the dtype DeepSpeed with LibTorch 2.15 runs it in on
    CPU. Every conversion is an ordinary `ds.aten "aten::to.dtype"`, so the
    IR shows each decision, and `-ds-autodiff` (whose gradient of
    `aten::to.dtype` casts back) derives a backward in the same dtypes.

    An op belongs to the engine whose `module` is the longest prefix of the
    op's `module` (root ops to the root engine). Per engine:

    - no precision section: nothing changes (fp32);
    - `bf16.enabled` / `fp16.enabled`: the engine's float `ds.param`s and
      `ds.buffer`s, and their reads, become `bf16` / `f16` (DeepSpeed calls
      `module.bfloat16()` / `half()`). Every op of the engine first casts a
      float tensor operand of another dtype to the engine's dtype: inputs
      and activations of fp32 engines enter this way (DeepSpeed users cast
      their inputs themselves). Then the op runs in the engine's dtype with
      LibTorch's BFloat16 / Half CPU kernel. An op without a CPU kernel in
      that dtype (none of the registry's in LibTorch 2.15, forward and
      backward; or named by `no-kernel-ops`) has its operands cast to `f32`,
      runs in `f32`, and each float result is cast back (rounded) to the
      engine's dtype;
    - `torch_autocast.enabled` (`dtype` bfloat16, the CPU default, or
      float16): parameters stay `f32`; ops in torch.autocast's CPU
      lower-precision list (linear, matmul, mm, bmm, addmm, baddbmm, addbmm,
      conv1d/2d/3d, conv_transpose2d, prelu, scaled_dot_product_attention,
      ...) cast their float operands to `torch_autocast.dtype`, ops in its
      fp32 list (mse_loss, cross_entropy_loss, nll_loss, kl_div, ...) to
      `f32`, promote ops (cat, stack, index_copy) to the widest; every other
      op runs in its inputs' dtype (softmax, layer_norm, sum, mean of bf16 /
      f16 inputs stay bf16 / f16).

    The lists are those of the module's target device (`ds.target_device`,
    CPU when absent). CPU: include/ds/Dialect/DS/Utils/PrecisionTables.def,
    probed from LibTorch 2.15 and checked against it by test/precision.
    CUDA: torch.autocast("cuda")'s lists as the build's LibTorch declares
    them in ATen/autocast_mode.h (read when the build is configured): its
    lower-precision list (the CPU's plus addmv, addr, einsum, mv,
    linalg_vecdot, the RNN cells, ...), its fp32 list (exp, log, pow,
    rsqrt, softplus, layer_norm, group_norm, rms_norm, the losses, ...) and
    the norm overloads it redispatches in f32, its fp32_set_opt_dtype list
    (softmax, log_softmax, sum, cumsum, ...: the first operand, when
    bf16 / f16 and the op's `dtype` is None, is cast to `f32`, as
    `dtype=torch.float32` would) and its promote list; cross_entropy_loss
    and nll_loss_nd run in `f32` (their parts are listed);
    binary_cross_entropy is an error in an autocast engine (torch refuses
    it). No CUDA op lacks a bf16 / f16 kernel. An op
    whose dimensioned float operands have different dtypes (a bf16 linear
    output added to an f32 residual) gets the narrower ones cast up first,
    which is what LibTorch's type promotion does inside the op. Result types
    are then re-inferred in program order (an explicit `dtype` argument
    decides; else the promoted float type of the float tensor operands),
    with `ds.if` results and the functions' result types: the loss of a
    bf16 engine is bf16.

    The engine records the decision: `precision` (`#ds.precision_mode`:
    bf16, fp16 or autocast), `grad_accum_dtype`, `autocast_dtype`
    (autocast) and `loss_scaler` (the config's `#ds.loss_scaler`; fp16:
    kind, scale, scale_window, hysteresis, consecutive_hysteresis,
    min_scale, every default resolved; fp16 autocast: kind grad_scaler
    with torch.amp.GradScaler's defaults, scale 2^16 and scale_window
    2000), and a remark
    says what happened:

    ```
    remark: fp16: 6 parameters and 0 buffers stored in f16; 14 ops in f16,
        0 ops computed in f32 and rounded to f16
    ```

    An engine without a typed config is an error naming it. Runs after
    `-ds-assign-engines` attached the configs and before `-ds-autodiff`;
    running it after is an error.
  }];
  let options = [
    ListOption<"noKernelOps", "no-kernel-ops", "std::string",
               "Operators (base names or qualified overloads) computed in f32 "
               "by native bf16 / fp16 engines as if LibTorch had no kernel "
               "for them in that dtype on the target device, besides "
               "PrecisionTables.def's on CPU (for LibTorch builds with fewer "
               "kernels, and for tests)">
  ];
  let statistics = [
    Statistic<"numCasts", "casts", "aten::to.dtype casts inserted">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect",
                           "::mlir::func::FuncDialect"];
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
    Option<"gradScale", "grad-scale", "double", "0.0",
           "Seed of the backward (0: 1 / the engines' "
           "gradient_accumulation_steps, 1 when no engine has a config)">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DSLowerOptimizer : Pass<"ds-lower-optimizer", "::mlir::ModuleOp"> {
  let summary = "Lower each engine's optimizer, schedule and clipping to IR";
  let description = [{
    Reads the typed config (`deepspeed`) of every `ds.engine` that is not
    frozen and creates `func.func @step()`, the work of the gradient
    accumulation boundary: one `ds.optimizer_step` per trainable engine, in
    engine order, with every hyperparameter as `-ds-assign-engines` resolved
    it from the DeepSpeed config: `"type": "Adam"` became `adamw` unless
    `"adam_w_mode": false` makes it `adam`, `"AdamW"` is `adamw`, `"SGD"`
    is `sgd`; DeepSpeed's defaults fill what the config leaves out
    (`weight_decay` 0, or 0.01 for `torch_adam` AdamW; `gradient_clipping`
    1.0); the config's `#ds.scheduler` becomes the op's `scheduler`, with
    `warmup_max_lr` resolved to the optimizer's lr where DeepSpeed does.

    ```mlir
    func.func @step() {
      ds.optimizer_step @model {type = adamw, lr = 0.001, betas = [0.9, 0.999],
          eps = 1.0e-08, weight_decay = 0.01, momentum = 0.0, dampening = 0.0,
          nesterov = false, gradient_clipping = 1.0}
      return
    }
    ```

    Rejects, with an error on the engine naming the config key: an engine
    without a typed config, a trainable engine whose config has no
    `optimizer` (it should be frozen), and Adam's `eps` 0. A module that
    already has a `@step` is an error. Run `-ds-zero-partition` afterwards to
    place the collectives around the updates.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect",
                           "::mlir::func::FuncDialect"];
}

def DSZeroPartition : Pass<"ds-zero-partition", "::mlir::ModuleOp"> {
  let summary = "Lay engines out in flat buffers, cut buckets, place ZeRO's collectives";
  let description = [{
    For every trainable engine (and every frozen stage 3 engine, see
    below), reads its ZeRO stage from its typed config (`#ds.zero`, the
    `zero_optimization` section: `stage` 0 to 3) and:

    1. lays its trainable parameters (`requires_grad`, engine not frozen) out
       in one flat buffer, in the order their gradients are complete in the
       backward of `func` (a parameter whose last `ds.grad` comes first goes
       first; a `ds.grad` inside a `ds.if` counts at the `ds.if`; parameters
       without a `ds.grad` go last; ties keep declaration order), so that the
       first buckets are ready first;
    2. cuts the buffer into buckets of at most `reduce_bucket_size` parameter
       elements (stage 0) or `min(reduce_bucket_size, allgather_bucket_size)`
       (stages 1-3), never splitting a parameter (a parameter larger than
       that has a bucket of its own), and pads each bucket with zeros at its
       end to a multiple of the world size. At stage 3 the parameters of at
       most `stage3_param_persistence_threshold` elements go, after the
       others, into buckets of their own marked `persistent`;
    3. records the layout (`zero_stage` and `flat_numel` on the `ds.engine`,
       `flat_offset` on each trainable `ds.param`, one `ds.bucket` per bucket)
       and places the collectives, as docs/plan-format.md fixes them:
       - stage 0: in `@step`, `ds.all_reduce` of every bucket, then per
         engine the `ds.wait`s and its `ds.optimizer_step`;
       - stage 1: in `@step`, `ds.reduce_scatter` of every bucket, then per
         engine the waits, its update and `ds.all_gather` of every bucket,
         whose waits end `@step`;
       - stage 2: in `func`, a `ds.reduce_scatter` of each bucket right after
         the top-level op that holds the last `ds.grad` writing into it (a
         bucket no `ds.grad` writes is reduced at the end of the backward),
         and every wait at the end of the backward; in `@step` the update,
         then the all-gathers and their waits;
       - stage 3: the reductions as at stage 2; in `@step` the update, then
         the all-gathers of the persistent buckets only. Every other bucket
         is sharded: in `func` and in `eval-func`, a `ds.all_gather` and its
         `ds.wait` go right before the first top-level op that reads one of
         its parameters (a `ds.get_param`, or a use of its result, at any
         depth: a read inside a `ds.if` gathers before the `ds.if`, with a
         remark naming the module) and a `ds.release` right after the last
         one, in the forward and again in the backward. The backward reads
         the parameters again through `ds.get_param`s of its own, which the
         pass makes. A bucket stays gathered across the turn instead when
         the release-everything schedule would gather at most
         `stage3_max_reuse_distance` parameter elements of its engine
         between its forward release and its backward gather (0 always
         releases).
       - stage 3 leaf modules (`zero_optimization.leaf_module`: classes,
         names, name suffixes; docs/leaf-modules.md): all parameters of an
         outermost leaf's subtree go into one sharded bucket of their own,
         marked `leaf "<path>"`, whatever its size and the persistence
         threshold, with a remark naming the module, the config entry that
         matched and the bucket. It is gathered before the first top-level op
         that reads the leaf (so before its `ds.if`s, without the remark for
         routed modules when every op in the `ds.if` belongs to the leaf),
         released after the last, and reduce-scattered once.
         A user-given entry that matches no module of the engine is an
         error naming the key; DeepSpeed's default classes never are.
         Stages 0-2 ignore leaf modules.
       With several engines, every engine's reductions start before the
       first engine waits, so their communication overlaps.

    Communication dtypes: every bucket of a native bf16 / fp16 engine
    (`bf16.enabled` / `fp16.enabled`) gets `dtype` =
    `communication_data_type` (default: the model dtype). Under
    `torch_autocast`, the parameters owned directly by a module whose class
    matches an entry of `lower_precision_safe_modules` (default
    torch.nn.Linear, Conv1d, Conv2d, Conv3d; exact class, bare, dotted or
    public alias, as leaf classes match) communicate in the autocast dtype,
    all others in f32: each dtype fills buckets of its own (one bucket never
    mixes dtypes; the size rules above apply per dtype), a bucket taking its
    place in the flat buffer when it closes. A stage 3 leaf bucket holding
    safe and other parameters communicates in f32. fp32 engines get no
    `dtype`. A remark on each engine with dtypes names its buckets, their
    dtype and why.

    A frozen engine (no optimizer) whose config asks for stage 3 is laid out
    too, with all its parameters (`requires_grad` or not) and the same
    bucketing rules; its sharded buckets are gathered and released as
    above, in the forward, the eval function and, where activation
    gradients flow through the engine, the backward. It has no
    reduce-scatter and nothing in `@step` (its persistent buckets are whole
    from the start). A frozen engine at stages 0-2 has nothing to shard and
    is left alone.

    Run after `-ds-autodiff` (stages 2 and 3 need the backward) and
    `-ds-lower-optimizer` (the collectives go around the
    `ds.optimizer_step`s in `@step`); `-ds-engine-backward` then marks each
    engine's share of the backward and `-ds-schedule-collectives` places
    the waits as each engine's `overlap_comm` asks. docs/zero.md shows each
    stage's IR.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"forward\"",
           "The training function whose backward stages 2 and 3 reduce in">,
    Option<"evalFuncName", "eval-func", "std::string", "\"forward_eval\"",
           "The eval function, where stage 3 gathers too">
  ];
  let statistics = [
    Statistic<"numBuckets", "buckets", "Buckets made">,
    Statistic<"numCollectives", "collectives", "Collectives placed">,
    Statistic<"paddingElements", "padding-elements",
              "Zero elements added to fill buckets to the world size">,
    Statistic<"numReleases", "releases", "Stage 3 releases placed">,
    Statistic<"numLeafModules", "leaf-modules",
              "Stage 3 leaf modules, one bucket each">,
    Statistic<"numBackwardReads", "backward-reads",
              "Stage 3 parameters read again in the backward">,
    Statistic<"numKeptBuckets", "kept-buckets",
              "Stage 3 buckets kept gathered across the forward/backward "
              "turn (stage3_max_reuse_distance)">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect",
                           "::mlir::func::FuncDialect"];
}

def DSScaleLoss : Pass<"ds-scale-loss", "::mlir::ModuleOp"> {
  let summary = "Multiply the backward's seed by the fp16 loss scale";
  let description = [{
    For the trainable engine that scales its loss (config `fp16.enabled`:
    DeepSpeed's loss scaling, static `fp16.loss_scale` or dynamic from
    2^`initial_scale_power`; or `torch_autocast` with dtype float16: the
    `torch.amp.GradScaler` DeepSpeed adds, from 2^16), places
    `ds.loss_scale @engine : tensor<f32>`
    right after the `ds.backward_begin` of `func` and multiplies every
    backward seed (the `ds.constant` that `-ds-autodiff` made for a loss,
    marked `ds.backward_seed`) by it, in f32, cast back to the loss's dtype:

    ```mlir
    ds.backward_begin
    %scale = ds.loss_scale @model : tensor<f32>
    %seed = ds.constant dense<5.000000e-01> : tensor<f16> {ds.backward_seed}
    %s32 = ds.aten "aten::to.dtype"(%seed, %c6, %false, %false, %none) ...
    %m = ds.aten "aten::mul.Tensor"(%s32, %scale) ...
    %s = ds.aten "aten::to.dtype"(%m, %c5, %false, %false, %none) ...
    ```

    An f32 seed is multiplied directly. A scale the loss's dtype cannot
    hold (2^32 in f16) becomes inf, as in DeepSpeed: the overflow check at
    the engine's `ds.optimizer_step` then skips the step and lowers the
    scale. Every gradient of the backward is thus scaled once; the runtime
    unscales them at the update.

    Rejects: a scaled (fp16 or fp16 autocast) engine next to any other
    trainable engine on the one backward (the shared seed would carry its
    scale into the other's gradients; DeepSpeed scales each engine's own
    loss), an engine that is already scaled, and a backward without a
    marked seed (run the pass right after `-ds-autodiff`, before
    `-canonicalize` merges the seed with other constants). Modules without
    such engines are left unchanged.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"forward\"",
           "The training function whose backward is seeded">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect",
                           "::mlir::func::FuncDialect"];
}

def DSRematerialize : Pass<"ds-rematerialize", "::mlir::ModuleOp"> {
  let summary = "Recompute checkpointed modules' activations in the backward";
  let description = [{
    Activation checkpointing as a rewrite. The module attribute
    `ds.checkpoint_modules` lists module paths (as ops carry them in
    `module`); each names a segment: the ops of the forward of `func` that
    ran in that module or below it. A value a segment computes and the
    backward reads is no longer kept from the forward to the backward:
    the ops that compute it are cloned, from the segment's inputs, right
    before the first backward op that reads one of the segment's values,
    and the backward reads the clones. The segment's inputs and outputs
    (values used by the forward outside it, or returned) stay alive as
    before, which is what `torch.utils.checkpoint` keeps.

    ```mlir
    %h = ds.aten "aten::linear"(%x, %w1, %b1) {module = "block.fc1"} ...
    %a = ds.aten "aten::gelu"(%h, %approx) {module = "block"} ...
    %y = ds.aten "aten::linear"(%a, %w2, %b2) {module = "block.fc2"} ...
    ...
    ds.backward_begin
    ...
    // with ds.checkpoint_modules = ["block"]: %h and %a are recomputed here
    %h2 = ds.aten "aten::linear"(%x, %w1, %b1) {module = "block.fc1"} ...
    %a2 = ds.aten "aten::gelu"(%h2, %approx) {module = "block"} ...
    %ga = ds.aten "aten::matmul"(%gy, %w2) {module = "block.fc2"} ...
    %gh = ds.aten "aten::gelu_backward"(%ga, %h2, %approx) ...
    ```

    Pure operators (the registry's `Pure` effect) and lists built from them
    are recomputed; random draws (dropout's `bernoulli`) are replayed:
    `ds.rng_state_get` saves the generator state before the segment's first
    draw, and the backward sets it before the recomputation and sets its
    own back after, so the trajectory is bitwise the one without
    checkpointing. Draws stay kept from the forward where a replay could
    not repeat them (in place, inside a `ds.if`, or with a draw outside the
    segment between two of its draws), as do ops with side effects and
    `ds.if`. Each segment gets a remark saying how many ops it recomputes,
    what it keeps and how many draws it replays.

    Run it after `-cse` (which would merge the clones back into the
    forward's ops) and before `-ds-zero-partition` (which gathers ZeRO-3
    parameters for the recomputation as for any backward op). Rejects: a
    path that is empty (the root module: nothing outside it would keep its
    inputs), one inside another listed path, and one that runs no op in the
    forward. A function without `ds.backward_begin` or a module without
    the attribute is left unchanged.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"forward\"",
           "The training function whose forward is checkpointed">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect",
                           "::mlir::func::FuncDialect"];
}

def DSEngineBackward : Pass<"ds-engine-backward", "::mlir::ModuleOp"> {
  let summary = "Mark each trainable engine's share of the joint backward";
  let description = [{
    In the backward of `func` (after `ds.backward_begin`), for every engine
    that is not frozen and has `ds.grad` ops there, inserts a
    `ds.backward_prologue @engine` right before the first top-level op that
    holds a `ds.grad` of one of its parameters (a `ds.grad` inside a `ds.if`
    counts at the `ds.if`) and a `ds.backward_epilogue @engine` after the
    last, and after the engine's `ds.reduce_scatter`s that
    `-ds-zero-partition` placed there. The engine's reductions all end
    before its epilogue: a `ds.reduce_scatter` of a bucket that no gradient
    writes (placed at the end of the backward) moves up to just before the
    epilogue, and every wait of the engine's reductions that comes later
    moves there too, so the IR keeps the marker rules of
    docs/plan-format.md (`-ds-schedule-collectives` then decides how early
    the waits go). Frozen engines get no markers, and neither does an
    engine without gradients.

    ```mlir
    ds.backward_begin
    ...
    ds.backward_prologue @e2
    ds.grad @e2.fc2.weight, %g : tensor<4x12xf32>
    ...
    ds.backward_epilogue @e2
    ds.backward_prologue @e1
    ...
    ```

    With one joint backward for a shared loss, the engines whose outputs
    enter the loss last are differentiated first, and each engine's epilogue
    (DeepSpeed's `_backward_epilogue`, which users of several engines call
    by hand) lands as soon as its gradients are complete. Run after
    `-ds-zero-partition` and before `-ds-schedule-collectives`.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"forward\"",
           "The training function">
  ];
  let statistics = [
    Statistic<"numMarked", "engines", "Engines given a prologue and an epilogue">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DSScheduleCollectives : Pass<"ds-schedule-collectives", "::mlir::ModuleOp"> {
  let summary = "Place the waits (and prefetch the gathers) as overlap_comm asks";
  let description = [{
    Moves the collectives that `-ds-zero-partition` placed, per engine, as
    its `zero_optimization.overlap_comm` (in its typed config) asks (DeepSpeed's default: true at
    stage 3, false otherwise), in the training function `func`, the eval
    function `eval-func` and `@step`:

    - overlap off: every collective is waited right after it starts; nothing
      overlaps.
    - overlap on: a reduce-scatter in the backward stays right after its
      bucket's last gradient and is waited right before its engine's
      `ds.backward_epilogue` (as late as the engine's share of the backward
      allows), or at the end of the function when the backward has no
      markers; collectives in `@step` keep their places (every
      engine's reductions start before the first update); each all-gather
      of a sharded (stage 3) bucket is prefetched: moved up, past compute
      and other collectives, as far as it may go, and waited where it was,
      right before the bucket's first read. It never moves above another
      all-gather (gathers start in the order they are needed), above the
      bucket's previous `ds.release`, or above `ds.backward_begin` (the
      runtime's forward and backward are separate calls), and it stops
      where it would bring the engine's gathers that are started but not
      yet waited above `stage3_prefetch_bucket_size` elements, or the
      elements of the engine's gathered sharded buckets above
      `stage3_max_live_parameters`.

    The result is deterministic: the gathers are moved one at a time in
    program order. Run after `-ds-zero-partition`; `-ds-print-schedule`
    shows the result.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"forward\"",
           "The training function">,
    Option<"evalFuncName", "eval-func", "std::string", "\"forward_eval\"",
           "The eval function">
  ];
  let statistics = [
    Statistic<"numPrefetched", "prefetched",
              "All-gathers started ahead of the op before their wait">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DSVerifyCollectives : Pass<"ds-verify-collectives", "::mlir::ModuleOp"> {
  let summary = "Prove that every rank issues the same collectives in the same order";
  let description = [{
    Checks, in the training function `func`, the eval function `eval-func`
    and `@step`, what keeps the ranks of a data-parallel job in step and
    every read of a sharded parameter valid, and fails with an error naming
    the bucket, the parameter and its module otherwise:

    - no collective, `ds.wait` or `ds.release` lies inside a `ds.if` (a
      data-dependent branch: ranks that take different branches would
      issue different collectives and deadlock, the ZeRO-3 hang of MoE
      models);
    - every token is waited exactly once, later in the same block;
    - stage 3: the gathers, waits and releases of a sharded bucket
      alternate (`ds.all_gather`, `ds.wait`, `ds.release`); every read of
      one of its parameters (`ds.get_param` or a use of its result, at any
      depth) lies after the wait of a gather of the bucket and before its
      release; every bucket is released before the function returns; a
      persistent bucket is gathered only in `@step` and a sharded one never
      there. A read inside a `ds.if` that is not covered names the module
      the branch belongs to as a ZeRO-3 leaf-module candidate;
    - stages 2 and 3: no `ds.grad` writes into a bucket after the bucket's
      reduce-scatter, and every bucket is reduce-scattered exactly once in
      `func`;
    - in `@step`, each engine's `ds.optimizer_step` comes after the waits of
      its reductions, and its all-gathers after the update;
    - the engine backward markers of `-ds-engine-backward`, as the plan
      validator checks them (docs/plan-format.md): only at the top level of
      the backward of `func`; none at all, or exactly one
      `ds.backward_prologue` and one `ds.backward_epilogue` for every
      trainable engine with `ds.grad` ops, the prologue before the engine's
      first gradient, the epilogue after its last gradient and after the
      `ds.wait` of each of its reduce-scatters, and no reduce-scatter of the
      engine after its epilogue.

    It changes nothing; `ds-compile` runs it last.
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"forward\"",
           "The training function">,
    Option<"evalFuncName", "eval-func", "std::string", "\"forward_eval\"",
           "The eval function">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DSIfTraining : Pass<"ds-if-training", "::mlir::ModuleOp"> {
  let summary = "Run a pipeline when some engine trains";
  let description = [{
    Runs `pipeline` (a `builtin.module(...)` pipeline) on the module when
    some `ds.engine` is not `frozen`, and does nothing otherwise: the
    compile pipeline (`ds-compile-pipeline`) derives the backward, the
    update and the collectives only for a model that has something to train.
  }];
  let options = [
    Option<"pipelineText", "pipeline", "std::string", "",
           "The passes to run when an engine trains, as a textual "
           "builtin.module(...) pipeline">
  ];
}

def DSPrintSchedule : Pass<"ds-print-schedule", "::mlir::ModuleOp"> {
  let summary = "Print the per-rank order of compute and collectives";
  let description = [{
    Prints, for the training function `func`, the eval function `eval-func`
    (when it has collectives: ZeRO stage 3 gathers there) and `@step`, the
    order in which every rank runs compute and collectives, numbering the
    lines; engine backward markers have a line each (`backward_prologue
    @student`). Runs of compute ops are compressed (`forward: 17 ops`, `backward:
    22 ops (through grad @fc1.bias)`, naming the last `ds.grad` of the run);
    a `ds.if` counts as one op. Each collective names its engine, its bucket
    and the bucket's elements (`persistent` for stage 3's persistent
    buckets) and points at the line of its wait, so the overlap
    `-ds-schedule-collectives` chose can be read off: a collective is in
    flight from its line to its wait. Stage 3 gathers and releases of
    sharded buckets add the elements gathered after them (`; live 48`), and
    a last line gives the peak. The header says whether the order is the
    same on every rank (it is when no collective, wait or release lies
    inside a `ds.if`, which the verifier guarantees). The IR is not changed.

    ```
    schedule of @forward (identical on every rank: no collective is inside a ds.if)
       1  forward: 17 ops
       2  backward: 22 ops (through grad @fc1.bias)
       3  reduce_scatter @model bucket 0 (84 elements) -> wait at 6
       4  backward: 1 op (through grad @fc1.weight)
       5  reduce_scatter @model bucket 1 (128 elements) -> wait at 7
       6  wait reduce_scatter @model bucket 0
       7  wait reduce_scatter @model bucket 1
    ```
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"forward\"",
           "The training function to print besides @step">,
    Option<"evalFuncName", "eval-func", "std::string", "\"forward_eval\"",
           "The eval function, printed when it has collectives">
  ];
}

#endif // DS_DIALECT_DS_TRANSFORMS_PASSES_TD
