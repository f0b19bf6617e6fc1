//===- AssignEngines.cpp - group state into engines -----------------------===//
//
// Declares the engines of a (possibly multi-engine) config and tags every
// parameter and buffer with the engine that owns it. An engine owns the state
// under its submodule prefix; the root engine (empty prefix) owns what no other
// engine takes. Everything later (autodiff, partitioning, the plan) reads
// ownership from the `engine` attribute only.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "ds/Dialect/DS/Transforms/ShardedParams.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSASSIGNENGINES
#include "ds/Dialect/DS/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

struct EngineSpec {
  std::string name;
  std::string prefix;
  bool frozen = false;
  bool ownsState = false;
};


/// Whether two module prefixes overlap (one is the other or a submodule of it).
static bool overlaps(StringRef a, StringRef b) {
  if (a.empty() || b.empty())
    return a == b;
  return a == b || isUnderModule(a, b) || isUnderModule(b, a);
}

struct AssignEnginesPass
    : public ds::impl::DSAssignEnginesBase<AssignEnginesPass> {
  using DSAssignEnginesBase::DSAssignEnginesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<EngineSpec> specs;
    if (failed(parseSpecs(module, specs)))
      return signalPassFailure();

    OpBuilder builder(module.getBodyRegion());
    builder.setInsertionPointToStart(module.getBody());
    for (EngineSpec &spec : specs) {
      if (SymbolTable::lookupSymbolIn(module, spec.name)) {
        module.emitError() << "engine name '" << spec.name
                           << "' is already a symbol of this module";
        return signalPassFailure();
      }
      auto engine = EngineOp::create(builder, module.getLoc(), spec.name,
                                     spec.prefix, "{}", spec.frozen);
      (void)engine;
    }

    bool failedAny = false;
    module.walk([&](Operation *op) {
      if (!isa<ParamOp, BufferOp>(op))
        return;
      StringRef name = SymbolTable::getSymbolName(op).getValue();
      EngineSpec *owner = nullptr;
      // A named submodule wins over the root engine.
      for (EngineSpec &spec : specs)
        if (isUnderModule(name, spec.prefix) && (!owner || owner->prefix.empty()))
          owner = &spec;
      if (!owner) {
        op->emitError() << "state '" << name
                        << "' lies outside every engine's submodule; add an "
                           "engine keyed \"\" to own the rest of the model";
        failedAny = true;
        return;
      }
      owner->ownsState = true;
      op->setAttr("engine",
                  FlatSymbolRefAttr::get(op->getContext(), owner->name));
    });
    // The submodules that do own state, to name them in the error.
    llvm::SmallVector<StringRef> submodules;
    module.walk([&](Operation *op) {
      if (!isa<ParamOp, BufferOp>(op))
        return;
      StringRef name = SymbolTable::getSymbolName(op).getValue();
      if (name.contains('.') &&
          !llvm::is_contained(submodules, name.split('.').first))
        submodules.push_back(name.split('.').first);
    });
    for (EngineSpec &spec : specs)
      if (!spec.ownsState && !spec.prefix.empty()) {
        InFlightDiagnostic diag =
            module.emitError()
            << "engine '" << spec.name << "': submodule '" << spec.prefix
            << "' has no parameters or buffers in this model (an engine's "
               "key in the config's \"engines\" is the path of a submodule "
               "that owns state; the model's top-level submodules with "
               "state: ";
        for (auto [i, submodule] : llvm::enumerate(submodules))
          diag << (i ? ", " : "") << submodule;
        diag << (submodules.empty() ? "none)" : ")");
        failedAny = true;
      }
    if (failedAny)
      signalPassFailure();
  }

  LogicalResult parseSpecs(ModuleOp module,
                           SmallVectorImpl<EngineSpec> &specs) {
    if (engines.empty()) {
      specs.push_back({"model", "", false, false});
    }
    for (const std::string &entry : engines) {
      auto [name, prefix] = StringRef(entry).split('=');
      if (name.empty() || !StringRef(entry).contains('='))
        return module.emitError()
               << "engine spec '" << entry << "' is not NAME=PREFIX";
      for (const EngineSpec &other : specs) {
        if (other.name == name)
          return module.emitError() << "engine '" << name << "' is given twice";
        if (overlaps(other.prefix, prefix))
          return module.emitError()
                 << "engines '" << other.name << "' (submodule '"
                 << other.prefix << "') and '" << name << "' (submodule '"
                 << prefix << "') overlap";
      }
      specs.push_back({name.str(), prefix.str(), false, false});
    }
    for (const std::string &name : frozen) {
      auto it = llvm::find_if(
          specs, [&](const EngineSpec &s) { return s.name == name; });
      if (it == specs.end())
        return module.emitError()
               << "frozen engine '" << name << "' is not among the engines";
      it->frozen = true;
    }
    return success();
  }
};

} // namespace
