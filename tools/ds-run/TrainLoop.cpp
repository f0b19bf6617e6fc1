//===- TrainLoop.cpp - ds-run training ------------------------------------===//
//
// DeepSpeed's training loop over the data file: per micro-step
// engine.forward(batch), engine.backward(), engine.step(); the step() on the
// accumulation boundary updates the parameters and its report (LR, gradient
// norm) goes into the step's line next to the mean loss.
//
//===----------------------------------------------------------------------===//

#include "TrainLoop.h"

#include "LossLog.h"
#include "Progress.h"
#include "RunSetup.h"

#include "ds/Runtime/RuntimeError.h"
#include "ds/Runtime/Safetensors.h"
#include "ds/Runtime/StateStore.h"

namespace ds::run {

namespace {

/// The optimizer's numbers for the step's line: "lr" and "grad_norm" are
/// the first trainable engine's (null and 0 when every engine is frozen);
/// with several trainable engines "engines" gives each one's (as the
/// oracle, test/oracle/oracle.py, reports them).
void addStepReport(nlohmann::ordered_json &line,
                   const runtime::StepReport &report) {
  bool none = report.engines.empty();
  line["lr"] = none ? nlohmann::ordered_json(nullptr)
                    : nlohmann::ordered_json(report.engines[0].lr);
  line["grad_norm"] = none ? 0.0 : report.engines[0].gradNorm;
  // fp32 training: no loss scaling, no overflow skips (fp16 comes later).
  line["loss_scale"] = 1.0;
  line["skipped"] = false;
  if (report.engines.size() > 1) {
    nlohmann::ordered_json engines = nlohmann::ordered_json::object();
    for (const runtime::EngineStepReport &engine : report.engines)
      engines[engine.engine] = {{"lr", engine.lr},
                                {"grad_norm", engine.gradNorm}};
    line["engines"] = std::move(engines);
  }
}

} // namespace

void runTrain(const Options &options, const World &world) {
  RunSetup run = setUpRun(options, world, /*training=*/true);
  runtime::Engine &engine = run.engine;
  const int64_t accumulation = engine.plan().gradientAccumulationSteps;

  LossMeter meter(engine.plan(), options.planPath);
  LossLog log(world);
  Progress progress("train");
  for (int64_t step = 1; step <= run.steps; ++step) {
    world.faultPoint(step); // DS_TEST_FAULT (test/mpi), else nothing.
    runtime::StepReport report;
    for (int64_t micro = 0; micro < accumulation; ++micro) {
      int64_t index = (step - 1) * accumulation + micro;
      meter.add(engine.forward(
          run.data.sliceMicroStep(index, world.rank, world.size)));
      engine.backward();
      report = engine.step();
    }
    if (!report.updated) // The engine counts micro-steps itself.
      throw runtime::RuntimeError(
          "internal error: step " + std::to_string(step) +
          " ended off the gradient accumulation boundary");
    nlohmann::ordered_json line = meter.line(step, world);
    addStepReport(line, report);
    log.emit(line);
    progress.update(step, run.steps);
  }
  log.writeFile(options.lossesPath);
  if (world.isLeader() && !options.saveParamsPath.empty())
    runtime::writeSafetensors(options.saveParamsPath, engine.state().named());
}

} // namespace ds::run
