//===- CommBindings.cpp - _dsopt.RankGroup and Communicator ---------------===//
//
// The ranks ds-run uses (RankGroup, include/ds/Runtime/Launch.h), for Python
// scripts that mpirun or torchrun launches: one group per process (MPI
// initialises once), whose communicators every engine of the process
// shares; every rank starts the same collectives in the same order because
// it runs the same script.
//
//===----------------------------------------------------------------------===//

#include "PyPlan.h"
#include "Tensors.h"

#include "ds/Runtime/Communicator.h"
#include "ds/Runtime/Launch.h"

#include <memory>
#include <mutex>

namespace py = pybind11;
using ds::runtime::Communicator;

namespace dsopt {

namespace {

std::shared_ptr<ds::runtime::RankGroup> &rankGroupSlot() {
  static std::shared_ptr<ds::runtime::RankGroup> group;
  return group;
}

/// The process's rank group, made on first use, once (MPI cannot start
/// twice).
std::shared_ptr<ds::runtime::RankGroup> rankGroup() {
  // Held across the join, which releases the GIL: two threads must not
  // both start MPI.
  static std::mutex joining;
  std::shared_ptr<ds::runtime::RankGroup> &group = rankGroupSlot();
  py::gil_scoped_release unlocked;
  std::lock_guard<std::mutex> lock(joining);
  if (!group) {
    ds::runtime::CommOptions options =
        ds::runtime::CommOptions::fromEnvironment();
    options.messagePrefix = "dsopt: error: ";
    group = ds::runtime::RankGroup::join(options);
  }
  return group;
}

ds::runtime::ReduceOp reduceOpNamed(const std::string &name) {
  if (name == "sum")
    return ds::runtime::ReduceOp::Sum;
  if (name == "avg")
    return ds::runtime::ReduceOp::Avg;
  if (name == "max")
    return ds::runtime::ReduceOp::Max;
  throw py::value_error("all_reduce: op must be 'sum', 'avg' or 'max', got '" +
                        name + "'");
}

} // namespace

void bindComm(py::module_ &m) {
  py::class_<Communicator, std::shared_ptr<Communicator>>(m, "Communicator")
      .def_property_readonly("rank", &Communicator::rank)
      .def_property_readonly("size", &Communicator::size)
      .def_property_readonly("backend", &Communicator::backendName)
      .def("barrier",
           [](Communicator &comm) {
             py::gil_scoped_release release;
             comm.barrier().wait();
           })
      // In place on a contiguous CPU tensor (DLPack: the caller's storage).
      .def(
          "all_reduce",
          [](Communicator &comm, const py::object &tensor,
             const std::string &op) {
            at::Tensor native = tensorFromPython(tensor);
            ds::runtime::ReduceOp reduce = reduceOpNamed(op);
            py::gil_scoped_release release;
            comm.allReduce(native, reduce).wait();
          },
          py::arg("tensor"), py::arg("op") = "sum")
      // Ends every rank (MPI_Abort): for an error after which the ranks
      // cannot meet again.
      .def("abort",
           [](Communicator &comm, int exitCode) { comm.abort(exitCode); });
  py::class_<ds::runtime::RankGroup, std::shared_ptr<ds::runtime::RankGroup>>(
      m, "RankGroup")
      .def_property_readonly("rank", &ds::runtime::RankGroup::rank)
      .def_property_readonly("size", &ds::runtime::RankGroup::size)
      .def_property_readonly("launcher",
                             [](const ds::runtime::RankGroup &group) {
                               return group.launch().describe();
                             })
      // MPI under mpirun, the store channel under torchrun, local alone.
      .def("host_communicator",
           [](ds::runtime::RankGroup &group) {
             py::gil_scoped_release release;
             return group.hostCommunicator();
           })
      // The communicator for engines on `device` ("cpu", "cuda",
      // "cuda:N"): NCCL for a GPU of several ranks.
      .def("communicator",
           [](ds::runtime::RankGroup &group, const std::string &device) {
             py::gil_scoped_release release;
             return group.communicator(ds::runtime::createRankDevice(device));
           });
  m.def("mpi_available", &ds::runtime::mpiCommunicatorAvailable);
  m.def("rank_group", &rankGroup);
  // At exit, after the engines: MPI finalises, the store closes.
  m.def("leave_rank_group", [] {
    std::shared_ptr<ds::runtime::RankGroup> group;
    std::swap(group, rankGroupSlot());
    py::gil_scoped_release release;
    group.reset();
  });
  m.def("local_communicator", &ds::runtime::createLocalCommunicator);
}

} // namespace dsopt
