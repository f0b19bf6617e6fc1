//===- ControlFlow.cpp - prim::If and prim::Loop --------------------------===//
//
// The example shapes decide most control flow: `prim::If` on a static
// condition is inlined (the other branch, with the shape checks' `aten::warn`
// and `prim::RaiseException`, disappears) and `prim::Loop` with a static trip
// count is unrolled. A condition computed from tensor data becomes `ds.if`
// with both branches; values a branch updates in place leave it as extra
// results. A loop whose trip count or continuation depends on tensor data is
// rejected.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::import;
namespace jit = torch::jit;

LogicalResult GraphImporter::importLoop(jit::Node *node) {
  Enclosing inside(*this, node);
  // prim::Loop(max_trip_count, initial_condition, carried...)
  Abstract maxTrip = lookup(node->input(0));
  Abstract cond = lookup(node->input(1));
  if (!maxTrip.isStatic() || !cond.isStatic())
    return error(node) << "loop whose trip count depends on tensor data is "
                          "not supported (the import unrolls loops with a "
                          "static trip count)";
  SmallVector<Abstract> carried;
  for (size_t i = 2; i < node->inputs().size(); ++i)
    carried.push_back(lookup(node->input(i)));
  int64_t trips = maxTrip.example.toInt();
  bool keepGoing = cond.example.toBool();
  constexpr int64_t kMaxUnroll = 100000;
  jit::Block *body = node->blocks()[0];
  for (int64_t i = 0; keepGoing && i < trips; ++i) {
    if (i >= kMaxUnroll)
      return error(node) << "loop runs more than " << kMaxUnroll
                         << " iterations; refusing to unroll it";
    SmallVector<Abstract> args;
    args.push_back(Abstract::makeStatic(i));
    args.append(carried.begin(), carried.end());
    SmallVector<Abstract> outs;
    if (failed(importBlock(body, args, outs)))
      return failure();
    if (!outs[0].isStatic())
      return error(node) << "loop whose continuation depends on tensor data "
                            "is not supported (a `while` on a tensor value "
                            "cannot be unrolled)";
    keepGoing = outs[0].example.toBool();
    carried.assign(outs.begin() + 1, outs.end());
  }
  for (auto [out, value] : llvm::zip(node->outputs(), carried))
    bind(out, value);
  return success();
}

/// Result type of a `ds.if` whose branches yield `a` and `b`: dims on which
/// they disagree become dynamic.
static Type mergeBranchTypes(Type a, Type b) {
  if (a == b)
    return a;
  auto ta = dyn_cast<RankedTensorType>(a);
  auto tb = dyn_cast<RankedTensorType>(b);
  if (ta && tb && ta.getRank() == tb.getRank() &&
      ta.getElementType() == tb.getElementType()) {
    SmallVector<int64_t> shape;
    for (int64_t d = 0; d < ta.getRank(); ++d)
      shape.push_back(ta.getDimSize(d) == tb.getDimSize(d)
                          ? ta.getDimSize(d)
                          : ShapedType::kDynamic);
    return RankedTensorType::get(shape, ta.getElementType());
  }
  return {};
}

LogicalResult GraphImporter::importIf(jit::Node *node) {
  Enclosing inside(*this, node);
  Abstract cond = lookup(node->input());
  if (cond.isStatic()) {
    // Decided by the example shapes: inline the branch that is taken.
    jit::Block *taken = node->blocks()[cond.example.toBool() ? 0 : 1];
    SmallVector<Abstract> outs;
    if (failed(importBlock(taken, {}, outs)))
      return failure();
    for (auto [out, value] : llvm::zip(node->outputs(), outs))
      bind(out, value);
    return success();
  }

  // Data-dependent: both branches become regions of a ds.if.
  Location l = loc(node);
  bool exampleTaken = cond.example.isBool() ? cond.example.toBool() : true;
  auto placeholder = IfOp::create(builder, l, TypeRange{}, cond.value);
  struct BranchResult {
    SmallVector<Abstract> outs;
    llvm::MapVector<jit::Value *, Abstract> rebound;
    Block *block;
  } branches[2];
  for (int b = 0; b < 2; ++b) {
    Region &region =
        b == 0 ? placeholder.getThenRegion() : placeholder.getElseRegion();
    Block *block = new Block();
    region.push_back(block);
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(block);
    scopes.emplace_back();
    bool isTaken = (b == 0) == exampleTaken;
    if (!isTaken)
      ++speculative;
    LogicalResult r = importBlock(node->blocks()[b], {}, branches[b].outs);
    if (!isTaken)
      --speculative;
    for (jit::Value *v : scopes.back().rebound)
      branches[b].rebound[v] = scopes.back().map[v];
    scopes.pop_back();
    branches[b].block = block;
    if (failed(r))
      return failure();
  }

  // Values the branches rebound (in-place updates of outer values) leave the
  // ds.if as extra results after the branch outputs.
  llvm::SmallVector<jit::Value *> reboundKeys;
  for (auto &br : branches)
    for (auto &kv : br.rebound)
      if (!llvm::is_contained(reboundKeys, kv.first))
        reboundKeys.push_back(kv.first);

  SmallVector<Abstract> yields[2];
  for (int b = 0; b < 2; ++b) {
    yields[b] = branches[b].outs;
    for (jit::Value *key : reboundKeys) {
      auto it = branches[b].rebound.find(key);
      yields[b].push_back(it != branches[b].rebound.end() ? it->second
                                                          : lookup(key));
    }
  }

  SmallVector<Type> resultTypes;
  SmallVector<Value> yieldValues[2];
  for (size_t i = 0; i < yields[0].size(); ++i) {
    for (int b = 0; b < 2; ++b) {
      OpBuilder::InsertionGuard guard(builder);
      builder.setInsertionPointToEnd(branches[b].block);
      if (failed(refreshView(yields[b][i], node)))
        return failure();
      yieldValues[b].push_back(materialize(yields[b][i], l));
      if (!yieldValues[b].back())
        return error(node) << "branch result #" << i
                           << " is not a value the IR can carry";
    }
    Type merged = mergeBranchTypes(yieldValues[0][i].getType(),
                                   yieldValues[1][i].getType());
    if (!merged)
      return error(node) << "branches of a data-dependent if yield different "
                            "types for result #"
                         << i << ": " << yieldValues[0][i].getType() << " and "
                         << yieldValues[1][i].getType();
    resultTypes.push_back(merged);
  }
  for (int b = 0; b < 2; ++b) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToEnd(branches[b].block);
    YieldOp::create(builder, l, yieldValues[b]);
  }
  auto ifOp = IfOp::create(builder, l, resultTypes, cond.value);
  ifOp.getThenRegion().takeBody(placeholder.getThenRegion());
  ifOp.getElseRegion().takeBody(placeholder.getElseRegion());
  placeholder.erase();

  auto takenYields = yields[exampleTaken ? 0 : 1];
  auto makeResult = [&](size_t i) {
    Abstract a;
    a.kind = Abstract::Kind::Dynamic;
    a.value = ifOp.getResult(i);
    a.example = exampleOf(takenYields[i]);
    if (auto t = dyn_cast<RankedTensorType>(resultTypes[i]))
      for (int64_t d = 0; d < t.getRank(); ++d)
        a.dynamicDims.push_back(t.isDynamicDim(d));
    return a;
  };
  size_t numOuts = branches[0].outs.size();
  for (size_t i = 0; i < numOuts; ++i) {
    Abstract a = makeResult(i);
    // A view chosen by the branch (`x[0] if c else x[1]`): never written
    // through, since which base it is, only the run time knows.
    a.isView = yields[0][i].isView || yields[1][i].isView;
    bind(node->outputs()[i], a);
  }
  // Values updated in place stay the tensors they were: views keep how they
  // were taken, now from their roots as the branches left them.
  SmallVector<std::shared_ptr<const ViewRecord>> views;
  for (size_t k = 0; k < reboundKeys.size(); ++k) {
    Abstract a = makeResult(numOuts + k);
    Abstract &old = lookup(reboundKeys[k]);
    a.path = old.path;
    a.isBuffer = old.isBuffer;
    a.storage = old.storage;
    a.isView = old.isView;
    views.push_back(old.view);
    rebind(reboundKeys[k], a);
  }
  for (size_t k = 0; k < reboundKeys.size(); ++k) {
    if (!views[k] || !views[k]->root)
      continue;
    Abstract *root = find(views[k]->root);
    Abstract a = lookup(reboundKeys[k]);
    if (!root || root->storage != a.storage)
      continue;
    auto record = std::make_shared<ViewRecord>(*views[k]);
    record->rootValue = root->value;
    a.view = std::move(record);
    rebind(reboundKeys[k], a);
  }
  return success();
}

/// Static evaluation: an operator whose inputs the example shapes decide and
