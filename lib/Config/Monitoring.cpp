//===- Monitoring.cpp - DeepSpeed's monitor sections ----------------------===//
//
// deepspeed/monitor/config.py: tensorboard and csv_monitor write files under
// output_path/job_name/, which ds-run does on rank 0. wandb and comet talk to
// services; their keys are checked and an enabled one is a remark.
//
//===----------------------------------------------------------------------===//

#include "Sections.h"

namespace ds::config::detail {

namespace {

MonitorOutputConfig parseOutput(ObjectReader &section) {
  MonitorOutputConfig output;
  output.enabled = section.boolean("enabled").value_or(false);
  if (auto path = section.string("output_path"))
    output.outputPath = *path;
  if (auto name = section.string("job_name")) {
    if (name->empty())
      section.fail("job_name", "must not be empty (it names the folder "
                               "under output_path)");
    output.jobName = *name;
  }
  section.rejectUnknownKeys();
  return output;
}

/// A service monitor: its keys read for their types only.
void parseService(ObjectReader &section, const char *const *stringKeys,
                  const char *const *booleanKeys, const char *integerKey,
                  ConfigNotes &notes) {
  bool enabled = section.boolean("enabled").value_or(false);
  for (const char *const *key = stringKeys; *key; ++key)
    section.string(*key);
  for (const char *const *key = booleanKeys; *key; ++key)
    section.boolean(*key);
  if (integerKey)
    if (auto value = section.integer(integerKey))
      requireMin(*value, 1, section.keyPath(integerKey));
  section.rejectUnknownKeys();
  if (enabled)
    notes.remarks.push_back(
        ConfigNote{section.keyPath("enabled"),
                   "true accepted: nothing is sent to this service; ds-run "
                   "writes the csv_monitor and tensorboard monitors",
                   "", 0});
}

} // namespace

MonitorConfig parseMonitors(ObjectReader &root, ConfigNotes &notes) {
  MonitorConfig monitor;
  if (auto section = root.object("tensorboard"))
    monitor.tensorboard = parseOutput(*section);
  if (auto section = root.object("csv_monitor"))
    monitor.csv = parseOutput(*section);
  if (auto section = root.object("wandb")) {
    static const char *const strings[] = {"group", "team", "project", nullptr};
    static const char *const booleans[] = {nullptr};
    parseService(*section, strings, booleans, nullptr, notes);
  }
  if (auto section = root.object("comet")) {
    static const char *const strings[] = {
        "project",        "workspace", "api_key", "experiment_name",
        "experiment_key", "mode",      nullptr};
    static const char *const booleans[] = {"online", nullptr};
    parseService(*section, strings, booleans, "samples_log_interval", notes);
  }
  return monitor;
}

} // namespace ds::config::detail
