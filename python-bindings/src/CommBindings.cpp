//===- CommBindings.cpp - _dsopt.Communicator: the ranks of an MPI job ----===//
//
// The communicator ds-run uses (lib/Runtime/Comm), for Python scripts that
// mpirun launches: every engine of the process shares the one MPI
// communicator (MPI initialises once per process), and every rank starts
// the same collectives in the same order because it runs the same script.
//
//===----------------------------------------------------------------------===//

#include "PyPlan.h"
#include "Tensors.h"

#include "ds/Runtime/Communicator.h"

#include <memory>

namespace py = pybind11;
using ds::runtime::Communicator;

namespace dsopt {

namespace {

/// The process's MPI communicator while something holds it.
std::weak_ptr<Communicator> &mpiSingleton() {
  static std::weak_ptr<Communicator> communicator;
  return communicator;
}

std::shared_ptr<Communicator> mpiCommunicator() {
  if (std::shared_ptr<Communicator> alive = mpiSingleton().lock())
    return alive;
  ds::runtime::CommOptions options =
      ds::runtime::CommOptions::fromEnvironment();
  options.messagePrefix = "dsopt: error: ";
  std::shared_ptr<Communicator> created;
  {
    py::gil_scoped_release release;
    created = ds::runtime::createMpiCommunicator(options);
  }
  mpiSingleton() = created;
  return created;
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
  m.def("mpi_available", &ds::runtime::mpiCommunicatorAvailable);
  m.def("mpi_communicator", &mpiCommunicator);
  m.def("local_communicator", &ds::runtime::createLocalCommunicator);
}

} // namespace dsopt
