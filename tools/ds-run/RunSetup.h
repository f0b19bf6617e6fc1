//===- RunSetup.h - What every ds-run mode loads first ----------*- C++ -*-===//

#ifndef DS_TOOLS_DSRUN_RUNSETUP_H
#define DS_TOOLS_DSRUN_RUNSETUP_H

#include "Options.h"
#include "World.h"

#include "ds/Runtime/Engine.h"
#include "ds/TensorIO/DataFile.h"

#include <cstdint>

namespace ds::run {

struct RunSetup {
  runtime::Engine engine;
  runtime::DataFile data;
  /// Optimizer steps to run; the data holds at least steps x GAS
  /// micro-steps.
  int64_t steps;
};

/// Loads the plan and its weights, checks the world size (and, for
/// training, that the plan has a train program), then loads the data and
/// checks that it holds every micro-step the run needs: all before any
/// step runs. Throws PlanError / RuntimeError.
RunSetup setUpRun(const Options &options, World &world, bool training);

} // namespace ds::run

#endif // DS_TOOLS_DSRUN_RUNSETUP_H
