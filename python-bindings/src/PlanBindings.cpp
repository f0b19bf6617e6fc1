//===- PlanBindings.cpp - _dsopt.load_plan and Plan ----------------------===//
//
// The native half of dsopt.load_plan / dsopt.Plan (dsopt.compile's is in
// CompileBindings.cpp, a module of its own that links the compiler). The
// Python half (dsopt/_plan.py) turns modules, dicts and tensors into the files
// and JSON text these functions take.
//
//===----------------------------------------------------------------------===//

#include "Errors.h"
#include "PyPlan.h"

#include "ds/Plan/PlanFormat.h"

#include <pybind11/stl.h>

#include <filesystem>

namespace py = pybind11;

namespace dsopt {

namespace {

PyPlan loadPlan(const std::string &path) {
  ds::plan::Plan plan = ds::plan::readPlan(path);
  std::string dir = std::filesystem::path(path).parent_path().string();
  return PyPlan{std::move(plan), path, dir, {}, {}};
}

std::string irAfter(const PyPlan &plan, const std::string &stage) {
  std::string known;
  for (const auto &[name, text] : plan.ir) {
    if (name == stage)
      return text;
    known += (known.empty() ? "" : ", ") + name;
  }
  if (plan.ir.empty())
    throw py::value_error(
        "this plan carries no IR: only a plan compiled in this process with "
        "keep_ir=True does (plan files hold the plan, not the IR)");
  throw py::value_error("no IR after stage '" + stage +
                        "'; the stages of this compile are: " + known);
}

py::object weightsOf(const PyPlan &plan) {
  if (!plan.plan.weights)
    return py::none();
  return py::dict(py::arg("kind") = plan.plan.weights->kind,
                  py::arg("path") = plan.plan.weights->path);
}

void setWeights(PyPlan &plan, const std::string &kind,
                const std::string &path) {
  if (kind != "torchscript" && kind != "safetensors" && kind != "pt2")
    throw py::value_error("weights kind must be 'torchscript', "
                          "'safetensors' or 'pt2', got '" +
                          kind + "'");
  plan.plan.weights = ds::plan::WeightsDesc{kind, path};
}

py::list inputsOf(const PyPlan &plan) {
  py::list inputs;
  for (const ds::plan::InputDesc &input : plan.plan.inputs)
    inputs.append(py::dict(py::arg("name") = input.name,
                           py::arg("dtype") = ds::plan::dtypeName(input.dtype),
                           py::arg("shape") = input.shape,
                           py::arg("batched") = input.batched));
  return inputs;
}

std::vector<std::string> namesOf(const std::vector<ds::plan::OutputDesc> &v) {
  std::vector<std::string> names;
  for (const auto &output : v)
    names.push_back(output.name);
  return names;
}

} // namespace

void bindPlan(py::module_ &m) {
  py::class_<PyPlan>(m, "Plan")
      .def("save",
           [](const PyPlan &plan, const std::string &path) {
             ds::plan::writePlan(plan.plan, path);
           })
      .def("copy", [](const PyPlan &plan) { return PyPlan(plan); })
      .def("mlir", &irAfter, py::arg("stage"))
      .def_property_readonly("stages",
                             [](const PyPlan &plan) {
                               std::vector<std::string> names;
                               for (const auto &entry : plan.ir)
                                 names.push_back(entry.first);
                               return names;
                             })
      .def("report", [](const PyPlan &plan) { return planReport(plan.plan); })
      .def("to_json",
           [](const PyPlan &plan) { return ds::plan::printPlan(plan.plan); })
      .def_property_readonly("weights", &weightsOf)
      .def("set_weights", &setWeights, py::arg("kind"), py::arg("path"))
      .def_property_readonly("inputs", &inputsOf)
      .def_property_readonly(
          "outputs",
          [](const PyPlan &plan) { return namesOf(plan.plan.outputs); })
      .def_property_readonly(
          "world_size", [](const PyPlan &plan) { return plan.plan.worldSize; })
      .def_property_readonly(
          "device", [](const PyPlan &plan) { return plan.plan.device; })
      .def_property_readonly(
          "torch_version",
          [](const PyPlan &plan) { return plan.plan.torchVersion; })
      .def_property_readonly(
          "micro_batch_per_rank",
          [](const PyPlan &plan) { return plan.plan.microBatchPerRank; })
      .def_property_readonly("gradient_accumulation_steps",
                             [](const PyPlan &plan) {
                               return plan.plan.gradientAccumulationSteps;
                             })
      .def_property_readonly("can_train",
                             [](const PyPlan &plan) {
                               return plan.plan.findProgram("train") != nullptr;
                             })
      .def_readonly("origin", &PyPlan::origin)
      .def_readonly("base_dir", &PyPlan::baseDir)
      .def_readonly("warnings", &PyPlan::warnings);

  m.def("load_plan", &loadPlan, py::arg("path"));
}

} // namespace dsopt
