//===- PyPlan.h - A plan as the Python package holds it ---------*- C++ -*-===//

#ifndef DSOPT_PYPLAN_H
#define DSOPT_PYPLAN_H

#include "ds/Plan/Plan.h"

#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

namespace dsopt {

/// A compiled or loaded plan plus what the compiler knew about it.
struct PyPlan {
  ds::plan::Plan plan;
  /// Names the plan in runtime errors: its file, or "<compiled plan>".
  std::string origin;
  /// A relative weights path resolves against this folder ("" = cwd).
  std::string baseDir;
  /// (stage, IR) after each compile stage; empty for loaded plans.
  std::vector<std::pair<std::string, std::string>> ir;
  std::vector<std::string> warnings;
};

/// The plan's summary as a dict (documented in docs/python.md).
pybind11::dict planReport(const ds::plan::Plan &plan);

void bindPlan(pybind11::module_ &module);
void bindEngine(pybind11::module_ &module);
void bindComm(pybind11::module_ &module);
/// dsopt.compile, in the module _dsopt_compile (CompileBindings.cpp).
void bindCompile(pybind11::module_ &module);

} // namespace dsopt

#endif // DSOPT_PYPLAN_H
