//===- VerifyCollectives.cpp - the collective order is the same everywhere ===//

#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "ds/Dialect/DS/Analysis/ShardedParams.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSVERIFYCOLLECTIVES
#include "ds/Dialect/DS/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

enum class FunctionKind { Train, Eval, Step };

/// A bucket with its engine and stage.
struct BucketInfo {
  BucketOp bucket;
  EngineOp engine;
  int64_t stage = 0;
  bool sharded = false;
};

/// "bucket @model_bucket0 (engine @model, ZeRO stage 3)".
std::string describe(BucketInfo info) {
  std::string text = "bucket @" + info.bucket.getSymName().str() +
                     " (engine @" + info.engine.getSymName().str() +
                     ", ZeRO stage " + std::to_string(info.stage);
  if (info.bucket.getPersistent())
    text += ", persistent";
  if (std::optional<StringRef> leaf = info.bucket.getLeaf())
    text += ", leaf '" + leaf->str() + "'";
  return text + ")";
}

/// The module a data-dependent branch belongs to, as a ZeRO-3 leaf-module
/// candidate: the common prefix of the modules of the ops inside it, with
/// that module's class when an op names it.
std::string leafCandidate(IfOp branch) {
  SmallVector<StringRef> modules;
  branch->walk([&](AtenOp op) {
    if (!op.getModule().empty())
      modules.push_back(op.getModule());
  });
  branch->walk([&](GetParamOp get) {
    if (auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(
            get, get.getNameAttr()))
      modules.push_back(param.getModule());
  });
  std::string common = commonModulePrefix(modules);
  if (common.empty())
    return "";
  std::string text = "'" + common + "'";
  StringRef cls;
  branch->walk([&](AtenOp op) {
    if (cls.empty() && op.getModule() == common)
      cls = op.getModuleClass();
  });
  if (!cls.empty())
    text += " (" + cls.str() + ")";
  return text;
}

class FunctionChecker {
public:
  FunctionChecker(func::FuncOp func, FunctionKind kind,
                  const llvm::MapVector<Operation *, BucketInfo> &buckets,
                  const ShardedParams &sharded)
      : func(func), kind(kind), buckets(buckets), sharded(sharded) {}

  LogicalResult check() {
    return failure(failed(checkBranches()) || failed(checkTokens()) ||
                   failed(checkOrder()) || failed(checkMarkers()) ||
                   failed(checkLossScales()));
  }

private:
  StringRef name() { return func.getSymName(); }
  const BucketInfo *infoOf(Operation *op) {
    auto ref = op->getAttrOfType<FlatSymbolRefAttr>("bucket");
    auto bucket = SymbolTable::lookupNearestSymbolFrom<BucketOp>(op, ref);
    auto it = buckets.find(bucket);
    return it == buckets.end() ? nullptr : &it->second;
  }

  LogicalResult checkBranches();
  LogicalResult checkTokens();
  LogicalResult checkOrder();
  LogicalResult checkRead(ParamRead read);
  LogicalResult checkGather(AllGatherOp gather);
  LogicalResult checkReduction(Operation *op);
  LogicalResult checkUpdate(OptimizerStepOp update);
  LogicalResult checkGrads(Operation *op);
  LogicalResult checkEnd();
  LogicalResult checkMarkers();
  LogicalResult checkLossScales();

  func::FuncOp func;
  FunctionKind kind;
  /// Every bucket of a partitioned engine, in engine order, then by offset.
  const llvm::MapVector<Operation *, BucketInfo> &buckets;
  /// Which bucket holds each parameter, which are sharded, what reads them.
  const ShardedParams &sharded;

  /// Stage 3 state of each sharded bucket in program order.
  enum class State { Released, InFlight, Gathered };
  struct BucketState {
    State state = State::Released;
    Operation *lastGather = nullptr;
    /// Releases so far: tells the gathers of a bucket apart.
    int64_t releases = 0;
  };
  llvm::DenseMap<Operation *, BucketState> states;
  /// The gather (its bucket's release count) each ds.get_param read from.
  llvm::DenseMap<Operation *, int64_t> readInGather;
  /// Stages 2-3 in the training function: the reduce-scatter of a bucket.
  llvm::DenseMap<Operation *, Operation *> reducedAt;
  /// @step: reductions of each engine not yet waited; buckets reduced and
  /// engines updated so far.
  llvm::MapVector<Value, Operation *> pendingReductions;
  llvm::DenseSet<Operation *> reducedInStep, gatheredInStep;
  llvm::DenseSet<Operation *> updated;
};

} // namespace

LogicalResult FunctionChecker::checkBranches() {
  WalkResult result = func.walk([&](Operation *op) {
    if (!isa<AllReduceOp, ReduceScatterOp, AllGatherOp, WaitOp, ReleaseOp,
             OptimizerStepOp>(op))
      return WalkResult::advance();
    if (!op->getParentOfType<IfOp>())
      return WalkResult::advance();
    op->emitError() << op->getName() << " is inside a data-dependent ds.if in @"
                    << name()
                    << ": ranks that take different branches would issue "
                       "different collectives and hang; it belongs at the "
                       "top level of the function";
    return WalkResult::interrupt();
  });
  return failure(result.wasInterrupted());
}

LogicalResult FunctionChecker::checkTokens() {
  WalkResult result = func.walk([&](Operation *op) {
    if (!isCollective(op))
      return WalkResult::advance();
    Value token = op->getResult(0);
    SmallVector<Operation *> users(token.getUsers());
    bool ok = users.size() == 1 && isa<WaitOp>(users.front()) &&
              users.front()->getBlock() == op->getBlock() &&
              op->isBeforeInBlock(users.front());
    if (ok)
      return WalkResult::advance();
    const BucketInfo *info = infoOf(op);
    op->emitError() << op->getName() << " of "
                    << (info ? describe(*info) : std::string("its bucket"))
                    << " must be waited exactly once, later in the same "
                       "block, but its token has "
                    << users.size() << " use(s)";
    return WalkResult::interrupt();
  });
  return failure(result.wasInterrupted());
}

LogicalResult FunctionChecker::checkRead(ParamRead read) {
  BucketState &bucket = states[read.bucket];
  const BucketInfo &info = buckets.find(read.bucket)->second;
  if (bucket.state == State::Gathered) {
    if (isa<GetParamOp>(read.op)) {
      readInGather[read.op] = bucket.releases;
      return success();
    }
    // A use of a ds.get_param's value must be in the gather the value was
    // read from: after a release the value is a buffer the bucket dropped.
    for (Value operand : read.op->getOperands()) {
      auto get = operand.getDefiningOp<GetParamOp>();
      if (!get || get.getName() != read.param.getSymName())
        continue;
      auto it = readInGather.find(get);
      if (it != readInGather.end() && it->second == bucket.releases)
        continue;
      return read.op->emitError()
             << "reads parameter @" << read.param.getSymName() << " (module '"
             << read.param.getModule() << "') of " << describe(info)
             << " through a value read before the bucket was released: read "
                "the parameter again (ds.get_param) after the bucket is "
                "gathered again (-cse merges such reads; run it before "
                "-ds-zero-partition)";
    }
    return success();
  }
  InFlightDiagnostic diag = read.op->emitError();
  diag << "reads parameter @" << read.param.getSymName() << " (module '"
       << read.param.getModule() << "') of " << describe(info)
       << " where the bucket is not gathered: ";
  if (bucket.state == State::InFlight)
    diag << "its ds.all_gather has not been waited yet";
  else if (bucket.releases > 0)
    diag << "it was released earlier in @" << name()
         << " and not gathered again";
  else
    diag << "no ds.all_gather of the bucket precedes the read in @" << name();
  if (auto branch = read.op->getParentOfType<IfOp>()) {
    while (auto outer = branch->getParentOfType<IfOp>())
      branch = outer;
    diag << "; the read is inside a data-dependent ds.if: gather the bucket "
            "before the ds.if (as -ds-zero-partition does), never inside it";
    BucketOp readBucket = info.bucket;
    if (readBucket.getLeaf())
      diag << " (a leaf module's bucket is gathered before the leaf's first "
              "read)";
    else if (std::string leaf = leafCandidate(branch); !leaf.empty())
      diag << ", or declare " << leaf
           << " a ZeRO-3 leaf module (zero_optimization.leaf_module) so "
              "that its parameters are gathered together before the branch";
  }
  return failure();
}

LogicalResult FunctionChecker::checkGather(AllGatherOp gather) {
  const BucketInfo *info = infoOf(gather);
  if (!info)
    return success(); // The op's verifier reports it.
  if (!info->sharded) {
    if (kind != FunctionKind::Step)
      return gather.emitError()
             << "ds.all_gather of " << describe(*info) << " in @" << name()
             << ": the bucket's parameters are whole on every rank; it is "
                "gathered in @step, after the engine's optimizer_step";
    if (!updated.contains(info->engine))
      return gather.emitError()
             << "ds.all_gather of " << describe(*info)
             << " runs before the engine's ds.optimizer_step: it would "
                "gather the parameters before they are updated";
    gatheredInStep.insert(info->bucket);
    return success();
  }
  if (kind == FunctionKind::Step)
    return gather.emitError()
           << "ds.all_gather of sharded " << describe(*info)
           << " in @step: a sharded bucket is gathered where its parameters "
              "are read (the next forward), not at the accumulation boundary";
  BucketState &state = states[info->bucket];
  if (state.state != State::Released)
    return gather.emitError()
           << "ds.all_gather of " << describe(*info)
           << ", which is already gathered: release it before gathering it "
              "again";
  state.state = State::InFlight;
  state.lastGather = gather;
  return success();
}

LogicalResult FunctionChecker::checkReduction(Operation *op) {
  const BucketInfo *info = infoOf(op);
  if (!info)
    return success();
  bool inBackward = info->stage >= 2;
  if (kind == FunctionKind::Eval ||
      (kind == FunctionKind::Train && !inBackward) ||
      (kind == FunctionKind::Step && inBackward))
    return op->emitError()
           << op->getName() << " of " << describe(*info) << " in @" << name()
           << ": "
           << (inBackward ? "stages 2 and 3 reduce in the backward of the "
                            "training function"
                          : "stages 0 and 1 reduce at the accumulation "
                            "boundary, in @step");
  if (kind == FunctionKind::Train) {
    auto [it, inserted] = reducedAt.try_emplace(info->bucket, op);
    if (!inserted)
      return op->emitError() << op->getName() << " of " << describe(*info)
                             << " a second time in @" << name();
    return success();
  }
  if (updated.contains(info->engine))
    return op->emitError() << op->getName() << " of " << describe(*info)
                           << " after the engine's ds.optimizer_step: the "
                              "update would miss these gradients";
  pendingReductions[op->getResult(0)] = op;
  reducedInStep.insert(info->bucket);
  return success();
}

LogicalResult FunctionChecker::checkUpdate(OptimizerStepOp update) {
  auto engine = SymbolTable::lookupNearestSymbolFrom<EngineOp>(
      update, update.getEngineAttr());
  if (!engine)
    return success();
  for (auto &[token, reduction] : pendingReductions) {
    const BucketInfo *info = infoOf(reduction);
    if (info && info->engine == engine)
      return update.emitError()
             << "ds.optimizer_step of engine @" << engine.getSymName()
             << " runs before the " << reduction->getName() << " of "
             << describe(*info)
             << " was waited: the update would read gradients that are "
                "still being reduced";
  }
  for (auto &[op, info] : buckets)
    if (info.engine == engine && info.stage <= 1 && !reducedInStep.contains(op))
      return update.emitError()
             << "ds.optimizer_step of engine @" << engine.getSymName()
             << " runs before " << describe(info) << " was reduced: ZeRO stage "
             << info.stage
             << " reduces every bucket in @step before the update";
  updated.insert(engine);
  return success();
}

LogicalResult FunctionChecker::checkGrads(Operation *op) {
  WalkResult result = op->walk([&](GradOp grad) {
    auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(
        grad, grad.getParamAttr());
    if (!param)
      return WalkResult::advance();
    BucketOp bucket = sharded.bucketHolding(param.getSymName());
    Operation *reduced = bucket ? reducedAt.lookup(bucket) : nullptr;
    if (!reduced)
      return WalkResult::advance();
    grad.emitError() << "writes the gradient of @" << param.getSymName()
                     << " (module '" << param.getModule() << "') into "
                     << describe(buckets.find(bucket)->second)
                     << " after the bucket's ds.reduce_scatter: the "
                        "reduction would miss it";
    return WalkResult::interrupt();
  });
  return failure(result.wasInterrupted());
}

LogicalResult FunctionChecker::checkEnd() {
  for (auto &[op, info] : buckets) {
    auto it = states.find(op);
    if (it != states.end() && it->second.state != State::Released)
      return it->second.lastGather->emitError()
             << "ds.all_gather of " << describe(info)
             << " is never released before @" << name()
             << " returns: release the bucket after its last read";
  }
  bool hasBackward = false;
  func.walk([&](BackwardBeginOp) { hasBackward = true; });
  if (kind == FunctionKind::Train && hasBackward)
    for (auto &[op, info] : buckets)
      if (info.stage >= 2 && !EngineOp(info.engine).getFrozen() &&
          !reducedAt.contains(op))
        return func.emitError()
               << describe(info) << " is never reduce-scattered in @" << name()
               << ": its gradients would not reach the shards";
  if (kind == FunctionKind::Step)
    for (auto &[op, info] : buckets)
      if (info.stage >= 1 && !info.sharded && updated.contains(info.engine) &&
          !gatheredInStep.contains(op))
        return func.emitError()
               << describe(info)
               << " is never all_gathered in @step after the engine's "
                  "update: the ranks would keep stale parameters";
  return success();
}

namespace {
/// One trainable engine's share of the backward, as the markers say.
struct EngineShare {
  Operation *prologue = nullptr;
  Operation *epilogue = nullptr;
  Operation *firstGrad = nullptr;
  /// Reduce-scatters of the engine not waited yet.
  llvm::MapVector<Value, Operation *> pending;
};
} // namespace

/// ds.loss_scale is no collective: it only has to be in the training
/// function's backward, at the top level (the plan reads it there), once
/// per engine.
LogicalResult FunctionChecker::checkLossScales() {
  Block &body = func.getBody().front();
  bool inBackward = false;
  llvm::StringMap<Operation *> seen;
  for (Operation &op : body) {
    if (isa<BackwardBeginOp>(op))
      inBackward = true;
    auto scale = dyn_cast<LossScaleOp>(op);
    if (!scale)
      continue;
    if (kind != FunctionKind::Train || !inBackward)
      return scale.emitError()
             << "ds.loss_scale @" << scale.getEngine() << " in @" << name()
             << (kind == FunctionKind::Train ? " comes before ds.backward_begin"
                                             : "")
             << ": the loss scale belongs to the backward of the training "
                "function";
    auto [it, inserted] = seen.try_emplace(scale.getEngine(), scale);
    if (!inserted) {
      InFlightDiagnostic diag = scale.emitError()
                                << "second ds.loss_scale of engine @"
                                << scale.getEngine() << " in @" << name();
      diag.attachNote(it->second->getLoc()) << "the first";
      return diag;
    }
  }
  return success();
}

LogicalResult FunctionChecker::checkMarkers() {
  Block &body = func.getBody().front();
  bool any = false;
  WalkResult misplaced = func.walk([&](Operation *op) {
    if (!isa<BackwardPrologueOp, BackwardEpilogueOp>(op))
      return WalkResult::advance();
    any = true;
    if (kind == FunctionKind::Train && op->getBlock() == &body)
      return WalkResult::advance();
    op->emitError() << op->getName() << " in @" << name()
                    << ": engine backward markers belong to the backward of "
                       "the training function, at the top level";
    return WalkResult::interrupt();
  });
  if (misplaced.wasInterrupted())
    return failure();
  if (!any)
    return success();

  // The trainable engine of each parameter, and each engine's share.
  llvm::StringMap<StringRef> engineOfParam;
  llvm::MapVector<StringRef, EngineShare> shares;
  auto module = func->getParentOfType<ModuleOp>();
  for (EngineOp engine : module.getOps<EngineOp>())
    if (!engine.getFrozen())
      shares[engine.getSymName()];
  for (ParamOp param : module.getOps<ParamOp>())
    if (param.getEngine() && shares.count(*param.getEngine()))
      engineOfParam[param.getSymName()] = *param.getEngine();

  bool inBackward = false;
  for (Operation &op : body) {
    if (isa<BackwardBeginOp>(op)) {
      inBackward = true;
      continue;
    }
    if (isa<BackwardPrologueOp, BackwardEpilogueOp>(op)) {
      StringRef engine =
          op.getAttrOfType<FlatSymbolRefAttr>("engine").getValue();
      auto it = shares.find(engine);
      if (it == shares.end())
        continue; // The op's verifier reports it.
      EngineShare &share = it->second;
      std::string what =
          op.getName().getStringRef().str() + " @" + engine.str();
      if (!inBackward)
        return op.emitError() << what << " comes before ds.backward_begin in @"
                              << name() << ": it belongs to the backward";
      if (isa<BackwardPrologueOp>(op)) {
        if (share.prologue)
          return op.emitError()
                 << what << " is the engine's second backward prologue";
        if (share.firstGrad) {
          InFlightDiagnostic diag =
              op.emitError() << what
                             << " comes after a gradient of the engine; the "
                                "prologue precedes every gradient of its "
                                "engine";
          diag.attachNote(share.firstGrad->getLoc())
              << "the engine's first gradient";
          return diag;
        }
        share.prologue = &op;
        continue;
      }
      if (!share.prologue)
        return op.emitError()
               << what
               << " has no ds.backward_prologue of the engine before it";
      if (share.epilogue)
        return op.emitError()
               << what << " is the engine's second backward epilogue";
      if (!share.pending.empty()) {
        Operation *reduction = share.pending.front().second;
        const BucketInfo *info = infoOf(reduction);
        return op.emitError()
               << what
               << " comes before the ds.wait of the ds.reduce_scatter of "
               << (info ? describe(*info) : std::string("its bucket"))
               << ": the epilogue ends the engine's reductions";
      }
      share.epilogue = &op;
      continue;
    }
    WalkResult late = op.walk([&](GradOp grad) {
      auto it = engineOfParam.find(grad.getParam());
      if (it == engineOfParam.end())
        return WalkResult::advance();
      EngineShare &share = shares[it->second];
      if (!share.firstGrad)
        share.firstGrad = grad;
      if (!share.epilogue)
        return WalkResult::advance();
      grad.emitError() << "writes a gradient of engine @" << it->second
                       << " after its ds.backward_epilogue; every gradient "
                          "of an engine lies between its prologue and its "
                          "epilogue";
      return WalkResult::interrupt();
    });
    if (late.wasInterrupted())
      return failure();
    if (auto reduction = dyn_cast<ReduceScatterOp>(op)) {
      const BucketInfo *info = infoOf(reduction);
      if (!info)
        continue;
      EngineShare &share = shares[EngineOp(info->engine).getSymName()];
      if (share.epilogue)
        return reduction.emitError()
               << "ds.reduce_scatter of " << describe(*info)
               << " after the engine's ds.backward_epilogue: the epilogue "
                  "ends the engine's reductions";
      share.pending[reduction.getToken()] = reduction;
    } else if (auto wait = dyn_cast<WaitOp>(op)) {
      for (auto &entry : shares)
        entry.second.pending.remove_if(
            [&](const auto &p) { return p.first == wait.getToken(); });
    }
  }
  for (auto &[engine, share] : shares) {
    if (share.prologue && !share.epilogue)
      return share.prologue->emitError()
             << "engine @" << engine
             << " has a ds.backward_prologue but no ds.backward_epilogue";
    if (share.firstGrad && !share.prologue)
      return share.firstGrad->emitError()
             << "engine @" << engine << " has gradients in @" << name()
             << " but no ds.backward_prologue, while other engines have "
                "backward markers (every trainable engine with gradients "
                "has them, or none does)";
  }
  return success();
}

LogicalResult FunctionChecker::checkOrder() {
  SmallVector<ParamRead> reads;
  for (Operation &op : func.getBody().front()) {
    reads.clear();
    sharded.collectReads(&op, reads);
    for (ParamRead read : reads)
      if (failed(checkRead(read)))
        return failure();
    if (kind == FunctionKind::Train && failed(checkGrads(&op)))
      return failure();
    if (auto gather = dyn_cast<AllGatherOp>(op)) {
      if (failed(checkGather(gather)))
        return failure();
    } else if (isa<AllReduceOp, ReduceScatterOp>(op)) {
      if (failed(checkReduction(&op)))
        return failure();
    } else if (auto wait = dyn_cast<WaitOp>(op)) {
      Operation *def = wait.getToken().getDefiningOp();
      pendingReductions.remove_if(
          [&](const auto &entry) { return entry.first == wait.getToken(); });
      if (auto gather = dyn_cast_or_null<AllGatherOp>(def))
        if (const BucketInfo *info = infoOf(gather); info && info->sharded)
          states[info->bucket].state = State::Gathered;
    } else if (auto release = dyn_cast<ReleaseOp>(op)) {
      const BucketInfo *info = infoOf(release);
      if (!info)
        continue;
      BucketState &state = states[info->bucket];
      if (state.state != State::Gathered)
        return release.emitError()
               << "ds.release of " << describe(*info)
               << ", which is not gathered here"
               << (state.state == State::InFlight
                       ? " (its ds.all_gather has not been waited)"
                       : "");
      state.state = State::Released;
      ++state.releases;
    } else if (auto update = dyn_cast<OptimizerStepOp>(op)) {
      if (failed(checkUpdate(update)))
        return failure();
    }
  }
  return checkEnd();
}

namespace {

struct VerifyCollectivesPass
    : public mlir::ds::impl::DSVerifyCollectivesBase<VerifyCollectivesPass> {
  using DSVerifyCollectivesBase::DSVerifyCollectivesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::MapVector<Operation *, BucketInfo> buckets;
    llvm::StringMap<SmallVector<BucketOp>> byEngine = bucketsByEngine(module);
    for (EngineOp engine : module.getOps<EngineOp>()) {
      if (!engine.isPartitioned())
        continue;
      int64_t stage = *engine.getZeroStage();
      for (BucketOp bucket : byEngine.lookup(engine.getSymName()))
        buckets[bucket] = {bucket, engine, stage, bucket.isShardedAt(stage)};
    }
    ShardedParams sharded(module);

    bool failedAny = false;
    auto check = [&](StringRef name, FunctionKind kind) {
      auto func = module.lookupSymbol<func::FuncOp>(name);
      if (!func || func.isExternal())
        return;
      FunctionChecker checker(func, kind, buckets, sharded);
      failedAny |= failed(checker.check());
    };
    check(funcName, FunctionKind::Train);
    check(evalFuncName, FunctionKind::Eval);
    check("step", FunctionKind::Step);
    if (failedAny)
      signalPassFailure();
    markAllAnalysesPreserved();
  }
};

} // namespace
