//===- GradMode.cpp - `with torch.no_grad():` in scripted code -------------===//
//
// TorchScript compiles `with torch.no_grad(): BODY` to
//   %g = prim::CreateObject()                  # torch.autograd.grad_mode.no_grad
//   prim::CallMethod[name="__init__"](%g)
//   prim::Enter(%g)
//   BODY                                       # in the same block
//   prim::Exit(%g)
// The importer folds the object away and imports the body as usual; at
// prim::Exit every tensor the body produced that is used after the block
// becomes `aten::detach` of it (what leaves a no_grad block carries no
// gradient), and `torch.is_grad_enabled()` inside the body folds to false.
// Outer tensors the body updates in place (an EMA buffer's
// `ema.mul_(d).add_(p, alpha=1 - d)`) are detached the same way: the importer
// notes their values at prim::Enter and detaches those that changed.
//
//===----------------------------------------------------------------------===//

#include "ImportInternal.h"

#include <torch/csrc/jit/ir/ir.h>

#include <functional>

using namespace mlir::ds::import;
namespace jit = torch::jit;

std::optional<bool> mlir::ds::import::gradModeOf(const c10::TypePtr &type) {
  auto cls = type ? type->cast<c10::ClassType>() : nullptr;
  if (!cls || !cls->name())
    return std::nullopt;
  std::string name = demangleClassName(cls->name()->qualifiedName());
  if (name == "torch.autograd.grad_mode.no_grad")
    return false;
  if (name == "torch.autograd.grad_mode.enable_grad")
    return true;
  return std::nullopt;
}

/// `node`'s ancestor in `block` (itself if it is in `block`), or null.
static jit::Node *ancestorIn(jit::Node *node, jit::Block *block) {
  while (node && node->owningBlock() != block) {
    jit::Block *b = node->owningBlock();
    node = b ? b->owningNode() : nullptr;
  }
  return node;
}

std::vector<jit::Value *>
mlir::ds::import::valuesLeavingBlock(jit::Node *enter, jit::Node *exit) {
  std::vector<jit::Value *> out;
  jit::Block *block = exit->owningBlock();
  for (jit::Node *n = enter->next(); n != exit; n = n->next())
    for (jit::Value *v : n->outputs()) {
      bool usedAfter = false;
      for (const jit::Use &use : v->uses()) {
        jit::Node *user = ancestorIn(use.user, block);
        // The block's own return uses values too.
        if (!user || user == block->return_node() || user->isAfter(exit))
          usedAfter = true;
      }
      if (usedAfter)
        out.push_back(v);
    }
  return out;
}

std::vector<jit::Value *>
mlir::ds::import::valuesEnteringBlock(jit::Node *enter, jit::Node *exit) {
  std::vector<jit::Value *> out;
  jit::Block *block = exit->owningBlock();
  std::function<void(jit::Node *)> visit = [&](jit::Node *n) {
    for (jit::Value *v : n->inputs()) {
      jit::Node *def = ancestorIn(v->node(), block);
      bool outside = !def || def == enter || def->isBefore(enter) ||
                     v->node()->kind() == c10::prim::Param;
      if (outside && std::find(out.begin(), out.end(), v) == out.end())
        out.push_back(v);
    }
    for (jit::Block *b : n->blocks())
      for (jit::Node *inner : b->nodes())
        visit(inner);
  };
  for (jit::Node *n = enter->next(); n != exit; n = n->next())
    visit(n);
  return out;
}
