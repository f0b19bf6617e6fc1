//===- MonitoringTest.cpp - tensorboard, csv_monitor, wandb, comet --------===//

#include "ConfigTestUtils.h"

using namespace ds::config;
using namespace ds::config::test;

namespace {

EngineConfig parseWith(const std::string &key, const std::string &value) {
  return parse(R"({"train_micro_batch_size_per_gpu": 1, ")" + key +
               "\": " + value + "}");
}

ConfigError errorWith(const std::string &key, const std::string &value) {
  return parseError(R"({"train_micro_batch_size_per_gpu": 1, ")" + key +
                    "\": " + value + "}");
}

} // namespace

TEST(ConfigMonitoringTest, DefaultsAreDeepSpeeds) {
  EngineConfig config = parse(R"({"train_micro_batch_size_per_gpu": 1})");
  EXPECT_FALSE(config.monitor.enabled());
  EXPECT_EQ(config.monitor.csv.jobName, "DeepSpeedJobName");
  EXPECT_EQ(config.monitor.csv.outputPath, "");
  EXPECT_EQ(config.stepsPerPrint, 10);
  EXPECT_FALSE(config.wallClockBreakdown);
}

TEST(ConfigMonitoringTest, FileMonitorsAreRead) {
  EngineConfig config = parse(R"({"train_micro_batch_size_per_gpu": 1,
      "csv_monitor": {"enabled": true, "output_path": "out", "job_name": "j"},
      "tensorboard": {"enabled": true, "output_path": "tb/"},
      "steps_per_print": 2, "wall_clock_breakdown": true})");
  EXPECT_TRUE(config.monitor.csv.enabled);
  EXPECT_EQ(config.monitor.csv.outputPath, "out");
  EXPECT_EQ(config.monitor.csv.jobName, "j");
  EXPECT_TRUE(config.monitor.tensorboard.enabled);
  EXPECT_EQ(config.monitor.tensorboard.outputPath, "tb/");
  EXPECT_EQ(config.monitor.tensorboard.jobName, "DeepSpeedJobName");
  EXPECT_EQ(config.stepsPerPrint, 2);
  EXPECT_TRUE(config.wallClockBreakdown);
  EXPECT_TRUE(config.notes.remarks.empty());
}

TEST(ConfigMonitoringTest, BadKeysAndValuesAreNamed) {
  ConfigError unknown =
      errorWith("csv_monitor", R"({"enabled": true, "path": "x"})");
  EXPECT_EQ(unknown.keyPath(), "csv_monitor.path");
  expectMessageHas(unknown, {"unknown key"});
  ConfigError type = errorWith("tensorboard", R"({"enabled": "yes"})");
  EXPECT_EQ(type.keyPath(), "tensorboard.enabled");
  ConfigError empty = errorWith("csv_monitor", R"({"job_name": ""})");
  EXPECT_EQ(empty.keyPath(), "csv_monitor.job_name");
  ConfigError notObject = errorWith("tensorboard", "true");
  EXPECT_EQ(notObject.keyPath(), "tensorboard");
  ConfigError interval = errorWith("comet", R"({"samples_log_interval": 0})");
  EXPECT_EQ(interval.keyPath(), "comet.samples_log_interval");
  ConfigError wandb = errorWith("wandb", R"({"entity": "me"})");
  EXPECT_EQ(wandb.keyPath(), "wandb.entity");
}

TEST(ConfigMonitoringTest, ServiceMonitorsAreRemarks) {
  EngineConfig config =
      parseWith("wandb", R"({"enabled": true, "project": "p", "group": null})");
  ASSERT_EQ(config.notes.remarks.size(), 1u);
  EXPECT_EQ(config.notes.remarks[0].keyPath, "wandb.enabled");
  EXPECT_NE(config.notes.remarks[0].detail.find("nothing is sent"),
            std::string::npos);
  EngineConfig comet = parseWith(
      "comet", R"({"enabled": true, "online": false, "mode": "get"})");
  ASSERT_EQ(comet.notes.remarks.size(), 1u);
  EXPECT_EQ(comet.notes.remarks[0].keyPath, "comet.enabled");
  EXPECT_TRUE(
      parseWith("wandb", R"({"enabled": false})").notes.remarks.empty());
  EXPECT_FALSE(parseWith("comet", "null").monitor.enabled());
}
