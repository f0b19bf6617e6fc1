//===- ZeroTest.cpp - The "zero_optimization" section ---------------------===//

#include "ConfigTestUtils.h"

using namespace ds::config;
using namespace ds::config::test;

namespace {

std::string withZero(const std::string &zero) {
  return R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": )" +
         zero + "}";
}

ZeroConfig zeroOf(const std::string &zero,
                  const ParseContext &context = makeContext()) {
  return parse(withZero(zero), context).zero;
}

ConfigError zeroError(const std::string &zero,
                      const ParseContext &context = makeContext()) {
  return parseError(withZero(zero), context);
}

} // namespace

TEST(ConfigZeroTest, DeepSpeedDefaults) {
  ZeroConfig zero = zeroOf("{}");
  EXPECT_EQ(zero.stage, 0);
  EXPECT_TRUE(zero.contiguousGradients);
  EXPECT_TRUE(zero.reduceScatter);
  EXPECT_EQ(zero.reduceBucketSize, 500000000);
  EXPECT_EQ(zero.allgatherBucketSize, 500000000);
  EXPECT_TRUE(zero.allgatherPartitions);
  EXPECT_FALSE(zero.overlapComm);
  EXPECT_EQ(zero.stage3PrefetchBucketSize, 50000000);
  EXPECT_EQ(zero.stage3ParamPersistenceThreshold, 100000);
  EXPECT_EQ(zero.stage3MaxLiveParameters, 1000000000);
  EXPECT_EQ(zero.stage3MaxReuseDistance, 1000000000);
  EXPECT_FALSE(zero.stage3Gather16BitWeightsOnModelSave);
  EXPECT_FALSE(zero.leafModule.classesGiven);
  EXPECT_EQ(zero.leafModule.classes, defaultLeafModuleClasses());
  EXPECT_TRUE(zero.leafModule.names.empty());
  EXPECT_TRUE(zero.leafModule.nameSuffixes.empty());
}

TEST(ConfigZeroTest, OverlapCommDefaultsToTrueForStage3Only) {
  EXPECT_FALSE(zeroOf(R"({"stage": 2})").overlapComm);
  EXPECT_TRUE(zeroOf(R"({"stage": 3})").overlapComm);
  EXPECT_FALSE(zeroOf(R"({"stage": 3, "overlap_comm": false})").overlapComm);
  EXPECT_TRUE(zeroOf(R"({"stage": 1, "overlap_comm": true})").overlapComm);
}

TEST(ConfigZeroTest, SizesAcceptIntegralFloats) {
  ZeroConfig zero = zeroOf(R"({"stage": 3, "reduce_bucket_size": 2e8,
      "allgather_bucket_size": 3e8, "stage3_prefetch_bucket_size": 5e7,
      "stage3_param_persistence_threshold": 0, "stage3_max_live_parameters": 1e9,
      "stage3_max_reuse_distance": 0, "sub_group_size": 1e9,
      "stage3_gather_16bit_weights_on_model_save": true})");
  EXPECT_EQ(zero.reduceBucketSize, 200000000);
  EXPECT_EQ(zero.allgatherBucketSize, 300000000);
  EXPECT_EQ(zero.stage3PrefetchBucketSize, 50000000);
  EXPECT_EQ(zero.stage3ParamPersistenceThreshold, 0);
  EXPECT_EQ(zero.stage3MaxLiveParameters, 1000000000);
  EXPECT_EQ(zero.stage3MaxReuseDistance, 0);
  EXPECT_TRUE(zero.stage3Gather16BitWeightsOnModelSave);
}

TEST(ConfigZeroTest, NonIntegralOrNegativeSizeIsAnErrorNamingTheKey) {
  ConfigError fraction = zeroError(R"({"stage3_prefetch_bucket_size": 1.5e0})");
  EXPECT_EQ(fraction.keyPath(),
            "zero_optimization.stage3_prefetch_bucket_size");
  expectMessageHas(fraction, {"non-integral"});
  EXPECT_EQ(zeroError(R"({"reduce_bucket_size": -1})").keyPath(),
            "zero_optimization.reduce_bucket_size");
}

TEST(ConfigZeroTest, StageOutsideZeroToThreeIsAnError) {
  ConfigError five = zeroError(R"({"stage": 5})");
  EXPECT_EQ(five.keyPath(), "zero_optimization.stage");
  expectMessageHas(five, {"[0, 3]", "got 5"});
  EXPECT_EQ(zeroError(R"({"stage": -1})").keyPath(), "zero_optimization.stage");
}

TEST(ConfigZeroTest, AutoSizesResolveFromTheHiddenSize) {
  ZeroConfig zero = zeroOf(R"({"stage": 3, "reduce_bucket_size": "auto",
      "stage3_prefetch_bucket_size": "auto",
      "stage3_param_persistence_threshold": "auto"})",
                           makeContext(1, {}, /*hiddenSize=*/1024));
  EXPECT_EQ(zero.reduceBucketSize, 1048576);        // 1024^2
  EXPECT_EQ(zero.stage3PrefetchBucketSize, 943718); // int(0.9 * 1024^2)
  EXPECT_EQ(zero.stage3ParamPersistenceThreshold, 10240);
}

TEST(ConfigZeroTest, AutoSizeWithoutHiddenSizeIsAnError) {
  ConfigError error = zeroError(R"({"reduce_bucket_size": "auto"})");
  EXPECT_EQ(error.keyPath(), "zero_optimization.reduce_bucket_size");
  expectMessageHas(error, {"hidden size"});
}

TEST(ConfigZeroTest, AutoOnOtherZeroKeysIsAnError) {
  ConfigError error =
      zeroError(R"({"sub_group_size": "auto"})", makeContext(1, {}, 1024));
  EXPECT_EQ(error.keyPath(), "zero_optimization.sub_group_size");
  expectMessageHas(error, {"\"auto\" cannot be resolved"});
}

TEST(ConfigZeroTest, LeafModuleSpecs) {
  ZeroConfig zero = zeroOf(R"({"stage": 3, "leaf_module": {
      "classes": ["my_pkg.MoEBlock", "Experts", "Experts"],
      "names": "transformer.layers.0.experts",
      "name_suffixes": ["experts"]}})");
  EXPECT_TRUE(zero.leafModule.classesGiven);
  EXPECT_EQ(zero.leafModule.classes,
            (std::vector<std::string>{"my_pkg.MoEBlock", "Experts"}));
  EXPECT_EQ(zero.leafModule.names,
            (std::vector<std::string>{"transformer.layers.0.experts"}));
  EXPECT_EQ(zero.leafModule.nameSuffixes,
            (std::vector<std::string>{"experts"}));
  // Names only: the class list stays DeepSpeed's default.
  ZeroConfig namesOnly =
      zeroOf(R"({"stage": 3, "leaf_module": {"names": ["moe"]}})");
  EXPECT_FALSE(namesOnly.leafModule.classesGiven);
  EXPECT_EQ(namesOnly.leafModule.classes, defaultLeafModuleClasses());
}

TEST(ConfigZeroTest, LeafModuleErrorsNameTheKey) {
  EXPECT_EQ(zeroError(R"({"leaf_module": {"class": ["X"]}})").keyPath(),
            "zero_optimization.leaf_module.class");
  EXPECT_EQ(zeroError(R"({"leaf_module": {"names": ["ok", ""]}})").keyPath(),
            "zero_optimization.leaf_module.names[1]");
  EXPECT_EQ(zeroError(R"({"leaf_module": {"classes": 3}})").keyPath(),
            "zero_optimization.leaf_module.classes");
}

TEST(ConfigZeroTest, DeprecatedGatherFp16NameIsAnAlias) {
  EXPECT_TRUE(zeroOf(R"({"stage3_gather_fp16_weights_on_model_save": true})")
                  .stage3Gather16BitWeightsOnModelSave);
  EXPECT_EQ(zeroError(R"({"stage3_gather_fp16_weights_on_model_save": true,
                         "stage3_gather_16bit_weights_on_model_save": false})")
                .keyPath(),
            "zero_optimization.stage3_gather_fp16_weights_on_model_save");
}
