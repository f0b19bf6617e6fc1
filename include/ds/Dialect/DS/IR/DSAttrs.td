//===- DSAttrs.td - ds dialect attributes ------------------*- tablegen -*-===//
//
// An engine's DeepSpeed config as typed attributes: what the passes read,
// every default resolved. `-ds-assign-engines` builds them from the JSON
// (docs/config.md); parameters equal to DeepSpeed's default are elided when
// printed.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_IR_DSATTRS_TD
#define DS_DIALECT_DS_IR_DSATTRS_TD

include "ds/Dialect/DS/IR/DSDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def DS_PrecisionMode : I32EnumAttr<"PrecisionMode",
    "an engine's mixed-precision mode", [
      I32EnumAttrCase<"FP32", 0, "fp32">,
      I32EnumAttrCase<"BF16", 1, "bf16">,
      I32EnumAttrCase<"FP16", 2, "fp16">,
      I32EnumAttrCase<"Autocast", 3, "autocast">]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}

def DS_OptimizerKind : I32EnumAttr<"OptimizerKind",
    "an optimizer as the runtime applies it", [
      I32EnumAttrCase<"Adam", 0, "adam">,
      I32EnumAttrCase<"AdamW", 1, "adamw">,
      I32EnumAttrCase<"SGD", 2, "sgd">]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}

def DS_SchedulerKind : I32EnumAttr<"SchedulerKind",
    "a DeepSpeed learning-rate schedule", [
      I32EnumAttrCase<"WarmupLR", 0>,
      I32EnumAttrCase<"WarmupDecayLR", 1>,
      I32EnumAttrCase<"WarmupCosineLR", 2>]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}

def DS_WarmupType : I32EnumAttr<"WarmupType", "the shape of a warmup", [
      I32EnumAttrCase<"Log", 0, "log">,
      I32EnumAttrCase<"Linear", 1, "linear">]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}

def DS_LossScalerKind : I32EnumAttr<"LossScalerKind", "a loss scaler", [
      I32EnumAttrCase<"Static", 0, "static">,
      I32EnumAttrCase<"Dynamic", 1, "dynamic">,
      I32EnumAttrCase<"GradScaler", 2, "grad_scaler">]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}

//===----------------------------------------------------------------------===//
// Enum attributes
//===----------------------------------------------------------------------===//

def DS_PrecisionModeAttr
    : EnumAttr<DS_Dialect, DS_PrecisionMode, "precision_mode"> {
  let summary = "an engine's mixed-precision mode: `#ds.precision_mode<bf16>`";
  let assemblyFormat = "`<` $value `>`";
}

def DS_OptimizerKindAttr
    : EnumAttr<DS_Dialect, DS_OptimizerKind, "optimizer_kind"> {
  let summary = "an optimizer as the runtime applies it: "
                "`#ds.optimizer_kind<adamw>`";
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

/// A double printed so that it reads back exactly ("0.001", "1.0e-08").
class DS_F64Parameter<string default>
    : DefaultValuedParameter<"::mlir::ds::F64",
                             "::mlir::ds::F64(" # default # ")"> {
  let parser = "::mlir::ds::parseF64($_parser)";
  let printer = "::mlir::ds::printF64($_printer, $_self)";
}

/// An optional double (absent: the default the description names).
def DS_OptionalF64Parameter
    : OptionalParameter<"std::optional<::mlir::ds::F64>"> {
  let parser = "::mlir::ds::parseOptionalF64($_parser)";
  let printer = "::mlir::ds::printF64($_printer, *$_self)";
}

def DS_OptionalI64Parameter : OptionalParameter<"std::optional<int64_t>"> {
  let printer = "$_printer << *$_self";
}

class DS_BoolParameter<string default>
    : DefaultValuedParameter<"bool", default> {
  let parser = "::mlir::ds::parseBool($_parser)";
  let printer = "$_printer << ($_self ? \"true\" : \"false\")";
}

class DS_Attr<string name, string attrMnemonic>
    : AttrDef<DS_Dialect, name> {
  let mnemonic = attrMnemonic;
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Sections
//===----------------------------------------------------------------------===//

def DS_LeafModulesAttr : DS_Attr<"LeafModules", "leaf_modules"> {
  let summary = "zero_optimization.leaf_module: ZeRO-3 leaf module specs";
  let description = [{
    Class names (bare or dotted), module paths and path suffixes of the
    engine's ZeRO-3 leaf modules (docs/leaf-modules.md). Without `classes`,
    DeepSpeed's default class list applies, and its entries need not match a
    module.

    ```mlir
    #ds.leaf_modules<classes = ["SparseMoeBlock"], names = ["moe"]>
    ```
  }];
  let parameters = (ins OptionalParameter<"::mlir::ArrayAttr">:$classes,
                        OptionalParameter<"::mlir::ArrayAttr">:$names,
                        OptionalParameter<"::mlir::ArrayAttr">:$name_suffixes);
}

def DS_ZeroAttr : DS_Attr<"Zero", "zero"> {
  let summary = "zero_optimization: an engine's ZeRO stage and buckets";
  let description = [{
    The `zero_optimization` keys the passes read, resolved (`overlap_comm`
    is true by default at stage 3 only). Elided parameters have DeepSpeed's
    defaults. `offload_optimizer`: `offload_optimizer.device` is "cpu"
    (ZeRO-Offload, stages 1-3), `offload_pin_memory` its `pin_memory`.

    ```mlir
    #ds.zero<stage = 3, overlap_comm = true, reduce_bucket_size = 128,
             stage3_param_persistence_threshold = 16>
    ```
  }];
  let parameters = (ins
    DefaultValuedParameter<"int64_t", "0">:$stage,
    DS_BoolParameter<"false">:$overlap_comm,
    DefaultValuedParameter<"int64_t", "500000000">:$reduce_bucket_size,
    DefaultValuedParameter<"int64_t", "500000000">:$allgather_bucket_size,
    DefaultValuedParameter<"int64_t", "50000000">:$stage3_prefetch_bucket_size,
    DefaultValuedParameter<"int64_t", "100000">:
        $stage3_param_persistence_threshold,
    DefaultValuedParameter<"int64_t", "1000000000">:$stage3_max_live_parameters,
    DefaultValuedParameter<"int64_t", "1000000000">:$stage3_max_reuse_distance,
    DS_BoolParameter<"false">:$stage3_gather_16bit_weights_on_model_save,
    OptionalParameter<"LeafModulesAttr">:$leaf_module,
    DS_BoolParameter<"false">:$offload_optimizer,
    DS_BoolParameter<"false">:$offload_pin_memory);
  let extraClassDeclaration = [{
    /// Every key at DeepSpeed's default (stage 0).
    static ZeroAttr getDefault(::mlir::MLIRContext *context);
  }];
}

def DS_LossScalerAttr : DS_Attr<"LossScaler", "loss_scaler"> {
  let summary = "an engine's loss scaler, every default resolved";
  let description = [{
    `static` or `dynamic`: DeepSpeed's fp16 scaler (`fp16.loss_scale`,
    2^`initial_scale_power`, `loss_scale_window`, `hysteresis`,
    `consecutive_hysteresis`, `min_loss_scale`); `grad_scaler`: the
    `torch.amp.GradScaler` DeepSpeed makes for fp16 autocast (2^16, growth
    interval 2000, hysteresis 1, no floor).

    ```mlir
    #ds.loss_scaler<kind = dynamic>
    #ds.loss_scaler<kind = grad_scaler, scale_window = 2000, hysteresis = 1,
                    min_scale = 0.0>
    ```
  }];
  let parameters = (ins
    EnumParameter<DS_LossScalerKind>:$kind,
    DS_F64Parameter<"65536.0">:$scale,
    DefaultValuedParameter<"int64_t", "1000">:$scale_window,
    DefaultValuedParameter<"int64_t", "2">:$hysteresis,
    DS_BoolParameter<"false">:$consecutive_hysteresis,
    DS_F64Parameter<"1.0">:$min_scale);
}

def DS_PrecisionAttr : DS_Attr<"Precision", "precision"> {
  let summary = "an engine's fp16 / bf16 / torch_autocast sections";
  let description = [{
    The mixed-precision mode (`fp16.enabled`, `bf16.enabled`,
    `torch_autocast.enabled`; `fp32` without), the dtypes as the config gives
    them (`grad_accum_dtype`: `data_types.grad_accum_dtype`,
    `communication_data_type`; absent: the model dtype), the autocast dtype
    and `lower_precision_safe_modules` (absent: torch.nn.Linear, Conv1d,
    Conv2d, Conv3d), and the loss scaler of an fp16 or fp16 autocast engine.

    ```mlir
    #ds.precision<mode = bf16>
    #ds.precision<mode = fp16, loss_scaler = #ds.loss_scaler<kind = dynamic>>
    #ds.precision<mode = autocast, autocast_dtype = bf16>
    ```

    The verifier checks that `autocast_dtype` and the safe modules come with
    `autocast` only, the loss scaler with `fp16` (kind `static` or
    `dynamic`) or f16 autocast (kind `grad_scaler`) only and always, and the
    dtypes (f32, f16, bf16; autocast: f16 or bf16).
  }];
  let parameters = (ins
    DefaultValuedParameter<"PrecisionMode", "PrecisionMode::FP32">:$mode,
    OptionalParameter<"::mlir::Type">:$grad_accum_dtype,
    OptionalParameter<"::mlir::Type">:$communication_data_type,
    OptionalParameter<"::mlir::Type">:$autocast_dtype,
    OptionalParameter<"::mlir::ArrayAttr">:$lower_precision_safe_modules,
    OptionalParameter<"LossScalerAttr">:$loss_scaler);
  let extraClassDeclaration = [{
    /// The dtype of the engine's parameters: bf16 / f16 in the native modes,
    /// else f32.
    ::mlir::Type getModelDtype() const;
    /// data_types.grad_accum_dtype, else the model dtype.
    ::mlir::Type getResolvedGradAccumDtype() const;
    /// communication_data_type, else the model dtype.
    ::mlir::Type getResolvedCommunicationDtype() const;
  }];
}

def DS_OptimizerAttr : DS_Attr<"Optimizer", "optimizer"> {
  let summary = "an engine's optimizer, as the runtime applies it";
  let description = [{
    `kind` is `adamw` when weight decay is decoupled (`AdamW`, and `Adam`
    unless `adam_w_mode` is false), `adam` for L2 decay, `sgd`; the other
    parameters are the optimizer's `params` with DeepSpeed's defaults
    resolved (`weight_decay` 0.01 for `torch_adam` AdamW).

    ```mlir
    #ds.optimizer<kind = adamw, lr = 0.002, weight_decay = 0.01>
    ```
  }];
  let parameters = (ins
    EnumParameter<DS_OptimizerKind>:$kind,
    DS_F64Parameter<"0.001">:$lr,
    DS_F64Parameter<"0.9">:$beta1,
    DS_F64Parameter<"0.999">:$beta2,
    DS_F64Parameter<"1.0e-8">:$eps,
    DS_F64Parameter<"0.0">:$weight_decay,
    DS_F64Parameter<"0.0">:$momentum,
    DS_F64Parameter<"0.0">:$dampening,
    DS_BoolParameter<"false">:$nesterov);
}

def DS_SchedulerAttr : DS_Attr<"Scheduler", "scheduler"> {
  let summary = "an engine's learning-rate schedule";
  let description = [{
    The `scheduler` section (docs/config.md). `warmup_max_lr` absent: the
    optimizer's lr (WarmupLR); `total_num_steps` is required by
    WarmupDecayLR and WarmupCosineLR.

    ```mlir
    #ds.scheduler<kind = WarmupLR, warmup_min_lr = 0.0001, warmup_num_steps = 3>
    ```
  }];
  let parameters = (ins
    EnumParameter<DS_SchedulerKind>:$kind,
    DS_F64Parameter<"0.0">:$warmup_min_lr,
    DS_OptionalF64Parameter:$warmup_max_lr,
    DefaultValuedParameter<"int64_t", "1000">:$warmup_num_steps,
    DefaultValuedParameter<"WarmupType", "WarmupType::Log">:$warmup_type,
    DS_OptionalI64Parameter:$total_num_steps,
    DS_F64Parameter<"0.0">:$warmup_min_ratio,
    DS_F64Parameter<"0.0001">:$cos_min_ratio);
}

def DS_EngineConfigAttr : DS_Attr<"EngineConfig", "engine_config"> {
  let summary = "an engine's DeepSpeed config, typed";
  let description = [{
    What the passes and the plan need from an engine's config, resolved:
    the batch sizes (`train_batch_size` = micro-batch x accumulation steps x
    world size), `seed`, `gradient_clipping` (0: off), the optimizer (absent:
    the engine is frozen) and its schedule, the ZeRO section (absent: stage 0
    with DeepSpeed's defaults) and the precision (absent: fp32).

    ```mlir
    ds.engine @model {module = "", deepspeed = #ds.engine_config<
        train_batch_size = 8, train_micro_batch_size_per_gpu = 4,
        gradient_accumulation_steps = 2,
        optimizer = #ds.optimizer<kind = adamw>,
        zero = #ds.zero<stage = 2>>}
    ```
  }];
  let parameters = (ins
    DefaultValuedParameter<"int64_t", "1">:$train_batch_size,
    DefaultValuedParameter<"int64_t", "1">:$train_micro_batch_size_per_gpu,
    DefaultValuedParameter<"int64_t", "1">:$gradient_accumulation_steps,
    DS_OptionalI64Parameter:$seed,
    DS_F64Parameter<"1.0">:$gradient_clipping,
    OptionalParameter<"OptimizerAttr">:$optimizer,
    OptionalParameter<"SchedulerAttr">:$scheduler,
    OptionalParameter<"ZeroAttr">:$zero,
    OptionalParameter<"PrecisionAttr">:$precision);
  let extraClassDeclaration = [{
    /// Whether the engine has no optimizer (no gradients, no update).
    bool isFrozen() const { return !getOptimizer(); }
    /// The ZeRO section; DeepSpeed's defaults (stage 0) when absent.
    ZeroAttr getZeroOrDefault() const;
    /// The precision section; fp32 when absent.
    PrecisionAttr getPrecisionOrDefault() const;
  }];
}

#endif // DS_DIALECT_DS_IR_DSATTRS_TD
