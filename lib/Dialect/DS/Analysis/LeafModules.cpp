//===- LeafModules.cpp - ZeRO-3 leaf modules of an engine -----------------===//

#include "ds/Dialect/DS/Analysis/LeafModules.h"
#include "ds/Dialect/DS/Analysis/ShardedParams.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"

#include <map>

using namespace mlir;
using namespace mlir::ds;

/// Whether `path` is `prefix` or below it on a `.` boundary ("" contains
/// every path).
static bool isWithin(StringRef path, StringRef prefix) {
  return path == prefix || isUnderModule(path, prefix);
}

bool LeafModule::contains(StringRef module) const {
  return isWithin(module, qualified);
}

/// "torch.nn.modules.linear.Linear" -> ("torch.nn.modules.linear", "Linear");
/// a bare name has no package.
static std::pair<StringRef, StringRef> splitClass(StringRef name) {
  size_t dot = name.rfind('.');
  if (dot == StringRef::npos)
    return {StringRef(), name};
  return {name.take_front(dot), name.drop_front(dot + 1)};
}

bool mlir::ds::leafClassMatches(StringRef spec, StringRef moduleClass) {
  auto [specPackage, specName] = splitClass(spec);
  auto [classPackage, className] = splitClass(moduleClass);
  if (specName != className)
    return false;
  if (specPackage.empty())
    return true;
  if (classPackage.empty())
    return specPackage == "__main__";
  return isWithin(classPackage, specPackage);
}

namespace {

/// A config entry and whether it matched.
struct Spec {
  std::string key;
  std::string value;
  bool userGiven = true;
  bool matched = false;
};

} // namespace

FailureOr<SmallVector<LeafModule>>
mlir::ds::findLeafModules(EngineOp engine,
                          const ::ds::config::LeafModuleConfig &config) {
  return findSelectedModules(engine, config, "zero_optimization.leaf_module.");
}

FailureOr<SmallVector<LeafModule>>
mlir::ds::findSelectedModules(EngineOp engine,
                              const ::ds::config::LeafModuleConfig &config,
                              StringRef keyPrefix) {
  auto module = engine->getParentOfType<ModuleOp>();
  StringRef root = engine.getModule();

  // Every module of the engine (qualified path -> class, "" when unknown).
  std::map<std::string, std::string> modules;
  auto note = [&](StringRef path, StringRef cls) {
    if (!isWithin(path, root))
      return;
    std::string &known = modules[path.str()];
    if (known.empty())
      known = cls.str();
    // Every enclosing module down to the engine's exists too.
    for (StringRef prefix = path; !prefix.empty() && prefix != root;) {
      size_t dot = prefix.rfind('.');
      prefix = dot == StringRef::npos ? StringRef() : prefix.take_front(dot);
      if (!isWithin(prefix, root))
        break;
      modules.try_emplace(prefix.str());
    }
  };
  for (ParamOp param : module.getOps<ParamOp>())
    if (param.getEngine() && *param.getEngine() == engine.getSymName())
      note(param.getModule(), param.getModuleClass());
  for (auto func : module.getOps<func::FuncOp>())
    func.walk([&](Operation *op) {
      auto path = op->getAttrOfType<StringAttr>("module");
      auto cls = op->getAttrOfType<StringAttr>("module_class");
      if (path && cls)
        note(path.getValue(), cls.getValue());
    });

  std::string prefix = keyPrefix.str();
  SmallVector<Spec> classes, names, suffixes;
  for (auto [i, value] : llvm::enumerate(config.classes))
    classes.push_back({prefix + ("classes[" + Twine(i) + "]").str(), value,
                       config.classesGiven});
  for (auto [i, value] : llvm::enumerate(config.names))
    names.push_back({prefix + ("names[" + Twine(i) + "]").str(), value});
  for (auto [i, value] : llvm::enumerate(config.nameSuffixes))
    suffixes.push_back(
        {prefix + ("name_suffixes[" + Twine(i) + "]").str(), value});

  // std::map orders a module before the modules below it: the outermost
  // match wins.
  SmallVector<LeafModule> leaves;
  for (const auto &[qualified, cls] : modules) {
    StringRef path = StringRef(qualified);
    if (!root.empty())
      path = path == root ? StringRef() : path.drop_front(root.size() + 1);
    Spec *first = nullptr;
    auto match = [&](SmallVectorImpl<Spec> &specs, auto &&matches) {
      for (Spec &spec : specs)
        if (matches(spec.value)) {
          spec.matched = true;
          if (!first)
            first = &spec;
        }
    };
    if (!cls.empty())
      match(classes,
            [&](StringRef spec) { return leafClassMatches(spec, cls); });
    match(names, [&](StringRef spec) { return path == spec; });
    match(suffixes, [&](StringRef spec) {
      return path == spec ||
             (path.ends_with(spec) && path.size() > spec.size() &&
              path[path.size() - spec.size() - 1] == '.');
    });
    if (!first || llvm::any_of(leaves, [&](const LeafModule &outer) {
          return outer.contains(qualified);
        }))
      continue;
    leaves.push_back(
        {path.str(), qualified, cls, first->key + " \"" + first->value + "\""});
  }

  for (SmallVector<Spec> *specs : {&classes, &names, &suffixes})
    for (const Spec &spec : *specs)
      if (spec.userGiven && !spec.matched)
        return engine.emitError()
               << "config of engine @" << engine.getSymName() << ": "
               << spec.key << ": \"" << spec.value << "\" matches no module";
  return leaves;
}
