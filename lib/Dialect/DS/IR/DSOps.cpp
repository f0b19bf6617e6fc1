//===- DSOps.cpp - ds dialect operations ----------------------------------===//

#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/AtenRegistry.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace mlir;
using namespace mlir::ds;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Whether a value of type `actual` may stand where `expected` is declared.
/// Tensor-typed list elements only fix the kind (any shape, any dtype).
static bool isCompatibleElement(Type expected, Type actual) {
  if (expected == actual)
    return true;
  // Tensor lists hold tensors of any shape and dtype, and None where the
  // schema says `Tensor?[]` (aten::index).
  return isa<TensorType>(expected) && isa<TensorType, ds::NoneType>(actual);
}

/// Resolves a state symbol and checks that it is a `StateOp` whose declared
/// type equals `type`.
template <typename StateOp>
static LogicalResult verifyStateUse(Operation *op, FlatSymbolRefAttr name,
                                    Type type, StringRef kind,
                                    SymbolTableCollection &symbolTable) {
  Operation *decl = symbolTable.lookupNearestSymbolFrom(op, name.getAttr());
  if (!decl)
    return op->emitOpError() << "refers to undeclared " << kind << " " << name;
  auto state = dyn_cast<StateOp>(decl);
  if (!state)
    return op->emitOpError() << "expects " << name << " to be a ds." << kind
                             << ", but it is a '" << decl->getName() << "'";
  if (state.getType() != type)
    return op->emitOpError()
           << "type " << type << " does not match the declared type "
           << state.getType() << " of " << kind << " " << name;
  return success();
}

//===----------------------------------------------------------------------===//
// ParamOp / BufferOp
//===----------------------------------------------------------------------===//

template <typename StateOp> static LogicalResult verifyStateDecl(StateOp op) {
  auto type = cast<RankedTensorType>(op.getType());
  if (!type.hasStaticShape())
    return op.emitOpError() << "state must have a static shape, but "
                            << op.getSymName() << " has type " << type;
  return success();
}

/// The ds.engine `engine` names, or an error on `op`.
static FailureOr<EngineOp> lookupEngine(Operation *op, FlatSymbolRefAttr engine,
                                        SymbolTableCollection &symbolTable) {
  auto decl = dyn_cast_or_null<EngineOp>(
      symbolTable.lookupNearestSymbolFrom(op, engine.getAttr()));
  if (!decl)
    return op->emitOpError() << "names engine " << engine
                             << ", which is not a ds.engine in this module";
  return decl;
}

template <typename StateOp>
static LogicalResult verifyEngineRef(StateOp op,
                                     SymbolTableCollection &symbolTable) {
  auto engine = op.getEngineAttr();
  if (!engine)
    return success();
  return lookupEngine(op, engine, symbolTable);
}

LogicalResult ParamOp::verify() { return verifyStateDecl(*this); }
LogicalResult BufferOp::verify() { return verifyStateDecl(*this); }

LogicalResult ParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  if (failed(verifyEngineRef(*this, symbolTable)))
    return failure();
  std::optional<int64_t> offset = getFlatOffset();
  if (!offset)
    return success();
  auto engineRef = getEngineAttr();
  auto engine =
      engineRef
          ? dyn_cast_or_null<EngineOp>(
                symbolTable.lookupNearestSymbolFrom(*this, engineRef.getAttr()))
          : EngineOp();
  if (!engine || !engine.isPartitioned())
    return emitOpError() << "has a flat_offset, but "
                         << (engine ? "its engine @" + engine.getSymName().str()
                                    : std::string("it has no engine, which"))
                         << " is not partitioned (no zero_stage)";
  if (!getRequiresGrad() && !engine.getFrozen())
    return emitOpError() << "has a flat_offset, but does not require grad; "
                            "only trainable parameters (and every parameter "
                            "of a frozen ZeRO stage 3 engine) are in the flat "
                            "buffer";
  int64_t numel = cast<RankedTensorType>(getType()).getNumElements();
  int64_t flatNumel = *engine.getFlatNumel();
  if (*offset < 0 || *offset + numel > flatNumel)
    return emitOpError() << "occupies [" << *offset << ", " << *offset + numel
                         << ") of the flat buffer, outside [0, " << flatNumel
                         << ") of engine @" << engine.getSymName();
  return success();
}
LogicalResult BufferOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyEngineRef(*this, symbolTable);
}

//===----------------------------------------------------------------------===//
// EngineOp
//===----------------------------------------------------------------------===//

/// The world size the module is compiled for: its `ds.world_size`, else 1.
static int64_t worldSizeOf(Operation *op) {
  auto module =
      isa<ModuleOp>(op) ? cast<ModuleOp>(op) : op->getParentOfType<ModuleOp>();
  return module ? getWorldSize(module).value_or(1) : 1;
}

/// A double as a person writes it: "0.001", "1e-08", "-1".
static std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.15g", value);
  return text;
}

/// Whether `type` is one of the float types an engine trains in.
static bool isTrainingFloat(Type type) {
  return type.isF32() || type.isF16() || type.isBF16();
}

/// Checks what the loss scaler's type leaves to the engine: a finite scale;
/// for dynamic and static (DeepSpeed's fp16 scaler) a finite floor > 0; for
/// grad_scaler (torch.amp.GradScaler) hysteresis 1, no consecutive
/// hysteresis, no floor.
static LogicalResult verifyLossScaler(EngineOp op, LossScalerAttr scaler) {
  if (!std::isfinite(scaler.getScale()))
    return op.emitOpError() << "loss_scaler scale must be finite, got "
                            << number(scaler.getScale());
  double minScale = scaler.getMinScale();
  if (scaler.getKind() != LossScalerKind::GradScaler) {
    if (!(minScale > 0.0) || !std::isfinite(minScale))
      return op.emitOpError()
             << "loss_scaler min_scale of a "
             << stringifyLossScalerKind(scaler.getKind())
             << " scaler must be finite and > 0, got " << number(minScale);
    return success();
  }
  if (minScale != 0.0)
    return op.emitOpError() << "loss_scaler min_scale of a grad_scaler must be "
                               "0.0 (torch.amp.GradScaler has no minimum "
                               "scale), got "
                            << number(minScale);
  if (scaler.getHysteresis() != 1 || scaler.getConsecutiveHysteresis())
    return op.emitOpError()
           << "loss_scaler of kind grad_scaler must have hysteresis 1 and "
              "consecutive_hysteresis false (torch.amp.GradScaler halves on "
              "every overflow)";
  return success();
}

LogicalResult EngineOp::verify() {
  std::optional<PrecisionMode> precision = getPrecision();
  if (!precision) {
    for (StringRef name : {"grad_accum_dtype", "autocast_dtype", "loss_scaler"})
      if ((*this)->getAttr(name))
        return emitOpError() << "has '" << name
                             << "' but no 'precision' (an engine without "
                                "'precision' trains in fp32)";
    return success();
  }
  StringRef mode = stringifyPrecisionMode(*precision);
  if (*precision == PrecisionMode::FP32)
    return emitOpError() << "'precision' must be bf16, fp16 or autocast, got "
                            "fp32 (an fp32 engine has no 'precision')";
  if (std::optional<Type> accum = getGradAccumDtype();
      accum && !isTrainingFloat(*accum))
    return emitOpError() << "'grad_accum_dtype' must be f32, f16 or bf16, got "
                         << *accum;
  std::optional<Type> autocast = getAutocastDtype();
  if (*precision == PrecisionMode::Autocast) {
    if (!autocast)
      return emitOpError() << "has precision autocast but no 'autocast_dtype'";
    if (!autocast->isBF16() && !autocast->isF16())
      return emitOpError() << "'autocast_dtype' must be bf16 or f16, got "
                           << *autocast;
  } else if (autocast) {
    return emitOpError() << "'autocast_dtype' is only for precision "
                            "autocast, but precision is "
                         << mode;
  }
  if (LossScalerAttr scaler = getLossScalerAttr()) {
    bool fp16Autocast =
        *precision == PrecisionMode::Autocast && autocast->isF16();
    if (*precision != PrecisionMode::FP16 && !fp16Autocast)
      return emitOpError()
             << "'loss_scaler' is only for precision fp16 and for precision "
                "autocast with autocast_dtype f16 (bf16 needs no loss "
                "scaling), but precision is "
             << mode << (autocast ? " with autocast_dtype bf16" : "");
    bool gradScaler = scaler.getKind() == LossScalerKind::GradScaler;
    if (gradScaler != fp16Autocast)
      return emitOpError()
             << (fp16Autocast
                     ? "an fp16 autocast engine's loss_scaler must have kind "
                       "grad_scaler (DeepSpeed scales fp16 autocast with a "
                       "torch.amp.GradScaler), got "
                     : "an fp16 engine's loss_scaler must have kind dynamic "
                       "or static (grad_scaler is for fp16 autocast), got ")
             << stringifyLossScalerKind(scaler.getKind());
    return verifyLossScaler(*this, scaler);
  }
  return success();
}

FailureOr<EngineConfigAttr> EngineOp::requireConfig(StringRef pass) {
  if (EngineConfigAttr config = getDeepspeedAttr())
    return config;
  return emitError() << "engine @" << getSymName()
                     << " has no DeepSpeed config ('deepspeed'), which " << pass
                     << " reads (-ds-assign-engines attaches it from the "
                        "config)";
}

LogicalResult EngineOp::verifySymbolUses(SymbolTableCollection &) {
  if (getZeroStage().has_value() != getFlatNumel().has_value())
    return emitOpError() << "zero_stage and flat_numel describe a partition "
                            "together, but only "
                         << (getZeroStage() ? "zero_stage" : "flat_numel")
                         << " is set";
  if (!isPartitioned())
    return success();
  int64_t stage = *getZeroStage();
  if (stage < 0 || stage > 3)
    return emitOpError() << "zero_stage must be 0, 1, 2 or 3, but is " << stage;
  if (getFrozen() && stage != 3)
    return emitOpError() << "is frozen (no optimizer, no gradients), but has "
                            "zero_stage "
                         << stage
                         << "; a frozen engine is partitioned only at stage 3, "
                            "where its parameters are sharded";
  int64_t flatNumel = *getFlatNumel();
  if (flatNumel < 0)
    return emitOpError() << "flat_numel must be >= 0, but is " << flatNumel;

  auto module = (*this)->getParentOfType<ModuleOp>();
  SmallVector<BucketOp> buckets;
  SmallVector<ParamOp> params;
  for (Operation &op : module.getBody()->getOperations()) {
    if (auto bucket = dyn_cast<BucketOp>(op)) {
      if (bucket.getEngine() == getSymName())
        buckets.push_back(bucket);
    } else if (auto param = dyn_cast<ParamOp>(op)) {
      if (param.getEngine() && *param.getEngine() == getSymName())
        params.push_back(param);
    }
  }
  llvm::stable_sort(buckets, [](BucketOp a, BucketOp b) {
    return a.getOffset() < b.getOffset();
  });
  int64_t expected = 0;
  for (BucketOp bucket : buckets) {
    if (bucket.getOffset() != expected)
      return emitOpError() << "buckets must cover [0, " << flatNumel
                           << ") without gaps or overlaps, but bucket @"
                           << bucket.getSymName() << " starts at "
                           << bucket.getOffset() << " where " << expected
                           << " was expected";
    expected += bucket.getNumel();
  }
  if (expected != flatNumel)
    return emitOpError() << "buckets must cover [0, " << flatNumel
                         << ") exactly, but they end at " << expected;

  SmallVector<std::pair<int64_t, ParamOp>> placed;
  for (ParamOp param : params) {
    // A frozen stage 3 engine shards every parameter it has.
    if (!param.getRequiresGrad() && !getFrozen())
      continue;
    std::optional<int64_t> offset = param.getFlatOffset();
    if (!offset)
      return emitOpError() << "is partitioned, but its "
                           << (getFrozen() ? "" : "trainable ") << "parameter @"
                           << param.getSymName() << " has no flat_offset";
    placed.push_back({*offset, param});
  }
  llvm::stable_sort(
      placed, [](const auto &a, const auto &b) { return a.first < b.first; });
  for (size_t i = 1; i < placed.size(); ++i) {
    auto [prevOffset, prev] = placed[i - 1];
    int64_t prevEnd =
        prevOffset + cast<RankedTensorType>(prev.getType()).getNumElements();
    if (placed[i].first < prevEnd)
      return emitOpError() << "parameters @" << prev.getSymName() << " (["
                           << prevOffset << ", " << prevEnd << ")) and @"
                           << placed[i].second.getSymName() << " (from "
                           << placed[i].first << ") overlap in the flat buffer";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// BucketOp
//===----------------------------------------------------------------------===//

LogicalResult BucketOp::verify() {
  if (getOffset() < 0)
    return emitOpError() << "offset must be >= 0, but is " << getOffset();
  if (getNumel() <= 0)
    return emitOpError() << "numel must be > 0, but is " << getNumel();
  int64_t worldSize = worldSizeOf(*this);
  if (getNumel() % worldSize != 0)
    return emitOpError() << "numel " << getNumel()
                         << " is not a multiple of the world size " << worldSize
                         << " (every rank owns numel / world size elements)";
  if (std::optional<Type> dtype = getDtype(); dtype && !isa<FloatType>(*dtype))
    return emitOpError() << "bucket @" << getSymName()
                         << " communicates in dtype " << *dtype
                         << ", which is not a float type (its collectives "
                            "move gradients and parameters)";
  return success();
}

LogicalResult BucketOp::verifySymbolUses(SymbolTableCollection &table) {
  FailureOr<EngineOp> engine = lookupEngine(*this, getEngineAttr(), table);
  if (failed(engine))
    return failure();
  if (!engine->isPartitioned())
    return emitOpError() << "belongs to engine " << getEngineAttr()
                         << ", which is not partitioned (no zero_stage)";
  if (getPersistent() && *engine->getZeroStage() != 3)
    return emitOpError() << "is persistent, but engine " << getEngineAttr()
                         << " is at ZeRO stage " << *engine->getZeroStage()
                         << "; only stage 3 shards parameters, so only its "
                            "buckets can be persistent";
  if (getLeaf() && (getPersistent() || *engine->getZeroStage() != 3)) {
    InFlightDiagnostic diag = emitOpError() << "is the bucket of leaf module '"
                                            << *getLeaf() << "', but ";
    if (getPersistent())
      diag << "it is persistent";
    else
      diag << "engine " << getEngineAttr() << " is at ZeRO stage "
           << *engine->getZeroStage();
    return diag << "; a leaf module's bucket is a sharded bucket of a stage 3 "
                   "engine";
  }
  return success();
}

/// The bucket a collective names, or an error.
static FailureOr<BucketOp> lookupBucket(Operation *op, FlatSymbolRefAttr name,
                                        SymbolTableCollection &table) {
  Operation *decl = table.lookupNearestSymbolFrom(op, name.getAttr());
  if (!decl)
    return op->emitOpError() << "refers to undeclared bucket " << name;
  auto bucket = dyn_cast<BucketOp>(decl);
  if (!bucket)
    return op->emitOpError()
           << "expects " << name << " to be a ds.bucket, but it is a '"
           << decl->getName() << "'";
  return bucket;
}

//===----------------------------------------------------------------------===//
// Collectives and ds.wait
//===----------------------------------------------------------------------===//

/// Collectives and waits run on every rank in the same order: never inside
/// a data-dependent branch.
static LogicalResult verifyNotInBranch(Operation *op, StringRef what) {
  if (op->getParentOfType<IfOp>())
    return op->emitOpError()
           << "is inside a ds.if; every rank must " << what
           << " in the same order, so it belongs at the top level of the "
              "function";
  return success();
}

static LogicalResult verifyCollective(Operation *op) {
  if (failed(verifyNotInBranch(op, "issue the same collectives")))
    return failure();
  Value token = op->getResult(0);
  SmallVector<Operation *> users(token.getUsers());
  if (users.size() != 1 || !isa<WaitOp>(users.front()))
    return op->emitOpError()
           << "token must be waited by exactly one ds.wait, but it has "
           << users.size() << " use(s)"
           << (users.size() == 1 ? " (not a ds.wait)" : "");
  return success();
}

/// The engine of a bucket that a collective or release names, when both
/// exist and the engine is partitioned (the bucket's verifier reports the
/// rest).
static FailureOr<std::pair<BucketOp, EngineOp>>
lookupPartitionedBucket(Operation *op, FlatSymbolRefAttr bucketName,
                        SymbolTableCollection &table) {
  auto bucket = lookupBucket(op, bucketName, table);
  if (failed(bucket))
    return failure();
  auto engine = dyn_cast_or_null<EngineOp>(
      table.lookupNearestSymbolFrom(op, bucket->getEngineAttr().getAttr()));
  return std::make_pair(*bucket,
                        engine && engine.isPartitioned() ? engine : EngineOp());
}

/// Which ZeRO stages a collective belongs to.
static LogicalResult verifyCollectiveStage(Operation *op,
                                           FlatSymbolRefAttr bucketName,
                                           SymbolTableCollection &table,
                                           bool stage0) {
  auto found = lookupPartitionedBucket(op, bucketName, table);
  if (failed(found))
    return failure();
  EngineOp engine = found->second;
  if (!engine)
    return success();
  int64_t stage = *engine.getZeroStage();
  if (engine.getFrozen() && !isa<AllGatherOp>(op))
    return op->emitOpError()
           << "reduces gradients of bucket " << bucketName << ", but engine @"
           << engine.getSymName()
           << " is frozen: it has no gradients (a frozen stage 3 engine only "
              "gathers and releases its parameters)";
  if (stage0 != (stage == 0))
    return op->emitOpError()
           << (stage0 ? "belongs to ZeRO stage 0"
                      : "belongs to ZeRO stages 1 to 3")
           << ", but engine @" << engine.getSymName() << " of bucket "
           << bucketName << " is at stage " << stage;
  return success();
}

LogicalResult AllReduceOp::verify() { return verifyCollective(*this); }
LogicalResult ReduceScatterOp::verify() { return verifyCollective(*this); }
LogicalResult AllGatherOp::verify() { return verifyCollective(*this); }

LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyCollectiveStage(*this, getBucketAttr(), table, true);
}
LogicalResult ReduceScatterOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyCollectiveStage(*this, getBucketAttr(), table, false);
}
LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyCollectiveStage(*this, getBucketAttr(), table, false);
}

LogicalResult ReleaseOp::verify() {
  return verifyNotInBranch(*this, "release the same buckets");
}

LogicalResult ReleaseOp::verifySymbolUses(SymbolTableCollection &table) {
  auto found = lookupPartitionedBucket(*this, getBucketAttr(), table);
  if (failed(found))
    return failure();
  auto [bucket, engine] = *found;
  if (!engine)
    return success();
  if (!bucket.isShardedAt(*engine.getZeroStage()))
    return emitOpError() << "releases bucket " << getBucketAttr()
                         << ", whose parameters are not sharded ("
                         << (bucket.getPersistent()
                                 ? "it is persistent"
                                 : "engine @" + engine.getSymName().str() +
                                       " is at ZeRO stage " +
                                       std::to_string(*engine.getZeroStage()))
                         << "); only the non-persistent buckets of a stage 3 "
                            "engine are gathered and released";
  return success();
}

//===----------------------------------------------------------------------===//
// BackwardPrologueOp / BackwardEpilogueOp
//===----------------------------------------------------------------------===//

static LogicalResult verifyBackwardMarker(Operation *op,
                                          FlatSymbolRefAttr engineName,
                                          SymbolTableCollection &table) {
  FailureOr<EngineOp> engine = lookupEngine(op, engineName, table);
  if (failed(engine))
    return failure();
  if (engine->getFrozen())
    return op->emitOpError()
           << "marks the backward of engine " << engineName
           << ", which is frozen: it has no gradients, so no share of the "
              "backward (only trainable engines have a prologue and an "
              "epilogue)";
  return success();
}

LogicalResult BackwardPrologueOp::verify() {
  return verifyNotInBranch(*this, "run the same engine backwards");
}
LogicalResult BackwardEpilogueOp::verify() {
  return verifyNotInBranch(*this, "run the same engine backwards");
}
LogicalResult
BackwardPrologueOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyBackwardMarker(*this, getEngineAttr(), table);
}
LogicalResult
BackwardEpilogueOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyBackwardMarker(*this, getEngineAttr(), table);
}

//===----------------------------------------------------------------------===//
// CotangentOp
//===----------------------------------------------------------------------===//

LogicalResult CotangentOp::verify() {
  if ((*this)->getParentOfType<IfOp>())
    return emitOpError() << "is inside a ds.if; the cotangent of result "
                         << getIndex()
                         << " seeds the backward, so it belongs at the top "
                            "level of the backward";
  if (!isa<FloatType>(getType().getElementType()))
    return emitOpError() << "must be a float tensor (only float results have "
                            "gradients), got "
                         << getType();
  auto func = (*this)->getParentOfType<FunctionOpInterface>();
  if (!func)
    return success();
  ArrayRef<Type> results = func.getResultTypes();
  if (uint64_t(getIndex()) >= results.size())
    return emitOpError() << "is the cotangent of result " << getIndex()
                         << ", but @" << func.getName() << " returns "
                         << results.size() << " result(s)";
  if (results[getIndex()] != getType())
    return emitOpError() << "has type " << getType() << ", but result "
                         << getIndex() << " of @" << func.getName()
                         << " is " << results[getIndex()];
  return success();
}

//===----------------------------------------------------------------------===//
// LossScaleOp
//===----------------------------------------------------------------------===//

LogicalResult LossScaleOp::verify() {
  if ((*this)->getParentOfType<IfOp>())
    return emitOpError() << "is inside a ds.if; the loss scale of engine "
                         << getEngineAttr()
                         << " multiplies the backward's seed, so it belongs "
                            "at the top level of the backward";
  return success();
}

LogicalResult LossScaleOp::verifySymbolUses(SymbolTableCollection &table) {
  FailureOr<EngineOp> engine = lookupEngine(*this, getEngineAttr(), table);
  if (failed(engine))
    return failure();
  if (engine->getFrozen())
    return emitOpError() << "reads the loss scale of engine " << getEngineAttr()
                         << ", which is frozen: it has no gradients, so no "
                            "loss scale (only trainable fp16 and fp16 "
                            "autocast engines scale their loss)";
  return success();
}

LogicalResult WaitOp::verify() {
  if (failed(verifyNotInBranch(*this, "wait for the same collectives")))
    return failure();
  Operation *def = getToken().getDefiningOp();
  if (!isa_and_nonnull<AllReduceOp, ReduceScatterOp, AllGatherOp>(def))
    return emitOpError() << "expects the token of a ds.all_reduce, "
                            "ds.reduce_scatter or ds.all_gather";
  if (def->getBlock() != (*this)->getBlock())
    return emitOpError()
           << "must be in the block that starts the collective it waits for";
  return success();
}

//===----------------------------------------------------------------------===//
// OptimizerStepOp
//===----------------------------------------------------------------------===//

/// Checks the ranges of an optimizer_step's schedule that its type leaves
/// open (the kinds, and total_num_steps where a kind needs it, it checks).
static LogicalResult verifySchedule(OptimizerStepOp op,
                                    SchedulerAttr scheduler) {
  auto fail = [&]() { return op.emitOpError() << "scheduler "; };
  auto atLeast = [&](StringRef key, double value) -> LogicalResult {
    if (!(value >= 0.0))
      return fail() << key << " must be >= 0, but is " << number(value);
    return success();
  };
  auto ratio = [&](StringRef key, double value) -> LogicalResult {
    if (!(value >= 0.0 && value <= 1.0))
      return fail() << key << " must be in [0, 1], but is " << number(value);
    return success();
  };
  auto positive = [&](StringRef key, int64_t value) -> LogicalResult {
    if (value < 1)
      return fail() << key << " must be >= 1, but is " << value;
    return success();
  };
  std::optional<F64> maxLr = scheduler.getWarmupMaxLr();
  std::optional<int64_t> totalSteps = scheduler.getTotalNumSteps();
  if (failed(atLeast("warmup_min_lr", scheduler.getWarmupMinLr())) ||
      (maxLr && failed(atLeast("warmup_max_lr", *maxLr))) ||
      failed(ratio("warmup_min_ratio", scheduler.getWarmupMinRatio())) ||
      failed(ratio("cos_min_ratio", scheduler.getCosMinRatio())) ||
      failed(positive("warmup_num_steps", scheduler.getWarmupNumSteps())) ||
      (totalSteps && failed(positive("total_num_steps", *totalSteps))))
    return failure();
  return success();
}

LogicalResult OptimizerStepOp::verify() {
  if (failed(verifyNotInBranch(*this, "run the same updates")))
    return failure();
  OptimizerKind type = getType();
  auto atLeastZero = [&](StringRef name, double value) -> LogicalResult {
    if (!(value >= 0.0))
      return emitOpError() << name << " must be >= 0, but is " << number(value);
    return success();
  };
  if (failed(atLeastZero("lr", getLr().convertToDouble())) ||
      failed(atLeastZero("weight_decay", getWeightDecay().convertToDouble())) ||
      failed(atLeastZero("momentum", getMomentum().convertToDouble())) ||
      failed(atLeastZero("gradient_clipping",
                         getGradientClipping().convertToDouble())))
    return failure();
  ArrayRef<double> betas = getBetas();
  if (betas.size() != 2)
    return emitOpError() << "betas must hold 2 values, but holds "
                         << betas.size();
  for (auto [i, beta] : llvm::enumerate(betas))
    if (!(beta >= 0.0 && beta < 1.0))
      return emitOpError() << "betas[" << i << "] must be in [0, 1), but is "
                           << number(beta);
  double eps = getEps().convertToDouble();
  if (!(eps > 0.0))
    return emitOpError() << "eps must be > 0, but is " << number(eps);
  double momentum = getMomentum().convertToDouble();
  double dampening = getDampening().convertToDouble();
  if (!std::isfinite(dampening))
    return emitOpError() << "dampening must be finite, but is "
                         << number(dampening);
  if (type == OptimizerKind::SGD) {
    if (getNesterov() && (momentum <= 0.0 || dampening != 0.0))
      return emitOpError() << "nesterov momentum requires momentum > 0 and "
                              "dampening 0, but momentum is "
                           << number(momentum) << " and dampening "
                           << number(dampening);
  } else {
    if (momentum != 0.0 || dampening != 0.0 || getNesterov())
      return emitOpError() << "momentum, dampening and nesterov are SGD "
                              "parameters; "
                           << stringifyOptimizerKind(type)
                           << " needs 0, 0 and false, but they are "
                           << number(momentum) << ", " << number(dampening)
                           << " and " << (getNesterov() ? "true" : "false");
  }
  if (SchedulerAttr scheduler = getSchedulerAttr())
    return verifySchedule(*this, scheduler);
  return success();
}

// The custom form: `@engine {key = value, ...}` with the hyperparameters in a
// fixed order and numbers as the shortest float literal that reads back to
// the same double, so `lr = 0.001` prints as written.

/// The shortest MLIR float literal that parses back to `value` (MLIR float
/// literals need a '.': `1.0e-08`, `0.0`). Non-finite values print as their
/// bit pattern, which the float parser accepts.
static std::string floatLiteral(double value) {
  if (!std::isfinite(value)) {
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    char text[32];
    std::snprintf(text, sizeof(text), "0x%016llX",
                  static_cast<unsigned long long>(bits));
    return text;
  }
  char text[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof(text), "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value)
      break;
  }
  std::string literal = text;
  size_t exponent = literal.find_first_of("eE");
  std::string mantissa = literal.substr(0, exponent);
  if (mantissa.find('.') == std::string::npos)
    mantissa += ".0";
  return exponent == std::string::npos ? mantissa
                                       : mantissa + literal.substr(exponent);
}

void OptimizerStepOp::print(OpAsmPrinter &p) {
  p << " ";
  p.printAttributeWithoutType(getEngineAttr());
  p << " {type = " << stringifyOptimizerKind(getType())
    << ", lr = " << floatLiteral(getLr().convertToDouble()) << ", betas = [";
  llvm::interleaveComma(getBetas(), p,
                        [&](double beta) { p << floatLiteral(beta); });
  p << "], eps = " << floatLiteral(getEps().convertToDouble())
    << ", weight_decay = " << floatLiteral(getWeightDecay().convertToDouble())
    << ", momentum = " << floatLiteral(getMomentum().convertToDouble())
    << ", dampening = " << floatLiteral(getDampening().convertToDouble())
    << ", nesterov = " << (getNesterov() ? "true" : "false")
    << ", gradient_clipping = "
    << floatLiteral(getGradientClipping().convertToDouble());
  if (SchedulerAttr scheduler = getSchedulerAttr()) {
    p << ", scheduler = ";
    p.printStrippedAttrOrType(scheduler);
  }
  p << "}";
  SmallVector<StringRef> elided = {
      "engine",       "type",     "lr",        "betas",    "eps",
      "weight_decay", "momentum", "dampening", "nesterov", "gradient_clipping",
      "scheduler"};
  p.printOptionalAttrDict((*this)->getAttrs(), elided);
}

ParseResult OptimizerStepOp::parse(OpAsmParser &parser,
                                   OperationState &result) {
  Builder &b = parser.getBuilder();
  FlatSymbolRefAttr engine;
  if (parser.parseAttribute(engine, "engine", result.attributes) ||
      parser.parseLBrace())
    return failure();
  static const char *floatKeys[] = {"lr",           "eps",
                                    "weight_decay", "momentum",
                                    "dampening",    "gradient_clipping"};
  auto parseEntry = [&]() -> ParseResult {
    std::string key;
    SMLoc loc = parser.getCurrentLocation();
    if (parser.parseKeywordOrString(&key) || parser.parseEqual())
      return failure();
    if (result.attributes.get(key))
      return parser.emitError(loc) << "'" << key << "' is given twice";
    if (key == "type") {
      StringRef name;
      if (parser.parseKeyword(&name))
        return failure();
      std::optional<OptimizerKind> kind = symbolizeOptimizerKind(name);
      if (!kind)
        return parser.emitError(loc) << "unknown optimizer type '" << name
                                     << "' (expected adamw, adam or sgd)";
      result.addAttribute(key, OptimizerKindAttr::get(b.getContext(), *kind));
    } else if (llvm::is_contained(floatKeys, key)) {
      double value;
      if (parser.parseFloat(value))
        return failure();
      result.addAttribute(key, b.getF64FloatAttr(value));
    } else if (key == "betas") {
      SmallVector<double> betas;
      if (parser.parseCommaSeparatedList(
              OpAsmParser::Delimiter::Square, [&]() -> ParseResult {
                return parser.parseFloat(betas.emplace_back());
              }))
        return failure();
      result.addAttribute(key, b.getDenseF64ArrayAttr(betas));
    } else if (key == "nesterov") {
      bool value = succeeded(parser.parseOptionalKeyword("true"));
      if (!value && parser.parseKeyword("false", " (nesterov is true or "
                                                 "false)"))
        return failure();
      result.addAttribute(key, b.getBoolAttr(value));
    } else if (key == "scheduler") {
      SchedulerAttr scheduler;
      if (parser.parseCustomAttributeWithFallback(scheduler))
        return failure();
      result.addAttribute(key, scheduler);
    } else {
      return parser.emitError(loc)
             << "unknown key '" << key
             << "' (expected type, lr, betas, eps, weight_decay, momentum, "
                "dampening, nesterov, gradient_clipping, scheduler)";
    }
    return success();
  };
  if (failed(parseEntry()))
    return failure();
  while (succeeded(parser.parseOptionalComma()))
    if (failed(parseEntry()))
      return failure();
  if (parser.parseRBrace() || parser.parseOptionalAttrDict(result.attributes))
    return failure();
  return success();
}

LogicalResult OptimizerStepOp::verifySymbolUses(SymbolTableCollection &table) {
  FailureOr<EngineOp> engine = lookupEngine(*this, getEngineAttr(), table);
  if (failed(engine))
    return failure();
  if (engine->getFrozen())
    return emitOpError() << "updates engine " << getEngineAttr()
                         << ", which is frozen (it has no optimizer and its "
                            "parameters get no gradients)";
  return success();
}

//===----------------------------------------------------------------------===//
// GetParamOp / GetBufferOp / SetBufferOp
//===----------------------------------------------------------------------===//

LogicalResult GetParamOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyStateUse<ParamOp>(*this, getNameAttr(), getType(), "param",
                                 table);
}

LogicalResult GetBufferOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyStateUse<BufferOp>(*this, getNameAttr(), getType(), "buffer",
                                  table);
}

LogicalResult SetBufferOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyStateUse<BufferOp>(*this, getNameAttr(), getValue().getType(),
                                  "buffer", table);
}

LogicalResult GradOp::verifySymbolUses(SymbolTableCollection &table) {
  if (failed(verifyStateUse<ParamOp>(*this, getParamAttr(),
                                     getValue().getType(), "param", table)))
    return failure();
  auto param = cast<ParamOp>(
      table.lookupNearestSymbolFrom(*this, getParamAttr().getAttr()));
  if (!param.getRequiresGrad())
    return emitOpError() << "gradient of " << getParamAttr()
                         << ", which does not require grad";
  return success();
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

/// Whether `value` is a valid constant of `type`; when not, `reason` says why.
static bool checkConstant(Attribute value, Type type, std::string *reason) {
  auto fail = [&](StringRef expected) {
    if (reason)
      *reason = ("expects " + expected + " for a constant of type ").str();
    return false;
  };
  if (isa<ds::NoneType>(type))
    return isa<UnitAttr>(value) || fail("'unit'");
  if (isa<StrType, DeviceType>(type))
    return isa<StringAttr>(value) || fail("a string");
  if (isa<ListType>(type)) {
    if (reason)
      *reason = "cannot hold a constant list (use ds.list_construct) of type ";
    return false;
  }
  if (auto tensor = dyn_cast<TensorType>(type)) {
    auto elements = dyn_cast<ElementsAttr>(value);
    if (!elements)
      return fail("an elements attribute");
    return elements.getType() == tensor ||
           fail("an elements attribute of the same type");
  }
  if (type.isInteger(64) || type.isInteger(1)) {
    auto integer = dyn_cast<IntegerAttr>(value);
    return (integer && integer.getType() == type) ||
           fail(type.isInteger(1) ? "'true' or 'false'" : "an integer");
  }
  if (type.isF64()) {
    auto fp = dyn_cast<FloatAttr>(value);
    return (fp && fp.getType() == type) || fail("a float");
  }
  if (reason)
    *reason = "cannot hold a constant of type ";
  return false;
}

bool ConstantOp::isValidConstant(Attribute value, Type type) {
  return checkConstant(value, type, nullptr);
}

LogicalResult ConstantOp::verify() {
  std::string reason;
  if (!checkConstant(getValue(), getType(), &reason))
    return emitOpError() << reason << getType() << ", but got " << getValue();
  return success();
}

// The value prints with its own type where it has one (`1 : i64`,
// `dense<0.0> : tensor<2xf32>`); otherwise the result type follows
// (`unit : !ds.none`).
void ConstantOp::print(OpAsmPrinter &p) {
  p << " ";
  p.printAttribute(getValue());
  auto typed = dyn_cast<TypedAttr>(getValue());
  if (!typed || typed.getType() != getType())
    p << " : " << getType();
  p.printOptionalAttrDict((*this)->getAttrs(), {"value"});
}

ParseResult ConstantOp::parse(OpAsmParser &parser, OperationState &result) {
  Attribute value;
  Type type;
  if (parser.parseAttribute(value))
    return failure();
  if (succeeded(parser.parseOptionalColon())) {
    if (parser.parseType(type))
      return failure();
  } else if (auto typed = dyn_cast<TypedAttr>(value)) {
    type = typed.getType();
  }
  // `"tanh" : !ds.str` parses as a string attribute carrying the type; the
  // op keeps the plain string, as the importer builds it.
  if (auto str = dyn_cast<StringAttr>(value)) {
    if (!type)
      type = str.getType();
    value = StringAttr::get(parser.getContext(), str.getValue());
  }
  if (!type)
    return parser.emitError(parser.getCurrentLocation(),
                            "expected ':' and the constant's type");
  result.addAttribute("value", value);
  result.addTypes(type);
  return parser.parseOptionalAttrDict(result.attributes);
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// ListConstructOp / ListUnpackOp
//===----------------------------------------------------------------------===//

LogicalResult ListConstructOp::verify() {
  Type elementType = getType().getElementType();
  for (auto [index, element] : llvm::enumerate(getElements()))
    if (!isCompatibleElement(elementType, element.getType()))
      return emitOpError() << "element #" << index << " has type "
                           << element.getType() << ", but the list holds "
                           << elementType;
  return success();
}

LogicalResult ListUnpackOp::verify() {
  Type elementType = getList().getType().getElementType();
  for (auto [index, result] : llvm::enumerate(getElements()))
    if (!isCompatibleElement(elementType, result.getType()))
      return emitOpError() << "result #" << index << " has type "
                           << result.getType() << ", but the list holds "
                           << elementType;
  return success();
}

//===----------------------------------------------------------------------===//
// AtenOp
//===----------------------------------------------------------------------===//

LogicalResult AtenOp::verify() {
  std::optional<AtenOpInfo> info = lookupAtenOp(getOp());
  if (!info)
    return emitOpError() << "operator '" << getOp()
                         << "' is not in the supported operator registry";
  if (getArgs().size() != info->numArgs)
    return emitOpError() << "operator '" << getOp() << "' takes "
                         << info->numArgs << " arguments, but "
                         << getArgs().size() << " were given";
  // A list-returning operator may be unpacked into several results.
  if (getNumResults() != info->numResults &&
      !(info->returnsList && getNumResults() != 1))
    return emitOpError() << "operator '" << getOp() << "' returns "
                         << info->numResults << " values, but the op has "
                         << getNumResults() << " results";
  return success();
}

void AtenOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  std::optional<AtenOpInfo> info = lookupAtenOp(getOp());
  // Unknown operators are rejected by the verifier; until then assume the
  // worst so that no rewrite drops or reorders them.
  if (info && info->effect == AtenEffect::Pure)
    return;
  effects.emplace_back(MemoryEffects::Read::get());
  effects.emplace_back(MemoryEffects::Write::get());
}

//===----------------------------------------------------------------------===//
// RngStateGetOp, RngStateSetOp
//===----------------------------------------------------------------------===//

int64_t RngStateGetOp::getStateBytes(TargetDevice device) {
  return device == TargetDevice::CUDA ? kCUDAStateBytes : kCPUStateBytes;
}

RankedTensorType RngStateGetOp::getStateType(MLIRContext *context,
                                             TargetDevice device) {
  return RankedTensorType::get(
      {getStateBytes(device)},
      IntegerType::get(context, 8, IntegerType::Unsigned));
}

/// A generator state has the size of the target device's generator:
/// set_rng_state refuses any other, and the plan's liveness counts its
/// bytes.
static LogicalResult verifyStateType(Operation *op, Type type) {
  TargetDevice device = getTargetDevice(op);
  RankedTensorType expected =
      RngStateGetOp::getStateType(op->getContext(), device);
  if (type == expected)
    return success();
  return op->emitOpError() << "expects the "
                           << (device == TargetDevice::CUDA ? "CUDA" : "CPU")
                           << " generator's state, " << expected
                           << ", for the module's target device \""
                           << stringifyTargetDevice(device)
                           << "\" (ds.target_device), got " << type;
}

LogicalResult RngStateGetOp::verify() {
  return verifyStateType(*this, getState().getType());
}

LogicalResult RngStateSetOp::verify() {
  if (failed(verifyStateType(*this, getState().getType())))
    return failure();
  if (!getState().getDefiningOp<RngStateGetOp>())
    return emitOpError() << "expects a state saved by ds.rng_state_get";
  return success();
}

//===----------------------------------------------------------------------===//
// IfOp
//===----------------------------------------------------------------------===//

/// Whether a branch may yield `yielded` for a result of type `expected`: the
/// same type, or a tensor whose static dims fill the result's dynamic ones
/// (branches that see different routings yield different row counts).
static bool isRefinementOf(Type yielded, Type expected) {
  if (yielded == expected)
    return true;
  auto y = dyn_cast<RankedTensorType>(yielded);
  auto e = dyn_cast<RankedTensorType>(expected);
  if (!y || !e || y.getElementType() != e.getElementType() ||
      y.getRank() != e.getRank())
    return false;
  for (int64_t d = 0; d < y.getRank(); ++d)
    if (!e.isDynamicDim(d) && y.getDimSize(d) != e.getDimSize(d))
      return false;
  return true;
}

LogicalResult IfOp::verify() {
  for (auto [name, region] :
       {std::pair<StringRef, Region *>{"then", &getThenRegion()},
        std::pair<StringRef, Region *>{"else", &getElseRegion()}}) {
    auto yield = cast<YieldOp>(region->front().getTerminator());
    if (yield.getValues().size() != getNumResults())
      return emitOpError() << "'" << name << "' branch yields "
                           << yield.getValues().size()
                           << " values, but the op has " << getNumResults()
                           << " results";
    for (auto [index, pair] :
         llvm::enumerate(llvm::zip(yield.getValues(), getResultTypes()))) {
      Type yielded = std::get<0>(pair).getType();
      Type expected = std::get<1>(pair);
      if (!isRefinementOf(yielded, expected))
        return emitOpError()
               << "'" << name << "' branch yields " << yielded << " as result #"
               << index << ", but the op has " << expected;
    }
  }
  return success();
}

llvm::StringMap<SmallVector<BucketOp>>
mlir::ds::bucketsByEngine(ModuleOp module) {
  llvm::StringMap<SmallVector<BucketOp>> byEngine;
  for (BucketOp bucket : module.getOps<BucketOp>())
    byEngine[bucket.getEngine()].push_back(bucket);
  for (auto &entry : byEngine)
    llvm::stable_sort(entry.second, [](BucketOp a, BucketOp b) {
      return a.getOffset() < b.getOffset();
    });
  return byEngine;
}

#define GET_OP_CLASSES
#include "ds/Dialect/DS/IR/DSOps.cpp.inc"
