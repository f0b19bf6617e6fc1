//===- DevicePlacementTest.cpp - Every allocation follows the device ------===//
//
// No GPU here, so the CUDA backend cannot show a tensor left on the CPU by
// mistake. This test loads plans on a stand-in for a CUDA device whose
// tensors are ATen's meta tensors (shapes and dtypes, no data: kernels run
// their shape functions only) and checks that the state, the flat
// gradient, master and optimizer buffers, stage 3's gathered parameters and
// every program value are on it. Meta tensors stop where a kernel has no
// meta implementation (mse_loss_backward) or a value is read (the clipping
// norm), so the test runs the forward only. The stand-in calls itself "cuda"
// because a plan runs only on the kind of device it was compiled for. With
// ZeRO-Offload the master and the optimizer state are on the CPU instead
// (pinned through the device's hostStaging when the plan asks for it).
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "ds/Plan/PlanFormat.h"
#include "ds/Runtime/Device.h"
#include "ds/Runtime/Engine.h"
#include "ds/Runtime/Optimizer.h"
#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/Safetensors.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

using namespace ds;
using ds::test::TempDir;

namespace {

class MetaStandIn final : public runtime::Device {
public:
  std::string backendName() const override { return "cuda"; }
  c10::Device device() const override { return c10::Device(c10::kMeta); }
  std::string describe() const override { return "meta (a stand-in)"; }
  at::Tensor hostStaging(at::IntArrayRef shape,
                         at::ScalarType dtype) override {
    ++stagingCalls;
    return at::empty(shape, at::TensorOptions().dtype(dtype));
  }
  at::Tensor copyFromHost(const at::Tensor &host,
                          const c10::Stream &) override {
    return host.to(device());
  }
  c10::Stream stream(runtime::StreamRole) override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(c10::kCPU));
  }
  at::Generator generator() override {
    return runtime::cpuDevice()->generator();
  }
  std::unique_ptr<runtime::Event> createEvent(bool timing) override {
    return runtime::cpuDevice()->createEvent(timing);
  }
  void synchronize() override {}

  int64_t stagingCalls = 0;
};

void expectOnMeta(const at::Tensor &tensor, const std::string &what) {
  ASSERT_TRUE(tensor.defined()) << what;
  EXPECT_EQ(tensor.device(), c10::Device(c10::kMeta)) << what;
}

TEST(RuntimeDevicePlacementTest, EveryBufferOfEveryStageIsOnTheDevice) {
  TempDir dir;
  runtime::writeSafetensors(dir.file("w.safetensors"),
                            {{"fc.weight", torch::randn({3, 4})},
                             {"fc.bias", torch::randn({3})},
                             {"extra.scale", torch::randn({2})}});
  for (int64_t stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    plan::Plan plan = test::zeroPlan(test::planJson("linear_mse_train.json"),
                                     1, stage, 6, /*gap=*/1);
    plan.device = "cuda";
    plan.weights = plan::WeightsDesc{"safetensors", "w.safetensors"};
    runtime::LoadOptions options;
    options.device = std::make_shared<MetaStandIn>();
    runtime::Engine engine =
        runtime::Engine::fromPlan(plan, "plan", dir.path(), options);
    EXPECT_EQ(engine.device()->device(), c10::Device(c10::kMeta));

    const std::string &name = plan.engines.at(0).name;
    const runtime::Optimizer *optimizer = engine.optimizer(name);
    ASSERT_NE(optimizer, nullptr);
    expectOnMeta(optimizer->expAvg(), "exp_avg");
    expectOnMeta(optimizer->expAvgSq(), "exp_avg_sq");
    for (size_t i = 0; i < engine.state().size(); ++i)
      if (!engine.state().sharded(int64_t(i)))
        expectOnMeta(engine.state().tensor(int64_t(i)),
                     engine.state().desc(int64_t(i)).name);

    // Host inputs are copied to the device; every result is on it.
    std::vector<at::Tensor> losses =
        engine.forward({torch::randn({4, 4}), torch::randn({4, 3})});
    ASSERT_EQ(losses.size(), 1u);
    expectOnMeta(losses[0], "the loss");
    // Stages 0-1 hold the flat gradient buffer for the whole run.
    if (stage <= 1)
      expectOnMeta(engine.gradient("fc.weight"), "fc.weight's gradient");
  }
}

TEST(RuntimeDevicePlacementTest, OffloadKeepsMasterAndOptimizerStateOnHost) {
  TempDir dir;
  runtime::writeSafetensors(dir.file("w.safetensors"),
                            {{"fc.weight", torch::randn({3, 4})},
                             {"fc.bias", torch::randn({3})},
                             {"extra.scale", torch::randn({2})}});
  const c10::Device cpu(c10::kCPU);
  for (int64_t stage = 1; stage <= 3; ++stage) {
    for (bool offload : {false, true}) {
      SCOPED_TRACE("stage " + std::to_string(stage) +
                   (offload ? ", offload" : ", no offload"));
      plan::Plan plan = test::zeroPlan(test::planJson("linear_mse_train.json"),
                                       1, stage, 6, /*gap=*/1);
      plan.device = "cuda";
      plan.weights = plan::WeightsDesc{"safetensors", "w.safetensors"};
      if (offload)
        plan.engines[0].offloadOptimizer = plan::OffloadDesc{true};
      runtime::LoadOptions options;
      auto standIn = std::make_shared<MetaStandIn>();
      options.device = standIn;
      runtime::Engine engine =
          runtime::Engine::fromPlan(plan, "plan", dir.path(), options);

      const std::string &name = plan.engines.at(0).name;
      const runtime::Optimizer *optimizer = engine.optimizer(name);
      ASSERT_NE(optimizer, nullptr);
      at::Tensor master = engine.masterParameters(name);
      if (offload) {
        // A float32 engine gets a master too: the update's copy on the host.
        ASSERT_TRUE(master.defined());
        EXPECT_EQ(master.device(), cpu);
        EXPECT_EQ(optimizer->expAvg().device(), cpu);
        EXPECT_EQ(optimizer->expAvgSq().device(), cpu);
        // pin_memory: host memory from the device's hostStaging.
        EXPECT_GE(standIn->stagingCalls, 3);
        runtime::MemoryStats memory = engine.trainMemory();
        EXPECT_EQ(memory.optimizerBytes, 0);
        EXPECT_EQ(memory.hostBytes,
                  int64_t(master.nbytes() + optimizer->expAvg().nbytes() +
                          optimizer->expAvgSq().nbytes()));
      } else {
        EXPECT_FALSE(master.defined());
        expectOnMeta(optimizer->expAvg(), "exp_avg");
        expectOnMeta(optimizer->expAvgSq(), "exp_avg_sq");
        EXPECT_EQ(standIn->stagingCalls, 0);
        EXPECT_EQ(engine.trainMemory().hostBytes, 0);
      }
      // Parameters and gradients stay on the device either way.
      for (size_t i = 0; i < engine.state().size(); ++i)
        if (!engine.state().sharded(int64_t(i)))
          expectOnMeta(engine.state().tensor(int64_t(i)),
                       engine.state().desc(int64_t(i)).name);
      std::vector<at::Tensor> losses =
          engine.forward({torch::randn({4, 4}), torch::randn({4, 3})});
      ASSERT_EQ(losses.size(), 1u);
      expectOnMeta(losses[0], "the loss");
      if (stage == 1)
        expectOnMeta(engine.gradient("fc.weight"), "fc.weight's gradient");
    }
  }
}

} // namespace
