//===- Monitor.cpp - Monitoring keys of the recorded config ---------------===//

#include "ds/Plan/Monitor.h"

#include "ds/Plan/PlanError.h"

namespace ds::plan {

std::string MonitorOutputDesc::directory() const {
  if (outputPath.empty())
    return jobName;
  if (outputPath.back() == '/')
    return outputPath + jobName;
  return outputPath + "/" + jobName;
}

namespace {

class ConfigReader {
public:
  ConfigReader(const ordered_json &config, const std::string &origin)
      : config_(config), origin_(origin) {}

  /// The value at section.key (section "" for the top level); nullptr when
  /// absent or null.
  const ordered_json *find(const std::string &section,
                           const std::string &key) const {
    const ordered_json *object = &config_;
    if (!section.empty()) {
      auto it = config_.find(section);
      if (it == config_.end() || it->is_null())
        return nullptr;
      if (!it->is_object())
        fail(section, "expected an object");
      object = &*it;
    }
    auto it = object->find(key);
    return it == object->end() || it->is_null() ? nullptr : &*it;
  }

  template <typename T>
  std::optional<T> get(const std::string &section, const std::string &key,
                       bool (ordered_json::*is)() const noexcept,
                       const char *expected) const {
    const ordered_json *value = find(section, key);
    if (!value)
      return std::nullopt;
    if (!(value->*is)())
      fail(section.empty() ? key : section + "." + key,
           std::string("expected ") + expected);
    return value->get<T>();
  }

  [[noreturn]] void fail(const std::string &key,
                         const std::string &detail) const {
    throw PlanError(origin_, "engines[0].ds_config." + key, detail);
  }

private:
  const ordered_json &config_;
  const std::string &origin_;
};

std::optional<MonitorOutputDesc> outputOf(const ConfigReader &reader,
                                          const std::string &section) {
  if (!reader
           .get<bool>(section, "enabled", &ordered_json::is_boolean,
                      "a boolean")
           .value_or(false))
    return std::nullopt;
  MonitorOutputDesc output;
  if (auto path = reader.get<std::string>(section, "output_path",
                                          &ordered_json::is_string, "a string"))
    output.outputPath = *path;
  if (auto name = reader.get<std::string>(section, "job_name",
                                          &ordered_json::is_string, "a string"))
    output.jobName = *name;
  return output;
}

} // namespace

MonitorDesc monitorOf(const Plan &plan, const std::string &origin) {
  MonitorDesc monitor;
  if (plan.engines.empty() || !plan.engines[0].dsConfig.is_object())
    return monitor;
  ConfigReader reader(plan.engines[0].dsConfig, origin);
  // Integral floats (1e1) are integers, as the config reads them.
  if (auto steps = reader.get<double>("", "steps_per_print",
                                      &ordered_json::is_number, "a number")) {
    if (*steps < 1 || *steps != double(int64_t(*steps)))
      reader.fail("steps_per_print", "expected an integer >= 1");
    monitor.stepsPerPrint = int64_t(*steps);
  }
  monitor.wallClockBreakdown =
      reader
          .get<bool>("", "wall_clock_breakdown", &ordered_json::is_boolean,
                     "a boolean")
          .value_or(false);
  monitor.csv = outputOf(reader, "csv_monitor");
  monitor.tensorboard = outputOf(reader, "tensorboard");
  return monitor;
}

} // namespace ds::plan
