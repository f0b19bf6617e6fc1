//===- TrainLoop.h - ds-run training ----------------------------*- C++ -*-===//

#ifndef DS_TOOLS_DSRUN_TRAINLOOP_H
#define DS_TOOLS_DSRUN_TRAINLOOP_H

#include "Options.h"
#include "World.h"

namespace ds::run {

/// Trains the plan over the requested optimizer steps (each: GAS
/// micro-steps of forward, backward, step) and reports one line per step
/// (stdout, and --losses); --save-params writes the final state. Throws on
/// any error.
void runTrain(const Options &options, World &world);

} // namespace ds::run

#endif // DS_TOOLS_DSRUN_TRAINLOOP_H
