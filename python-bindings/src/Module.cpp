//===- Module.cpp - The _dsopt extension module ---------------------------===//
//
// The native part of the `dsopt` package: the runtime engine (ds::runtime) of
// this project, linked in, and the same libtorch as Python's torch. It links
// no MLIR or LLVM: the compiler is the separate module _dsopt_compile
// (CompileBindings.cpp), whose compile() this module re-exports when it sits
// beside it. The runtime-only build (runtime/CMakeLists.txt, for GPU nodes
// without MLIR) has no _dsopt_compile: compile() then raises CompileError
// saying so, and plans come from ds-compile on a build machine.
//
//===----------------------------------------------------------------------===//

#include "Errors.h"
#include "PyPlan.h"

#include <pybind11/pybind11.h>

#include <string>

namespace py = pybind11;

namespace {

/// `compile` and HAS_COMPILER: the compiler module's compile(), or one that
/// explains why there is none.
void attachCompiler(py::module_ &m) {
  std::string name = py::str(m.attr("__name__"));
  size_t dot = name.rfind('.');
  std::string sibling =
      (dot == std::string::npos ? "" : name.substr(0, dot + 1)) +
      "_dsopt_compile";
  try {
    py::module_ compiler = py::module_::import(sibling.c_str());
    m.attr("compile") = compiler.attr("compile");
    m.attr("HAS_COMPILER") = true;
    return;
  } catch (py::error_already_set &error) {
    // A compiler module that is there but does not load (a missing MLIR
    // library) is an error worth seeing; only its absence is expected.
    if (!error.matches(PyExc_ModuleNotFoundError))
      throw;
  }
  m.def(
      "compile",
      [](py::args, py::kwargs) -> py::object {
        throw dsopt::CompileFailure(
            "this dsopt is the runtime-only build (no compiler: its module "
            "_dsopt_compile links MLIR and is built only by the full build); "
            "compile the plan with ds-compile (or dsopt.compile) where the "
            "full build is installed, then load it here with "
            "dsopt.load_plan(path)");
      },
      "Raises CompileError: this build of dsopt has no compiler.");
  m.attr("HAS_COMPILER") = false;
}

} // namespace

PYBIND11_MODULE(_dsopt, m) {
  m.doc() = "dsopt native module: run plans compiled from TorchScript models "
            "and DeepSpeed configs (use the dsopt package)";
  dsopt::registerErrors(m);
  dsopt::bindPlan(m);
  dsopt::bindComm(m);
  dsopt::bindEngine(m);
  // After bindPlan: the compiler module returns Plan objects.
  attachCompiler(m);
}
