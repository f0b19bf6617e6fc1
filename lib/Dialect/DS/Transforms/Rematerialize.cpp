//===- Rematerialize.cpp - activation checkpointing by recomputation ------===//
//
// For each module listed in `ds.checkpoint_modules`, the values its forward
// ops compute and the backward reads are recomputed right before the
// backward needs them, so the forward no longer keeps them alive (the plan's
// liveness frees them after their last forward use). Random draws run again
// from the generator state saved before the segment's first one.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/Analysis/ShardedParams.h"
#include "ds/Dialect/DS/IR/AtenRegistry.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSREMATERIALIZE
#include "ds/Dialect/DS/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// The forward of a training function: its top-level ops before
/// `ds.backward_begin`, numbered in order.
struct Forward {
  Operation *begin = nullptr;
  llvm::DenseMap<Operation *, unsigned> position;

  bool contains(Operation *op) const { return position.count(op); }
};

struct RematerializePass
    : public mlir::ds::impl::DSRematerializeBase<RematerializePass> {
  using DSRematerializeBase::DSRematerializeBase;

  void runOnOperation() override;

private:
  LogicalResult checkPaths(ModuleOp module, ArrayRef<StringRef> paths);
  LogicalResult checkpoint(func::FuncOp func, const Forward &forward,
                           StringRef path);

  /// Forward ops that were cloned: erased when the backward was their only
  /// reader.
  SmallVector<Operation *> cloned;
};

} // namespace

/// Whether `path` is `prefix` or a module below it.
static bool isWithin(StringRef path, StringRef prefix) {
  return path == prefix || isUnderModule(path, prefix);
}

/// The module an op ran in, when it records one.
static std::optional<StringRef> moduleOf(Operation *op) {
  if (auto aten = dyn_cast<AtenOp>(op))
    return aten.getModule();
  return std::nullopt;
}

/// The registry's effect of `op` when it is a known operator.
static std::optional<AtenEffect> atenEffectOf(Operation *op) {
  auto aten = dyn_cast<AtenOp>(op);
  if (!aten)
    return std::nullopt;
  std::optional<AtenOpInfo> info = lookupAtenOp(aten.getOp());
  if (!info)
    return std::nullopt;
  return info->effect;
}

/// Whether `op`, or an op in its regions, draws from the random number
/// generator.
static bool draws(Operation *op) {
  return op
      ->walk([](Operation *inner) {
        return atenEffectOf(inner) == AtenEffect::Random
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

/// Whether `op` is a random draw that gives the forward's results again once
/// the generator is back at the forward's state: an out-of-place random
/// operator (an in-place one, `dropout_`, would overwrite its input again).
static bool isReplayable(Operation *op) {
  if (op->getNumRegions() != 0 || atenEffectOf(op) != AtenEffect::Random)
    return false;
  StringRef name = cast<AtenOp>(op).getOp().split('.').first;
  return !name.ends_with("_");
}

/// Whether running `op` again gives the same results and changes nothing
/// else: a pure operator without regions, or a list built or unpacked. With
/// `replay`, also a random draw the generator's saved state repeats.
static bool isRecomputable(Operation *op, bool replay) {
  if (op->getNumRegions() != 0)
    return false;
  if (isa<ListConstructOp, ListUnpackOp>(op))
    return true;
  if (replay && isReplayable(op))
    return true;
  return atenEffectOf(op) == AtenEffect::Pure;
}

/// Whether the segment's random draws can be replayed: each is replayable
/// and nothing outside the segment draws between the first and the last, so
/// from the state saved before the first the recomputation draws them all
/// again.
static bool canReplay(ArrayRef<Operation *> randomOps,
                      const llvm::SetVector<Operation *> &segment) {
  if (randomOps.empty() || !llvm::all_of(randomOps, isReplayable))
    return false;
  for (Operation *op = randomOps.front(); op != randomOps.back();
       op = op->getNextNode())
    if (!segment.contains(op) && draws(op))
      return false;
  return true;
}

/// The top-level op of `func`'s body that holds `op` (itself, or the op whose
/// region it is nested in).
static Operation *topLevelOf(Operation *op, Block *body) {
  while (op->getBlock() != body)
    op = op->getParentOp();
  return op;
}

LogicalResult RematerializePass::checkPaths(ModuleOp module,
                                            ArrayRef<StringRef> paths) {
  StringRef attr = DSDialect::getCheckpointModulesAttrName();
  for (auto [i, path] : llvm::enumerate(paths)) {
    if (path.empty())
      return module.emitError()
             << "'" << attr
             << "' lists the root module (\"\"): nothing outside it would "
                "keep its inputs; list its submodules instead";
    for (StringRef other : paths.take_front(i))
      if (isWithin(path, other) || isWithin(other, path))
        return module.emitError()
               << "'" << attr << "' lists '" << path << "' and '" << other
               << "', one inside the other; list the outer one only";
  }
  return success();
}

LogicalResult RematerializePass::checkpoint(func::FuncOp func,
                                            const Forward &forward,
                                            StringRef path) {
  Block &body = func.getBody().front();
  auto inSegment = [&](Operation *op) {
    std::optional<StringRef> module = moduleOf(op);
    return forward.contains(op) && module && isWithin(*module, path);
  };

  // The segment's ops, and the lists that only gather or split its values.
  llvm::SetVector<Operation *> segment;
  for (Operation &op : body) {
    if (&op == forward.begin)
      break;
    bool member = inSegment(&op);
    if (!member && isa<ListConstructOp, ListUnpackOp>(op))
      member = !op.getOperands().empty() &&
               llvm::all_of(op.getOperands(), [&](Value v) {
                 Operation *def = v.getDefiningOp();
                 return def && segment.contains(def);
               });
    if (member)
      segment.insert(&op);
  }
  if (!llvm::any_of(segment, [&](Operation *op) { return inSegment(op); }))
    return func.emitError()
           << "'" << DSDialect::getCheckpointModulesAttrName() << "' lists '"
           << path << "', which runs no op in the forward of @"
           << func.getSymName();

  // Random draws run again from the generator state saved before the
  // segment's first draw, as torch.utils.checkpoint does; when that cannot
  // give the forward's draws, they stay kept.
  SmallVector<Operation *> randomOps;
  for (Operation *op : segment)
    if (draws(op))
      randomOps.push_back(op);
  bool replay = canReplay(randomOps, segment);

  // Values that stay alive as before: the segment's outputs (read by the
  // forward outside it or returned) and the results of what cannot run
  // twice (side effects, draws that are not replayed).
  auto isBackward = [&](Operation *user) {
    return !forward.contains(topLevelOf(user, &body));
  };
  llvm::DenseSet<Value> kept;
  for (Operation *op : segment)
    for (Value result : op->getResults()) {
      bool output = !isRecomputable(op, replay) ||
                    llvm::any_of(result.getUsers(), [&](Operation *user) {
                      Operation *top = topLevelOf(user, &body);
                      return isa<func::ReturnOp>(top) ||
                             (forward.contains(top) && !segment.contains(top));
                    });
      if (output)
        kept.insert(result);
    }

  // What the backward reads and the forward no longer keeps for it.
  SmallVector<Value> recomputed;
  for (Operation *op : segment)
    for (Value result : op->getResults())
      if (!kept.contains(result) && llvm::any_of(result.getUsers(), isBackward))
        recomputed.push_back(result);
  if (recomputed.empty()) {
    emitRemark(func.getLoc())
        << "activation checkpoint '" << path
        << "': the backward reads none of its values; nothing to recompute";
    return success();
  }

  // The ops that compute them from the segment's inputs and kept values.
  llvm::DenseSet<Operation *> needed;
  auto addNeeded = [&](ArrayRef<Operation *> roots) {
    SmallVector<Operation *> worklist(roots);
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (!needed.insert(op).second)
        continue;
      for (Value operand : op->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (def && segment.contains(def) && !kept.contains(operand))
          worklist.push_back(def);
      }
    }
  };
  SmallVector<Operation *> roots;
  for (Value v : recomputed)
    roots.push_back(v.getDefiningOp());
  addNeeded(roots);
  // A replayed draw needs the draws before it in the segment, which advance
  // the generator to its state.
  ArrayRef<Operation *> replayed;
  if (replay) {
    auto last = llvm::find_if(llvm::reverse(randomOps), [&](Operation *op) {
      return needed.contains(op);
    });
    replayed = ArrayRef<Operation *>(randomOps).take_front(
        std::distance(last, randomOps.rend()));
    addNeeded(replayed);
  }

  // Clone them in forward order before the first backward op that reads one.
  Operation *insertBefore = nullptr;
  for (Value v : recomputed)
    for (Operation *user : v.getUsers()) {
      if (!isBackward(user))
        continue;
      Operation *top = topLevelOf(user, &body);
      if (!insertBefore || top->isBeforeInBlock(insertBefore))
        insertBefore = top;
    }
  OpBuilder builder(insertBefore);
  Value current;
  if (!replayed.empty()) {
    // Saved in the forward, set for the recomputation, and the backward's
    // own state set back after it.
    Location loc = replayed.front()->getLoc();
    OpBuilder forwardBuilder(replayed.front());
    TargetDevice device = getTargetDevice(body.getParentOp());
    Value saved = RngStateGetOp::create(forwardBuilder, loc, device);
    current = RngStateGetOp::create(builder, loc, device);
    RngStateSetOp::create(builder, loc, saved);
  }
  IRMapping mapping;
  unsigned clones = 0;
  for (Operation *op : segment)
    if (needed.contains(op)) {
      builder.clone(*op, mapping);
      cloned.push_back(op);
      ++clones;
    }
  if (current)
    RngStateSetOp::create(builder, current.getLoc(), current);
  for (Value v : recomputed) {
    Value clone = mapping.lookup(v);
    v.replaceUsesWithIf(
        clone, [&](OpOperand &use) { return isBackward(use.getOwner()); });
  }

  unsigned keptCount = 0;
  for (Value v : kept)
    if (llvm::any_of(v.getUsers(), isBackward))
      ++keptCount;
  InFlightDiagnostic remark = emitRemark(func.getLoc());
  remark << "activation checkpoint '" << path << "': " << clones
         << " ops recomputed in the backward for " << recomputed.size()
         << " values; " << keptCount
         << " values of the segment stay kept for the backward (outputs, "
            "random draws, side effects)";
  if (!replayed.empty())
    remark << "; " << replayed.size()
           << " random draws replayed from the generator state saved before "
              "the first";
  return success();
}

void RematerializePass::runOnOperation() {
  ModuleOp module = getOperation();
  SmallVector<StringRef> paths = getCheckpointModules(module);
  if (paths.empty())
    return;
  if (failed(checkPaths(module, paths)))
    return signalPassFailure();
  auto func = module.lookupSymbol<func::FuncOp>(funcName);
  if (!func || func.isExternal())
    return;
  Block &body = func.getBody().front();
  Forward forward;
  for (Operation &op : body) {
    if (isa<BackwardBeginOp>(op)) {
      forward.begin = &op;
      break;
    }
    forward.position[&op] = forward.position.size();
  }
  if (!forward.begin)
    return;
  for (StringRef path : paths)
    if (failed(checkpoint(func, forward, path)))
      return signalPassFailure();

  // The forward's copies that only the backward read are dead now; its
  // draws stay, since they advance the generator.
  for (Operation *op : llvm::reverse(cloned))
    if (isOpTriviallyDead(op))
      op->erase();
}
