//===- AssignEngines.cpp - the config's engines, state grouped into them --===//

#include "ds/Config/Config.h"
#include "ds/Dialect/DS/Analysis/LeafModules.h"
#include "ds/Dialect/DS/Analysis/ShardedParams.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "ds/Dialect/DS/Utils/EngineConfigAttr.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <filesystem>
#include <map>

namespace mlir::ds {
#define GEN_PASS_DEF_DSASSIGNENGINES
#include "ds/Dialect/DS/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
namespace config = ::ds::config;

namespace {

struct EngineSpec {
  std::string name;
  std::string prefix;
  bool frozen = false;
  bool ownsState = false;
  /// From a config: the engine's config, typed and as given.
  EngineConfigAttr typed;
  std::string source;
  /// From a config: activation_checkpointing.modules.
  ::ds::config::LeafModuleConfig checkpointModules;
};

/// Whether two module prefixes overlap (one is the other or a submodule of it).
static bool overlaps(StringRef a, StringRef b) {
  if (a.empty() || b.empty())
    return a == b;
  return a == b || isUnderModule(a, b) || isUnderModule(b, a);
}

/// The global micro-batch of the data: rows of the first batched argument of
/// `@forward_eval` (else `@forward`) times the world size; unset when that
/// argument's batch is unknown or every argument is unbatched.
static std::optional<int64_t> dataMicroBatchOf(ModuleOp module,
                                               int64_t worldSize) {
  for (StringRef name : {"forward_eval", "forward"}) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func)
      continue;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      if (func.getArgAttr(i, "ds.unbatched"))
        continue;
      auto type = dyn_cast<RankedTensorType>(func.getArgument(i).getType());
      if (!type || type.getRank() == 0 || type.isDynamicDim(0))
        return std::nullopt;
      return type.getDimSize(0) * worldSize;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

/// The hidden size of the state engine `key` owns, as the "auto" bucket
/// sizes need it (Accelerate reads model.config.hidden_size, which a
/// TorchScript module does not carry): the most common last dimension of
/// its 2-D parameters (Linear weights [out, in], embeddings [vocab, h]),
/// the first in model order on a tie.
static std::optional<config::HiddenSize>
inferHiddenSize(ModuleOp module, const std::string &key,
                const std::vector<std::string> &keys) {
  auto owns = [&](StringRef name) {
    if (!key.empty())
      return isUnderModule(name, key);
    return llvm::none_of(keys, [&](const std::string &other) {
      return !other.empty() && isUnderModule(name, other);
    });
  };
  std::map<int64_t, int64_t> counts;
  std::vector<int64_t> order;
  int64_t matrices = 0;
  module.walk([&](ParamOp param) {
    RankedTensorType type = param.getType();
    if (type.getRank() != 2 || !owns(param.getSymName()))
      return;
    int64_t dim = type.getDimSize(1);
    if (counts[dim]++ == 0)
      order.push_back(dim);
    ++matrices;
  });
  if (order.empty())
    return std::nullopt;
  int64_t best = order.front();
  for (int64_t dim : order)
    if (counts[dim] > counts[best])
      best = dim;
  return config::HiddenSize{
      best, "the most common last dimension of the engine's 2-D parameters "
            "(" +
                std::to_string(counts[best]) + " of " +
                std::to_string(matrices) + ")"};
}

/// The config library's warnings and remarks, at the file they name (else
/// the config's).
static void emitNotes(MLIRContext *context, const config::ConfigNotes &notes,
                      StringRef configFile) {
  auto locOf = [&](const config::ConfigNote &note) -> Location {
    StringRef file = note.file.empty() ? configFile : StringRef(note.file);
    return FileLineColLoc::get(context, file, 0, 0);
  };
  auto text = [&](const config::ConfigNote &note) {
    std::string message = note.message();
    if (!note.file.empty() || configFile.empty())
      return message;
    return configFile.str() + ": " + message;
  };
  for (const config::ConfigNote &note : notes.warnings)
    emitWarning(locOf(note)) << text(note);
  for (const config::ConfigNote &note : notes.remarks)
    emitRemark(locOf(note)) << text(note);
}

struct AssignEnginesPass
    : public mlir::ds::impl::DSAssignEnginesBase<AssignEnginesPass> {
  using DSAssignEnginesBase::DSAssignEnginesBase;

  void runOnOperation() override;

private:
  FailureOr<int64_t> resolveWorldSize(ModuleOp module);
  /// Sets ds.target_device from the `device` option (else the module's,
  /// else cpu).
  LogicalResult resolveDevice(ModuleOp module);
  LogicalResult specsFromConfig(ModuleOp module,
                                SmallVectorImpl<EngineSpec> &specs);
  LogicalResult specsFromOptions(ModuleOp module,
                                 SmallVectorImpl<EngineSpec> &specs);
  LogicalResult assignCheckpointModules(ModuleOp module,
                                        ArrayRef<EngineSpec> specs);
};

} // namespace

FailureOr<int64_t> AssignEnginesPass::resolveWorldSize(ModuleOp module) {
  std::optional<int64_t> imported = getWorldSize(module);
  int64_t requested = worldSize;
  if (requested < 0)
    return module.emitError() << "world-size must be >= 1, got " << requested;
  if (requested > 0 && imported && *imported != requested)
    return module.emitError()
           << "world-size=" << requested << " disagrees with the module's "
           << DSDialect::getWorldSizeAttrName() << " = " << *imported
           << " (the size the model was imported for)";
  if (requested == 0)
    return imported.value_or(1);
  setWorldSize(module, requested);
  return requested;
}

LogicalResult
AssignEnginesPass::specsFromConfig(ModuleOp module,
                                   SmallVectorImpl<EngineSpec> &specs) {
  MLIRContext *context = module.getContext();
  if (!engines.empty() || !frozen.empty())
    return module.emitError() << "ds-assign-engines takes the engines from "
                                 "the config; do not give `engines` or "
                                 "`frozen` with it";
  FailureOr<int64_t> world = resolveWorldSize(module);
  if (failed(world))
    return failure();
  config::ParseContext parseContext;
  parseContext.worldSize = *world;
  parseContext.dataMicroBatch = dataMicroBatch > 0
                                    ? std::optional<int64_t>(dataMicroBatch)
                                    : dataMicroBatchOf(module, *world);
  parseContext.engineHiddenSize =
      [module](const std::string &key, const std::vector<std::string> &keys) {
        return inferHiddenSize(module, key, keys);
      };
  config::SessionConfig session;
  try {
    if (!mixedPrecision.empty())
      parseContext.mixedPrecision = config::parseMixedPrecision(mixedPrecision);
    for (const std::string &text : overrides)
      parseContext.overrides.push_back(config::parseConfigOverride(text));
    if (!configPath.empty()) {
      session = config::loadSessionConfig(configPath, parseContext);
    } else {
      config::ordered_json json = config::parseJsonText(configJson, configName);
      std::string baseDir = configBaseDir.empty()
                                ? std::filesystem::current_path().string()
                                : configBaseDir;
      try {
        session = config::parseSessionConfig(json, parseContext, baseDir);
      } catch (const config::ConfigError &error) {
        throw error.withFile(configName);
      }
    }
  } catch (const config::ConfigError &error) {
    // The message names the file; a location of just the file lets drivers
    // print it once.
    Location loc =
        error.file().empty()
            ? Location(UnknownLoc::get(context))
            : Location(FileLineColLoc::get(context, error.file(), 0, 0));
    return emitError(loc) << error.what();
  }
  emitNotes(context, session.notes,
            configPath.empty() ? StringRef(configName) : StringRef(configPath));

  for (const config::EngineEntry &entry : session.engines) {
    std::string name = session.multiEngine
                           ? (entry.key.empty() ? "root" : entry.key)
                           : "model";
    std::replace(name.begin(), name.end(), '.', '_');
    EngineSpec spec{name, entry.key, entry.config.frozen()};
    spec.typed = buildEngineConfigAttr(context, entry.config);
    spec.source = entry.config.source.dump();
    spec.checkpointModules = entry.config.activationCheckpointing.modules;
    specs.push_back(std::move(spec));
  }
  return success();
}

LogicalResult
AssignEnginesPass::specsFromOptions(ModuleOp module,
                                    SmallVectorImpl<EngineSpec> &specs) {
  if (engines.empty())
    specs.push_back({"model", ""});
  for (const std::string &entry : engines) {
    auto [name, prefix] = StringRef(entry).split('=');
    if (name.empty() || !StringRef(entry).contains('='))
      return module.emitError()
             << "engine spec '" << entry << "' is not NAME=PREFIX";
    specs.push_back({name.str(), prefix.str()});
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

/// Resolves each engine's activation_checkpointing.modules to module paths,
/// which -ds-rematerialize reads from ds.checkpoint_modules.
LogicalResult
AssignEnginesPass::assignCheckpointModules(ModuleOp module,
                                           ArrayRef<EngineSpec> specs) {
  std::vector<std::string> paths;
  for (const EngineSpec &spec : specs) {
    const ::ds::config::LeafModuleConfig &selection = spec.checkpointModules;
    if (selection.classes.empty() && selection.names.empty() &&
        selection.nameSuffixes.empty())
      continue;
    auto engine = SymbolTable::lookupSymbolIn(module, spec.name);
    FailureOr<SmallVector<LeafModule>> selected = findSelectedModules(
        cast<EngineOp>(engine), selection, "activation_checkpointing.modules.");
    if (failed(selected))
      return failure();
    for (const LeafModule &selectedModule : *selected) {
      if (selectedModule.qualified.empty())
        return module.emitError()
               << "config of engine @" << spec.name << ": "
               << selectedModule.matchedBy
               << " matches the root module: nothing outside it would keep "
                  "its inputs; select its submodules (the blocks) instead";
      emitRemark(module.getLoc())
          << "engine @" << spec.name << ": activation checkpointing of '"
          << selectedModule.qualified << "'"
          << (selectedModule.moduleClass.empty()
                  ? std::string()
                  : " (" + selectedModule.moduleClass + ")")
          << ", selected by " << selectedModule.matchedBy;
      paths.push_back(selectedModule.qualified);
    }
  }
  if (!paths.empty())
    setCheckpointModules(module, paths);
  return success();
}

LogicalResult AssignEnginesPass::resolveDevice(ModuleOp module) {
  // The module's target from here on is explicit: the option's, else the
  // module's own, else the CPU.
  if (device.empty()) {
    setTargetDevice(module, getTargetDevice(module));
    return success();
  }
  std::optional<TargetDevice> requested = parseTargetDevice(device);
  if (!requested)
    return module.emitError()
           << "device must be cpu or cuda, got '" << device << "'";
  if (auto existing = module->getAttrOfType<StringAttr>(
          DSDialect::getTargetDeviceAttrName());
      existing && existing.getValue() != device)
    return module.emitError()
           << "device=" << device << " disagrees with the module's "
           << DSDialect::getTargetDeviceAttrName() << " = " << existing;
  setTargetDevice(module, *requested);
  return success();
}

void AssignEnginesPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(resolveDevice(module)))
    return signalPassFailure();
  SmallVector<EngineSpec> specs;
  bool fromConfig = !configPath.empty() || !configJson.empty();
  if (failed(fromConfig ? specsFromConfig(module, specs)
                        : specsFromOptions(module, specs)))
    return signalPassFailure();
  for (auto [i, spec] : llvm::enumerate(specs))
    for (const EngineSpec &other : ArrayRef(specs).take_front(i)) {
      if (other.name == spec.name) {
        module.emitError() << "engine '" << spec.name << "' is given twice";
        return signalPassFailure();
      }
      if (overlaps(other.prefix, spec.prefix)) {
        module.emitError() << "engines '" << other.name << "' (submodule '"
                           << other.prefix << "') and '" << spec.name
                           << "' (submodule '" << spec.prefix << "') overlap";
        return signalPassFailure();
      }
    }
  // A module saved after .eval() trains dropout-free on running statistics;
  // that is what a frozen teacher wants, never what a trained root does.
  SmallVector<StringRef> evalModules = getEvalModules(module);
  for (const EngineSpec &spec : specs)
    if (!spec.frozen && llvm::is_contained(evalModules, spec.prefix)) {
      module.emitError()
          << "engine '" << spec.name << "' is trainable, but its module "
          << (spec.prefix.empty() ? std::string("(the root)")
                                  : "'" + spec.prefix + "'")
          << " was saved in eval mode: call .train() on it before "
             "torch.jit.save, or make the engine frozen (no optimizer)";
      return signalPassFailure();
    }

  OpBuilder builder(module.getBodyRegion());
  builder.setInsertionPointToStart(module.getBody());
  for (EngineSpec &spec : specs) {
    if (SymbolTable::lookupSymbolIn(module, spec.name)) {
      module.emitError() << "engine name '" << spec.name
                         << "' is already a symbol of this module";
      return signalPassFailure();
    }
    auto engine =
        EngineOp::create(builder, module.getLoc(), spec.name, spec.prefix,
                         spec.typed ? spec.source : "{}", spec.frozen);
    if (spec.typed)
      engine.setDeepspeedAttr(spec.typed);
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
  SmallVector<StringRef> submodules;
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
  if (failedAny || failed(assignCheckpointModules(module, specs)))
    signalPassFailure();
}
