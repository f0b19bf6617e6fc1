//===- CompilePipeline.h - the passes of ds-compile -------------*- C++ -*-===//
//
// The pass pipeline from an imported model to the IR the plan is emitted
// from, registered as `ds-compile-pipeline`: ds-compile (lib/Compiler) and
// `ds-opt --pass-pipeline='builtin.module(ds-compile-pipeline{...})'` build
// it with the same function, so both print the same IR.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_TRANSFORMS_COMPILEPIPELINE_H
#define DS_DIALECT_DS_TRANSFORMS_COMPILEPIPELINE_H

#include "mlir/Pass/PassOptions.h"

#include <string>
#include <vector>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace mlir::ds {

struct CompilePipelineOptions
    : public PassPipelineOptions<CompilePipelineOptions> {
  Option<std::string> config{
      *this, "config",
      llvm::cl::desc("DeepSpeed config (JSON file); relative engine config "
                     "files resolve against its folder")};
  Option<int64_t> worldSize{
      *this, "world-size",
      llvm::cl::desc("Data-parallel ranks (0: the module's ds.world_size, "
                     "which the model was imported for)"),
      llvm::cl::init(0)};
  Option<std::string> device{
      *this, "device",
      llvm::cl::desc("The device to compile for, cpu or cuda (the module's "
                     "ds.target_device; empty: the module's, else cpu)")};
  /// For drivers that hold the config as JSON text instead of a file (the
  /// Python package): -ds-assign-engines' config-json and its companions.
  std::string configJson;
  std::string configName = "<config>";
  std::string configBaseDir;
  /// -ds-assign-engines' mixed-precision and set.
  std::string mixedPrecision;
  std::vector<std::string> configOverrides;
  /// -ds-assign-engines' data-micro-batch (0: from the module).
  int64_t dataMicroBatch = 0;
};

/// -ds-assign-engines (the config enters the IR), -ds-assign-precision, and
/// when an engine trains (-ds-if-training): -ds-autodiff, -ds-scale-loss,
/// canonicalize, cse, -ds-lower-optimizer, -ds-zero-partition,
/// -ds-engine-backward, -ds-schedule-collectives, -ds-verify-collectives.
void buildCompilePipeline(OpPassManager &pm,
                          const CompilePipelineOptions &options);

/// Registers `ds-compile-pipeline`.
void registerCompilePipeline();

} // namespace mlir::ds

#endif // DS_DIALECT_DS_TRANSFORMS_COMPILEPIPELINE_H
