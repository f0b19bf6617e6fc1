//===- ZeroPartition.cpp - flat buffers, buckets and ZeRO collectives -----===//

#include "ds/Dialect/DS/Analysis/ZeroLayout.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Analysis/LeafModules.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "ds/Dialect/DS/Analysis/ShardedParams.h"
#include "ds/Dialect/DS/Utils/EngineConfigAttr.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Support/DebugStringHelper.h"
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
  /// Stage 3: the parameters stay whole on every rank.
  bool persistent = false;
  /// Stage 3: the leaf module whose subtree the bucket holds.
  const LeafModule *leaf = nullptr;
  /// The dtype its collectives move; null: the gradient buffer's (fp32).
  Type dtype;
  /// Autocast: a leaf bucket that holds safe and other parameters (it
  /// communicates in f32).
  bool mixedLeaf = false;
};

/// How an engine's buckets communicate (from its config's precision).
struct CommPolicy {
  enum class Kind { None, Native, Autocast } kind = Kind::None;
  /// Native: communication_data_type; autocast: the autocast dtype.
  Type lowDtype;
  /// Native: whether the config names communication_data_type.
  bool given = false;
  /// Autocast: lower_precision_safe_modules.
  std::vector<std::string> safeModules;

  /// The entry of lower_precision_safe_modules that the class of the module
  /// owning `param` matches, if any (autocast only).
  std::optional<StringRef> safeEntry(ParamOp param) const {
    for (const std::string &spec : safeModules)
      if (leafClassMatches(spec, param.getModuleClass()))
        return StringRef(spec);
    return std::nullopt;
  }
  /// The dtype `param` is communicated in (null: none).
  Type dtypeOf(ParamOp param) const {
    switch (kind) {
    case Kind::None:
      return Type();
    case Kind::Native:
      return lowDtype;
    case Kind::Autocast:
      return safeEntry(param) ? lowDtype : Float32Type::get(param.getContext());
    }
    return Type();
  }
};

/// One engine's flat buffer.
struct EngineLayout {
  EngineOp engine;
  /// A frozen stage 3 engine: sharded parameters, no gradients, no update.
  bool frozen = false;
  int64_t stage = 0;
  OptimizerStepOp step;
  /// Trainable parameters in layout order, with their offsets.
  SmallVector<std::pair<ParamOp, int64_t>> params;
  SmallVector<BucketLayout> buckets;
  SmallVector<BucketOp> bucketOps;
  int64_t numel = 0;
  /// Stage 3: zero_optimization.stage3_max_reuse_distance.
  int64_t maxReuseDistance = 0;
  /// Stage 3: the outermost leaf modules, one bucket each.
  SmallVector<LeafModule> leaves;
  CommPolicy comm;
};

int64_t numelOf(ParamOp param) {
  return cast<RankedTensorType>(param.getType()).getNumElements();
}

struct ZeroPartitionPass
    : public mlir::ds::impl::DSZeroPartitionBase<ZeroPartitionPass> {
  using DSZeroPartitionBase::DSZeroPartitionBase;

  void runOnOperation() override;

private:
  LogicalResult layOut(EngineLayout &layout, int64_t world,
                       const llvm::StringMap<GradPosition> &grads);
  void declare(OpBuilder &builder, EngineLayout &layout);
  void remarkCommDtypes(EngineLayout &layout);
  LogicalResult placeStep(func::FuncOp step,
                          MutableArrayRef<EngineLayout> engines);
  LogicalResult placeBackward(func::FuncOp train,
                              MutableArrayRef<EngineLayout> engines,
                              const llvm::StringMap<GradPosition> &grads);
  void placeGathers(func::FuncOp func, bool training,
                    ArrayRef<EngineLayout> engines,
                    const ShardedParams &sharded);
  void readAgainInBackward(Block &body, Operation *backwardBegin,
                           const ShardedParams &sharded);
};

} // namespace

/// How `precision` makes the engine's buckets communicate.
static CommPolicy commPolicyOf(PrecisionAttr precision) {
  CommPolicy policy;
  switch (precision.getMode()) {
  case PrecisionMode::FP32:
    break;
  case PrecisionMode::BF16:
  case PrecisionMode::FP16:
    policy.kind = CommPolicy::Kind::Native;
    policy.lowDtype = precision.getResolvedCommunicationDtype();
    policy.given = bool(precision.getCommunicationDataType());
    break;
  case PrecisionMode::Autocast:
    policy.kind = CommPolicy::Kind::Autocast;
    policy.lowDtype = precision.getAutocastDtype();
    policy.safeModules = lowerPrecisionSafeModules(precision);
    break;
  }
  return policy;
}

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
  FailureOr<EngineConfigAttr> config =
      engine.requireConfig("-ds-zero-partition");
  if (failed(config))
    return failure();
  ZeroAttr zero = config->getZeroOrDefault();
  layout.stage = zero.getStage();
  layout.maxReuseDistance = zero.getStage3MaxReuseDistance();
  layout.comm = commPolicyOf(config->getPrecisionOrDefault());
  if (engine.isPartitioned())
    return engine.emitError()
           << "engine @" << engine.getSymName() << " is already partitioned";

  // Trainable parameters (a frozen engine: all of them) in declaration
  // order, then in backward order.
  auto module = getOperation();
  SmallVector<ParamOp> params;
  for (ParamOp param : module.getOps<ParamOp>())
    if ((param.getRequiresGrad() || layout.frozen) && param.getEngine() &&
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
             << param.getSymName() << ") "
             << (layout.frozen ? "" : "trainable ")
             << "parameters; one flat buffer holds one dtype";
  }
  // The policy (ZeroLayout.h) on sizes and dtypes; the leaf modules first,
  // so that each parameter knows its leaf.
  auto [capacity, capacityKey] = bucketCapacity(
      layout.stage, zero.getReduceBucketSize(), zero.getAllgatherBucketSize());
  if (capacity < 1 && !params.empty())
    return engine.emitError()
           << "config of engine @" << engine.getSymName() << ": " << capacityKey
           << ": a bucket must hold at least 1 element, "
              "got "
           << capacity;
  if (layout.stage == 3) {
    FailureOr<SmallVector<LeafModule>> leaves =
        findLeafModules(engine, leafModuleConfig(zero.getLeafModule()));
    if (failed(leaves))
      return failure();
    layout.leaves = std::move(*leaves);
  }
  SmallVector<LayoutParam> items;
  for (ParamOp param : params) {
    LayoutParam item;
    item.numel = numelOf(param);
    item.dtype = layout.comm.dtypeOf(param);
    auto leaf = llvm::find_if(layout.leaves, [&](const LeafModule &l) {
      return l.contains(param.getModule());
    });
    if (leaf != layout.leaves.end())
      item.leaf = leaf - layout.leaves.begin();
    if (auto it = grads.find(param.getSymName()); it != grads.end())
      item.gradPosition = {it->second.topLevel, it->second.sequence};
    items.push_back(item);
  }
  ZeroLayoutPolicy policy;
  policy.stage = layout.stage;
  policy.worldSize = world;
  policy.capacity = capacity;
  policy.persistenceThreshold = zero.getStage3ParamPersistenceThreshold();
  policy.numLeaves = layout.leaves.size();
  policy.wideDtype = Float32Type::get(engine.getContext());
  ZeroLayout result = layOutParams(items, layoutOrder(items), policy);
  for (auto [index, offset] : result.offsets)
    layout.params.push_back({params[index], offset});
  for (LayoutBucket &planned : result.buckets) {
    BucketLayout bucket;
    bucket.offset = planned.offset;
    bucket.numel = planned.numel;
    for (unsigned index : planned.params)
      bucket.params.push_back(params[index]);
    bucket.persistent = planned.persistent;
    if (planned.leaf >= 0)
      bucket.leaf = &layout.leaves[planned.leaf];
    bucket.dtype = planned.dtype;
    bucket.mixedLeaf = planned.mixedLeaf;
    layout.buckets.push_back(std::move(bucket));
  }
  layout.numel = result.numel;
  paddingElements += result.padding;
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
    auto op = BucketOp::create(
        builder, engine.getLoc(), name, engine.getSymName(), bucket.offset,
        bucket.numel, bucket.persistent,
        bucket.leaf ? builder.getStringAttr(bucket.leaf->path) : StringAttr(),
        bucket.dtype ? TypeAttr::get(bucket.dtype) : TypeAttr());
    if (bucket.leaf) {
      int64_t used = 0;
      for (ParamOp param : bucket.params)
        used += numelOf(param);
      op.emitRemark() << "ZeRO-3 leaf module '" << bucket.leaf->path << "'"
                      << (bucket.leaf->moduleClass.empty()
                              ? std::string()
                              : " (" + bucket.leaf->moduleClass + ")")
                      << ", matched by " << bucket.leaf->matchedBy
                      << ": bucket @" << name << " holds its "
                      << bucket.params.size()
                      << (bucket.params.size() == 1 ? " parameter ("
                                                    : " parameters (")
                      << used << " elements), gathered at once"
                      << (layout.frozen ? "" : " and reduced once");
      ++numLeafModules;
    }
    layout.bucketOps.push_back(op);
  }
  remarkCommDtypes(layout);
}

/// "fc1.weight, fc1.bias" for `params`.
static std::string paramList(ArrayRef<ParamOp> params) {
  std::string text;
  for (ParamOp param : params)
    text += (text.empty() ? "" : ", ") + param.getSymName().str();
  return text;
}

/// One remark per engine whose buckets carry a dtype: which bucket moves
/// which dtype, and why.
void ZeroPartitionPass::remarkCommDtypes(EngineLayout &layout) {
  const CommPolicy &comm = layout.comm;
  if (comm.kind == CommPolicy::Kind::None || layout.bucketOps.empty())
    return;
  EngineOp engine = layout.engine;
  std::string what = layout.frozen ? "gathers" : "reduces and gathers";
  if (!layout.frozen && layout.stage == 0)
    what = "all-reduces";
  if (comm.kind == CommPolicy::Kind::Native) {
    InFlightDiagnostic remark = engine.emitRemark()
                                << "engine @" << engine.getSymName() << " "
                                << what << " every bucket (";
    for (auto [i, op] : llvm::enumerate(layout.bucketOps))
      remark << (i ? ", @" : "@") << op.getSymName();
    remark << ") in " << debugString(comm.lowDtype) << " ("
           << (comm.given ? "communication_data_type"
                          : "the model dtype: no communication_data_type")
           << ")";
    return;
  }
  // Autocast: each bucket with its parameters and, for the low dtype, the
  // classes that made them safe.
  InFlightDiagnostic remark = engine.emitRemark()
                              << "torch_autocast engine @"
                              << engine.getSymName() << " " << what
                              << " the parameters of lower-precision-safe "
                                 "modules in "
                              << debugString(comm.lowDtype)
                              << ", the others in f32: ";
  for (auto [i, bucket] : llvm::enumerate(layout.buckets)) {
    remark << (i ? "; @" : "@") << layout.bucketOps[i].getSymName() << " ("
           << paramList(bucket.params);
    if (bucket.dtype == comm.lowDtype) {
      // The entries of lower_precision_safe_modules that matched.
      SmallVector<StringRef> entries;
      for (ParamOp param : bucket.params)
        if (std::optional<StringRef> entry = comm.safeEntry(param);
            entry && !llvm::is_contained(entries, *entry))
          entries.push_back(*entry);
      remark << ": ";
      for (auto [k, entry] : llvm::enumerate(entries))
        remark << (k ? ", " : "") << entry;
    } else if (bucket.mixedLeaf) {
      remark << ": leaf module '" << bucket.leaf->path
             << "' mixes safe and other parameters, so its one bucket stays "
                "in f32";
    }
    remark << ") in " << debugString(bucket.dtype);
  }
}

/// Rebuilds @step: every engine's reductions first, then per engine its
/// waits, its update and (stages 1-2, and stage 3's persistent buckets) its
/// all-gathers, whose waits come last.
LogicalResult
ZeroPartitionPass::placeStep(func::FuncOp step,
                             MutableArrayRef<EngineLayout> engines) {
  // Everything goes before the op after the last update (the return).
  Operation *anchor = nullptr;
  for (EngineLayout &layout : engines)
    if (!layout.frozen && (!anchor || anchor->isBeforeInBlock(layout.step)))
      anchor = layout.step;
  if (!anchor)
    return success(); // Only frozen engines: nothing happens at the boundary.
  anchor = anchor->getNextNode();
  OpBuilder builder(anchor);

  SmallVector<SmallVector<Value>> reductions(engines.size());
  for (auto [e, layout] : llvm::enumerate(engines)) {
    if (layout.stage >= 2 || layout.frozen)
      continue; // Reduced in the backward, or nothing to reduce.
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
    if (layout.frozen)
      continue; // No update; persistent buckets are whole from the start.
    for (Value token : reductions[e])
      WaitOp::create(builder, layout.step.getLoc(), token);
    layout.step->moveBefore(anchor);
    if (layout.stage == 0)
      continue;
    for (BucketOp bucket : layout.bucketOps) {
      if (bucket.isShardedAt(layout.stage))
        continue; // Gathered where it is read.
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

/// Stages 2 and 3: a reduce_scatter of each bucket after the top-level op
/// that holds the last ds.grad writing into it; the waits end the backward.
LogicalResult
ZeroPartitionPass::placeBackward(func::FuncOp train,
                                 MutableArrayRef<EngineLayout> engines,
                                 const llvm::StringMap<GradPosition> &grads) {
  auto inBackward = [](const EngineLayout &l) {
    return l.stage >= 2 && !l.frozen;
  };
  auto first = llvm::find_if(engines, inBackward);
  if (first == engines.end())
    return success();
  for (EngineLayout &layout : engines)
    if (inBackward(layout) && !layout.bucketOps.empty() && !train)
      return layout.engine.emitError()
             << "ZeRO stage " << layout.stage
             << " reduces gradients in the backward of @" << funcName
             << ", which the module does not have (run "
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
    return train.emitError() << "ZeRO stage " << first->stage
                             << " reduces gradients in the "
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
    if (!inBackward(layout))
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

/// The backward of -ds-autodiff uses the forward's ds.get_param values. At
/// stage 3 those die with the forward (the bucket is released), so every
/// backward use of a sharded parameter gets a ds.get_param of its own, right
/// before the first top-level backward op that uses it.
void ZeroPartitionPass::readAgainInBackward(Block &body,
                                            Operation *backwardBegin,
                                            const ShardedParams &sharded) {
  SmallVector<GetParamOp> forwardReads;
  for (Operation &op : body) {
    if (&op == backwardBegin)
      break;
    if (auto get = dyn_cast<GetParamOp>(op))
      if (sharded.bucketOf(get.getName()))
        forwardReads.push_back(get);
  }
  for (GetParamOp get : forwardReads) {
    SmallVector<OpOperand *> late;
    Operation *firstUser = nullptr;
    for (OpOperand &use : get->getUses()) {
      Operation *top = body.findAncestorOpInBlock(*use.getOwner());
      if (!backwardBegin->isBeforeInBlock(top))
        continue;
      late.push_back(&use);
      if (!firstUser || top->isBeforeInBlock(firstUser))
        firstUser = top;
    }
    if (late.empty())
      continue;
    OpBuilder builder(firstUser);
    Operation *again = builder.clone(*get);
    for (OpOperand *use : late)
      use->set(again->getResult(0));
    ++numBackwardReads;
    if (get->use_empty())
      get->erase();
  }
}

/// "module 'moe.experts.0'" for the parameters `reads` name.
static std::string describeModules(ArrayRef<ParamRead> reads) {
  SmallVector<StringRef> modules;
  for (ParamRead read : reads)
    if (!llvm::is_contained(modules, read.param.getModule()))
      modules.push_back(read.param.getModule());
  llvm::sort(modules);
  if (modules.size() > 1)
    if (std::string common = commonModulePrefix(modules); !common.empty())
      return "module '" + common + "'";
  std::string text = modules.size() == 1 ? "module " : "modules ";
  for (auto [i, module] : llvm::enumerate(modules))
    text += (i ? ", '" : "'") + module.str() + "'";
  return text;
}

/// Whether `branch` is routing inside the leaf module whose bucket is
/// `bucket`: some op in it names a module of the leaf's subtree and every
/// op that names a module lies there (a leaf called under a ds.if of an
/// enclosing module is not). Ops without a TorchScript origin (no module,
/// or an empty one and no class: what the backward adds, e.g. the zeros of
/// an untaken branch) do not count either way.
static bool isLeafRouting(IfOp branch, BucketOp bucket) {
  std::optional<StringRef> leaf = bucket.getLeaf();
  if (!leaf)
    return false;
  auto engine = SymbolTable::lookupNearestSymbolFrom<EngineOp>(
      bucket, bucket.getEngineAttr());
  std::string qualified = leaf->str();
  if (engine && !engine.getModule().empty())
    qualified = leaf->empty() ? engine.getModule().str()
                              : (engine.getModule() + "." + *leaf).str();
  bool inLeaf = false;
  WalkResult result = branch->walk([&](Operation *inner) {
    auto module = inner->getAttrOfType<StringAttr>("module");
    auto moduleClass = inner->getAttrOfType<StringAttr>("module_class");
    // No origin: no module, or an empty one without a class (the root's
    // own ops carry the root's class).
    if (!module || (module.getValue().empty() &&
                    (!moduleClass || moduleClass.getValue().empty())))
      return WalkResult::advance();
    if (module.getValue() != qualified &&
        !isUnderModule(module.getValue(), qualified))
      return WalkResult::interrupt();
    inLeaf = true;
    return WalkResult::advance();
  });
  return inLeaf && !result.wasInterrupted();
}

/// Stage 3: gathers, waits and releases of the sharded buckets in `func`.
/// Each bucket is gathered (and waited) right before the first top-level op
/// that reads one of its parameters and released right after the last, once
/// for the forward and once for the backward (`training`, split at
/// ds.backward_begin). A bucket whose forward release and backward gather
/// would have at most stage3_max_reuse_distance (> 0) elements of its
/// engine's buckets gathered between them stays gathered across the turn.
void ZeroPartitionPass::placeGathers(func::FuncOp func, bool training,
                                     ArrayRef<EngineLayout> engines,
                                     const ShardedParams &sharded) {
  if (!func || func.isExternal() || sharded.empty())
    return;
  Block &body = func.getBody().front();
  Operation *backwardBegin = nullptr;
  if (training)
    for (Operation &op : body)
      if (isa<BackwardBeginOp>(op)) {
        backwardBegin = &op;
        break;
      }
  if (backwardBegin)
    readAgainInBackward(body, backwardBegin, sharded);

  // The sharded buckets in engine order, then by offset.
  struct Span {
    int64_t first = -1, last = -1;
  };
  struct Use {
    BucketOp bucket;
    int64_t engine = 0;
    Span span[2]; // forward, backward
    bool keep = false;
  };
  SmallVector<Use, 0> uses;
  llvm::DenseMap<Operation *, size_t> useOf;
  for (auto [e, layout] : llvm::enumerate(engines))
    for (BucketOp bucket : layout.bucketOps)
      if (sharded.isSharded(bucket)) {
        useOf[bucket] = uses.size();
        uses.push_back({bucket, int64_t(e)});
      }

  SmallVector<Operation *> top;
  int64_t turn = -1;
  for (Operation &op : body.without_terminator()) {
    if (&op == backwardBegin)
      turn = top.size();
    top.push_back(&op);
  }
  SmallVector<ParamRead> reads;
  for (auto [i, op] : llvm::enumerate(top)) {
    reads.clear();
    sharded.collectReads(op, reads);
    int segment = turn >= 0 && int64_t(i) > turn ? 1 : 0;
    SmallVector<StringRef> bucketNames;
    for (ParamRead read : reads) {
      Span &span = uses[useOf.lookup(read.bucket)].span[segment];
      if (span.first < 0)
        span.first = i;
      span.last = i;
      if (!llvm::is_contained(bucketNames, read.bucket.getSymName()))
        bucketNames.push_back(read.bucket.getSymName());
    }
    // A leaf module's own routing: its bucket is gathered before the ds.if
    // by design, no remark.
    auto branch = dyn_cast<IfOp>(op);
    bool leafRouting = llvm::all_of(reads, [&](ParamRead read) {
      return branch && isLeafRouting(branch, read.bucket);
    });
    if (branch && !reads.empty() && !leafRouting) {
      // The backward's ds.if has the forward's location: say which it is.
      std::string where = turn < 0 ? "of @" + func.getSymName().str()
                                   : (segment ? "in the backward of @"
                                              : "in the forward of @") +
                                         func.getSymName().str();
      InFlightDiagnostic remark = op->emitRemark()
                                  << "ZeRO-3: the parameters of "
                                  << describeModules(reads)
                                  << " are read inside this data-dependent "
                                     "ds.if "
                                  << where << "; bucket";
      remark << (bucketNames.size() > 1 ? "s " : " ");
      for (auto [k, name] : llvm::enumerate(bucketNames))
        remark << (k ? ", @" : "@") << name;
      remark << (bucketNames.size() > 1 ? " are" : " is")
             << " gathered before it on every rank, whether or not the "
                "branch runs (a collective inside the branch could deadlock)";
    }
  }

  // stage3_max_reuse_distance: the elements the release-everything schedule
  // gathers between the bucket's forward release and its backward gather.
  for (Use &use : uses) {
    if (use.span[0].first < 0 || use.span[1].first < 0)
      continue;
    int64_t between = 0;
    for (Use &other : uses) {
      if (&other == &use || other.engine != use.engine)
        continue;
      if (other.span[0].first > use.span[0].last)
        between += other.bucket.getNumel();
      if (other.span[1].first >= 0 && other.span[1].first < use.span[1].first)
        between += other.bucket.getNumel();
    }
    int64_t distance = engines[use.engine].maxReuseDistance;
    use.keep = distance > 0 && between <= distance;
    numKeptBuckets += use.keep;
  }

  SmallVector<SmallVector<BucketOp>> gatherBefore(top.size()),
      releaseAfter(top.size());
  for (Use &use : uses) {
    auto interval = [&](int64_t first, int64_t last) {
      gatherBefore[first].push_back(use.bucket);
      releaseAfter[last].push_back(use.bucket);
    };
    if (use.keep) {
      interval(use.span[0].first, use.span[1].last);
      continue;
    }
    for (const Span &span : use.span)
      if (span.first >= 0)
        interval(span.first, span.last);
  }
  for (auto [i, op] : llvm::enumerate(top)) {
    OpBuilder builder(op);
    for (BucketOp bucket : gatherBefore[i]) {
      auto ref = FlatSymbolRefAttr::get(bucket.getSymNameAttr());
      Value token = AllGatherOp::create(builder, op->getLoc(), ref);
      WaitOp::create(builder, op->getLoc(), token);
      ++numCollectives;
    }
    builder.setInsertionPointAfter(op);
    for (BucketOp bucket : releaseAfter[i]) {
      ReleaseOp::create(builder, op->getLoc(),
                        FlatSymbolRefAttr::get(bucket.getSymNameAttr()));
      ++numReleases;
    }
  }
}

void ZeroPartitionPass::runOnOperation() {
  ModuleOp module = getOperation();
  int64_t world = getWorldSize(module).value_or(1);

  // Trainable engines, and frozen ones at stage 3 (sharded parameters).
  SmallVector<EngineLayout, 0> engines;
  for (EngineOp engine : module.getOps<EngineOp>()) {
    if (!engine.getFrozen()) {
      engines.push_back({engine});
      continue;
    }
    FailureOr<EngineConfigAttr> config =
        engine.requireConfig("-ds-zero-partition");
    if (failed(config))
      return signalPassFailure();
    if (config->getZeroOrDefault().getStage() == 3)
      engines.push_back({engine, /*frozen=*/true});
  }
  if (engines.empty())
    return;

  // Each trainable engine's update, made by -ds-lower-optimizer.
  auto step = module.lookupSymbol<func::FuncOp>("step");
  for (EngineLayout &layout : engines) {
    if (layout.frozen)
      continue;
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
    failedAny |= failed(layOut(layout, world, grads));
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
  setWorldSize(module, world);

  if (failed(placeBackward(train, engines, grads)) ||
      failed(placeStep(step, engines)))
    return signalPassFailure();

  // Stage 3: the sharded buckets are gathered where they are read.
  ShardedParams sharded(module);
  placeGathers(train, /*training=*/true, engines, sharded);
  auto eval = module.lookupSymbol<func::FuncOp>(evalFuncName);
  if (eval != train)
    placeGathers(eval, /*training=*/false, engines, sharded);
}
