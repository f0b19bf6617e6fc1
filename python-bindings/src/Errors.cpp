//===- Errors.cpp - C++ errors as Python exceptions -----------------------===//

#include "Errors.h"

#include "ds/Config/Config.h"
#include "ds/Plan/PlanError.h"
#include "ds/TensorIO/RuntimeError.h"

#include <c10/util/Exception.h>

namespace py = pybind11;

namespace dsopt {

void registerErrors(py::module_ &module) {
  // Translators run newest first; these types are unrelated, so the order
  // only matters for the catch-all c10::Error, registered first.
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error)
        std::rethrow_exception(error);
    } catch (const c10::Error &e) {
      // The backtrace is LibTorch's C++ stack: noise in a Python traceback.
      PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });
  py::register_exception<ds::runtime::RuntimeError>(module, "EngineError",
                                                    PyExc_RuntimeError);
  py::register_exception<ds::plan::PlanError>(module, "PlanError",
                                              PyExc_ValueError);
  py::register_exception<ds::config::ConfigError>(module, "ConfigError",
                                                  PyExc_ValueError);
  py::register_exception<CompileFailure>(module, "CompileError",
                                         PyExc_ValueError);
}

} // namespace dsopt
