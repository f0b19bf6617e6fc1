//===- GradMode.cpp - `with torch.no_grad():` in scripted code ------------===//
//
// TorchScript compiles `with torch.no_grad(): BODY` to
//   %g = prim::CreateObject()             # torch.autograd.grad_mode.no_grad
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

#include "GraphImporter.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include <torch/csrc/jit/ir/ir.h>

#include <functional>

using namespace mlir;
using namespace mlir::ds;
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

/// `with torch.no_grad():` and `torch.enable_grad()`: the grad-mode object
/// folds away; at prim::Exit of a no_grad block, what the block produces for
/// later statements becomes `aten::detach` of it.
LogicalResult GraphImporter::importGradMode(jit::Node *node) {
  c10::Symbol kind = node->kind();
  jit::Value *object =
      kind == c10::prim::CreateObject ? node->output() : node->input(0);
  std::optional<bool> mode = gradModeOf(object->type());
  if (!mode) {
    std::string typeName = object->type()->repr_str();
    if (auto cls = object->type()->cast<c10::ClassType>())
      if (cls->name())
        typeName = demangleClassName(cls->name()->qualifiedName());
    return error(node) << "unsupported operator '" << kind.toQualString()
                       << "' on " << typeName
                       << " (only `with torch.no_grad()` and "
                          "`torch.enable_grad()` blocks are supported)";
  }
  auto none = Abstract::makeStatic(c10::IValue());
  if (kind == c10::prim::Enter) {
    GradModeBlock block{node, *mode, {}};
    jit::Node *exit = node;
    while (exit->kind() != c10::prim::Exit || exit->input(0) != object) {
      exit = exit->next();
      if (exit->kind() == c10::prim::Return)
        return error(node) << "'prim::Enter' without its prim::Exit";
    }
    for (jit::Value *v : valuesEnteringBlock(node, exit)) {
      // Views of bases written before the block are taken again here, so
      // that only what the block itself updates counts as updated.
      Abstract a = lookup(v);
      if (failed(refreshView(a, node)))
        return failure();
      bind(v, a);
      if (a.kind == Abstract::Kind::Dynamic && a.value)
        block.before.emplace_back(v, a.value);
    }
    gradModes.push_back(std::move(block));
  }
  if (kind == c10::prim::Exit) {
    if (gradModes.empty() || gradModes.back().enter->input(0) != object)
      return error(node) << "'prim::Exit' without its prim::Enter";
    GradModeBlock block = std::move(gradModes.back());
    gradModes.pop_back();
    if (!*mode) {
      std::function<void(Abstract &)> detach = [&](Abstract &a) {
        if (a.kind == Abstract::Kind::Tuple || a.kind == Abstract::Kind::List) {
          for (Abstract &e : a.elements)
            detach(e);
          return;
        }
        if (a.kind != Abstract::Kind::Dynamic || !a.value ||
            !isa<TensorType>(a.value.getType()))
          return;
        a.value = emitAten("aten::detach", {a.value}, a.value.getType(), node)
                      ->getResult(0);
        a.isView = true;
        a.view = nullptr;
        a.isParam = a.isBuffer = false;
        a.path.clear();
      };
      for (jit::Value *v : valuesLeavingBlock(block.enter, node)) {
        Abstract a = lookup(v);
        detach(a);
        bind(v, a);
      }
      // Outer tensors updated in place inside the block.
      for (auto &[v, old] : block.before) {
        Abstract a = lookup(v);
        if (a.kind != Abstract::Kind::Dynamic || a.value == old)
          continue;
        std::string path = a.path;
        bool isBuffer = a.isBuffer;
        detach(a);
        a.path = path;
        a.isBuffer = isBuffer;
        a.isView = false;
        a.view = nullptr;
        rebind(v, a);
      }
    }
  }
  for (jit::Value *out : node->outputs())
    bind(out, none);
  return success();
}

/// Calls are inlined here rather than by TorchScript's Inline pass: its
/// call stacks name a module by its last attribute only (`0` for
/// `blocks.0`), while the GetAttr chain that reaches the callee's `self`
