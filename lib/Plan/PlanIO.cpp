//===- PlanIO.cpp - Plan files on disk ------------------------------------===//

#include "ds/Plan/AtomicFile.h"
#include "ds/Plan/PlanFormat.h"

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
  } catch (const ordered_json::parse_error &error) {
    // Drop nlohmann's "[json.exception.parse_error.101] " prefix.
    std::string message = error.what();
    if (size_t end = message.find("] "); end != std::string::npos)
      message = message.substr(end + 2);
    throw PlanError(path, "", "not valid JSON: " + message);
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
