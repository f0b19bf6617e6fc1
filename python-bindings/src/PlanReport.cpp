//===- PlanReport.cpp - Plan.report(): a plan's summary as a dict ---------===//
//
// Until the compiler's own report (an issue of its own) lands, Plan.report()
// summarises what the plan itself says: shapes of the run, engines, state
// bytes by kind, and per program the op counts and predicted peak of live
// value bytes. Keys are documented in docs/python.md.
//
//===----------------------------------------------------------------------===//

#include "PyPlan.h"

#include "ds/Plan/MemoryPrediction.h"
#include "ds/Plan/Report.h"

#include <pybind11/stl.h>

#include <set>

namespace py = pybind11;
using namespace ds::plan;

namespace dsopt {

namespace {

using OpIt = std::vector<Op>::const_iterator;

/// Ops in [begin, end), counted into `byKind`, branches included.
int64_t countOps(OpIt begin, OpIt end, py::dict &byKind) {
  int64_t total = 0;
  for (OpIt it = begin; it != end; ++it) {
    const Op &op = *it;
    ++total;
    py::str kind(opKindName(op.kind));
    byKind[kind] =
        (byKind.contains(kind) ? byKind[kind].cast<int64_t>() : 0) + 1;
    if (op.kind == OpKind::If)
      total += countOps(op.thenBranch.body.begin(), op.thenBranch.body.end(),
                        byKind) +
               countOps(op.elseBranch.body.begin(), op.elseBranch.body.end(),
                        byKind);
  }
  return total;
}

py::dict programReport(const Program &program) {
  py::dict report, byKind;
  report["ops"] = countOps(program.body.begin(), program.body.end(), byKind);
  report["ops_by_kind"] = byKind;
  report["values"] = program.values.size();
  report["results"] = program.results.size();
  report["predicted_peak_bytes"] = predictPeakBytes(program);
  if (program.backwardStart) {
    OpIt split = program.body.begin() + *program.backwardStart;
    py::dict scratch;
    report["backward_start"] = *program.backwardStart;
    report["forward_ops"] = countOps(program.body.begin(), split, scratch);
    report["backward_ops"] = countOps(split, program.body.end(), scratch);
  }
  return report;
}

int64_t stateBytes(const StateDesc &state) {
  return staticNumel(state.shape).value_or(0) * dtypeSize(state.dtype);
}

} // namespace

py::dict planReport(const Plan &plan) {
  py::dict report;
  report["producer"] = plan.producer;
  report["world_size"] = plan.worldSize;
  report["micro_batch_per_rank"] = plan.microBatchPerRank;
  report["gradient_accumulation_steps"] = plan.gradientAccumulationSteps;
  if (plan.weights)
    report["weights"] = py::dict(py::arg("kind") = plan.weights->kind,
                                 py::arg("path") = plan.weights->path);
  else
    report["weights"] = py::none();

  std::set<std::string> frozen;
  py::list engines;
  for (const EngineDesc &engine : plan.engines) {
    bool isFrozen = !engine.trainable;
    if (isFrozen)
      frozen.insert(engine.name);
    py::list params;
    for (const StateDesc &state : plan.state)
      if (state.kind == StateKind::Param && state.engine == engine.name)
        params.append(state.name);
    // What dsopt.initialize's optimizer and scheduler views describe.
    py::object optimizer = py::none();
    if (engine.optimizer) {
      const OptimizerDesc &desc = *engine.optimizer;
      py::object scheduler = py::none();
      if (desc.scheduler)
        scheduler = py::str(schedulerTypeName(desc.scheduler->type));
      optimizer = py::dict(py::arg("type") = optimizerTypeName(desc.type),
                           py::arg("lr") = desc.lr,
                           py::arg("weight_decay") = desc.weightDecay,
                           py::arg("gradient_clipping") = desc.gradientClipping,
                           py::arg("scheduler") = scheduler);
    }
    engines.append(py::dict(
        py::arg("name") = engine.name, py::arg("module") = engine.module,
        py::arg("frozen") = isFrozen, py::arg("zero_stage") = engine.zeroStage,
        py::arg("params") = params, py::arg("optimizer") = optimizer));
  }
  report["engines"] = engines;

  py::list inputs, outputs;
  for (const InputDesc &input : plan.inputs)
    inputs.append(py::dict(
        py::arg("name") = input.name, py::arg("dtype") = dtypeName(input.dtype),
        py::arg("shape") = input.shape, py::arg("batched") = input.batched));
  for (const OutputDesc &output : plan.outputs)
    outputs.append(
        py::dict(py::arg("name") = output.name, py::arg("kind") = output.kind));
  report["inputs"] = inputs;
  report["outputs"] = outputs;

  int64_t params = 0, buffers = 0, trainable = 0;
  int64_t paramBytes = 0, bufferBytes = 0, trainableBytes = 0;
  for (const StateDesc &state : plan.state) {
    int64_t bytes = stateBytes(state);
    if (state.kind == StateKind::Buffer) {
      ++buffers;
      bufferBytes += bytes;
      continue;
    }
    ++params;
    paramBytes += bytes;
    if (state.requiresGrad && !frozen.count(state.engine)) {
      ++trainable;
      trainableBytes += bytes;
    }
  }
  report["state"] = py::dict(
      py::arg("count") =
          py::dict(py::arg("param") = params, py::arg("buffer") = buffers,
                   py::arg("trainable_param") = trainable),
      py::arg("bytes") = py::dict(py::arg("param") = paramBytes,
                                  py::arg("buffer") = bufferBytes,
                                  py::arg("trainable_param") = trainableBytes));

  py::dict programs;
  for (const auto &[name, program] : plan.programs)
    programs[py::str(name)] = programReport(program);
  report["programs"] = programs;
  return report;
}

} // namespace dsopt
