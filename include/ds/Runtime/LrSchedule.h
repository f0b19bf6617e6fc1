//===- LrSchedule.h - DeepSpeed's learning rate schedules -------*- C++ -*-===//
//
// The learning rate of each optimizer update under an engine's
// plan::SchedulerDesc: DeepSpeed's WarmupLR, WarmupDecayLR and
// WarmupCosineLR (deepspeed/runtime/lr_schedules.py). The formulas are in
// docs/config.md. Plain C++: no ATen.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_LRSCHEDULE_H
#define DS_RUNTIME_LRSCHEDULE_H

#include "ds/Plan/Plan.h"

#include <cstdint>

namespace ds::runtime {

/// DeepSpeed's learning rate at scheduler iteration `step` (its
/// `last_batch_iteration`): -1 before the first scheduler.step(), which
/// DeepSpeed calls after every optimizer update not skipped for fp16
/// overflow. `baseLr` is the optimizer's lr: WarmupCosineLR scales it, and
/// WarmupLR uses it when warmup_max_lr is unset.
double schedulerLr(const plan::SchedulerDesc &scheduler, double baseLr,
                   int64_t step);

/// The lr the next optimizer update uses after `appliedUpdates` updates
/// were applied (skipped ones not counted): schedulerLr(.., appliedUpdates-1).
double schedulerLrForUpdate(const plan::SchedulerDesc &scheduler, double baseLr,
                            int64_t appliedUpdates);

} // namespace ds::runtime

#endif // DS_RUNTIME_LRSCHEDULE_H
