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
  ConfigError error = parseError(R"({"train_micro_batch_size_per_gpu": 4})",
                                 makeContext(2, /*dataMicroBatch=*/6));
  EXPECT_EQ(error.keyPath(), "train_micro_batch_size_per_gpu");
  expectMessageHas(error, {"= 8", "B = 6"});
  // The message says the fix: the value that fits, "auto", and how to
  // override the key.
  expectMessageHas(error, {"set train_micro_batch_size_per_gpu to 3",
                           "or to \"auto\"", "--set KEY=auto",
                           "overrides={\"KEY\": \"auto\"}"});
  // A micro-batch implied by train_batch_size names that key too.
  expectMessageHas(parseError(R"({"train_batch_size": 8})",
                              makeContext(2, /*dataMicroBatch=*/6)),
                   {"set train_micro_batch_size_per_gpu to 3",
                    "train_batch_size 8 implies it"});
  // A B the world size does not divide has no per-rank value to suggest.
  expectMessageHas(parseError(R"({"train_micro_batch_size_per_gpu": 2})",
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
