//===- OptimizerTest.cpp - The "optimizer" section ------------------------===//

#include "ConfigTestUtils.h"

using namespace ds::config;
using namespace ds::config::test;

namespace {

std::string withOptimizer(const std::string &optimizer) {
  return R"({"train_micro_batch_size_per_gpu": 1, "optimizer": )" + optimizer +
         "}";
}

OptimizerConfig optimizerOf(const std::string &optimizer) {
  return *parse(withOptimizer(optimizer)).optimizer;
}

ConfigError optimizerError(const std::string &optimizer) {
  return parseError(withOptimizer(optimizer));
}

} // namespace

TEST(ConfigOptimizerTest, AdamDefaultsAreFusedAdamInAdamWMode) {
  OptimizerConfig adam = optimizerOf(R"({"type": "Adam"})");
  EXPECT_EQ(adam.type, OptimizerType::Adam);
  EXPECT_DOUBLE_EQ(adam.lr, 1e-3);
  EXPECT_DOUBLE_EQ(adam.betas[0], 0.9);
  EXPECT_DOUBLE_EQ(adam.betas[1], 0.999);
  EXPECT_DOUBLE_EQ(adam.eps, 1e-8);
  EXPECT_DOUBLE_EQ(adam.weightDecay, 0.0);
  EXPECT_TRUE(adam.adamWMode);
  EXPECT_FALSE(adam.torchAdam);
  EXPECT_TRUE(adam.decoupledWeightDecay());
}

TEST(ConfigOptimizerTest, GivenParamsAreRead) {
  OptimizerConfig adamw = optimizerOf(R"({"type": "AdamW", "params": {
      "lr": 3e-4, "betas": [0.8, 0.95], "eps": 1e-6, "weight_decay": 0.1}})");
  EXPECT_DOUBLE_EQ(adamw.lr, 3e-4);
  EXPECT_DOUBLE_EQ(adamw.betas[0], 0.8);
  EXPECT_DOUBLE_EQ(adamw.betas[1], 0.95);
  EXPECT_DOUBLE_EQ(adamw.eps, 1e-6);
  EXPECT_DOUBLE_EQ(adamw.weightDecay, 0.1);
}

TEST(ConfigOptimizerTest, TypeIsCaseInsensitive) {
  EXPECT_EQ(optimizerOf(R"({"type": "adamw"})").type, OptimizerType::AdamW);
  EXPECT_EQ(optimizerOf(R"({"type": "ADAM"})").type, OptimizerType::Adam);
  EXPECT_EQ(optimizerOf(R"({"type": "sgd", "params": {"lr": 0.1}})").type,
            OptimizerType::SGD);
}

TEST(ConfigOptimizerTest, AdamWModeFalseMeansL2WeightDecay) {
  OptimizerConfig adam =
      optimizerOf(R"({"type": "Adam", "params": {"adam_w_mode": false}})");
  EXPECT_FALSE(adam.adamWMode);
  EXPECT_FALSE(adam.decoupledWeightDecay());
  // AdamW ignores nothing silently: adam_w_mode false there is an error.
  ConfigError error =
      optimizerError(R"({"type": "AdamW", "params": {"adam_w_mode": false}})");
  EXPECT_EQ(error.keyPath(), "optimizer.params.adam_w_mode");
  EXPECT_TRUE(
      optimizerOf(R"({"type": "AdamW", "params": {"adam_w_mode": true}})")
          .decoupledWeightDecay());
}

TEST(ConfigOptimizerTest, TorchAdamDefaultsWeightDecayLikeTorch) {
  // torch.optim.AdamW: 0.01; torch.optim.Adam: 0.
  EXPECT_DOUBLE_EQ(
      optimizerOf(R"({"type": "AdamW", "params": {"torch_adam": true}})")
          .weightDecay,
      0.01);
  EXPECT_DOUBLE_EQ(
      optimizerOf(R"({"type": "Adam", "params": {"torch_adam": true}})")
          .weightDecay,
      0.01);
  EXPECT_DOUBLE_EQ(optimizerOf(R"({"type": "Adam", "params":
      {"torch_adam": true, "adam_w_mode": false}})")
                       .weightDecay,
                   0.0);
  EXPECT_DOUBLE_EQ(optimizerOf(R"({"type": "AdamW", "params":
      {"torch_adam": true, "weight_decay": 0.2}})")
                       .weightDecay,
                   0.2);
}

TEST(ConfigOptimizerTest, SgdParams) {
  OptimizerConfig sgd = optimizerOf(R"({"type": "SGD", "params":
      {"lr": 0.1, "momentum": 0.9, "nesterov": true, "weight_decay": 1e-4}})");
  EXPECT_EQ(sgd.type, OptimizerType::SGD);
  EXPECT_DOUBLE_EQ(sgd.lr, 0.1);
  EXPECT_DOUBLE_EQ(sgd.momentum, 0.9);
  EXPECT_DOUBLE_EQ(sgd.dampening, 0.0);
  EXPECT_TRUE(sgd.nesterov);
  EXPECT_DOUBLE_EQ(sgd.weightDecay, 1e-4);
  EXPECT_FALSE(sgd.decoupledWeightDecay());

  ConfigError nesterov =
      optimizerError(R"({"type": "SGD", "params": {"nesterov": true}})");
  EXPECT_EQ(nesterov.keyPath(), "optimizer.params.nesterov");
}

TEST(ConfigOptimizerTest, AdamParamOnSgdIsUnknown) {
  ConfigError error =
      optimizerError(R"({"type": "SGD", "params": {"betas": [0.9, 0.99]}})");
  EXPECT_EQ(error.keyPath(), "optimizer.params.betas");
  expectMessageHas(error, {"unknown key", "SGD"});
}

TEST(ConfigOptimizerTest, UnsupportedOptimizerTypesSayNotSupported) {
  for (const char *type : {"OneBitAdam", "Lamb", "LAMB", "OneBitLamb",
                           "ZeroOneAdam", "Adagrad", "Muon", "RMSprop"}) {
    ConfigError error =
        optimizerError(std::string(R"({"type": ")") + type + "\"}");
    EXPECT_EQ(error.keyPath(), "optimizer.type") << type;
    expectMessageHas(error, {"not supported", type});
  }
}

TEST(ConfigOptimizerTest, ImpossibleValuesNameTheKey) {
  EXPECT_EQ(
      optimizerError(R"({"type": "Adam", "params": {"lr": -0.1}})").keyPath(),
      "optimizer.params.lr");
  EXPECT_EQ(optimizerError(R"({"type": "Adam", "params": {"betas": [0.9]}})")
                .keyPath(),
            "optimizer.params.betas");
  EXPECT_EQ(
      optimizerError(R"({"type": "Adam", "params": {"betas": [0.9, 1.0]}})")
          .keyPath(),
      "optimizer.params.betas[1]");
  EXPECT_EQ(
      optimizerError(R"({"type": "Adam", "params": {"betas": [0.9, "x"]}})")
          .keyPath(),
      "optimizer.params.betas[1]");
  EXPECT_EQ(
      optimizerError(R"({"type": "AdamW", "params": {"weight_decay": -1}})")
          .keyPath(),
      "optimizer.params.weight_decay");
  EXPECT_EQ(optimizerError(R"({"type": "AdamW", "params": {"eps": -1e-8}})")
                .keyPath(),
            "optimizer.params.eps");
}

TEST(ConfigOptimizerTest, MissingTypeAndAutoMomentumAreErrors) {
  EXPECT_EQ(optimizerError(R"({"params": {"lr": 0.1}})").keyPath(),
            "optimizer.type");
  // "auto" lr is the HF Trainer's (AutoTest.cpp); nothing fills momentum.
  ConfigError autoMomentum =
      optimizerError(R"({"type": "SGD", "params": {"momentum": "auto"}})");
  EXPECT_EQ(autoMomentum.keyPath(), "optimizer.params.momentum");
  expectMessageHas(autoMomentum, {"auto"});
}

TEST(ConfigOptimizerTest, MaxGradNormAndAmsgradAreNotSupported) {
  ConfigError clip =
      optimizerError(R"({"type": "Adam", "params": {"max_grad_norm": 1.0}})");
  EXPECT_EQ(clip.keyPath(), "optimizer.params.max_grad_norm");
  expectMessageHas(clip, {"not supported", "gradient_clipping"});
  expectMessageHas(
      optimizerError(R"({"type": "Adam", "params": {"amsgrad": true}})"),
      {"optimizer.params.amsgrad", "not supported"});
}
