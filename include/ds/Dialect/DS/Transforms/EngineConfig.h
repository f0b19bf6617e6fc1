//===- EngineConfig.h - An engine's DeepSpeed config in passes --*- C++ -*-===//
//
// The passes that lower what an engine's config asks for (-ds-lower-optimizer,
// -ds-zero-partition) read the `config` of a `ds.engine` with the config
// library, in the same context the compile pipeline parsed the session in,
// and report a bad config as an error on the engine that names the key.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_TRANSFORMS_ENGINECONFIG_H
#define DS_DIALECT_DS_TRANSFORMS_ENGINECONFIG_H

#include "ds/Config/Config.h"
#include "ds/Dialect/DS/IR/DSOps.h"

namespace mlir::ds {

/// The world size a pass works for: `requested` when it is > 0 (it must then
/// agree with the module's `ds.world_size`, when that is set), else the
/// module's `ds.world_size`, else 1. Emits an error on the module and fails
/// when the two disagree or the size is not positive.
FailureOr<int64_t> resolveWorldSize(ModuleOp module, int64_t requested);

/// Parses `engine`'s config as the compile pipeline does, for `worldSize`
/// ranks, with the data's global micro-batch taken from the first batched
/// argument of `@forward_eval` (or `@forward`). Batch sizes do not concern
/// the passes: a config that names none gets the micro-batch of the data (1
/// without data), as the runtime fills it in. On a bad config, emits an
/// error on the engine naming the key ("optimizer.params.lr: ...").
FailureOr<::ds::config::EngineConfig> parseEngineConfig(EngineOp engine,
                                                        int64_t worldSize);

} // namespace mlir::ds

#endif // DS_DIALECT_DS_TRANSFORMS_ENGINECONFIG_H
