//===- RunSetup.cpp - What every ds-run mode loads first ------------------===//
//
// Everything that can fail on the user's files fails here, before the first
// step: a long run must not die at step 900 because the data is short.
//
//===----------------------------------------------------------------------===//

#include "RunSetup.h"

#include "ds/Runtime/Device.h"
#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/RuntimeError.h"

#include <cstdio>

namespace ds::run {

using runtime::RuntimeError;

namespace {

int64_t stepsToRun(const Options &options, const runtime::DataFile &data,
                   int64_t accumulation) {
  if (options.steps) {
    int64_t needed = *options.steps * accumulation;
    data.requireMicroSteps(needed, std::to_string(*options.steps) +
                                       " step(s) x " +
                                       std::to_string(accumulation) +
                                       " gradient accumulation step(s)");
    return *options.steps;
  }
  int64_t steps = data.numMicroSteps() / accumulation;
  if (steps < 1)
    data.requireMicroSteps(accumulation,
                           "one step of gradient_accumulation_steps = " +
                               std::to_string(accumulation));
  return steps;
}

} // namespace

RunSetup setUpRun(const Options &options, World &world, bool training) {
  runtime::LoadOptions loadOptions;
  loadOptions.weightsPath = options.weightsPath;
  loadOptions.rank = world.rank;
  loadOptions.connect = [&world](const std::shared_ptr<runtime::Device> &device) {
    return world.connect(device);
  };
  loadOptions.seed = options.seed;
  if (!options.device.empty())
    loadOptions.device = runtime::createRankDevice(options.device);
  runtime::Engine engine = runtime::Engine::load(options.planPath, loadOptions);
  const plan::Plan &plan = engine.plan();
  const std::vector<std::string> &kept = engine.state().keptBuffers();
  if (!kept.empty() && world.rank == 0) {
    std::string names;
    for (const std::string &name : kept)
      names += (names.empty() ? "\"" : ", \"") + name + "\"";
    std::fprintf(stderr,
                 "ds-run: note: --weights %s has no buffer %s: kept the "
                 "plan's (state dicts leave out non-persistent buffers)\n",
                 options.weightsPath.c_str(), names.c_str());
  }
  // The engine checks this against its communicator; a World without one
  // (one rank) is checked here.
  if (plan.worldSize != world.size)
    throw RuntimeError(
        options.planPath + ": the plan was compiled for --world-size " +
        std::to_string(plan.worldSize) + ", but " + std::to_string(world.size) +
        (world.size == 1 ? " rank was" : " ranks were") + " launched");
  if (plan.outputs.empty())
    throw RuntimeError(options.planPath +
                       ": the forward returns nothing; ds-run reports the "
                       "losses the forward returns");
  if (training && !engine.canTrain())
    throw RuntimeError(options.planPath +
                       ": the plan has no train program (programs.train): "
                       "it was compiled for evaluation only; pass --eval to "
                       "run its eval program");

  runtime::DataOptions dataOptions;
  dataOptions.unbatched = options.unbatched;
  runtime::DataFile data =
      runtime::DataFile::load(options.dataPath, plan, dataOptions);
  int64_t steps = stepsToRun(options, data, plan.gradientAccumulationSteps);
  return RunSetup{std::move(engine), std::move(data), steps};
}

} // namespace ds::run
