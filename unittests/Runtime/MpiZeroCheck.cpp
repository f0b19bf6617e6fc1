//===- MpiZeroCheck.cpp - ZeRO stages 0-3 over MPI ranks ------------------===//
//
// Run under mpirun (ctest does, on 2 and 4 ranks). The hand-written train
// plan partitioned for the launched ranks (test::partitionEngine: a
// padding element after every parameter, buckets of 6 elements rounded to
// a multiple of W, GAS 2) is trained at ZeRO stages 0, 1 and 2 through the
// MPI communicator, whose collectives are asynchronous (a communication
// thread), so a reduce-scatter into a shard or an in-place all-gather of
// the flat parameter buffer really runs while the rank goes on. Stage 3
// trains the plan whose backward reads fc.weight again
// (test::withBackwardWeightRead), with every bucket sharded and with the
// small parameters persistent: the gathers of the sharded buckets run on
// the communication thread while the forward goes on. Every rank checks:
//  - its parameters against one process's autograd + torch::optim AdamW
//    over the whole batch (within 1e-6 relative), and that every rank
//    holds bitwise the same parameters (stage 3: Engine::gatherState);
//  - the traffic per optimizer step it measured against predictReport,
//    and the memory (parameters, gradients, optimizer state; at stage 3
//    the transient buffers and the peak too) likewise;
//  - that an all-gather started before some computation completes during
//    it (the communication thread progresses it), and the collectives'
//    timing (Engine::overlap(), printed).
//
// Exit code 0 when every check passes on this rank; each failure prints a
// line "rank R: FAIL: ...".
//
// Two more modes, without MPI, check ds-run's measured report (ctest runs
// them around `mpirun ds-run`, MpiDsRunZero.cmake):
//   MpiZeroCheck --write DIR STAGE W   writes DIR/plan.json (for W ranks at
//                                      ZeRO STAGE; stage 3 with persistent
//                                      small parameters), DIR/w.safetensors
//                                      and DIR/data.safetensors
//   MpiZeroCheck --compare DIR         checks DIR/report.json (ds-run
//                                      --report) against predictReport of
//                                      DIR/plan.json (stage 3: the peak
//                                      exactly; the overlap timings
//                                      present), and
//                                      DIR/params.safetensors against the
//                                      oracle
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "ds/Plan/PlanFormat.h"
#include "ds/Plan/Report.h"
#include "ds/Runtime/Communicator.h"
#include "ds/Runtime/Engine.h"
#include "ds/Runtime/StateStore.h"
#include "ds/Runtime/TimedCommunicator.h"
#include "ds/TensorIO/Safetensors.h"

#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

using namespace ds;

namespace {

constexpr int64_t STEPS = 3, GAS = 2, ROWS = 4;
const std::vector<std::string> kParams = {"fc.weight", "fc.bias",
                                          "extra.scale"};
int64_t R = 0, W = 1;
int failures = 0;

void check(bool ok, const std::string &what) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "rank %lld: FAIL: %s\n", (long long)R, what.c_str());
  }
}

/// Stage 3: parameters of at most `persistentNumel` elements persistent.
plan::Plan zeroPlan(int64_t stage, int64_t persistentNumel = 3) {
  plan::ordered_json json = test::planJson("linear_mse_train.json");
  json["gradient_accumulation_steps"] = GAS;
  json["engines"][0]["batch"]["gradient_accumulation_steps"] = GAS;
  json["programs"]["train"]["body"][6]["value"] = 1.0 / double(GAS);
  if (stage != 3)
    return test::zeroPlan(json, W, stage, 6, /*gap=*/1);
  test::Stage3Options options;
  options.persistentNumel = persistentNumel;
  return test::zeroPlan(test::withBackwardWeightRead(json), W, 3, 6,
                        /*gap=*/1, options);
}

struct Batch {
  at::Tensor x, t; // The whole micro-step: W * ROWS rows.
};

runtime::NamedTensors makeWeights() {
  torch::manual_seed(42); // The same on every rank.
  return {{"fc.weight", torch::randn({3, 4})},
          {"fc.bias", torch::randn({3})},
          {"extra.scale", torch::randn({2})}};
}

std::vector<Batch> makeData() {
  torch::manual_seed(11); // The same on every rank.
  std::vector<Batch> data;
  for (int64_t i = 0; i < STEPS * GAS; ++i)
    data.push_back({torch::randn({W * ROWS, 4}), torch::randn({W * ROWS, 3})});
  return data;
}

/// Autograd + torch::optim::AdamW over the whole batch (the oracle).
std::vector<at::Tensor> reference(const runtime::NamedTensors &weights,
                                  const std::vector<Batch> &data) {
  std::vector<at::Tensor> params;
  for (const std::string &name : kParams)
    for (const auto &[key, tensor] : weights)
      if (key == name)
        params.push_back(tensor.clone().requires_grad_(true));
  torch::optim::AdamW optimizer(
      params, torch::optim::AdamWOptions(0.01).weight_decay(0.1));
  for (int64_t step = 0; step < STEPS; ++step) {
    for (int64_t micro = 0; micro < GAS; ++micro) {
      const Batch &b = data[size_t(step * GAS + micro)];
      (torch::mse_loss(torch::linear(b.x, params[0], params[1]), b.t) /
       double(GAS))
          .backward();
    }
    params[2].mutable_grad() = torch::zeros_like(params[2]);
    torch::nn::utils::clip_grad_norm_(params, 1.0);
    optimizer.step();
    optimizer.zero_grad();
  }
  return params;
}

void checkStage(const std::shared_ptr<runtime::Communicator> &comm,
                const std::string &weightsPath,
                const runtime::NamedTensors &weights, int64_t stage,
                int64_t persistentNumel = 3) {
  std::string label =
      "stage " + std::to_string(stage) +
      (stage == 3 ? " (persistent <= " + std::to_string(persistentNumel) + ")"
                  : std::string()) +
      ": ";
  plan::Plan plan = zeroPlan(stage, persistentNumel);
  runtime::LoadOptions options;
  options.weightsPath = weightsPath;
  options.communicator = comm;
  runtime::Engine engine =
      runtime::Engine::fromPlan(plan, "mpi-zero.json", ".", options);
  std::vector<Batch> data = makeData();
  plan::CommVolume before = comm->volume();
  for (int64_t i = 0; i < STEPS * GAS; ++i) {
    const Batch &b = data[size_t(i)];
    engine.forward(
        {b.x.narrow(0, R * ROWS, ROWS), b.t.narrow(0, R * ROWS, ROWS)});
    engine.backward();
    engine.step();
  }
  plan::CommVolume volume = comm->volume() - before;
  runtime::MemoryStats memory = engine.trainMemory();
  plan::OverlapReport overlap = engine.overlap();

  // Against the oracle (stage 3: gathered, every rank takes part).
  std::vector<at::Tensor> expected = reference(weights, data);
  runtime::NamedTensors whole = engine.gatherState();
  std::vector<at::Tensor> mine;
  for (size_t k = 0; k < kParams.size(); ++k) {
    at::Tensor ours;
    for (const auto &[name, tensor] : whole)
      if (name == kParams[k])
        ours = tensor;
    at::Tensor ref = expected[k].detach();
    double worst = ((ours - ref).abs() - 1e-6 * ref.abs()).max().item<double>();
    check(worst <= 1e-7, label + kParams[k] + " is off the oracle by " +
                             std::to_string(worst) + " beyond 1e-6 relative");
    mine.push_back(ours.reshape(-1));
  }
  // Bitwise the same on every rank.
  at::Tensor flat = at::cat(mine);
  at::Tensor all = at::empty({W * flat.numel()}, flat.options());
  comm->allGather(all, flat).wait();
  for (int64_t r = 0; r < W; ++r)
    check(all.narrow(0, r * flat.numel(), flat.numel()).equal(flat),
          label + "rank " + std::to_string(r) +
              "'s parameters differ from this rank's");

  // Measured against predicted.
  plan::RankReport predicted = plan::predictReport(plan).ranks[size_t(R)];
  auto same = [&](int64_t measured, int64_t want, const char *what) {
    check(measured == want, label + what + ": measured " +
                                std::to_string(measured) + ", predicted " +
                                std::to_string(want));
  };
  same(volume.allReduce / STEPS, predicted.comm.allReduce, "all_reduce");
  same(volume.reduceScatter / STEPS, predicted.comm.reduceScatter,
       "reduce_scatter");
  same(volume.allGather / STEPS, predicted.comm.allGather, "all_gather");
  same(volume.broadcast, 0, "broadcast after load");
  same(memory.parameterBytes, predicted.paramBytes, "param_bytes");
  same(memory.gradientBytes, predicted.gradBytes, "grad_bytes");
  same(memory.optimizerBytes, predicted.optimizerStateBytes,
       "optimizer_state_bytes");
  same(memory.transientPeakBytes, predicted.transientBytes, "transient_bytes");
  if (stage == 3)
    same(memory.jointPeakBytes + memory.parameterBytes + memory.bufferBytes +
             memory.gradientBytes + memory.optimizerBytes,
         predicted.peakBytes, "peak_bytes");
  // Every collective the engine started was timed.
  int64_t started = 0;
  for (const plan::Program *program :
       {plan.findProgram("train"), plan.findProgram("step")})
    for (const plan::Op &op : program->body)
      if (op.kind == plan::OpKind::AllReduce ||
          op.kind == plan::OpKind::ReduceScatter ||
          op.kind == plan::OpKind::AllGather)
        started += program == plan.findProgram("train") ? STEPS * GAS : STEPS;
  if (stage >= 1)
    started += STEPS; // The global norm's scalar all-reduce.
  same(overlap.total().count, started, "collectives timed");
  plan::CollectiveTiming total = overlap.total();
  if (R == 0)
    std::printf(
        "%s%lld reduce-scatter + %lld all-gather + %lld all-reduce elements "
        "per step; %lld collectives in flight %.4f s, compute blocked in "
        "them %.4f s (all_gather %.4f / %.4f s) of %.3f s\n",
        label.c_str(), (long long)(volume.reduceScatter / STEPS),
        (long long)(volume.allGather / STEPS),
        (long long)(volume.allReduce / STEPS), (long long)total.count,
        total.collectiveSeconds, total.waitSeconds,
        overlap.allGather.collectiveSeconds, overlap.allGather.waitSeconds,
        overlap.trainSeconds);
}

/// The communication thread moves a collective while the rank computes:
/// an all-gather started before a loop of matrix products completes during
/// it (the loop runs until it has, or 30 s), and wait() then returns at
/// once.
void checkProgress(const std::shared_ptr<runtime::Communicator> &comm) {
  runtime::TimedCommunicator timed(comm);
  const int64_t n = 1 << 20; // 4 MiB per rank.
  at::Tensor in = at::full({n}, double(R), at::kFloat);
  at::Tensor out = at::empty({W * n}, at::kFloat);
  auto start = std::chrono::steady_clock::now();
  runtime::CommHandle handle = timed.allGather(out, in);
  at::Tensor a = at::randn({128, 128});
  int64_t products = 0;
  while (!handle.isCompleted() &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
    a = at::mm(a, a).tanh();
    ++products;
  }
  bool completed = handle.isCompleted();
  handle.wait();
  check(completed, "an all-gather did not complete while this rank computed "
                   "(no progress without MPI calls from the caller)");
  for (int64_t r = 0; r < W; ++r)
    check(out.narrow(0, r * n, n).eq(double(r)).all().item<bool>(),
          "the all-gather's block of rank " + std::to_string(r));
  plan::CollectiveTiming timing = timed.timing().allGather;
  check(timing.count == 1 && timing.waitSeconds <= timing.collectiveSeconds,
        "the all-gather's timing");
  if (R == 0)
    std::printf("progress: a %lld-float all-gather completed during %lld "
                "matrix products: in flight %.4f s, wait() %.6f s\n",
                (long long)(W * n), (long long)products,
                timing.collectiveSeconds, timing.waitSeconds);
}

} // namespace

/// --write DIR STAGE W: the files of a ds-run training.
int writeFiles(const std::string &dir, int64_t stage) {
  plan::writePlan(zeroPlan(stage), dir + "/plan.json");
  runtime::writeSafetensors(dir + "/w.safetensors", makeWeights());
  std::vector<at::Tensor> xs, ts;
  for (const Batch &b : makeData()) {
    xs.push_back(b.x);
    ts.push_back(b.t);
  }
  // [S, B, ...]: S micro-steps of the whole batch.
  runtime::writeSafetensors(dir + "/data.safetensors",
                            {{"x", at::stack(xs)}, {"t", at::stack(ts)}});
  return 0;
}

/// --compare DIR: ds-run's report and parameters.
int compareFiles(const std::string &dir) {
  plan::Plan plan = plan::readPlan(dir + "/plan.json");
  W = plan.worldSize;
  plan::Report predicted = plan::predictReport(plan);
  plan::Report measured = plan::reportFromJson(
      plan::ordered_json::parse(test::readText(dir + "/report.json")));
  std::string label =
      "ds-run stage " + std::to_string(predicted.zeroStage) + ": ";
  check(measured.kind == "measured" && measured.steps == STEPS,
        label + "not a measured report of " + std::to_string(STEPS) + " steps");
  check(measured.zeroStage == predicted.zeroStage, label + "zero_stage");
  check(measured.ranks.size() == size_t(W), label + "a report per rank");
  for (size_t r = 0; r < measured.ranks.size() && r < size_t(W); ++r) {
    const plan::RankReport &m = measured.ranks[r];
    const plan::RankReport &p = predicted.ranks[r];
    std::string rank = label + "rank " + std::to_string(r) + ": ";
    auto same = [&](int64_t a, int64_t b, const char *what) {
      check(a == b, rank + what + ": measured " + std::to_string(a) +
                        ", predicted " + std::to_string(b));
    };
    same(m.paramBytes, p.paramBytes, "param_bytes");
    same(m.gradBytes, p.gradBytes, "grad_bytes");
    same(m.optimizerStateBytes, p.optimizerStateBytes, "optimizer_state_bytes");
    same(m.bufferBytes, p.bufferBytes, "buffer_bytes");
    same(m.activationPeakBytes, p.activationPeakBytes, "activation_peak_bytes");
    same(m.transientBytes, p.transientBytes, "transient_bytes");
    same(m.comm.allReduce, p.comm.allReduce, "all_reduce");
    same(m.comm.reduceScatter, p.comm.reduceScatter, "reduce_scatter");
    same(m.comm.allGather, p.comm.allGather, "all_gather");
    same(m.comm.broadcast, p.comm.broadcast, "broadcast");
    check(m.peakBytes <= p.peakBytes,
          rank + "peak_bytes: measured " + std::to_string(m.peakBytes) +
              " above the predicted bound " + std::to_string(p.peakBytes));
    if (predicted.zeroStage == 3)
      same(m.peakBytes, p.peakBytes, "peak_bytes");
    check(m.overlap.has_value() && m.overlap->total().count > 0 &&
              m.overlap->trainSeconds > 0,
          rank + "the measured report has no collective timings");
  }
  runtime::NamedTensors saved =
      runtime::readSafetensors(dir + "/params.safetensors");
  std::vector<at::Tensor> expected = reference(makeWeights(), makeData());
  for (size_t k = 0; k < kParams.size(); ++k)
    for (const auto &[name, tensor] : saved)
      if (name == kParams[k]) {
        at::Tensor ref = expected[k].detach();
        double worst =
            ((tensor - ref).abs() - 1e-6 * ref.abs()).max().item<double>();
        check(worst <= 1e-7,
              label + name + " is off the oracle by " + std::to_string(worst));
      }
  std::printf("%s%s\n", label.c_str(),
              failures ? "FAILED" : "report = prediction, parameters = oracle");
  return failures ? 1 : 0;
}

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 4 && args[0] == "--write") {
      W = std::stoll(args[3]);
      return writeFiles(args[1], std::stoll(args[2]));
    }
    if (args.size() == 2 && args[0] == "--compare")
      return compareFiles(args[1]);
  } catch (const std::exception &error) {
    std::fprintf(stderr, "FAIL: %s\n", error.what());
    return 1;
  }
  try {
    runtime::CommOptions options = runtime::CommOptions::fromEnvironment();
    std::shared_ptr<runtime::Communicator> comm =
        runtime::createMpiCommunicator(options);
    R = comm->rank();
    W = comm->size();
    test::TempDir dir;
    // The same weights on every rank (a file per rank: no shared folder
    // is assumed).
    runtime::NamedTensors weights = makeWeights();
    std::string path = dir.file("w.safetensors");
    runtime::writeSafetensors(path, weights);
    for (int64_t stage : {0, 1, 2})
      checkStage(comm, path, weights, stage);
    checkStage(comm, path, weights, 3, /*persistentNumel=*/0);
    checkStage(comm, path, weights, 3, /*persistentNumel=*/3);
    checkProgress(comm);
    comm->barrier().wait();
  } catch (const std::exception &error) {
    std::fprintf(stderr, "rank %lld: FAIL: %s\n", (long long)R, error.what());
    return 1;
  }
  if (R == 0)
    std::printf("MpiZeroCheck on %lld ranks: %s\n", (long long)W,
                failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}
