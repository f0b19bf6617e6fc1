//===- ZeroPartition.cpp - flat buffers, buckets and ZeRO collectives -----===//
//
// Lays every trainable engine's parameters out in one flat buffer, cuts it
// into buckets and places the collectives of the engine's ZeRO stage
// (docs/zero.md, docs/plan-format.md "The accumulation boundary"):
//
//   stage 0  @step: all_reduce every bucket; wait; optimizer_step
//   stage 1  @step: reduce_scatter every bucket; wait; optimizer_step;
//                   all_gather every bucket; wait
//   stage 2  train: reduce_scatter each bucket after its last ds.grad; waits
//                   at the end of the backward
//            @step: optimizer_step; all_gather every bucket; wait
//
// The layout follows the backward: parameters whose gradients are complete
// first come first, so bucket 0 can be reduced while the backward still
// runs. A parameter is never split between buckets.
//
// Assumes -ds-assign-engines (engines with their configs), -ds-autodiff
// (ds.grad in the training function; stage 2 needs them) and
// -ds-lower-optimizer (one ds.optimizer_step per trainable engine in @step).
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Transforms/EngineConfig.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSZEROPARTITION
#include "ds/Dialect/DS/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// Where a parameter's gradient is complete in the training function: the
/// top-level op holding its last ds.grad, and that ds.grad's position in a
/// walk of the function (to order parameters finished by the same op).
struct GradPosition {
  int64_t topLevel = 0;
  int64_t sequence = 0;
};

/// One bucket: a slice of the flat buffer and the parameters in it.
struct BucketLayout {
  int64_t offset = 0;
  int64_t numel = 0;
  SmallVector<ParamOp> params;
};

/// One engine's flat buffer.
struct EngineLayout {
  EngineOp engine;
  int64_t stage = 0;
  OptimizerStepOp step;
  /// Trainable parameters in layout order, with their offsets.
  SmallVector<std::pair<ParamOp, int64_t>> params;
  SmallVector<BucketLayout> buckets;
  SmallVector<BucketOp> bucketOps;
  int64_t numel = 0;
};

int64_t numelOf(ParamOp param) {
  return cast<RankedTensorType>(param.getType()).getNumElements();
}

/// Packs parameters, in order, into buckets of at most `capacity` parameter
/// elements (a larger parameter gets a bucket of its own) and pads each
/// bucket to a multiple of `worldSize`.
class BucketPlanner {
public:
  BucketPlanner(int64_t capacity, int64_t worldSize)
      : capacity(capacity), worldSize(worldSize) {}

  void plan(ArrayRef<ParamOp> params, EngineLayout &layout) {
    BucketLayout current;
    int64_t used = 0;
    auto close = [&] {
      if (current.params.empty())
        return;
      current.numel = (used + worldSize - 1) / worldSize * worldSize;
      padding += current.numel - used;
      layout.numel = current.offset + current.numel;
      layout.buckets.push_back(std::move(current));
      current = BucketLayout();
      current.offset = layout.numel;
      used = 0;
    };
    current.offset = 0;
    for (ParamOp param : params) {
      int64_t numel = numelOf(param);
      if (used > 0 && used + numel > capacity)
        close();
      layout.params.push_back({param, current.offset + used});
      current.params.push_back(param);
      used += numel;
    }
    close();
  }

  int64_t padding = 0;

private:
  int64_t capacity;
  int64_t worldSize;
};

struct ZeroPartitionPass
    : public mlir::ds::impl::DSZeroPartitionBase<ZeroPartitionPass> {
  using DSZeroPartitionBase::DSZeroPartitionBase;

  void runOnOperation() override;

private:
  LogicalResult layOut(EngineLayout &layout, int64_t world,
                       const llvm::StringMap<GradPosition> &grads);
  void declare(OpBuilder &builder, EngineLayout &layout);
  LogicalResult placeStep(func::FuncOp step,
                          MutableArrayRef<EngineLayout> engines);
  LogicalResult placeBackward(func::FuncOp train,
                              MutableArrayRef<EngineLayout> engines,
                              const llvm::StringMap<GradPosition> &grads);
};

} // namespace

/// The last ds.grad of every parameter in `train`, by top-level op.
static llvm::StringMap<GradPosition> gradPositions(func::FuncOp train) {
  llvm::StringMap<GradPosition> positions;
  if (!train || train.isExternal())
    return positions;
  int64_t topLevel = 0, sequence = 0;
  for (Operation &op : train.getBody().front()) {
    op.walk<WalkOrder::PreOrder>([&](GradOp grad) {
      positions[grad.getParam()] = {topLevel, sequence++};
    });
    ++topLevel;
  }
  return positions;
}

LogicalResult
ZeroPartitionPass::layOut(EngineLayout &layout, int64_t world,
                          const llvm::StringMap<GradPosition> &grads) {
  EngineOp engine = layout.engine;
  FailureOr<::ds::config::EngineConfig> config =
      parseEngineConfig(engine, world);
  if (failed(config))
    return failure();
  layout.stage = config->zero.stage;
  if (layout.stage == 3)
    return engine.emitError()
           << "config of engine @" << engine.getSymName()
           << ": zero_optimization.stage: ZeRO stage 3 is not implemented yet "
              "(stages 0, 1 and 2 are)";
  if (engine.isPartitioned())
    return engine.emitError()
           << "engine @" << engine.getSymName() << " is already partitioned";

  // Trainable parameters in declaration order, then in backward order.
  auto module = getOperation();
  SmallVector<ParamOp> params;
  for (ParamOp param : module.getOps<ParamOp>())
    if (param.getRequiresGrad() && param.getEngine() &&
        *param.getEngine() == engine.getSymName())
      params.push_back(param);
  for (ParamOp param : params) {
    Type elem = cast<RankedTensorType>(param.getType()).getElementType();
    Type first =
        cast<RankedTensorType>(params.front().getType()).getElementType();
    if (elem != first)
      return engine.emitError()
             << "engine @" << engine.getSymName() << " mixes " << first << " (@"
             << params.front().getSymName() << ") and " << elem << " (@"
             << param.getSymName()
             << ") trainable parameters; one flat buffer holds one dtype";
  }
  llvm::stable_sort(params, [&](ParamOp a, ParamOp b) {
    auto ia = grads.find(a.getSymName()), ib = grads.find(b.getSymName());
    bool ha = ia != grads.end(), hb = ib != grads.end();
    if (ha != hb)
      return ha; // Parameters without a gradient go last.
    if (!ha)
      return false;
    return std::make_pair(ia->second.topLevel, ia->second.sequence) <
           std::make_pair(ib->second.topLevel, ib->second.sequence);
  });

  int64_t capacity = config->zero.reduceBucketSize;
  const char *capacityKey = "zero_optimization.reduce_bucket_size";
  if (layout.stage > 0 &&
      config->zero.allgatherBucketSize < config->zero.reduceBucketSize) {
    capacity = config->zero.allgatherBucketSize;
    capacityKey = "zero_optimization.allgather_bucket_size";
  }
  if (capacity < 1 && !params.empty())
    return engine.emitError()
           << "config of engine @" << engine.getSymName() << ": " << capacityKey
           << ": a bucket must hold at least 1 element, "
              "got "
           << capacity;
  BucketPlanner planner(capacity, world);
  planner.plan(params, layout);
  paddingElements += planner.padding;
  numBuckets += layout.buckets.size();
  return success();
}

/// Records the layout in the IR: engine attributes, flat offsets, buckets.
void ZeroPartitionPass::declare(OpBuilder &builder, EngineLayout &layout) {
  EngineOp engine = layout.engine;
  MLIRContext *ctx = engine.getContext();
  auto i64 = [&](int64_t v) {
    return IntegerAttr::get(IntegerType::get(ctx, 64), v);
  };
  engine.setZeroStageAttr(i64(layout.stage));
  engine.setFlatNumelAttr(i64(layout.numel));
  for (auto [param, offset] : layout.params)
    param.setFlatOffsetAttr(i64(offset));
  ModuleOp module = getOperation();
  for (auto [index, bucket] : llvm::enumerate(layout.buckets)) {
    std::string base = (engine.getSymName() + "_bucket" + Twine(index)).str();
    std::string name = base;
    for (int suffix = 1; SymbolTable::lookupSymbolIn(module, name); ++suffix)
      name = base + "_" + std::to_string(suffix);
    auto op =
        BucketOp::create(builder, engine.getLoc(), name, engine.getSymName(),
                         bucket.offset, bucket.numel);
    layout.bucketOps.push_back(op);
  }
}

/// Rebuilds @step: every engine's reductions first, then per engine its
/// waits, its update and (stages 1-2) its all-gathers, whose waits come last.
LogicalResult
ZeroPartitionPass::placeStep(func::FuncOp step,
                             MutableArrayRef<EngineLayout> engines) {
  // Everything goes before the op after the last update (the return).
  Operation *anchor = nullptr;
  for (EngineLayout &layout : engines)
    if (!anchor || anchor->isBeforeInBlock(layout.step))
      anchor = layout.step;
  anchor = anchor->getNextNode();
  OpBuilder builder(anchor);

  SmallVector<SmallVector<Value>> reductions(engines.size());
  for (auto [e, layout] : llvm::enumerate(engines)) {
    if (layout.stage == 2)
      continue; // Reduced in the backward.
    for (BucketOp bucket : layout.bucketOps) {
      auto ref = FlatSymbolRefAttr::get(bucket.getSymNameAttr());
      Value token =
          layout.stage == 0
              ? AllReduceOp::create(builder, layout.step.getLoc(), ref)
                    .getResult()
              : ReduceScatterOp::create(builder, layout.step.getLoc(), ref)
                    .getResult();
      reductions[e].push_back(token);
      ++numCollectives;
    }
  }
  SmallVector<Value> gathers;
  for (auto [e, layout] : llvm::enumerate(engines)) {
    for (Value token : reductions[e])
      WaitOp::create(builder, layout.step.getLoc(), token);
    layout.step->moveBefore(anchor);
    if (layout.stage == 0)
      continue;
    for (BucketOp bucket : layout.bucketOps) {
      auto ref = FlatSymbolRefAttr::get(bucket.getSymNameAttr());
      gathers.push_back(
          AllGatherOp::create(builder, layout.step.getLoc(), ref).getResult());
      ++numCollectives;
    }
  }
  for (Value token : gathers)
    WaitOp::create(builder, token.getLoc(), token);
  return success();
}

/// Stage 2: a reduce_scatter of each bucket after the top-level op that holds
/// the last ds.grad writing into it; the waits end the backward.
LogicalResult
ZeroPartitionPass::placeBackward(func::FuncOp train,
                                 MutableArrayRef<EngineLayout> engines,
                                 const llvm::StringMap<GradPosition> &grads) {
  bool anyStage2 =
      llvm::any_of(engines, [](const EngineLayout &l) { return l.stage == 2; });
  if (!anyStage2)
    return success();
  for (EngineLayout &layout : engines)
    if (layout.stage == 2 && !layout.bucketOps.empty() && !train)
      return layout.engine.emitError()
             << "ZeRO stage 2 reduces gradients in the backward of @"
             << funcName << ", which the module does not have (run "
             << "-ds-autodiff first)";
  if (!train)
    return success();
  Block &body = train.getBody().front();
  SmallVector<Operation *> topLevel;
  Operation *backwardBegin = nullptr;
  int64_t backwardIndex = 0;
  for (Operation &op : body) {
    if (isa<BackwardBeginOp>(op)) {
      backwardBegin = &op;
      backwardIndex = topLevel.size();
    }
    topLevel.push_back(&op);
  }
  if (!backwardBegin)
    return train.emitError() << "ZeRO stage 2 reduces gradients in the "
                                "backward, but @"
                             << funcName
                             << " has no ds.backward_begin (run -ds-autodiff "
                                "first)";

  // Buckets by the top-level op after which they are ready (-1: the end).
  struct Ready {
    int64_t after;
    size_t engine, bucket;
  };
  SmallVector<Ready> ready;
  for (auto [e, layout] : llvm::enumerate(engines)) {
    if (layout.stage != 2)
      continue;
    for (auto [b, bucket] : llvm::enumerate(layout.buckets)) {
      int64_t after = -1;
      for (ParamOp param : bucket.params) {
        auto it = grads.find(param.getSymName());
        if (it == grads.end())
          continue;
        // Never before the backward starts (a ds.grad belongs after it).
        after = std::max({after, it->second.topLevel, backwardIndex});
      }
      ready.push_back({after, e, b});
    }
  }
  // In readiness order; the end of the backward last; ties by engine, then
  // bucket.
  llvm::stable_sort(ready, [](const Ready &a, const Ready &b) {
    auto key = [](const Ready &r) {
      return std::make_tuple(r.after < 0 ? INT64_MAX : r.after, r.engine,
                             r.bucket);
    };
    return key(a) < key(b);
  });
  Operation *terminator = body.getTerminator();
  SmallVector<Value> tokens;
  Operation *lastInserted = nullptr;
  int64_t lastAfter = -2;
  for (const Ready &r : ready) {
    EngineLayout &layout = engines[r.engine];
    BucketOp bucket = layout.bucketOps[r.bucket];
    OpBuilder builder(train.getContext());
    if (r.after < 0)
      builder.setInsertionPoint(terminator);
    else if (r.after == lastAfter)
      builder.setInsertionPointAfter(lastInserted);
    else
      builder.setInsertionPointAfter(topLevel[r.after]);
    Location loc =
        r.after < 0 ? terminator->getLoc() : topLevel[r.after]->getLoc();
    auto op = ReduceScatterOp::create(
        builder, loc, FlatSymbolRefAttr::get(bucket.getSymNameAttr()));
    tokens.push_back(op.getResult());
    lastInserted = op;
    lastAfter = r.after;
    ++numCollectives;
  }
  OpBuilder builder(terminator);
  for (Value token : tokens)
    WaitOp::create(builder, terminator->getLoc(), token);
  return success();
}

void ZeroPartitionPass::runOnOperation() {
  ModuleOp module = getOperation();
  FailureOr<int64_t> world = resolveWorldSize(module, worldSize);
  if (failed(world))
    return signalPassFailure();

  SmallVector<EngineLayout> engines;
  for (EngineOp engine : module.getOps<EngineOp>())
    if (!engine.getFrozen())
      engines.push_back({engine});
  if (engines.empty())
    return;

  // Each trainable engine's update, made by -ds-lower-optimizer.
  auto step = module.lookupSymbol<func::FuncOp>("step");
  for (EngineLayout &layout : engines) {
    if (step)
      for (auto update : step.getBody().front().getOps<OptimizerStepOp>())
        if (update.getEngine() == layout.engine.getSymName()) {
          if (layout.step) {
            update.emitError() << "engine @" << layout.engine.getSymName()
                               << " is updated twice in @step";
            return signalPassFailure();
          }
          layout.step = update;
        }
    if (!layout.step) {
      layout.engine.emitError()
          << "engine @" << layout.engine.getSymName()
          << " has no ds.optimizer_step in @step (run -ds-lower-optimizer "
             "first)";
      return signalPassFailure();
    }
  }

  auto train = module.lookupSymbol<func::FuncOp>(funcName);
  if (train && train.isExternal())
    train = nullptr;
  llvm::StringMap<GradPosition> grads = gradPositions(train);
  bool failedAny = false;
  for (EngineLayout &layout : engines)
    failedAny |= failed(layOut(layout, *world, grads));
  if (failedAny)
    return signalPassFailure();

  // Buckets are declared after the state, before the first function.
  OpBuilder builder(module.getBodyRegion());
  auto firstFunc = module.getOps<func::FuncOp>().begin();
  if (firstFunc != module.getOps<func::FuncOp>().end())
    builder.setInsertionPoint(*firstFunc);
  else
    builder.setInsertionPointToEnd(module.getBody());
  for (EngineLayout &layout : engines)
    declare(builder, layout);
  module->setAttr("ds.world_size", builder.getI64IntegerAttr(*world));

  if (failed(placeBackward(train, engines, grads)) ||
      failed(placeStep(step, engines)))
    return signalPassFailure();
}
