//===- OptimizerTest.cpp - Optimizers and clipping against torch ----------===//
//
// The runtime's Optimizer must compute what torch.optim computes (the oracle
// is Python's torch.optim 2.15): unittests/fixtures/data/optim_expected.pt,
// written by it (make_fixtures.py next to it), is matched bit for bit.
// LibTorch's C++ torch::optim is a second reference: its SGD runs Python's op
// sequence (the buffer starts as a clone of the first gradient) and must agree
// bitwise; its Adam/AdamW still update the first moment with mul_().add_()
// where Python's uses lerp_() since 2.0, so they agree to rounding (relative
// 1e-6) only.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "ds/Runtime/GradientBuffers.h"
#include "ds/Runtime/Optimizer.h"
#include "ds/TensorIO/DataFile.h"

#include <torch/torch.h>

#include <map>

using namespace ds;
using ds::plan::OptimizerDesc;
using ds::plan::OptimizerType;
using ds::runtime::FlatLayout;
using ds::runtime::Optimizer;

namespace {

const std::vector<std::vector<int64_t>> kShapes = {{3, 5}, {5}, {2, 2, 2}};

FlatLayout layoutOf(const std::vector<std::vector<int64_t>> &shapes) {
  FlatLayout layout;
  for (size_t i = 0; i < shapes.size(); ++i)
    layout.add(int64_t(i), shapes[i]);
  return layout;
}

/// Runs `steps` updates with random gradients through both our Optimizer
/// and `reference` (built on clones of the same parameters); returns both
/// parameter sets.
template <typename MakeReference>
std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>>
runBoth(const OptimizerDesc &desc, MakeReference makeReference, int steps,
        const std::vector<double> &lrs = {}) {
  torch::manual_seed(7);
  std::vector<at::Tensor> ours, theirs;
  for (const auto &shape : kShapes) {
    ours.push_back(torch::randn(shape));
    theirs.push_back(ours.back().clone().requires_grad_(true));
  }
  FlatLayout layout = layoutOf(kShapes);
  at::Tensor flat = layout.allocate();
  std::vector<at::Tensor> grads = layout.views(flat);
  Optimizer optimizer(desc, layout);
  std::unique_ptr<torch::optim::Optimizer> reference = makeReference(theirs);
  for (int step = 0; step < steps; ++step) {
    double lr = lrs.empty() ? desc.lr : lrs[step];
    for (size_t i = 0; i < kShapes.size(); ++i) {
      at::Tensor grad = torch::randn(kShapes[i]);
      grads[i].copy_(grad);
      theirs[i].mutable_grad() = grad.clone();
    }
    optimizer.step(ours, grads, lr);
    for (auto &group : reference->param_groups())
      group.options().set_lr(lr);
    reference->step();
  }
  EXPECT_EQ(optimizer.steps(), steps);
  return {ours, theirs};
}

/// LibTorch's C++ Adam and AdamW round the first moment differently from
/// torch.optim (above): a few float32 ulps after five steps.
void expectEqualToRounding(const std::vector<at::Tensor> &ours,
                           const std::vector<at::Tensor> &theirs) {
  ASSERT_EQ(ours.size(), theirs.size());
  for (size_t i = 0; i < ours.size(); ++i)
    EXPECT_TRUE(at::allclose(ours[i], theirs[i].detach(), /*rtol=*/1e-6,
                             /*atol=*/1e-7))
        << "parameter " << i << ": max difference "
        << (ours[i] - theirs[i].detach()).abs().max().item<double>();
}

void expectBitwiseEqual(const std::vector<at::Tensor> &ours,
                        const std::vector<at::Tensor> &theirs) {
  ASSERT_EQ(ours.size(), theirs.size());
  for (size_t i = 0; i < ours.size(); ++i)
    EXPECT_TRUE(ours[i].equal(theirs[i].detach()))
        << "parameter " << i << ": max difference "
        << (ours[i] - theirs[i].detach()).abs().max().item<double>();
}

OptimizerDesc adamDesc(OptimizerType type, double wd) {
  OptimizerDesc desc;
  desc.type = type;
  desc.lr = 0.01;
  desc.betas = {0.8, 0.99};
  desc.eps = 1e-6;
  desc.weightDecay = wd;
  return desc;
}

} // namespace

TEST(RuntimeOptimizerTest, AdamWAgreesWithLibTorchAdamW) {
  OptimizerDesc desc = adamDesc(OptimizerType::AdamW, 0.05);
  auto [ours, theirs] =
      runBoth(desc,
              [&](std::vector<at::Tensor> params) {
                return std::make_unique<torch::optim::AdamW>(
                    params, torch::optim::AdamWOptions(desc.lr)
                                .betas({desc.betas[0], desc.betas[1]})
                                .eps(desc.eps)
                                .weight_decay(desc.weightDecay));
              },
              5, {0.01, 0.02, 0.005, 0.01, 0.03});
  expectEqualToRounding(ours, theirs);
}

TEST(RuntimeOptimizerTest, AdamWithL2DecayAgreesWithLibTorchAdam) {
  OptimizerDesc desc = adamDesc(OptimizerType::Adam, 0.05);
  auto [ours, theirs] = runBoth(
      desc,
      [&](std::vector<at::Tensor> params) {
        return std::make_unique<torch::optim::Adam>(
            params, torch::optim::AdamOptions(desc.lr)
                        .betas({desc.betas[0], desc.betas[1]})
                        .eps(desc.eps)
                        .weight_decay(desc.weightDecay));
      },
      5);
  expectEqualToRounding(ours, theirs);
}

TEST(RuntimeOptimizerTest, SgdVariantsMatchTorchOptimSgd) {
  struct Variant {
    double momentum, dampening, weightDecay;
    bool nesterov;
  };
  for (Variant v : {Variant{0, 0, 0, false}, Variant{0, 0, 0.1, false},
                    Variant{0.9, 0, 0, false}, Variant{0.9, 0.3, 0.01, false},
                    Variant{0.9, 0, 0.01, true}}) {
    OptimizerDesc desc;
    desc.type = OptimizerType::SGD;
    desc.lr = 0.1;
    desc.momentum = v.momentum;
    desc.dampening = v.dampening;
    desc.weightDecay = v.weightDecay;
    desc.nesterov = v.nesterov;
    auto [ours, theirs] = runBoth(
        desc,
        [&](std::vector<at::Tensor> params) {
          return std::make_unique<torch::optim::SGD>(
              params, torch::optim::SGDOptions(desc.lr)
                          .momentum(v.momentum)
                          .dampening(v.dampening)
                          .weight_decay(v.weightDecay)
                          .nesterov(v.nesterov));
        },
        4);
    SCOPED_TRACE("momentum " + std::to_string(v.momentum) + " nesterov " +
                 std::to_string(v.nesterov));
    expectBitwiseEqual(ours, theirs);
  }
}

TEST(RuntimeOptimizerTest, KernelFollowsTheDevice) {
  EXPECT_EQ(runtime::defaultOptimizerKernel(c10::Device(c10::kCPU)),
            runtime::OptimizerKernel::Reference);
  EXPECT_EQ(runtime::defaultOptimizerKernel(c10::Device(c10::kCUDA, 0)),
            runtime::OptimizerKernel::Fused);
  OptimizerDesc desc;
  EXPECT_EQ(Optimizer(desc, layoutOf(kShapes)).kernel(),
            runtime::OptimizerKernel::Reference);
}

TEST(RuntimeOptimizerTest, StateLivesInFlatBuffers) {
  FlatLayout layout = layoutOf(kShapes);
  EXPECT_EQ(layout.numel, 15 + 5 + 8);
  EXPECT_EQ(layout.offsets, (std::vector<int64_t>{0, 15, 20}));
  Optimizer adam(adamDesc(OptimizerType::AdamW, 0.0), layout);
  EXPECT_EQ(adam.expAvg().numel(), 28);
  EXPECT_EQ(adam.expAvgSq().numel(), 28);
  EXPECT_EQ(adam.bytes(), 2 * 28 * 4);
  OptimizerDesc sgd;
  sgd.type = OptimizerType::SGD;
  EXPECT_FALSE(Optimizer(sgd, layout).momentumBuffer().defined());
  sgd.momentum = 0.5;
  EXPECT_EQ(Optimizer(sgd, layout).momentumBuffer().numel(), 28);
}

TEST(RuntimeOptimizerTest, ClippingMatchesClipGradNorm) {
  torch::manual_seed(3);
  for (double maxNorm : {0.5, 1e3}) {
    std::vector<at::Tensor> ours, theirs;
    for (const auto &shape : kShapes) {
      at::Tensor p = torch::zeros(shape).requires_grad_(true);
      p.mutable_grad() = torch::randn(shape);
      theirs.push_back(p);
      ours.push_back(p.grad().clone());
    }
    double norm = runtime::clipGradientsByGlobalNorm(ours, maxNorm);
    double expected = torch::nn::utils::clip_grad_norm_(theirs, maxNorm);
    EXPECT_EQ(norm, expected);
    for (size_t i = 0; i < ours.size(); ++i)
      // LibTorch's C++ computes max_norm / (norm + 1e-6) by division,
      // Python (our model) by reciprocal() * max_norm: one ulp apart.
      EXPECT_TRUE(ours[i].allclose(theirs[i].grad(), 1e-6, 0));
    if (maxNorm > 1.0) { // No clipping below the threshold.
      for (size_t i = 0; i < ours.size(); ++i) {
        EXPECT_TRUE(ours[i].equal(theirs[i].grad()));
      }
    }
  }
  std::vector<at::Tensor> grads = {torch::full({4}, 3.0)};
  EXPECT_DOUBLE_EQ(runtime::clipGradientsByGlobalNorm(grads, 0.0), 6.0);
  EXPECT_TRUE(grads[0].equal(torch::full({4}, 3.0))) << "0 disables clipping";
  EXPECT_EQ(runtime::clipGradientsByGlobalNorm({}, 1.0), 0.0);
}

/// The same updates as Python's torch.optim 2.15 computed them (the file is
/// written by data/make_fixtures.py): initial parameters p0_i, gradients
/// g<step>_i, and per case the parameters after each step.
TEST(RuntimeOptimizerTest, MatchesPythonTorchOptimFixture) {
  runtime::NamedTensors file =
      runtime::readTensorFile(test::fixture("data/optim_expected.pt"));
  std::map<std::string, at::Tensor> t(file.begin(), file.end());
  const int numParams = 3, numSteps = 3;
  std::vector<std::vector<int64_t>> shapes;
  for (int i = 0; i < numParams; ++i)
    shapes.push_back(t.at("p0_" + std::to_string(i)).sizes().vec());
  FlatLayout layout = layoutOf(shapes);

  struct Case {
    const char *name;
    OptimizerDesc desc;
    double maxNorm;
    runtime::OptimizerKernel kernel = runtime::OptimizerKernel::Reference;
  };
  const runtime::OptimizerKernel fused = runtime::OptimizerKernel::Fused;
  OptimizerDesc adamw = adamDesc(OptimizerType::AdamW, 0.1);
  OptimizerDesc adamL2 = adamDesc(OptimizerType::Adam, 0.1);
  OptimizerDesc sgd;
  sgd.type = OptimizerType::SGD;
  sgd.lr = 0.05;
  sgd.momentum = 0.9;
  sgd.weightDecay = 0.01;
  sgd.nesterov = true;
  OptimizerDesc sgdPlain = sgd;
  sgdPlain.momentum = 0.0;
  sgdPlain.nesterov = false;
  // The fused kernels (CUDA's default) on their CPU implementations:
  // bitwise torch.optim(fused=True).
  for (const Case &c :
       {Case{"adamw", adamw, 0.7}, Case{"adam", adamL2, 0.7},
        Case{"sgd", sgd, 0.0}, Case{"adamw_fused", adamw, 0.7, fused},
        Case{"adam_fused", adamL2, 0.7, fused},
        Case{"sgd_fused", sgd, 0.0, fused},
        Case{"sgd_plain_fused", sgdPlain, 0.0, fused}}) {
    SCOPED_TRACE(c.name);
    std::vector<at::Tensor> params;
    for (int i = 0; i < numParams; ++i)
      params.push_back(t.at("p0_" + std::to_string(i)).clone());
    at::Tensor flat = layout.allocate();
    std::vector<at::Tensor> grads = layout.views(flat);
    Optimizer optimizer(c.desc, layout, c.kernel);
    EXPECT_EQ(optimizer.kernel(), c.kernel);
    for (int step = 0; step < numSteps; ++step) {
      for (int i = 0; i < numParams; ++i)
        grads[i].copy_(
            t.at("g" + std::to_string(step) + "_" + std::to_string(i)));
      double norm = runtime::clipGradientsByGlobalNorm(grads, c.maxNorm);
      EXPECT_EQ(norm, t.at(std::string(c.name) + "_norm" + std::to_string(step))
                          .item<double>());
      optimizer.step(params, grads, c.desc.lr);
      for (int i = 0; i < numParams; ++i) {
        at::Tensor expected =
            t.at(std::string(c.name) + "_" + std::to_string(step) + "_" +
                 std::to_string(i));
        EXPECT_TRUE(params[i].equal(expected))
            << "step " << step << " parameter " << i << ": max difference "
            << (params[i] - expected).abs().max().item<double>();
      }
    }
  }
}
