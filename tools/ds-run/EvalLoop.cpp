//===- EvalLoop.cpp - ds-run --eval ---------------------------------------===//
//
// Each optimizer step consumes gradient_accumulation_steps micro-steps of
// the data; its loss is the mean over ranks and micro-steps, as DeepSpeed
// reports it (per output when the forward returns several losses, and their
// sum as "loss").
//
//===----------------------------------------------------------------------===//

#include "EvalLoop.h"

#include "Progress.h"

#include "ds/Plan/AtomicFile.h"
#include "ds/Runtime/DTypes.h"
#include "ds/Runtime/DataFile.h"
#include "ds/Runtime/Engine.h"
#include "ds/Runtime/RuntimeError.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <iostream>

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

void runEval(const Options &options, const World &world) {
  runtime::LoadOptions loadOptions;
  loadOptions.weightsPath = options.weightsPath;
  runtime::Engine engine = runtime::Engine::load(options.planPath, loadOptions);
  const plan::Plan &plan = engine.plan();
  if (plan.worldSize != world.size)
    throw RuntimeError(options.planPath +
                       ": the plan was compiled for "
                       "world_size " +
                       std::to_string(plan.worldSize) + ", but " +
                       std::to_string(world.size) + " rank(s) are running");
  if (plan.outputs.empty())
    throw RuntimeError(options.planPath +
                       ": the eval program returns nothing; --eval reports "
                       "the losses the forward returns");

  runtime::DataOptions dataOptions;
  dataOptions.unbatched = options.unbatched;
  runtime::DataFile data =
      runtime::DataFile::load(options.dataPath, plan, dataOptions);
  const int64_t accumulation = plan.gradientAccumulationSteps;
  const int64_t steps = stepsToRun(options, data, accumulation);

  const size_t numOutputs = plan.outputs.size();
  std::string lines;
  Progress progress("eval");
  for (int64_t step = 1; step <= steps; ++step) {
    std::vector<double> sums(numOutputs, 0.0);
    for (int64_t micro = 0; micro < accumulation; ++micro) {
      int64_t index = (step - 1) * accumulation + micro;
      std::vector<at::Tensor> outputs = engine.forwardEval(
          data.sliceMicroStep(index, world.rank, world.size));
      for (size_t k = 0; k < numOutputs; ++k) {
        if (outputs[k].numel() != 1)
          throw RuntimeError(options.planPath + ": output " +
                             std::to_string(k) + " (\"" + plan.outputs[k].name +
                             "\") is " + runtime::describeTensor(outputs[k]) +
                             ", not a scalar; --eval reports scalar losses");
        sums[k] += outputs[k].item<double>();
      }
    }
    world.sumAcrossRanks(sums);

    nlohmann::ordered_json line;
    line["step"] = step;
    double total = 0.0;
    std::vector<double> losses;
    for (double sum : sums) {
      losses.push_back(sum / double(accumulation * world.size));
      total += losses.back();
    }
    line["loss"] = total;
    if (numOutputs > 1)
      line["losses"] = losses;
    if (world.isLeader()) {
      std::string text = line.dump() + "\n";
      std::cout << text << std::flush;
      lines += text;
    }
    progress.update(step, steps);
  }

  if (world.isLeader() && !options.lossesPath.empty())
    plan::writeFileAtomic(options.lossesPath, lines);
}

} // namespace ds::run
