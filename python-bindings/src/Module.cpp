//===- Module.cpp - The _dsopt extension module ---------------------------===//
//
// The native part of the `dsopt` package: the compile pipeline
// (ds::compiler) and the runtime engine (ds::runtime) of this project, both
// linked in, and the same libtorch as Python's torch.
//
//===----------------------------------------------------------------------===//

#include "Errors.h"
#include "PyPlan.h"

#include <pybind11/pybind11.h>

PYBIND11_MODULE(_dsopt, m) {
  m.doc() = "dsopt native module: compile TorchScript models with DeepSpeed "
            "configs into plans and run them (use the dsopt package)";
  dsopt::registerErrors(m);
  dsopt::bindPlan(m);
  dsopt::bindComm(m);
  dsopt::bindEngine(m);
}
