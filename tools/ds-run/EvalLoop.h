//===- EvalLoop.h - ds-run --eval -------------------------------*- C++ -*-===//

#ifndef DS_TOOLS_DSRUN_EVALLOOP_H
#define DS_TOOLS_DSRUN_EVALLOOP_H

#include "Options.h"
#include "World.h"

namespace ds::run {

/// Runs the plan's eval program over the requested steps and reports one
/// loss line per step (stdout, and --losses). Throws on any error.
void runEval(const Options &options, World &world);

} // namespace ds::run

#endif // DS_TOOLS_DSRUN_EVALLOOP_H
