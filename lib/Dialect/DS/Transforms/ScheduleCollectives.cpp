//===- ScheduleCollectives.cpp - waits and prefetch as overlap_comm asks --===//

#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "ds/Dialect/DS/Analysis/ShardedParams.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSSCHEDULECOLLECTIVES
#include "ds/Dialect/DS/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// What an engine's config says about overlap.
struct OverlapPolicy {
  bool overlap = false;
  int64_t prefetchBucketSize = 0;
  int64_t maxLiveParameters = 0;
};

struct ScheduleCollectivesPass
    : public mlir::ds::impl::DSScheduleCollectivesBase<
          ScheduleCollectivesPass> {
  using DSScheduleCollectivesBase::DSScheduleCollectivesBase;

  void runOnOperation() override;

private:
  /// The bucket a collective or release names.
  BucketOp bucketOf(Operation *op) {
    auto name = op->getAttrOfType<FlatSymbolRefAttr>("bucket");
    return getOperation().lookupSymbol<BucketOp>(name.getAttr());
  }

  void placeWaits(func::FuncOp func, bool training);
  void prefetch(func::FuncOp func, const ShardedParams &sharded);

  llvm::StringMap<OverlapPolicy> policies;
};

} // namespace

/// Overlap off: each wait right after its collective. Overlap on: the
/// backward's reduce-scatters are waited right before their engine's
/// backward epilogue (at the end of the training function without one), in
/// the order they start; everything else stays.
void ScheduleCollectivesPass::placeWaits(func::FuncOp func, bool training) {
  Block &body = func.getBody().front();
  SmallVector<Operation *> collectives;
  llvm::StringMap<Operation *> epilogues;
  for (Operation &op : body) {
    if (isCollective(&op))
      collectives.push_back(&op);
    else if (auto epilogue = dyn_cast<BackwardEpilogueOp>(op))
      epilogues[epilogue.getEngine()] = epilogue;
  }
  Operation *terminator = body.getTerminator();
  for (Operation *collective : collectives) {
    Value token = collective->getResult(0);
    if (!token.hasOneUse())
      continue; // The verifier reports it.
    auto wait = dyn_cast<WaitOp>(*token.getUsers().begin());
    if (!wait || wait->getBlock() != &body)
      continue;
    BucketOp bucket = bucketOf(collective);
    const OverlapPolicy &policy =
        policies.lookup(bucket ? bucket.getEngine() : StringRef());
    if (!policy.overlap) {
      wait->moveAfter(collective);
    } else if (training && isa<ReduceScatterOp>(collective)) {
      Operation *epilogue =
          bucket ? epilogues.lookup(bucket.getEngine()) : nullptr;
      wait->moveBefore(epilogue && collective->isBeforeInBlock(epilogue)
                           ? epilogue
                           : terminator);
    }
  }
}

/// Overlap on: moves each sharded all-gather up as far as the engine's
/// prefetch and live-parameter bounds allow.
void ScheduleCollectivesPass::prefetch(func::FuncOp func,
                                       const ShardedParams &sharded) {
  Block &body = func.getBody().front();
  SmallVector<AllGatherOp> gathers;
  for (auto gather : body.getOps<AllGatherOp>()) {
    BucketOp bucket = bucketOf(gather);
    if (bucket && sharded.isSharded(bucket) &&
        policies.lookup(bucket.getEngine()).overlap)
      gathers.push_back(gather);
  }

  SmallVector<ParamRead> reads;
  for (AllGatherOp gather : gathers) {
    BucketOp bucket = bucketOf(gather);
    StringRef engine = bucket.getEngine();
    const OverlapPolicy &policy = policies.lookup(engine);
    int64_t numel = bucket.getNumel();

    // The engine's elements in flight (gathers started, not yet waited) and
    // live (gathered sharded buckets) while each op before the gather runs.
    llvm::DenseMap<Operation *, std::pair<int64_t, int64_t>> during;
    llvm::DenseMap<Value, int64_t> open;
    int64_t inFlight = 0, live = 0;
    for (Operation &op : body) {
      if (&op == gather)
        break;
      auto ownBucket = [&](Operation *collective) -> BucketOp {
        BucketOp b = bucketOf(collective);
        return b && b.getEngine() == engine && sharded.isSharded(b) ? b
                                                                    : nullptr;
      };
      if (auto other = dyn_cast<AllGatherOp>(op)) {
        if (BucketOp b = ownBucket(other)) {
          inFlight += b.getNumel();
          live += b.getNumel();
          open[other.getToken()] = b.getNumel();
        }
        during[&op] = {inFlight, live};
      } else if (auto wait = dyn_cast<WaitOp>(op)) {
        during[&op] = {inFlight, live};
        inFlight -= open.lookup(wait.getToken());
      } else if (auto release = dyn_cast<ReleaseOp>(op)) {
        during[&op] = {inFlight, live};
        if (BucketOp b = ownBucket(release))
          live -= b.getNumel();
      } else {
        during[&op] = {inFlight, live};
      }
    }

    Operation *target = nullptr;
    for (Operation *op = gather->getPrevNode(); op; op = op->getPrevNode()) {
      if (isa<AllGatherOp, BackwardBeginOp>(op))
        break;
      if (auto release = dyn_cast<ReleaseOp>(op);
          release && release.getBucket() == bucket.getSymName())
        break;
      reads.clear();
      sharded.collectReads(op, reads);
      if (llvm::any_of(reads,
                       [&](const ParamRead &r) { return r.bucket == bucket; }))
        break; // Invalid IR (a read before the gather); leave it be.
      auto [opInFlight, opLive] = during.lookup(op);
      if (opInFlight + numel > policy.prefetchBucketSize ||
          opLive + numel > policy.maxLiveParameters)
        break;
      target = op;
    }
    if (!target)
      continue;
    gather->moveBefore(target);
    ++numPrefetched;
  }
}

void ScheduleCollectivesPass::runOnOperation() {
  ModuleOp module = getOperation();
  for (EngineOp engine : module.getOps<EngineOp>()) {
    if (!engine.isPartitioned())
      continue;
    FailureOr<EngineConfigAttr> config =
        engine.requireConfig("-ds-schedule-collectives");
    if (failed(config))
      return signalPassFailure();
    ZeroAttr zero = config->getZeroOrDefault();
    policies[engine.getSymName()] = {zero.getOverlapComm(),
                                     zero.getStage3PrefetchBucketSize(),
                                     zero.getStage3MaxLiveParameters()};
  }
  if (policies.empty())
    return;

  ShardedParams sharded(module);
  auto train = module.lookupSymbol<func::FuncOp>(funcName);
  auto eval = module.lookupSymbol<func::FuncOp>(evalFuncName);
  auto step = module.lookupSymbol<func::FuncOp>("step");
  for (func::FuncOp func : {train, eval, step}) {
    if (!func || func.isExternal())
      continue;
    placeWaits(func, func == train);
    if (func != step)
      prefetch(func, sharded);
  }
}
