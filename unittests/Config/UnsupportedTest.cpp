//===- UnsupportedTest.cpp - DeepSpeed features we do not implement -------===//

#include "ConfigTestUtils.h"

using namespace ds::config;
using namespace ds::config::test;

namespace {

std::string withKey(const std::string &key, const std::string &value) {
  return R"({"train_micro_batch_size_per_gpu": 1, ")" + key + "\": " + value +
         "}";
}

std::string withZeroKey(const std::string &key, const std::string &value) {
  return withKey("zero_optimization", "{\"" + key + "\": " + value + "}");
}

} // namespace

TEST(ConfigUnsupportedTest, TopLevelFeaturesSayNotSupported) {
  const std::pair<const char *, const char *> features[] = {
      {"flops_profiler", R"({"enabled": true})"},
      {"pipeline", R"({"stages": 2})"},
      {"comms_logger", R"({"enabled": true})"},
      {"compression_training", "{}"},
      {"sparse_attention", R"({"mode": "fixed"})"},
      {"amp", R"({"enabled": true})"},
      {"elasticity", R"({"enabled": true})"},
      {"curriculum_learning", R"({"enabled": true})"},
      {"data_efficiency", R"({"enabled": true})"},
      {"autotuning", R"({"enabled": true})"},
  };
  for (const auto &[key, value] : features) {
    ConfigError error = parseError(withKey(key, value));
    EXPECT_EQ(error.keyPath(), key);
    expectMessageHas(error, {"not supported", key});
  }
}

TEST(ConfigUnsupportedTest, ZeroFeaturesSayNotSupported) {
  const std::pair<const char *, const char *> features[] = {
      {"zero_hpz_partition_size", "8"},
      {"mics_shard_size", "4"},
      {"zero_quantized_gradients", "true"},
  };
  for (const auto &[key, value] : features) {
    ConfigError error = parseError(withZeroKey(key, value));
    EXPECT_EQ(error.keyPath(), std::string("zero_optimization.") + key);
    expectMessageHas(error, {"not supported"});
  }
}

TEST(ConfigUnsupportedTest, SwitchedOffFeaturesAreAccepted) {
  // As Accelerate and the HF Trainer write them.
  EXPECT_NO_THROW(parse(withKey("tensorboard", R"({"enabled": false})")));
  EXPECT_NO_THROW(parse(withKey("wandb", "null")));
  EXPECT_NO_THROW(parse(withZeroKey(
      "offload_optimizer", R"({"device": "none", "nvme_path": null})")));
  EXPECT_NO_THROW(parse(withZeroKey("zero_hpz_partition_size", "1")));
  EXPECT_NO_THROW(parse(withZeroKey("mics_shard_size", "-1")));
  EXPECT_NO_THROW(parse(withKey("zero_allow_untested_optimizer", "false")));
}

TEST(ConfigUnsupportedTest, FlagsOfSupportedSectionsSayNotSupported) {
  ConfigError autoCast =
      parseError(withKey("fp16", R"({"enabled": true, "auto_cast": true})"));
  EXPECT_EQ(autoCast.keyPath(), "fp16.auto_cast");
  expectMessageHas(autoCast, {"not supported"});
  ConfigError bf16 = parseError(
      withKey("bf16", R"({"enabled": true, "immediate_grad_update": true})"));
  EXPECT_EQ(bf16.keyPath(), "bf16.immediate_grad_update");
  expectMessageHas(bf16, {"not supported"});
}

TEST(ConfigUnsupportedTest, UnknownKeyIsNotConfusedWithUnsupported) {
  ConfigError error = parseError(withKey("not_a_deepspeed_key", "1"));
  expectMessageHas(error, {"unknown key"});
  EXPECT_EQ(std::string(error.what()).find("not supported"), std::string::npos);
}
