//===- EvalLoop.cpp - ds-run --eval ---------------------------------------===//
//
// Each reported step consumes gradient_accumulation_steps micro-steps of the
// data, as a training step would, so that eval and training lines compare
// step for step.
//
//===----------------------------------------------------------------------===//

#include "EvalLoop.h"

#include "LossLog.h"
#include "Progress.h"
#include "RunSetup.h"

#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/Safetensors.h"

namespace ds::run {

void runEval(const Options &options, World &world) {
  RunSetup run = setUpRun(options, world, /*training=*/false);
  runtime::Engine &engine = run.engine;
  const int64_t accumulation = engine.plan().gradientAccumulationSteps;

  LossMeter meter(engine.plan(), options.planPath);
  LossLog log(world);
  Progress progress("eval");
  for (int64_t step = 1; step <= run.steps; ++step) {
    for (int64_t micro = 0; micro < accumulation; ++micro) {
      int64_t index = (step - 1) * accumulation + micro;
      meter.add(engine.forwardEval(
          run.data.sliceMicroStep(index, world.rank, world.size)));
    }
    log.emit(meter.line(step, world));
    progress.update(step, run.steps);
  }
  log.writeFile(options.lossesPath);
  if (!options.saveParamsPath.empty()) {
    // ZeRO stage 3: a collective; every rank takes part, rank 0 writes.
    runtime::NamedTensors params = engine.gatherState();
    if (world.isLeader())
      runtime::writeSafetensors(options.saveParamsPath, params);
  }
}

} // namespace ds::run
