//===- EngineConfig.cpp - An engine's DeepSpeed config in passes ----------===//

#include "ds/Dialect/DS/Transforms/EngineConfig.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace mlir::ds;
namespace config = ::ds::config;

FailureOr<int64_t> mlir::ds::resolveWorldSize(ModuleOp module,
                                              int64_t requested) {
  auto attr = module->getAttrOfType<IntegerAttr>("ds.world_size");
  if (requested < 0)
    return module.emitError() << "world-size must be >= 1, got " << requested;
  if (requested > 0 && attr && attr.getInt() != requested)
    return module.emitError()
           << "world-size=" << requested
           << " disagrees with the module's ds.world_size = " << attr.getInt()
           << " (the size the model was imported for)";
  int64_t worldSize = requested > 0 ? requested : attr ? attr.getInt() : 1;
  if (worldSize < 1)
    return module.emitError()
           << "ds.world_size must be >= 1, got " << worldSize;
  return worldSize;
}

/// The global micro-batch of the data: rows of the first batched argument of
/// the forward times the world size, as the compile pipeline computes it.
static std::optional<int64_t> dataMicroBatch(ModuleOp module,
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

FailureOr<config::EngineConfig> mlir::ds::parseEngineConfig(EngineOp engine,
                                                            int64_t worldSize) {
  auto module = engine->getParentOfType<ModuleOp>();
  config::ParseContext context;
  context.worldSize = worldSize;
  context.dataMicroBatch = dataMicroBatch(module, worldSize);
  try {
    config::ordered_json json =
        config::parseJsonText(engine.getConfig().str(),
                              "config of engine @" + engine.getSymName().str());
    if (json.is_object() && !json.contains("train_batch_size") &&
        !json.contains("train_micro_batch_size_per_gpu")) {
      int64_t micro = 1;
      if (context.dataMicroBatch && *context.dataMicroBatch % worldSize == 0)
        micro = *context.dataMicroBatch / worldSize;
      json["train_micro_batch_size_per_gpu"] = micro;
    }
    return config::parseEngineConfig(json, context);
  } catch (const config::ConfigError &error) {
    InFlightDiagnostic diag = engine.emitError() << "config of engine @"
                                                 << engine.getSymName() << ": ";
    if (!error.keyPath().empty())
      diag << error.keyPath() << ": ";
    diag << error.detail();
    return failure();
  }
}
