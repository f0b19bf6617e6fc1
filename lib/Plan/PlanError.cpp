//===- PlanError.cpp - Errors about a plan file ---------------------------===//

#include "ds/Plan/PlanError.h"

#include <utility>

namespace ds::plan {

static std::string formatPlanError(const std::string &origin,
                                   const std::string &where,
                                   const std::string &detail) {
  std::string text;
  for (const std::string *part : {&origin, &where}) {
    if (part->empty())
      continue;
    text += *part;
    text += ": ";
  }
  return text + detail;
}

PlanError::PlanError(std::string origin, std::string where, std::string detail)
    : std::runtime_error(formatPlanError(origin, where, detail)),
      origin_(std::move(origin)), where_(std::move(where)),
      detail_(std::move(detail)) {}

} // namespace ds::plan
