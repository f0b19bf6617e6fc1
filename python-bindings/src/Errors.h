//===- Errors.h - C++ errors as Python exceptions ---------------*- C++ -*-===//
//
// Every error the compiler and runtime report becomes a Python exception
// carrying the C++ message unchanged, so that the interpreter survives any
// bad input:
//
//   dsopt.CompileError (ValueError)  the compile pipeline failed
//   dsopt.ConfigError  (ValueError)  ds::config::ConfigError
//   dsopt.PlanError    (ValueError)  ds::plan::PlanError (plan files, load)
//   dsopt.EngineError  (RuntimeError) ds::runtime::RuntimeError (weights,
//                                    data, kernels, calls out of order)
//   RuntimeError                     c10::Error, without its C++ backtrace
//
//===----------------------------------------------------------------------===//

#ifndef DSOPT_ERRORS_H
#define DSOPT_ERRORS_H

#include <pybind11/pybind11.h>

#include <stdexcept>

namespace dsopt {

/// A failed ds::compiler::compile; what() is the compiler's message.
class CompileFailure : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

void registerErrors(pybind11::module_ &module);

} // namespace dsopt

#endif // DSOPT_ERRORS_H
