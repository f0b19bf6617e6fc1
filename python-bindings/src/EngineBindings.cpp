//===- EngineBindings.cpp - _dsopt.Engine, DataFile, safetensors ----------===//
//
// The native half of dsopt.Engine: ds::runtime::Engine with tensors crossing
// as DLPack capsules (Tensors.h). Long calls release the GIL; the Python
// half (dsopt/_engine.py) gives it DeepSpeed's method names and argument
// forms.
//
//===----------------------------------------------------------------------===//

#include "PyPlan.h"
#include "Tensors.h"

#include "ds/Runtime/Checkpoint.h"
#include "ds/Runtime/Communicator.h"
#include "ds/Runtime/Device.h"
#include "ds/Runtime/Engine.h"
#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/DataFile.h"
#include "ds/TensorIO/Safetensors.h"

#include <pybind11/stl.h>

#include <optional>

namespace py = pybind11;
using ds::runtime::Engine;

namespace dsopt {

namespace {

Engine makeEngine(const PyPlan &plan, const std::string &weights,
                  std::optional<int64_t> seed, int64_t rank, bool checkResults,
                  std::shared_ptr<ds::runtime::Communicator> communicator,
                  const std::string &device) {
  ds::runtime::LoadOptions options;
  if (!device.empty())
    options.device = ds::runtime::createRankDevice(device);
  options.weightsPath = weights;
  options.seed = seed;
  options.rank = rank;
  options.checkResults = checkResults;
  options.communicator = std::move(communicator);
  // The Engine keeps its own copy: the Python Plan stays usable.
  py::gil_scoped_release release;
  return Engine::fromPlan(plan.plan, plan.origin, plan.baseDir, options);
}

/// Runs `call` on the inputs without the GIL; tensors in and out by DLPack.
template <typename Call>
py::list runTensors(const py::list &inputs, Call call) {
  std::vector<at::Tensor> tensors = tensorsFromPython(inputs);
  std::vector<at::Tensor> results;
  {
    py::gil_scoped_release release;
    results = call(tensors);
  }
  return tensorsToPython(results);
}

py::dict stepReport(const ds::runtime::StepReport &report) {
  py::list engines;
  for (const auto &engine : report.engines)
    engines.append(py::dict(py::arg("engine") = engine.engine,
                            py::arg("lr") = engine.lr,
                            py::arg("grad_norm") = engine.gradNorm,
                            py::arg("loss_scale") = engine.lossScale,
                            py::arg("skipped") = engine.skipped));
  return py::dict(py::arg("updated") = report.updated,
                  py::arg("engines") = engines,
                  py::arg("grad_norm") = report.gradNorm(),
                  py::arg("skipped") = report.skipped());
}

py::dict memoryReport(const ds::runtime::MemoryStats &stats) {
  return py::dict(py::arg("current_bytes") = stats.currentBytes,
                  py::arg("peak_bytes") = stats.peakBytes,
                  py::arg("state_bytes") = stats.stateBytes,
                  py::arg("gradient_bytes") = stats.gradientBytes,
                  py::arg("optimizer_bytes") = stats.optimizerBytes);
}

/// (name, tensor) pairs as a list of (name, capsule).
py::list namedToPython(const ds::runtime::NamedTensors &named) {
  py::list items;
  for (const auto &[name, tensor] : named)
    items.append(py::make_tuple(name, tensorToPython(tensor)));
  return items;
}

void bindEngineClass(py::module_ &m) {
  py::class_<Engine>(m, "Engine")
      .def(py::init(&makeEngine), py::arg("plan"), py::arg("weights") = "",
           py::arg("seed") = py::none(), py::arg("rank") = 0,
           py::arg("check_results") = true, py::arg("communicator") = nullptr,
           py::arg("device") = "")
      .def("forward",
           [](Engine &engine, const py::list &inputs) {
             return runTensors(inputs, [&](const auto &tensors) {
               return engine.forward(tensors);
             });
           })
      .def("forward_eval",
           [](Engine &engine, const py::list &inputs) {
             return runTensors(inputs, [&](const auto &tensors) {
               return engine.forwardEval(tensors);
             });
           })
      .def("backward",
           [](Engine &engine, double seedScale) {
             py::gil_scoped_release release;
             engine.backward(seedScale);
           },
           py::arg("seed_scale") = 1.0)
      // One DLPack capsule or None (zeros) per forward result.
      .def("backward_with",
           [](Engine &engine, const py::list &cotangents) {
             std::vector<at::Tensor> tensors;
             tensors.reserve(cotangents.size());
             for (py::handle item : cotangents)
               tensors.push_back(item.is_none() ? at::Tensor()
                                                : tensorFromPython(item));
             py::gil_scoped_release release;
             engine.backward(tensors);
           })
      .def_property_readonly("takes_cotangents", &Engine::takesCotangents)
      .def_property_readonly("rank", &Engine::rank)
      .def_property_readonly("world_size", &Engine::worldSize)
      .def("step",
           [](Engine &engine) {
             ds::runtime::StepReport report;
             {
               py::gil_scoped_release release;
               report = engine.step();
             }
             return stepReport(report);
           })
      .def("is_gradient_accumulation_boundary",
           &Engine::isGradientAccumulationBoundary)
      .def_property_readonly("can_train", &Engine::canTrain)
      .def_property_readonly("global_steps", &Engine::globalSteps)
      .def_property_readonly("micro_steps", &Engine::microSteps)
      .def_property_readonly("seed", &Engine::seed)
      .def("next_lr", &Engine::nextLr, py::arg("engine"))
      .def("loss_scale", &Engine::lossScale, py::arg("engine"))
      .def("gradient",
           [](const Engine &engine, const std::string &param) {
             return tensorToPython(engine.gradient(param));
           })
      // gatherState(): whole parameters at every stage (a collective at
      // ZeRO stage 3, so every rank calls it at the same point).
      .def("state",
           [](const Engine &engine) {
             return namedToPython(engine.gatherState());
           })
      .def("save_params",
           [](const Engine &engine, const std::string &path) {
             ds::runtime::NamedTensors named = engine.gatherState();
             py::gil_scoped_release release;
             ds::runtime::writeSafetensors(path, named);
           })
      // Checkpoints (docs/checkpoint.md): collectives, like state().
      .def(
          "save_checkpoint",
          [](Engine &engine, const std::string &dir, const std::string &tag,
             bool includeFrozen) {
            ds::runtime::SaveCheckpointOptions options;
            options.includeFrozen = includeFrozen;
            return engine.saveCheckpoint(dir, tag, options);
          },
          py::arg("dir"), py::arg("tag") = "",
          py::arg("include_frozen") = false,
          py::call_guard<py::gil_scoped_release>())
      .def("load_checkpoint", &Engine::loadCheckpoint, py::arg("dir"),
           py::arg("tag") = "", py::call_guard<py::gil_scoped_release>())
      // (saved, message): message says why nothing was saved.
      .def(
          "save_16bit_model",
          [](Engine &engine, const std::string &dir,
             const std::string &filename, bool excludeFrozen) {
            std::string message;
            bool saved;
            {
              py::gil_scoped_release release;
              saved =
                  engine.save16bitModel(dir, filename, excludeFrozen, &message);
            }
            return py::make_tuple(saved, message);
          },
          py::arg("dir"), py::arg("filename"), py::arg("exclude_frozen"))
      .def("memory",
           [](const Engine &engine) { return memoryReport(engine.memory()); })
      .def("train_memory",
           [](const Engine &engine) {
             return memoryReport(engine.trainMemory());
           })
      .def("reset_peak_memory", &Engine::resetPeakMemory)
      .def("engine_reports", [](const Engine &engine) {
        py::list reports;
        for (const ds::plan::EngineReport &report : engine.engineReports()) {
          const ds::plan::CommVolume &comm = report.comm;
          reports.append(py::dict(
              py::arg("name") = report.name, py::arg("frozen") = report.frozen,
              py::arg("zero_stage") = report.zeroStage,
              py::arg("param_bytes") = report.paramBytes,
              py::arg("grad_bytes") = report.gradBytes,
              py::arg("optimizer_state_bytes") = report.optimizerStateBytes,
              py::arg("comm_volume_elements") =
                  py::dict(py::arg("all_reduce") = comm.allReduce,
                           py::arg("reduce_scatter") = comm.reduceScatter,
                           py::arg("all_gather") = comm.allGather,
                           py::arg("broadcast") = comm.broadcast,
                           py::arg("total") = comm.total())));
        }
        return reports;
      });
}

/// ds-run's view of a data file, so Python loops can feed exactly its rows.
struct PyDataFile {
  ds::runtime::DataFile data;
  int64_t worldSize;
};

void bindDataFile(py::module_ &m) {
  py::class_<PyDataFile>(m, "DataFile")
      .def(py::init([](const std::string &path, const PyPlan &plan,
                       const std::vector<std::string> &unbatched) {
             ds::runtime::DataOptions options;
             options.unbatched = unbatched;
             return PyDataFile{
                 ds::runtime::DataFile::load(path, plan.plan, options),
                 plan.plan.worldSize};
           }),
           py::arg("path"), py::arg("plan"), py::arg("unbatched"))
      .def_property_readonly(
          "num_micro_steps",
          [](const PyDataFile &file) { return file.data.numMicroSteps(); })
      .def(
          "micro_step",
          [](const PyDataFile &file, int64_t step, int64_t rank) {
            if (step < 0 || step >= file.data.numMicroSteps())
              throw py::index_error("micro-step " + std::to_string(step) +
                                    " is out of range: " + file.data.path() +
                                    " holds " +
                                    std::to_string(file.data.numMicroSteps()));
            if (rank < 0 || rank >= file.worldSize)
              throw py::index_error("rank " + std::to_string(rank) +
                                    " is out of range for world_size " +
                                    std::to_string(file.worldSize));
            return tensorsToPython(
                file.data.sliceMicroStep(step, rank, file.worldSize));
          },
          py::arg("step"), py::arg("rank"));
}

} // namespace

void bindEngine(py::module_ &m) {
  bindEngineClass(m);
  bindDataFile(m);
  // dsopt.zero_to_fp32 checks a checkpoint's manifest before torch.load.
  m.def("verify_checkpoint_folder", &ds::runtime::verifyCheckpointFolder,
        py::arg("folder"));
  m.def("read_safetensors", [](const std::string &path) {
    return namedToPython(ds::runtime::readSafetensors(path));
  });
  m.def("write_safetensors",
        [](const std::string &path, const py::list &items) {
          ds::runtime::NamedTensors named;
          for (py::handle item : items) {
            auto pair = py::reinterpret_borrow<py::tuple>(item);
            named.emplace_back(pair[0].cast<std::string>(),
                               tensorFromPython(pair[1]));
          }
          ds::runtime::writeSafetensors(path, named);
        });
  // Hands tensors through DLPack and back unchanged: the tests check with it
  // that no copy happens on either way.
  m.def("_roundtrip", [](const py::list &items) {
    return tensorsToPython(tensorsFromPython(items));
  });
}

} // namespace dsopt
