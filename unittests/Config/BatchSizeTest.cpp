//===- BatchSizeTest.cpp - train = micro * GAS * world --------------------===//

#include "ConfigTestUtils.h"

using namespace ds::config;
using namespace ds::config::test;

namespace {

struct Batch {
  int64_t train, micro, gas;
};

Batch batchOf(const std::string &text, const ParseContext &context) {
  EngineConfig config = parse(text, context);
  return {config.trainBatchSize, config.trainMicroBatchSizePerGpu,
          config.gradientAccumulationSteps};
}

void expectBatch(Batch actual, int64_t train, int64_t micro, int64_t gas) {
  EXPECT_EQ(actual.train, train);
  EXPECT_EQ(actual.micro, micro);
  EXPECT_EQ(actual.gas, gas);
}

} // namespace

TEST(ConfigBatchSizeTest, MicroAloneMeansGasOne) {
  expectBatch(
      batchOf(R"({"train_micro_batch_size_per_gpu": 4})", makeContext(2)), 8, 4,
      1);
}

TEST(ConfigBatchSizeTest, TrainAloneMeansGasOne) {
  expectBatch(batchOf(R"({"train_batch_size": 16})", makeContext(4)), 16, 4, 1);
}

TEST(ConfigBatchSizeTest, TrainAndMicroDeriveGas) {
  expectBatch(batchOf(R"({"train_batch_size": 32,
                          "train_micro_batch_size_per_gpu": 4})",
                      makeContext(2)),
              32, 4, 4);
}

TEST(ConfigBatchSizeTest, TrainAndGasDeriveMicro) {
  expectBatch(batchOf(R"({"train_batch_size": 32,
                          "gradient_accumulation_steps": 2})",
                      makeContext(4)),
              32, 4, 2);
}

TEST(ConfigBatchSizeTest, MicroAndGasDeriveTrain) {
  expectBatch(batchOf(R"({"train_micro_batch_size_per_gpu": 3,
                          "gradient_accumulation_steps": 5})",
                      makeContext(2)),
              30, 3, 5);
}

TEST(ConfigBatchSizeTest, ConsistentTripleIsAccepted) {
  expectBatch(batchOf(R"({"train_batch_size": 24,
                          "train_micro_batch_size_per_gpu": 3,
                          "gradient_accumulation_steps": 4})",
                      makeContext(2)),
              24, 3, 4);
}

TEST(ConfigBatchSizeTest, InconsistentTripleNamesAllValuesAndWorldSize) {
  ConfigError error = parseError(R"({"train_batch_size": 32,
                                     "train_micro_batch_size_per_gpu": 4,
                                     "gradient_accumulation_steps": 2})",
                                 makeContext(2));
  EXPECT_EQ(error.keyPath(), "train_batch_size");
  expectMessageHas(
      error, {"train_batch_size (32)", "train_micro_batch_size_per_gpu (4)",
              "gradient_accumulation_steps (2)", "world size (2)"});
}

TEST(ConfigBatchSizeTest, NonDivisibleDerivationIsAnError) {
  ConfigError gas = parseError(R"({"train_batch_size": 10,
                                   "train_micro_batch_size_per_gpu": 3})");
  EXPECT_EQ(gas.keyPath(), "gradient_accumulation_steps");
  expectMessageHas(gas, {"not divisible", "(10)", "(3)"});

  ConfigError micro = parseError(R"({"train_batch_size": 10,
                                     "gradient_accumulation_steps": 4})");
  EXPECT_EQ(micro.keyPath(), "train_micro_batch_size_per_gpu");
  expectMessageHas(micro, {"not divisible", "(10)", "(4)"});

  ConfigError world = parseError(R"({"train_batch_size": 10})", makeContext(4));
  expectMessageHas(world, {"not divisible", "world size (4)"});
}

TEST(ConfigBatchSizeTest, NeitherTrainNorMicroIsAnError) {
  ConfigError error = parseError(R"({"gradient_accumulation_steps": 2})");
  expectMessageHas(error, {"train_batch_size", "train_micro_batch_size_per_gpu",
                           "must be given"});
}

TEST(ConfigBatchSizeTest, NonPositiveAndNonIntegralValuesAreErrors) {
  EXPECT_EQ(parseError(R"({"train_batch_size": 0})").keyPath(),
            "train_batch_size");
  EXPECT_EQ(parseError(R"({"train_micro_batch_size_per_gpu": -2})").keyPath(),
            "train_micro_batch_size_per_gpu");
  ConfigError fraction = parseError(R"({"train_batch_size": 2.5})");
  expectMessageHas(fraction, {"train_batch_size", "expected an integer"});
  // An integral float is an integer.
  EXPECT_EQ(parse(R"({"train_batch_size": 8.0})").trainBatchSize, 8);
}

TEST(ConfigBatchSizeTest, DataMicroBatchMustAgreeNamingBothValues) {
  // Trainable engines: a frozen one's batch sizes yield to the data (below).
  ConfigError error = parseError(R"({"train_micro_batch_size_per_gpu": 4,
                                     "optimizer": {"type": "SGD"}})",
                                 makeContext(2, /*dataMicroBatch=*/6));
  EXPECT_EQ(error.keyPath(), "train_micro_batch_size_per_gpu");
  expectMessageHas(error, {"= 8", "B = 6"});
  // The message says the fix: the value that fits, "auto", and how to
  // override the key.
  expectMessageHas(error, {"set train_micro_batch_size_per_gpu to 3",
                           "or to \"auto\"", "--set KEY=auto",
                           "overrides={\"KEY\": \"auto\"}"});
  // A micro-batch implied by train_batch_size names that key too.
  expectMessageHas(parseError(R"({"train_batch_size": 8,
                                  "optimizer": {"type": "SGD"}})",
                              makeContext(2, /*dataMicroBatch=*/6)),
                   {"set train_micro_batch_size_per_gpu to 3",
                    "train_batch_size 8 implies it"});
  // A B the world size does not divide has no per-rank value to suggest.
  expectMessageHas(parseError(R"({"train_micro_batch_size_per_gpu": 2,
                                  "optimizer": {"type": "SGD"}})",
                              makeContext(2, /*dataMicroBatch=*/5)),
                   {"B = 5", "not divisible by the world size"});
  // Agreement passes.
  EXPECT_EQ(parse(R"({"train_micro_batch_size_per_gpu": 3})", makeContext(2, 6))
                .trainBatchSize,
            6);
}

TEST(ConfigBatchSizeTest, AutoMicroComesFromTheData) {
  expectBatch(batchOf(R"({"train_micro_batch_size_per_gpu": "auto",
                          "gradient_accumulation_steps": 2})",
                      makeContext(4, /*dataMicroBatch=*/8)),
              16, 2, 2);
}

TEST(ConfigBatchSizeTest, AllAutoMeansGasOne) {
  expectBatch(batchOf(R"({"train_batch_size": "auto",
                          "train_micro_batch_size_per_gpu": "auto",
                          "gradient_accumulation_steps": "auto"})",
                      makeContext(2, 8)),
              8, 4, 1);
}

TEST(ConfigBatchSizeTest, AutoGasIsDerivedFromTrainAndData) {
  expectBatch(batchOf(R"({"train_batch_size": 32,
                          "gradient_accumulation_steps": "auto"})",
                      makeContext(2, 8)),
              32, 4, 4);
}

TEST(ConfigBatchSizeTest, AutoNeedsTheData) {
  ConfigError error =
      parseError(R"({"train_micro_batch_size_per_gpu": "auto"})");
  EXPECT_EQ(error.keyPath(), "train_micro_batch_size_per_gpu");
  expectMessageHas(error, {"auto", "micro-batch"});
  ConfigError indivisible = parseError(
      R"({"train_micro_batch_size_per_gpu": "auto"})", makeContext(4, 6));
  expectMessageHas(indivisible, {"B = 6", "world size 4"});
}

namespace {

/// The frozen ZeRO-3 teacher of Accelerate's multi-model guide, verbatim
/// but for its trailing comma: no optimizer, and a micro-batch of 1 that is
/// there only because DeepSpeed requires the key.
constexpr const char *kGuideTeacher = R"({
  "bf16": {"enabled": "auto"},
  "zero_optimization": {"stage": 3, "overlap_comm": true,
      "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
      "stage3_param_persistence_threshold": "auto",
      "stage3_max_live_parameters": "auto",
      "stage3_max_reuse_distance": "auto"},
  "train_micro_batch_size_per_gpu": 1})";

/// The warnings of `config` about `key`.
std::vector<std::string> warningsOn(const EngineConfig &config,
                                    const std::string &key) {
  std::vector<std::string> details;
  for (const ConfigNote &note : config.notes.warnings)
    if (note.keyPath == key)
      details.push_back(note.detail);
  return details;
}

void expectOneWarning(const EngineConfig &config, const std::string &key,
                      std::initializer_list<std::string> parts) {
  std::vector<std::string> details = warningsOn(config, key);
  ASSERT_EQ(details.size(), 1u)
      << key << ": " << ::testing::PrintToString(details);
  for (const std::string &part : parts)
    EXPECT_NE(details[0].find(part), std::string::npos)
        << "warning \"" << details[0] << "\" lacks \"" << part << "\"";
}

} // namespace

TEST(ConfigBatchSizeTest, FrozenEngineBatchKeysDisagreeingWithTheDataWarn) {
  // 4 rows per rank on 2 ranks: B = 8, not the teacher's 1 * 2.
  ParseContext context = makeContext(2, /*dataMicroBatch=*/8,
                                     /*hiddenSize=*/8);
  EngineConfig teacher = parse(kGuideTeacher, context);
  ASSERT_TRUE(teacher.frozen());
  expectBatch({teacher.trainBatchSize, teacher.trainMicroBatchSizePerGpu,
               teacher.gradientAccumulationSteps},
              8, 4, 1);
  expectOneWarning(teacher, "train_micro_batch_size_per_gpu",
                   {"frozen (no optimizer)",
                    "its train_micro_batch_size_per_gpu 1 is ignored",
                    "the data's micro-batch is 4 rows per rank", "B = 8",
                    "world size 2"});
  EXPECT_TRUE(warningsOn(teacher, "train_batch_size").empty());
  // The recorded config holds what the plan runs on.
  EXPECT_EQ(teacher.source["train_micro_batch_size_per_gpu"], 4);

  // A micro-batch implied by train_batch_size: that key is ignored.
  EngineConfig trainOnly = parse(R"({"train_batch_size": 2})", context);
  expectBatch({trainOnly.trainBatchSize, trainOnly.trainMicroBatchSizePerGpu,
               trainOnly.gradientAccumulationSteps},
              8, 4, 1);
  expectOneWarning(trainOnly, "train_batch_size",
                   {"its train_batch_size 2 is ignored", "the data gives 8"});
  EXPECT_EQ(trainOnly.source["train_batch_size"], 8);

  // DeepSpeed's derivation with the data's micro-batch, where the given
  // train_batch_size allows it: GAS 16 / (4 * 2) = 2.
  EngineConfig derived =
      parse(R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 1})",
            context);
  expectBatch({derived.trainBatchSize, derived.trainMicroBatchSizePerGpu,
               derived.gradientAccumulationSteps},
              16, 4, 2);
  EXPECT_EQ(derived.notes.warnings.size(), 1u);

  // A given GAS is kept (engines of a session must agree on it); a
  // train_batch_size that contradicts it and the data is ignored.
  EngineConfig gas = parse(R"({"train_batch_size": 8,
                               "train_micro_batch_size_per_gpu": 1,
                               "gradient_accumulation_steps": 4})",
                           context);
  expectBatch({gas.trainBatchSize, gas.trainMicroBatchSizePerGpu,
               gas.gradientAccumulationSteps},
              32, 4, 4);
  expectOneWarning(gas, "train_micro_batch_size_per_gpu", {"1 is ignored"});
  expectOneWarning(gas, "train_batch_size", {"8 is ignored", "gives 32"});
  EXPECT_TRUE(warningsOn(gas, "gradient_accumulation_steps").empty());

  // Values that agree with the data are nothing to ignore.
  EXPECT_TRUE(parse(R"({"train_micro_batch_size_per_gpu": 4})", context)
                  .notes.warnings.empty());
}

TEST(ConfigBatchSizeTest, FrozenEngineStillNeedsAConsistentConfig) {
  // A B the world size does not divide has no micro-batch per rank.
  expectMessageHas(parseError(R"({"train_micro_batch_size_per_gpu": 1})",
                              makeContext(2, /*dataMicroBatch=*/5)),
                   {"B = 5", "not divisible by the world size"});
  // A config DeepSpeed itself rejects, whatever the data, stays an error.
  expectMessageHas(parseError(R"({"train_batch_size": 32,
                                  "train_micro_batch_size_per_gpu": 1,
                                  "gradient_accumulation_steps": 2})",
                              makeContext(2, 8)),
                   {"inconsistent batch sizes"});
}

TEST(ConfigBatchSizeTest, TrainableEngineMicroBatchDisagreeingWithTheData) {
  // The teacher's config with an optimizer: it trains, so its micro-batch
  // must be the data's, as before.
  std::string trainable = kGuideTeacher;
  trainable.insert(1, R"("optimizer": {"type": "AdamW"},)");
  ConfigError error = parseError(trainable, makeContext(2, /*dataMicroBatch=*/8,
                                                        /*hiddenSize=*/8));
  EXPECT_EQ(error.keyPath(), "train_micro_batch_size_per_gpu");
  expectMessageHas(error, {"train_micro_batch_size_per_gpu (1) * world size "
                           "(2) = 2 does not match the data's global "
                           "micro-batch B = 8",
                           "set train_micro_batch_size_per_gpu to 4"});
  ConfigError trainOnly =
      parseError(R"({"train_batch_size": 2, "optimizer": {"type": "SGD"}})",
                 makeContext(2, 8));
  expectMessageHas(trainOnly, {"= 2 does not match", "B = 8",
                               "train_batch_size 2 implies it"});
}
