//===- CheckParameterUse.cpp - trainable parameters the forward never reads ===//
//
// A trainable parameter that `@forward` never reads gets no gradient, so it
// never trains. In a model made by torch.jit.trace that is the sign of a
// frozen path: the trace keeps only the branch its example took, so a
// mixture of experts traced on a batch that chose 2 of 4 experts trains 2 of
// them, silently. For a traced module (`ds.traced`) it is an error naming
// the modules; otherwise (a scripted or exported model keeps every branch) a
// warning, since an unused submodule is legal.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSCHECKPARAMETERUSE
#include "ds/Dialect/DS/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// How many names a message lists before "and N more".
constexpr size_t kListed = 4;

std::string listed(ArrayRef<StringRef> names) {
  std::string text;
  for (auto [i, name] : llvm::enumerate(names.take_front(kListed)))
    text += (i ? ", " : "") + name.str();
  if (names.size() > kListed)
    text += " and " + std::to_string(names.size() - kListed) + " more";
  return text;
}

struct CheckParameterUsePass
    : public mlir::ds::impl::DSCheckParameterUseBase<CheckParameterUsePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward)
      return;
    llvm::StringSet<> read;
    forward.walk([&](GetParamOp get) { read.insert(get.getName()); });

    llvm::StringSet<> frozen;
    for (EngineOp engine : module.getOps<EngineOp>())
      if (engine.getFrozen())
        frozen.insert(engine.getSymName());
    // The unread trainable parameters, by the module that owns them.
    llvm::MapVector<StringRef, SmallVector<StringRef>> unread;
    llvm::StringMap<StringRef> classOf;
    for (ParamOp param : module.getOps<ParamOp>()) {
      if (!param.getRequiresGrad() || read.contains(param.getSymName()) ||
          (param.getEngine() && frozen.contains(*param.getEngine())))
        continue;
      unread[param.getModule()].push_back(param.getSymName());
      classOf[param.getModule()] = param.getModuleClass();
    }
    if (unread.empty())
      return;

    bool traced = module->hasAttr("ds.traced");
    size_t count = 0;
    SmallVector<std::string> modules;
    for (auto &[path, names] : unread) {
      count += names.size();
      modules.push_back(describeModule(path, classOf[path]).substr(
                            sizeof("in ") - 1) +
                        ": " + listed(names));
    }
    std::string where;
    for (auto [i, text] : llvm::enumerate(modules))
      where += (i ? "; " : "") + text;
    if (traced) {
      module.emitError()
          << count << " trainable parameter" << (count == 1 ? "" : "s")
          << " of this traced model " << (count == 1 ? "is" : "are")
          << " never read by its forward, so "
          << (count == 1 ? "it" : "they")
          << " would never train (" << where
          << "). torch.jit.trace keeps only the path its example took: a "
             "branch on the data (a mixture of experts' routing) is frozen. "
             "Script the model, export it with torch.cond for the branch "
             "(docs/import.md), or trace it on a batch that takes every "
             "path; give unused parameters requires_grad=False";
      return signalPassFailure();
    }
    module.emitWarning() << count << " trainable parameter"
                         << (count == 1 ? " is" : "s are")
                         << " never read by the forward and "
                         << (count == 1 ? "gets" : "get") << " no gradient ("
                         << where << ")";
  }
};

} // namespace
