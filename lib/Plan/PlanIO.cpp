//===- PlanIO.cpp - Plan files on disk ------------------------------------===//

#include "ds/Plan/AtomicFile.h"
#include "ds/Plan/PlanFormat.h"
#include "ds/Support/JsonPath.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ds::plan {

Plan readPlan(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw PlanError(path, "",
                    std::string("cannot open plan file: ") +
                        std::strerror(errno));
  std::stringstream text;
  text << file.rdbuf();
  if (file.bad())
    throw PlanError(path, "", "cannot read plan file");
  if (text.str().empty())
    throw PlanError(path, "", "the plan file is empty");

  ordered_json json;
  try {
    json = ordered_json::parse(text.str());
  } catch (const ordered_json::exception &error) {
    // A syntax error, or a number too large for a double.
    throw PlanError(path, "", "not valid JSON: " + ds::json::parseFailure(error));
  }
  return parsePlan(json, path);
}

void writePlan(const Plan &plan, const std::string &path) {
  validatePlan(plan, path);
  std::string text = printPlan(plan);
  try {
    writeFileAtomic(path, text);
  } catch (const std::runtime_error &error) {
    throw PlanError(path, "", error.what());
  }
}

} // namespace ds::plan
