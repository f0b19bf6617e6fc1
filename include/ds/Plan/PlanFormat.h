//===- PlanFormat.h - Reading, writing and validating plans -----*- C++ -*-===//
//
// The JSON side of the plan format: file <-> JSON <-> Plan. Reading always
// validates the structure (docs/plan-format.md, "Validation on load"), except
// that operator names are checked by the runtime, which owns the registry.
//
//===----------------------------------------------------------------------===//

#ifndef DS_PLAN_PLANFORMAT_H
#define DS_PLAN_PLANFORMAT_H

#include "ds/Plan/Plan.h"
#include "ds/Plan/PlanError.h"

#include <string>

namespace ds::plan {

/// Reads and validates the plan file at `path`. Throws PlanError naming the
/// file for I/O errors, malformed JSON and invalid plans.
Plan readPlan(const std::string &path);

/// Converts and validates a parsed JSON document; `origin` names it in
/// errors (usually the file path).
Plan parsePlan(const ordered_json &json, const std::string &origin);

/// Checks a Plan built in memory (what parsePlan checks after conversion).
/// Throws PlanError; `origin` names the plan in messages.
void validatePlan(const Plan &plan, const std::string &origin);

/// The JSON document for `plan` (current version), keys in the documented
/// order. Does not validate.
ordered_json toJson(const Plan &plan);

/// The text writePlan writes: toJson(plan) with one line per small object
/// (a value, a call op, a state entry) and nesting only where ops have
/// branches, so that plans diff well and FileCheck can match op lines.
std::string printPlan(const Plan &plan);

/// Validates `plan`, then writes it to `path` atomically (a temporary file
/// in the same folder, renamed over `path`). Throws PlanError.
void writePlan(const Plan &plan, const std::string &path);

} // namespace ds::plan

#endif // DS_PLAN_PLANFORMAT_H
