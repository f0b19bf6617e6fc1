//===- PlanValidate.cpp - Structural checks of a whole plan ---------------===//
//
// Everything in docs/plan-format.md "Validation on load" except operator
// names (the runtime owns the registry). This file: the top level (counts,
// weights), unique engine and state names, state entries, inputs, outputs,
// and each program (ValidateProgram.cpp); PlanValidator.h lists the others.
//
//===----------------------------------------------------------------------===//

#include "PlanValidator.h"

namespace ds::plan {

namespace detail {

void PlanValidator::run() {
  if (!isPlanDevice(plan_.device))
    fail("device", "expected \"cpu\" or \"cuda\" (the device the plan is "
                   "compiled for), found \"" +
                       plan_.device + "\"");
  atLeastOne(plan_.worldSize, "world_size");
  atLeastOne(plan_.microBatchPerRank, "micro_batch_per_rank");
  atLeastOne(plan_.gradientAccumulationSteps, "gradient_accumulation_steps");
  if (plan_.weights) {
    if (plan_.weights->kind != "torchscript" &&
        plan_.weights->kind != "safetensors" && plan_.weights->kind != "pt2")
      fail("weights.kind",
           "expected \"torchscript\", \"safetensors\" or \"pt2\", found \"" +
               plan_.weights->kind + "\"");
    if (plan_.weights->path.empty())
      fail("weights.path", "is empty");
  }
  checkEngines();
  checkState();
  checkTraining();
  checkInputs();
  checkOutputs();
  checkPrograms();
  checkVariants();
}

void PlanValidator::fail(const std::string &where,
                         const std::string &detail) const {
  throw PlanError(origin_, where, detail);
}

void PlanValidator::atLeastOne(int64_t value, const char *field) const {
  if (value < 1)
    fail(field, "must be at least 1, found " + std::to_string(value));
}

void PlanValidator::uniqueName(const std::string &name,
                               const std::string &where, const char *what,
                               std::set<std::string> &seen) const {
  if (name.empty())
    fail(where, std::string("empty ") + what + " name");
  if (!seen.insert(name).second)
    fail(where, std::string("duplicate ") + what + " name \"" + name + "\"");
}

void PlanValidator::checkEngines() {
  std::set<std::string> names;
  for (size_t i = 0; i < plan_.engines.size(); ++i)
    uniqueName(plan_.engines[i].name, joinIndex("engines", i) + ".name",
               "engine", names);
}

void PlanValidator::checkState() {
  std::set<std::string> names;
  for (size_t i = 0; i < plan_.state.size(); ++i) {
    const StateDesc &state = plan_.state[i];
    std::string where = joinIndex("state", i);
    uniqueName(state.name, where + ".name", "state", names);
    if (!staticNumel(state.shape))
      fail(where + ".shape",
           "state shapes must be static, found " + formatShape(state.shape));
    bool known = false;
    std::string engines;
    for (const EngineDesc &engine : plan_.engines) {
      known |= engine.name == state.engine;
      engines += (engines.empty() ? "" : ", ") + engine.name;
    }
    if (!known)
      fail(where + ".engine",
           "no engine named \"" + state.engine +
               "\" (engines: " + (engines.empty() ? "none" : engines) + ")");
  }
}

void PlanValidator::checkInputs() {
  std::set<std::string> names;
  for (size_t i = 0; i < plan_.inputs.size(); ++i) {
    const InputDesc &input = plan_.inputs[i];
    std::string where = joinIndex("inputs", i);
    uniqueName(input.name, where + ".name", "input", names);
    for (int64_t dim : input.shape)
      if (dim < kDynamicDim)
        fail(where + ".shape", "dimension " + std::to_string(dim) +
                                   " is negative (-1 marks a dynamic size)");
    if (!input.batched)
      continue;
    if (input.shape.empty())
      fail(where + ".shape", "a batched input needs a batch dimension, "
                             "found a scalar shape []");
    int64_t batch = input.shape[0];
    if (batch != kDynamicDim && batch != plan_.microBatchPerRank)
      fail(where + ".shape",
           "the first dimension of a batched input is the per-rank "
           "micro-batch (micro_batch_per_rank = " +
               std::to_string(plan_.microBatchPerRank) + "), found " +
               formatShape(input.shape));
  }
}

void PlanValidator::checkOutputs() {
  std::set<std::string> names;
  for (size_t i = 0; i < plan_.outputs.size(); ++i)
    uniqueName(plan_.outputs[i].name, joinIndex("outputs", i) + ".name",
               "output", names);
}

void PlanValidator::checkPrograms() {
  const Program *eval = plan_.findProgram("eval");
  if (!eval)
    fail("programs", "missing required program \"eval\"");
  if (eval->results.size() != plan_.outputs.size())
    fail("programs.eval.results", "the eval program returns " +
                                      std::to_string(eval->results.size()) +
                                      " value(s), but \"outputs\" lists " +
                                      std::to_string(plan_.outputs.size()));
  if (plan_.findProgram("train") && !plan_.findProgram("step"))
    fail("programs", "missing required program \"step\" (the "
                     "accumulation boundary's collectives and "
                     "optimizer_step; required with \"train\")");
  if (const Program *train = plan_.findProgram("train");
      train && train->results.size() != plan_.outputs.size())
    fail("programs.train.results", "the train program returns " +
                                       std::to_string(train->results.size()) +
                                       " value(s), but \"outputs\" lists " +
                                       std::to_string(plan_.outputs.size()));
  for (const auto &[name, program] : plan_.programs)
    ProgramValidator(plan_, program, origin_, name).run();
}

void PlanValidator::checkVariants() const {
  for (size_t v = 0; v < plan_.variants.size(); ++v) {
    const ShapeVariant &variant = plan_.variants[v];
    std::string where = joinIndex("variants", v);
    if (variant.inputs.size() != plan_.inputs.size())
      fail(where + ".inputs", "has " + std::to_string(variant.inputs.size()) +
                                  " input(s), the plan has " +
                                  std::to_string(plan_.inputs.size()));
    std::vector<std::vector<int64_t>> shapes;
    for (size_t i = 0; i < plan_.inputs.size(); ++i) {
      const InputDesc &input = variant.inputs[i];
      const InputDesc &first = plan_.inputs[i];
      if (input.name != first.name || input.dtype != first.dtype ||
          input.batched != first.batched)
        fail(joinIndex(where + ".inputs", i),
             "\"" + input.name + "\" (" + dtypeName(input.dtype) +
                 (input.batched ? "" : ", unbatched") +
                 ") differs from the plan's input \"" + first.name + "\" (" +
                 dtypeName(first.dtype) + (first.batched ? "" : ", unbatched") +
                 "): a variant changes shapes only");
      shapes.push_back(input.shape);
    }
    // An exact earlier match (the first wins at run time) makes it dead.
    std::optional<size_t> earlier = plan_.matchShape(shapes);
    if (earlier && *earlier <= v)
      fail(where + ".inputs",
           "the shapes are taken by " +
               (*earlier == 0 ? std::string("the plan's inputs")
                              : joinIndex("variants", *earlier - 1)) +
               " already; the variant would never run");
    bool trains = plan_.findProgram("train") != nullptr;
    for (const auto &[name, program] : variant.programs)
      if (name != "eval" && !(trains && name == "train"))
        fail(where + ".programs",
             "unexpected program \"" + name + "\" (a variant has \"eval\"" +
                 (trains ? std::string(" and \"train\"") : "") +
                 "; it shares the plan's \"step\")");
    if (trains && !variant.programs.count("train"))
      fail(where + ".programs", "missing program \"train\" (the plan trains)");
  }
}

} // namespace detail

void validatePlan(const Plan &plan, const std::string &origin) {
  detail::PlanValidator(plan, origin).run();
  for (size_t v = 0; v < plan.variants.size(); ++v)
    detail::PlanValidator(plan.withVariant(v),
                          origin + ": variants[" + std::to_string(v) + "]")
        .run();
}

} // namespace ds::plan
