//===- CompilePipeline.cpp - the passes of ds-compile ---------------------===//

#include "ds/Dialect/DS/Transforms/CompilePipeline.h"
#include "ds/Dialect/DS/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::ds;

void mlir::ds::buildCompilePipeline(OpPassManager &pm,
                                    const CompilePipelineOptions &options) {
  DSAssignEnginesOptions engines;
  engines.configPath = options.config;
  engines.configJson = options.configJson;
  engines.configName = options.configName;
  engines.configBaseDir = options.configBaseDir;
  engines.worldSize = options.worldSize;
  engines.mixedPrecision = options.mixedPrecision;
  engines.dataMicroBatch = options.dataMicroBatch;
  engines.device = options.device;
  engines.overrides.assign(options.configOverrides.begin(),
                           options.configOverrides.end());
  pm.addPass(createDSAssignEngines(engines));
  // Trainable parameters the forward never reads (a traced model's frozen
  // branch): after the engines say which are frozen.
  pm.addPass(createDSCheckParameterUse());
  // Training-mode dropout as the target device draws its mask (the device is
  // the engines' pass's to set).
  pm.addPass(createDSLowerDropout());
  // Mixed precision (fp16 / bf16 / torch_autocast) as casts and dtypes, in
  // the forward the backward is then derived from (no change in fp32).
  pm.addPass(createDSAssignPrecision());

  OpPassManager training(ModuleOp::getOperationName());
  // The training step: the backward's seed divides by the accumulation
  // steps once for all paths, and an fp16 engine's loss scale multiplies it
  // before canonicalization merges the seed with other constants.
  training.addPass(createDSAutodiff());
  training.addPass(createDSScaleLoss());
  training.addPass(createCanonicalizerPass());
  training.addPass(createCSEPass());
  // Activation checkpointing: after CSE, which would merge the recomputation
  // back into the forward.
  training.addPass(createDSRematerialize());
  // The accumulation boundary: each engine's update, then the flat buffers,
  // buckets and collectives of its ZeRO stage around it.
  training.addPass(createDSLowerOptimizer());
  training.addPass(createDSZeroPartition());
  // Each trainable engine's share of the joint backward: its prologue
  // before its first gradient, its epilogue after its last gradient and
  // reductions (DeepSpeed's _backward_prologue / _backward_epilogue).
  training.addPass(createDSEngineBackward());
  // Where the waits go (overlap_comm, stage 3 prefetch), then the proof that
  // every rank issues the same collectives and reads only gathered
  // parameters.
  training.addPass(createDSScheduleCollectives());
  training.addPass(createDSVerifyCollectives());
  pm.addPass(createDSIfTraining(std::move(training)));
}

void mlir::ds::registerCompilePipeline() {
  PassPipelineRegistration<CompilePipelineOptions>(
      "ds-compile-pipeline",
      "The ds-compile pipeline: the config's engines, precision, and when an "
      "engine trains the backward, optimizer, ZeRO partition and collectives",
      buildCompilePipeline);
}
