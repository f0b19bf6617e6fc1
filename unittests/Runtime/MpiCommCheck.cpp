//===- MpiCommCheck.cpp - The MPI communicator on real ranks
//---------------===//
//
// Run under mpirun (ctest does, on 2 and 4 ranks; unittests/Runtime/
// CMakeLists.txt). Checks every collective's result against what it must
// be, on every rank; that reductions give bitwise the same result on every
// rank (data parallelism relies on it to keep parameters equal); that many
// collectives may be in flight at once and waited in any order; and
// measures how much of a started collective progresses while the caller
// computes (printed, not asserted: timing depends on the machine's load).
//
//   MpiCommCheck            the checks and the overlap measurement
//   MpiCommCheck --timeout  rank 1 joins a collective 4 s late; rank 0,
//                           with a 1 s timeout in Throw mode, must get a
//                           CommTimeoutError naming the collective, then
//                           the collective completes once rank 1 arrives
//   --store                 (first) the same checks of the runtime's
//                           channel communicator over the store channel,
//                           under torchrun (RANK, WORLD_SIZE, MASTER_ADDR,
//                           MASTER_PORT): after a timeout its channel is
//                           aborted (as NCCL's is), so rank 0's collective
//                           stays failed; rank 1's completes when it
//                           arrives. No overlap measurement (the store
//                           channel is not built for speed).
//
// Exit code 0 when every check passes on this rank; each failure prints a
// line "rank R: FAIL: ...".
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/Communicator.h"
#include "ds/Runtime/Launch.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace ds::runtime;

namespace {

using Clock = std::chrono::steady_clock;

int64_t R = 0, W = 1;
int failures = 0;
bool storeBackend = false;

std::shared_ptr<Communicator> &comm() {
  static std::shared_ptr<Communicator> communicator;
  return communicator;
}

void check(bool ok, const std::string &what) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "rank %lld: FAIL: %s\n", (long long)R, what.c_str());
  }
}

bool same(const at::Tensor &a, const at::Tensor &b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         a.equal(b);
}

/// Rank r's contribution: values that depend on the rank and position.
at::Tensor contribution(int64_t rank, int64_t n, at::ScalarType type) {
  return (at::arange(n, at::kDouble) * 0.5 + double(rank * 1000 + 1)).to(type);
}

void checkAllReduce() {
  for (at::ScalarType type : {at::kFloat, at::kDouble, at::kLong}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
      if (op == ReduceOp::Avg && type == at::kLong)
        continue;
      const int64_t n = 1000;
      // Exact in every dtype: integral contributions are summed as such.
      at::Tensor expected = contribution(0, n, type).to(at::kDouble);
      for (int64_t r = 1; r < W; ++r) {
        at::Tensor part = contribution(r, n, type).to(at::kDouble);
        expected =
            op == ReduceOp::Max ? at::maximum(expected, part) : expected + part;
      }
      if (op == ReduceOp::Avg)
        expected = expected / double(W);
      at::Tensor tensor = contribution(R, n, type);
      comm()->allReduce(tensor, op).wait();
      check(same(tensor, expected.to(type)), std::string("allReduce ") +
                                                 reduceOpName(op) + " " +
                                                 c10::toString(type));
    }
  }
}

void checkBitwiseAgreement() {
  // Random addends whose sum rounds differently in different orders: every
  // rank must still get the same bits.
  at::Tensor tensor =
      at::randn({1 << 16}, at::TensorOptions().dtype(at::kFloat)) *
      double(R + 1);
  comm()->allReduce(tensor, ReduceOp::Avg).wait();
  at::Tensor all = at::empty({W * tensor.numel()}, tensor.options());
  comm()->allGather(all, tensor).wait();
  bool equal = true;
  for (int64_t r = 0; r < W; ++r)
    equal = equal &&
            same(all.narrow(0, r * tensor.numel(), tensor.numel()), tensor);
  check(equal, "allReduce results are bitwise equal on every rank");
}

void checkReduceScatter() {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
    const int64_t n = 777;
    at::Tensor expected = contribution(0, W * n, at::kDouble);
    for (int64_t r = 1; r < W; ++r) {
      at::Tensor part = contribution(r, W * n, at::kDouble);
      expected =
          op == ReduceOp::Max ? at::maximum(expected, part) : expected + part;
    }
    if (op == ReduceOp::Avg)
      expected = expected / double(W);
    at::Tensor input = contribution(R, W * n, at::kFloat);
    at::Tensor output = at::full({n}, -1.0f);
    comm()->reduceScatter(output, input, op).wait();
    check(same(output, expected.narrow(0, R * n, n).to(at::kFloat)),
          std::string("reduceScatter ") + reduceOpName(op));
    check(same(input, contribution(R, W * n, at::kFloat)),
          "reduceScatter leaves its input alone");
  }
}

/// bf16 and fp16 reductions (user-defined MPI ops): on 2 ranks the one
/// pairwise sum, widened to float32 and rounded back, is exact to the bit;
/// on more ranks MPI's order of the partial sums is its own, so the result
/// is within the 16-bit rounding of every partial sum and equal on every
/// rank.
void check16BitReductions() {
  for (at::ScalarType type : {at::kBFloat16, at::kHalf}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
      const int64_t n = 4099;
      auto part = [&](int64_t r) {
        // Values that need rounding in 16 bits; NaN-free, |x| < 30.
        return (at::sin(at::arange(n, at::kDouble) * 0.37 + double(r)) * 7.3 +
                double(r) * 1.1)
            .to(type);
      };
      at::Tensor tensor = part(R);
      std::string what = std::string("allReduce ") + reduceOpName(op) + " " +
                         c10::toString(type);
      comm()->allReduce(tensor, op).wait();
      if (W == 2) {
        // Pairwise in float32, rounded to the type; Avg then divides in it.
        at::Tensor a = part(0).to(at::kFloat), b = part(1).to(at::kFloat);
        at::Tensor expected =
            (op == ReduceOp::Max ? at::maximum(a, b) : a + b).to(type);
        if (op == ReduceOp::Avg)
          expected.div_(2.0);
        check(same(tensor, expected), what + " (bitwise, 2 ranks)");
      } else {
        at::Tensor exact = part(0).to(at::kDouble);
        for (int64_t r = 1; r < W; ++r)
          exact = op == ReduceOp::Max
                      ? at::maximum(exact, part(r).to(at::kDouble))
                      : exact + part(r).to(at::kDouble);
        if (op == ReduceOp::Avg)
          exact = exact / double(W);
        // Each of the W - 1 partial sums (|s| < 30 W) rounds by at most
        // half a unit in the last place of the type.
        double ulp = type == at::kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
        double bound = double(W) * 30.0 * ulp * double(W);
        double error =
            (tensor.to(at::kDouble) - exact).abs().max().item<double>();
        check(error <= bound, what + ": error " + std::to_string(error) +
                                  " > " + std::to_string(bound));
      }
      at::Tensor all = at::empty({W * n}, tensor.options());
      comm()->allGather(all, tensor).wait();
      bool equal = true;
      for (int64_t r = 0; r < W; ++r)
        equal = equal && same(all.narrow(0, r * n, n), tensor);
      check(equal, what + ": the same bits on every rank");
    }
    // Reduce-scatter: rank r's block of the averaged sum.
    const int64_t n = 1001;
    at::Tensor input =
        (at::cos(at::arange(W * n, at::kDouble) * 0.11) * 3.3 + double(R))
            .to(type);
    at::Tensor output = at::empty({n}, input.options());
    comm()->reduceScatter(output, input, ReduceOp::Avg).wait();
    at::Tensor whole = input.clone();
    comm()->allReduce(whole, ReduceOp::Avg).wait();
    check(same(output, whole.narrow(0, R * n, n)) || W > 2,
          std::string("reduceScatter avg ") + c10::toString(type) +
              " equals the allReduce's block");
  }
}

void checkAllGather() {
  for (at::ScalarType type : {at::kFloat, at::kBFloat16, at::kLong}) {
    const int64_t n = 333;
    at::Tensor expected = at::cat(
        [&] {
          std::vector<at::Tensor> parts;
          for (int64_t r = 0; r < W; ++r)
            parts.push_back(contribution(r, n, type));
          return parts;
        }(),
        0);
    at::Tensor output = at::zeros({W * n}, type);
    comm()->allGather(output, contribution(R, n, type)).wait();
    check(same(output, expected),
          std::string("allGather ") + c10::toString(type));
    // In place: this rank's block of the output is the input (ZeRO's
    // gather of updated shards into the flat buffer).
    at::Tensor flat = at::zeros({W * n}, type);
    flat.narrow(0, R * n, n).copy_(contribution(R, n, type));
    comm()->allGather(flat, flat.narrow(0, R * n, n)).wait();
    check(same(flat, expected),
          std::string("allGather in place ") + c10::toString(type));
  }
}

void checkBroadcast() {
  for (int64_t root : {int64_t(0), W - 1}) {
    at::Tensor tensor = contribution(R, 4097, at::kFloat).view({17, 241});
    comm()->broadcast(tensor, root).wait();
    check(same(tensor, contribution(root, 4097, at::kFloat).view({17, 241})),
          "broadcast from rank " + std::to_string(root));
  }
  comm()->barrier().wait();
}

void checkManyInFlight() {
  // Sixteen collectives in flight, waited in reverse order.
  std::vector<at::Tensor> tensors;
  std::vector<CommHandle> handles;
  for (int64_t i = 0; i < 16; ++i) {
    tensors.push_back(at::full({(i + 1) * 1000}, double(R + i)));
    handles.push_back(comm()->allReduce(tensors.back(), ReduceOp::Sum));
  }
  for (int64_t i = 15; i >= 0; --i) {
    handles[size_t(i)].wait();
    double expected = double(W * (W - 1) / 2 + W * i);
    check(tensors[size_t(i)].eq(expected).all().item<bool>(),
          "in-flight allReduce " + std::to_string(i));
  }
}

/// Buffers above 8 MiB (the libuv store's largest message: the store
/// channel sends chunks).
void checkLarge() {
  const int64_t n = 3 << 20; // 12 MiB of float32.
  at::Tensor tensor = at::full({n}, double(R + 1));
  tensor[n - 1] = double(7 * (R + 1));
  comm()->allReduce(tensor, ReduceOp::Sum).wait();
  double total = double(W * (W + 1) / 2);
  check(tensor.narrow(0, 0, n - 1).eq(total).all().item<bool>() &&
            tensor[n - 1].item<double>() == 7 * total,
        "allReduce of 12 MiB");
  at::Tensor gathered = at::empty({W * n});
  comm()->allGather(gathered, at::full({n}, double(R))).wait();
  bool ok = true;
  for (int64_t r = 0; r < W; ++r)
    ok &= gathered.narrow(0, r * n, n).eq(double(r)).all().item<bool>();
  check(ok, "allGather of 12 MiB per rank");
}

void checkBadArguments() {
  auto refuses = [](auto call, const char *text) {
    try {
      call();
      check(false, std::string("expected a CommError: ") + text);
    } catch (const CommError &error) {
      check(std::strstr(error.what(), text) != nullptr,
            std::string("message '") + error.what() + "' lacks '" + text + "'");
    }
  };
  refuses(
      [] {
        comm()->allReduce(at::zeros({4, 4}).t(), ReduceOp::Sum);
      },
      "must be contiguous");
  refuses([] { comm()->allReduce(at::zeros({4}, at::kBool), ReduceOp::Sum); },
          "cannot reduce bool");
  refuses(
      [] {
        comm()->reduceScatter(at::zeros({3}), at::zeros({3 * W + 1}),
                              ReduceOp::Sum);
      },
      "the input must hold size() x output elements");
  refuses([] { comm()->broadcast(at::zeros({3}), W); }, "is not a rank");
  // Both backends here move host memory (meta: a device without data).
  refuses(
      [] {
        comm()->allReduce(at::empty({4}, at::TensorOptions().device(at::kMeta)),
                          ReduceOp::Sum);
      },
      "allReduce: the tensor must be a CPU tensor, got meta");
}

/// Seconds of `iterations` 256x256 matmuls.
double compute(int64_t iterations) {
  at::Tensor a = at::randn({256, 256});
  at::Tensor b = at::randn({256, 256});
  Clock::time_point start = Clock::now();
  for (int64_t i = 0; i < iterations; ++i)
    a = at::mm(a, b).div_(16.0);
  (void)a.sum().item<float>();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

/// How much of a started collective completes while this rank computes.
void measureOverlap() {
  const int64_t n = 16 << 20; // 64 MiB of float32.
  at::Tensor big = at::ones({n});
  at::Tensor shard = at::empty({n / W});
  at::Tensor gathered = at::empty({n});
  struct Case {
    const char *name;
    std::function<CommHandle()> start;
  };
  std::vector<Case> cases = {
      {"allReduce", [&] { return comm()->allReduce(big, ReduceOp::Avg); }},
      {"reduceScatter",
       [&] { return comm()->reduceScatter(shard, big, ReduceOp::Avg); }},
      {"allGather",
       [&] { return comm()->allGather(gathered, big.narrow(0, 0, n / W)); }},
  };
  // The compute per case lasts about as long as the collective alone: the
  // stringent case, where only a collective that progresses in the
  // background finishes by the time the compute does.
  compute(10); // Warm-up.
  at::Tensor perIteration = at::tensor({compute(50) / 50}, at::kDouble);
  comm()->allReduce(perIteration, ReduceOp::Max).wait();
  for (const Case &c : cases) {
    c.start().wait(); // Warm-up (buffers, connections).
    comm()->barrier().wait();
    Clock::time_point start = Clock::now();
    c.start().wait();
    at::Tensor alone = at::tensor({seconds(start)}, at::kDouble);
    comm()->allReduce(alone, ReduceOp::Max).wait();
    double commAlone = alone.item<double>();
    int64_t count =
        std::max<int64_t>(1, int64_t(commAlone / perIteration.item<double>()));
    double computeAlone = compute(count);
    comm()->barrier().wait();
    CommHandle handle = c.start();
    double overlapped = compute(count);
    Clock::time_point waitStart = Clock::now();
    handle.wait();
    double waited = seconds(waitStart);
    double hidden = commAlone > 0 ? 1.0 - waited / commAlone : 1.0;
    if (R == 0)
      std::printf("overlap %s 64 MiB on %lld ranks: alone %.3f s; started, "
                  "then %.3f s of compute (%.3f s without communication, "
                  "slowdown %.2fx), then waited %.3f s: %.0f%% of the "
                  "collective hidden\n",
                  c.name, (long long)W, commAlone, overlapped, computeAlone,
                  overlapped / computeAlone, waited,
                  100.0 * std::max(0.0, hidden));
  }
}

int timeoutCheck() {
  CommHandle handle;
  at::Tensor tensor = at::full({8}, double(R + 1), at::kDouble);
  if (R == 1)
    std::this_thread::sleep_for(std::chrono::seconds(4));
  handle = comm()->allReduce(tensor, ReduceOp::Sum);
  if (R == 0) {
    bool timedOut = false;
    while (true) {
      try {
        handle.wait();
        break;
      } catch (const CommTimeoutError &error) {
        if (!timedOut)
          std::printf("rank 0: got CommTimeoutError: %s\n", error.what());
        check(std::strstr(error.what(),
                          "rank 0: collective allReduce #0 (sum, 8 x "
                          "float64) timed out after 1 s (a peer rank may "
                          "have died)") != nullptr,
              std::string("timeout message: ") + error.what());
        timedOut = true;
        if (storeBackend)
          break; // The channel is aborted: the collective stays failed.
      }
    }
    check(timedOut, "rank 0 saw a timeout while rank 1 was late");
    if (storeBackend)
      return failures ? 1 : 0;
  } else {
    handle.wait();
  }
  check(tensor.eq(double(W * (W + 1) / 2)).all().item<bool>(),
        "the late allReduce completes");
  return failures ? 1 : 0;
}


/// The host communicator of a torchrun launch (the store channel), as
/// ds-run and dsopt get it; the group outlives the communicator.
std::shared_ptr<Communicator> createStoreCommunicator(const CommOptions &options) {
  static std::shared_ptr<RankGroup> group;
  group = RankGroup::join(options);
  if (group->launch().kind != LaunchInfo::Kind::Store)
    throw CommError("--store: not started by torchrun (RANK, WORLD_SIZE, "
                    "MASTER_ADDR, MASTER_PORT)");
  return group->hostCommunicator();
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  storeBackend = !args.empty() && args.front() == "--store";
  if (storeBackend)
    args.erase(args.begin());
  bool timeout = !args.empty() && args.front() == "--timeout";
  try {
    CommOptions options = CommOptions::fromEnvironment();
    if (timeout) {
      options.timeoutSeconds = 1;
      options.onTimeout = CommOptions::OnTimeout::Throw;
    }
    comm() = storeBackend ? createStoreCommunicator(options)
                          : createMpiCommunicator(options);
    R = comm()->rank();
    W = comm()->size();
    at::manual_seed(uint64_t(R) + 7);
    if (timeout)
      return timeoutCheck();
    checkAllReduce();
    checkBitwiseAgreement();
    checkReduceScatter();
    check16BitReductions();
    checkAllGather();
    checkBroadcast();
    checkManyInFlight();
    checkLarge();
    checkBadArguments();
    if (!storeBackend)
      measureOverlap();
    comm()->barrier().wait();
  } catch (const std::exception &error) {
    std::fprintf(stderr, "rank %lld: FAIL: %s\n", (long long)R, error.what());
    return 1;
  }
  if (R == 0)
    std::printf("MpiCommCheck (%s) on %lld ranks: %s\n",
                comm()->backendName(), (long long)W,
                failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}
