//===- TrainLoop.cpp - ds-run training ------------------------------------===//
//
// DeepSpeed's training loop over the data file: per micro-step
// engine.forward(batch), engine.backward(), engine.step(); the step() on the
// accumulation boundary updates the parameters and its report (LR, gradient
// norm) goes into the step's line next to the mean loss.
//
//===----------------------------------------------------------------------===//

#include "TrainLoop.h"

#include "DataPrefetch.h"

#include "LossLog.h"
#include "RunSetup.h"
#include "TrainMonitor.h"

#include "ds/Plan/Report.h"
#include "ds/Runtime/Communicator.h"
#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/RuntimeError.h"
#include "ds/TensorIO/Safetensors.h"

#include <ATen/ATen.h>

#include <cstdio>

namespace ds::run {

namespace {

/// The optimizer's numbers for the step's line: "lr", "grad_norm",
/// "loss_scale" and "skipped" are the first trainable engine's (null and 0 when
/// every engine is frozen); with several trainable engines "engines" gives each
/// one's (as the oracle, test/oracle/oracle.py, reports them). When the forward
/// returns one loss per engine (independent engines, in the plan's engine
/// order), each engine's entry also carries its "loss".
void addStepReport(nlohmann::ordered_json &line,
                   const runtime::StepReport &report, const plan::Plan &plan) {
  bool none = report.engines.empty();
  line["lr"] = none ? nlohmann::ordered_json(nullptr)
                    : nlohmann::ordered_json(report.engines[0].lr);
  line["grad_norm"] = none ? 0.0 : report.engines[0].gradNorm;
  // The fp16 loss scale the step's gradients carried (1 without one) and
  // whether an overflow skipped the update.
  line["loss_scale"] = none ? 1.0 : report.engines[0].lossScale;
  line["skipped"] = none ? false : report.engines[0].skipped;
  nlohmann::ordered_json engines = nlohmann::ordered_json::object();
  if (report.engines.size() > 1)
    for (const runtime::EngineStepReport &engine : report.engines)
      engines[engine.engine] = {{"lr", engine.lr},
                                {"grad_norm", engine.gradNorm},
                                {"loss_scale", engine.lossScale},
                                {"skipped", engine.skipped}};
  auto losses = line.find("losses");
  if (plan.engines.size() > 1 && losses != line.end() &&
      losses->size() == plan.engines.size())
    for (size_t e = 0; e < plan.engines.size(); ++e)
      engines[plan.engines[e].name]["loss"] = (*losses)[e];
  if (!engines.empty())
    line["engines"] = std::move(engines);
}

/// The communicator's volume now (zero without one).
runtime::CommVolume volumeNow(const World &world) {
  return world.comm ? world.comm->volume() : runtime::CommVolume();
}

/// This rank's measured numbers, in the order gatherReport reads them.
std::vector<int64_t> measureRank(const runtime::Engine &engine,
                                 const runtime::CommVolume &stepVolume,
                                 int64_t steps) {
  runtime::MemoryStats memory = engine.trainMemory();
  // The persistent bytes, plus the most held at once of the programs' live
  // values and the transient training buffers.
  int64_t peak = memory.jointPeakBytes + memory.parameterBytes +
                 memory.bufferBytes + memory.gradientBytes +
                 memory.optimizerBytes;
  // Per optimizer step: the run's volume over its steps (every step moves
  // the same).
  auto perStep = [&](int64_t elements) { return elements / steps; };
  std::vector<plan::EngineReport> engines = engine.engineReports();
  // Host bytes only where an engine offloads (-1: none, as the predicted
  // report leaves the field out).
  bool offloads = false;
  for (const plan::EngineReport &report : engines)
    offloads |= report.hostBytes.has_value();
  std::vector<int64_t> values = {engine.rank(),
                                 memory.parameterBytes,
                                 memory.gradientBytes,
                                 memory.optimizerBytes,
                                 memory.bufferBytes,
                                 memory.peakBytes,
                                 memory.transientPeakBytes,
                                 peak,
                                 perStep(stepVolume.allReduce),
                                 perStep(stepVolume.reduceScatter),
                                 perStep(stepVolume.allGather),
                                 perStep(stepVolume.broadcast),
                                 offloads ? memory.hostBytes : -1};
  // Then kEngineFields per engine.
  for (const plan::EngineReport &report : engines)
    values.insert(
        values.end(),
        {report.paramBytes, report.gradBytes, report.optimizerStateBytes,
         perStep(report.comm.allReduce), perStep(report.comm.reduceScatter),
         perStep(report.comm.allGather), perStep(report.comm.broadcast),
         report.hostBytes.value_or(-1)});
  return values;
}

/// Numbers per engine in measureRank's list, after the rank's thirteen.
constexpr int64_t kRankFields = 13;
constexpr int64_t kEngineFields = 8;

std::optional<int64_t> presentBytes(int64_t value) {
  return value >= 0 ? std::optional<int64_t>(value) : std::nullopt;
}

/// This rank's overlap timings as numbers, in the order overlapFrom reads
/// them.
std::vector<double> measureOverlap(const plan::OverlapReport &overlap) {
  std::vector<double> values;
  for (const plan::CollectiveTiming *timing :
       {&overlap.allReduce, &overlap.reduceScatter, &overlap.allGather,
        &overlap.broadcast}) {
    values.push_back(double(timing->count));
    values.push_back(timing->collectiveSeconds);
    values.push_back(timing->waitSeconds);
  }
  values.push_back(overlap.trainSeconds);
  return values;
}

plan::OverlapReport overlapFrom(const double *v) {
  plan::OverlapReport overlap;
  for (plan::CollectiveTiming *timing :
       {&overlap.allReduce, &overlap.reduceScatter, &overlap.allGather,
        &overlap.broadcast}) {
    timing->count = int64_t(v[0]);
    timing->collectiveSeconds = v[1];
    timing->waitSeconds = v[2];
    v += 3;
  }
  overlap.trainSeconds = v[0];
  return overlap;
}

/// Every rank's `mine`, gathered (an all-gather of a small tensor); every
/// rank must call it.
template <typename T>
std::vector<T> gatherRanks(const World &world, const std::vector<T> &mine,
                           at::ScalarType dtype) {
  if (!world.comm || world.size <= 1)
    return mine;
  at::Tensor input = at::tensor(mine, dtype);
  at::Tensor output = at::empty({world.size * int64_t(mine.size())}, dtype);
  world.comm->allGather(output, input).wait();
  return std::vector<T>(output.data_ptr<T>(),
                        output.data_ptr<T>() + output.numel());
}

/// Every rank's measureRank numbers and overlap timings, gathered, as a
/// report; every rank must call it.
plan::Report gatherReport(const runtime::Engine &engine, const World &world,
                          const runtime::CommVolume &stepVolume, int64_t steps,
                          int64_t loadBroadcast,
                          const plan::OverlapReport &overlap) {
  std::vector<int64_t> mine = measureRank(engine, stepVolume, steps);
  const int64_t fields = int64_t(mine.size());
  std::vector<int64_t> all = gatherRanks(world, mine, at::kLong);
  std::vector<double> timings = measureOverlap(overlap);
  const int64_t timingFields = int64_t(timings.size());
  std::vector<double> allTimings = gatherRanks(world, timings, at::kDouble);
  plan::Report report;
  report.kind = "measured";
  report.worldSize = world.size;
  report.gradientAccumulationSteps = engine.plan().gradientAccumulationSteps;
  report.zeroStage = plan::predictReport(engine.plan()).zeroStage;
  report.steps = steps;
  report.loadBroadcastElements = loadBroadcast;
  for (int64_t r = 0; r < world.size; ++r) {
    const int64_t *v = all.data() + r * fields;
    plan::RankReport rank;
    rank.rank = v[0];
    rank.paramBytes = v[1];
    rank.gradBytes = v[2];
    rank.optimizerStateBytes = v[3];
    rank.bufferBytes = v[4];
    rank.activationPeakBytes = v[5];
    rank.transientBytes = v[6];
    rank.peakBytes = v[7];
    rank.comm.allReduce = v[8];
    rank.comm.reduceScatter = v[9];
    rank.comm.allGather = v[10];
    rank.comm.broadcast = v[11];
    rank.hostBytes = presentBytes(v[12]);
    rank.overlap = overlapFrom(allTimings.data() + r * timingFields);
    // Names, frozen and stages are the same on every rank.
    std::vector<plan::EngineReport> engines = engine.engineReports();
    for (size_t e = 0; e < engines.size(); ++e) {
      const int64_t *w = v + kRankFields + int64_t(e) * kEngineFields;
      plan::EngineReport &entry = engines[e];
      entry.paramBytes = w[0];
      entry.gradBytes = w[1];
      entry.optimizerStateBytes = w[2];
      entry.comm = {w[3], w[4], w[5], w[6]};
      entry.hostBytes = presentBytes(w[7]);
    }
    rank.engines = std::move(engines);
    report.ranks.push_back(rank);
  }
  return report;
}

/// --save-16bit: every rank takes part (a gather at ZeRO stage 3). An
/// engine that cannot be saved is a warning, as DeepSpeed's is: the run
/// still succeeds.
void save16Bit(const Options &options, runtime::Engine &engine,
               const World &world) {
  std::string message;
  bool saved = engine.save16bitModel(
      options.save16BitDir, options.save16BitFile.value_or("pytorch_model.bin"),
      options.save16BitExcludeFrozen, &message);
  if (!saved && world.isLeader())
    std::fprintf(stderr, "ds-run: warning: %s\n", message.c_str());
}

/// --resume: loads the checkpoint and returns the first step to run.
int64_t resumeFrom(const Options &options, runtime::Engine &engine,
                   int64_t steps) {
  if (options.resumeDir.empty())
    return 1;
  std::string loaded = engine.loadCheckpoint(options.resumeDir);
  if (engine.globalSteps() >= steps)
    throw runtime::RuntimeError(
        "--resume " + loaded + ": the checkpoint is at step " +
        std::to_string(engine.globalSteps()) + "; --steps " +
        std::to_string(steps) +
        " leaves nothing to run (--steps counts all steps, those before "
        "the checkpoint included)");
  return engine.globalSteps() + 1;
}

} // namespace

void runTrain(const Options &options, World &world) {
  RunSetup run = setUpRun(options, world, /*training=*/true);
  runtime::Engine &engine = run.engine;
  // Loading broadcast the state from rank 0: not per-step traffic.
  const int64_t loadBroadcast = volumeNow(world).broadcast;
  // The engine's collectives during the micro-steps (those of
  // programs.train and programs.step); ds-run's own loss averaging is left
  // out.
  runtime::CommVolume stepVolume;
  // Their timing, from here on (the load's broadcast is not part of it).
  engine.resetOverlap();
  const int64_t accumulation = engine.plan().gradientAccumulationSteps;

  // A resumed run goes on from the checkpoint's step to --steps; the data
  // position follows from the step.
  const int64_t first = resumeFrom(options, engine, run.steps);
  runtime::SaveCheckpointOptions saveOptions;
  saveOptions.includeFrozen = options.saveFrozen;

  LossMeter meter(engine.plan(), options.planPath);
  LossLog log(world);
  TrainMonitor monitor(options, engine, world, run.steps);
  DataPrefetcher data(engine.device(), [&](int64_t index) {
    return run.data.sliceMicroStep(index, world.rank, world.size);
  });
  const int64_t lastMicroStep = run.steps * accumulation - 1;
  for (int64_t step = first; step <= run.steps; ++step) {
    world.beginStep(step); // Timeout messages; DS_TEST_FAULT (test/mpi).
    monitor.stepBegin(step);
    runtime::StepReport report;
    for (int64_t micro = 0; micro < accumulation; ++micro) {
      int64_t index = (step - 1) * accumulation + micro;
      runtime::CommVolume before = volumeNow(world);
      meter.add(engine.forward(data.take(
          index, index < lastMicroStep ? std::optional<int64_t>(index + 1)
                                       : std::nullopt)));
      engine.backward();
      report = engine.step();
      stepVolume += volumeNow(world) - before;
    }
    if (!report.updated) // The engine counts micro-steps itself.
      throw runtime::RuntimeError(
          "internal error: step " + std::to_string(step) +
          " ended off the gradient accumulation boundary");
    nlohmann::ordered_json line = meter.line(step, world);
    addStepReport(line, report, engine.plan());
    log.emit(line);
    monitor.stepEnd(step, line);
    if (!options.saveCheckpointDir.empty() &&
        ((options.saveEvery && step % options.saveEvery == 0) ||
         step == run.steps))
      engine.saveCheckpoint(options.saveCheckpointDir, "", saveOptions);
  }
  plan::OverlapReport overlap = engine.overlap();
  log.writeFile(options.lossesPath);
  monitor.finish();
  if (!options.reportPath.empty()) {
    plan::Report measured =
        gatherReport(engine, world, stepVolume, run.steps - first + 1,
                     loadBroadcast, overlap);
    if (world.isLeader())
      plan::writeReport(measured, options.reportPath);
  }
  if (!options.saveParamsPath.empty()) {
    // ZeRO stage 3: a collective (each rank holds only its blocks), so
    // every rank takes part; rank 0 writes.
    runtime::NamedTensors params = engine.gatherState();
    if (world.isLeader())
      runtime::writeSafetensors(options.saveParamsPath, params);
  }
  if (!options.save16BitDir.empty())
    save16Bit(options, engine, world);
}

} // namespace ds::run
