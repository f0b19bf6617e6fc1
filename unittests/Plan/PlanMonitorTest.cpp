//===- PlanMonitorTest.cpp - Monitoring keys of a plan's ds_config --------===//

#include "ds/Plan/Monitor.h"
#include "ds/Plan/PlanError.h"

#include <gtest/gtest.h>

using namespace ds::plan;

namespace {

Plan planWith(const char *config) {
  Plan plan;
  EngineDesc engine;
  engine.name = "model";
  engine.dsConfig = ordered_json::parse(config);
  plan.engines.push_back(engine);
  return plan;
}

} // namespace

TEST(PlanMonitorTest, DefaultsAreDeepSpeeds) {
  MonitorDesc monitor = monitorOf(planWith("{}"), "p");
  EXPECT_EQ(monitor.stepsPerPrint, 10);
  EXPECT_FALSE(monitor.wallClockBreakdown);
  EXPECT_FALSE(monitor.csv);
  EXPECT_FALSE(monitor.tensorboard);
  EXPECT_EQ(monitorOf(Plan(), "p").stepsPerPrint, 10);
}

TEST(PlanMonitorTest, ReadsTheFirstEngine) {
  MonitorDesc monitor = monitorOf(
      planWith(R"({"steps_per_print": 5e0, "wall_clock_breakdown": true,
                   "csv_monitor": {"enabled": true, "output_path": "out/",
                                   "job_name": "j"},
                   "tensorboard": {"enabled": false, "output_path": "x"}})"),
      "p");
  EXPECT_EQ(monitor.stepsPerPrint, 5);
  EXPECT_TRUE(monitor.wallClockBreakdown);
  ASSERT_TRUE(monitor.csv);
  EXPECT_EQ(monitor.csv->directory(), "out/j");
  EXPECT_FALSE(monitor.tensorboard);
  MonitorOutputDesc here;
  EXPECT_EQ(here.directory(), "DeepSpeedJobName");
  here.outputPath = "runs";
  EXPECT_EQ(here.directory(), "runs/DeepSpeedJobName");
}

TEST(PlanMonitorTest, BadValuesNameTheKey) {
  const std::pair<const char *, const char *> cases[] = {
      {R"({"steps_per_print": 0})", "engines[0].ds_config.steps_per_print"},
      {R"({"steps_per_print": 2.5})", "engines[0].ds_config.steps_per_print"},
      {R"({"wall_clock_breakdown": 1})",
       "engines[0].ds_config.wall_clock_breakdown"},
      {R"({"csv_monitor": {"enabled": true, "job_name": 3}})",
       "engines[0].ds_config.csv_monitor.job_name"},
      {R"({"tensorboard": []})", "engines[0].ds_config.tensorboard"},
  };
  for (const auto &[config, where] : cases) {
    try {
      monitorOf(planWith(config), "p");
      ADD_FAILURE() << config << ": no error";
    } catch (const PlanError &error) {
      EXPECT_NE(std::string(error.what()).find(where), std::string::npos)
          << error.what();
    }
  }
}
