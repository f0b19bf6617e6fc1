//===- Rematerialize.cpp - activation checkpointing by recomputation ------===//
//
// For each module listed in `ds.checkpoint_modules`, the values its forward
// ops compute and the backward reads are recomputed right before the
// backward needs them, so the forward no longer keeps them alive (the plan's
// liveness frees them after their last forward use).
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

/// Whether running `op` again gives the same results and changes nothing
/// else: a pure operator without regions, or a list built or unpacked.
static bool isRecomputable(Operation *op) {
  if (op->getNumRegions() != 0)
    return false;
  if (isa<ListConstructOp, ListUnpackOp>(op))
    return true;
  auto aten = dyn_cast<AtenOp>(op);
  if (!aten)
    return false;
  std::optional<AtenOpInfo> info = lookupAtenOp(aten.getOp());
  return info && info->effect == AtenEffect::Pure;
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

  // Values that stay alive as before: the segment's outputs (read by the
  // forward outside it or returned) and the results of what cannot run
  // twice (random draws, side effects).
  auto isBackward = [&](Operation *user) {
    return !forward.contains(topLevelOf(user, &body));
  };
  llvm::DenseSet<Value> kept;
  for (Operation *op : segment)
    for (Value result : op->getResults()) {
      bool output = !isRecomputable(op) ||
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
  SmallVector<Operation *> worklist;
  for (Value v : recomputed)
    worklist.push_back(v.getDefiningOp());
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
  IRMapping mapping;
  unsigned clones = 0;
  for (Operation *op : segment)
    if (needed.contains(op)) {
      builder.clone(*op, mapping);
      cloned.push_back(op);
      ++clones;
    }
  for (Value v : recomputed) {
    Value clone = mapping.lookup(v);
    v.replaceUsesWithIf(
        clone, [&](OpOperand &use) { return isBackward(use.getOwner()); });
  }

  unsigned keptCount = 0;
  for (Value v : kept)
    if (llvm::any_of(v.getUsers(), isBackward))
      ++keptCount;
  emitRemark(func.getLoc())
      << "activation checkpoint '" << path << "': " << clones
      << " ops recomputed in the backward for " << recomputed.size()
      << " values; " << keptCount
      << " values of the segment stay kept for the backward (outputs, "
         "random draws, side effects)";
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

  // The forward's copies that only the backward read are dead now.
  for (Operation *op : llvm::reverse(cloned))
    if (op->use_empty())
      op->erase();
}
