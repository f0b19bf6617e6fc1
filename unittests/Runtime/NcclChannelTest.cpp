//===- NcclChannelTest.cpp - The CUDA backend's NCCL channel, on GPUs -----===//
//
// The channel of ds/Runtime/Channel.h that the cuda backend makes
// (lib/Runtime/CUDA/NcclChannel.cpp), through the device registry
// (createDeviceChannel): one rank per visible GPU (DS_NCCL_TEST_RANKS caps
// it), each a thread of this process with its own device, joined through a
// Rendezvous of threads (TestRendezvous.h). With one GPU the job has one
// rank; the out-of-place forms still fail when a collective does not write
// its whole output (outputs start as -1).
//
// Checked: all-reduce (sum, avg, max), reduce-scatter, all-gather (out of
// place and in place) and broadcast in float32, bfloat16 and float16, on
// the compute stream and on the communication stream after an event; the
// other reduced dtypes and moved dtypes; the argument errors; describe();
// abort() twice, then destruction.
//
// Without a visible GPU it prints the reason and exits 77 (ctest's
// SKIP_RETURN_CODE): skipped, never passed.
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/Device.h"

#include "TestRendezvous.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <iostream>
#include <regex>
#include <thread>

using namespace ds::runtime;

namespace {

/// One rank of the job: its device and its end of the channel.
struct Rank {
  int64_t rank = 0;
  std::shared_ptr<Device> device;
  std::unique_ptr<Channel> channel;
};

/// Runs body(i) on `count` threads at once; the exceptions' messages, by
/// index ("" where none).
std::vector<std::string> onThreads(int64_t count,
                                   const std::function<void(int64_t)> &body) {
  std::vector<std::string> errors(count);
  std::vector<std::thread> threads;
  for (int64_t i = 0; i < count; ++i)
    threads.emplace_back([&, i] {
      try {
        body(i);
      } catch (const std::exception &e) {
        errors[i] = e.what();
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  return errors;
}

/// The ranks of one channel, `size` GPUs.
class Job {
public:
  Job(int64_t size, const std::string &key) : ranks_(size) {
    std::vector<std::string> errors = onThreads(size, [&](int64_t r) {
      Rank &rank = ranks_[r];
      rank.rank = r;
      rank.device = createDevice("cuda:" + std::to_string(r));
      test::ThreadRendezvous rendezvous(board_, r, size);
      rank.channel = createDeviceChannel(*rank.device, rendezvous, key);
    });
    for (const std::string &error : errors)
      if (!error.empty())
        throw std::runtime_error("joining the channel '" + key + "': " + error);
  }
  int64_t size() const { return int64_t(ranks_.size()); }
  Rank &rank(int64_t r) { return ranks_[r]; }
  /// body(rank) on every rank at once; a rank's exception fails the test.
  void each(const std::function<void(Rank &)> &body) {
    std::vector<std::string> errors = onThreads(size(), [&](int64_t r) {
      c10::DeviceGuard guard(ranks_[r].device->device());
      body(ranks_[r]);
    });
    for (int64_t r = 0; r < size(); ++r)
      EXPECT_EQ(errors[r], "") << "rank " << r;
  }

private:
  test::Board board_;
  std::vector<Rank> ranks_;
};

int64_t ranksToUse = 1;
Job *job = nullptr;

/// scale * (i % 3 + 1) for i in [offset, offset + n): small integers, exact
/// in bfloat16 and int8 for sums of up to 8 ranks.
at::Tensor pattern(int64_t offset, int64_t n, int64_t scale) {
  return (at::arange(offset, offset + n, at::kLong).remainder(3) + 1) * scale;
}

at::Tensor on(const Rank &rank, const at::Tensor &host, at::ScalarType dtype) {
  return host.to(rank.device->options(dtype));
}

/// A tensor of `n` elements of -1: a collective that leaves some of its
/// output unwritten fails the comparison.
at::Tensor unwritten(const Rank &rank, int64_t n, at::ScalarType dtype) {
  return at::full({n}, -1, rank.device->options(dtype));
}

/// Queues `collective` on the stream of `role` (after the compute stream's
/// work, through an event) and waits for it.
void runOn(Rank &rank, StreamRole role,
           const std::function<void(const c10::Stream &)> &collective) {
  Device &device = *rank.device;
  c10::Stream stream = device.stream(role);
  if (role != StreamRole::Compute) {
    std::unique_ptr<Event> ready = device.createEvent();
    ready->record(device.stream(StreamRole::Compute));
    ready->block(stream);
  }
  collective(stream);
  std::unique_ptr<Event> done = device.createEvent();
  done->record(stream);
  done->synchronize();
}

/// `got` (on the GPU) equals `want` (long or double, host): exactly for
/// integers and for sums, within the dtype's rounding for `approximate`.
void expectValues(const at::Tensor &got, const at::Tensor &want,
                  const std::string &what, bool approximate = false) {
  at::Tensor host = got.cpu().to(at::kDouble);
  at::Tensor expected = want.to(at::kDouble);
  ASSERT_EQ(host.sizes(), expected.sizes()) << what;
  double rtol = 0;
  if (approximate)
    rtol = got.scalar_type() == at::kBFloat16 ? 1e-2
           : got.scalar_type() == at::kHalf   ? 1e-3
                                              : 1e-6;
  bool same = approximate ? at::allclose(host, expected, rtol, 0)
                          : at::equal(host, expected);
  if (!same) {
    at::Tensor wrong = (host - expected).abs().gt(rtol * expected.abs());
    int64_t first = wrong.nonzero().flatten().index({0}).item<int64_t>();
    ADD_FAILURE() << what << ": " << wrong.sum().item<int64_t>() << " of "
                  << host.numel() << " elements wrong; element " << first
                  << " is " << host[first].item<double>() << ", expected "
                  << expected[first].item<double>();
  }
}

std::string nameOf(ChannelOp op) {
  return op == ChannelOp::Sum ? "sum" : op == ChannelOp::Avg ? "avg" : "max";
}

struct Case {
  at::ScalarType dtype;
  StreamRole role;
};

class NcclChannel : public ::testing::TestWithParam<Case> {};

TEST_P(NcclChannel, AllReduce) {
  const Case c = GetParam();
  int64_t w = job->size(), n = 1001;
  for (ChannelOp op : {ChannelOp::Sum, ChannelOp::Avg, ChannelOp::Max}) {
    job->each([&](Rank &rank) {
      at::Tensor t = on(rank, pattern(0, n, rank.rank + 1), c.dtype);
      runOn(rank, c.role, [&](const c10::Stream &stream) {
        rank.channel->allReduce(t, op, stream);
      });
      at::Tensor sum = pattern(0, n, w * (w + 1) / 2).to(at::kDouble);
      at::Tensor want = op == ChannelOp::Sum   ? sum
                        : op == ChannelOp::Avg ? sum / double(w)
                                               : pattern(0, n, w);
      expectValues(t, want,
                   "all-reduce " + nameOf(op) + " on rank " +
                       std::to_string(rank.rank),
                   op == ChannelOp::Avg);
    });
  }
}

TEST_P(NcclChannel, ReduceScatter) {
  const Case c = GetParam();
  int64_t w = job->size(), m = 333;
  for (ChannelOp op : {ChannelOp::Sum, ChannelOp::Max}) {
    job->each([&](Rank &rank) {
      at::Tensor input = on(rank, pattern(0, w * m, rank.rank + 1), c.dtype);
      at::Tensor output = unwritten(rank, m, c.dtype);
      runOn(rank, c.role, [&](const c10::Stream &stream) {
        rank.channel->reduceScatter(output, input, op, stream);
      });
      int64_t scale = op == ChannelOp::Sum ? w * (w + 1) / 2 : w;
      expectValues(output, pattern(rank.rank * m, m, scale),
                   "reduce-scatter " + nameOf(op) + " on rank " +
                       std::to_string(rank.rank));
    });
  }
}

/// Block q of the gathered tensor: rank q's pattern(0, m, q + 1).
at::Tensor gathered(int64_t w, int64_t m) {
  std::vector<at::Tensor> blocks;
  for (int64_t q = 0; q < w; ++q)
    blocks.push_back(pattern(0, m, q + 1));
  return at::cat(blocks);
}

TEST_P(NcclChannel, AllGather) {
  const Case c = GetParam();
  int64_t w = job->size(), m = 333;
  job->each([&](Rank &rank) {
    at::Tensor input = on(rank, pattern(0, m, rank.rank + 1), c.dtype);
    at::Tensor output = unwritten(rank, w * m, c.dtype);
    runOn(rank, c.role, [&](const c10::Stream &stream) {
      rank.channel->allGather(output, input, stream);
    });
    expectValues(output, gathered(w, m),
                 "all-gather on rank " + std::to_string(rank.rank));
  });
}

TEST_P(NcclChannel, AllGatherInPlace) {
  const Case c = GetParam();
  int64_t w = job->size(), m = 333;
  job->each([&](Rank &rank) {
    at::Tensor output = unwritten(rank, w * m, c.dtype);
    at::Tensor mine = output.narrow(0, rank.rank * m, m);
    mine.copy_(on(rank, pattern(0, m, rank.rank + 1), c.dtype));
    runOn(rank, c.role, [&](const c10::Stream &stream) {
      rank.channel->allGather(output, mine, stream);
    });
    expectValues(output, gathered(w, m),
                 "in-place all-gather on rank " + std::to_string(rank.rank));
  });
}

TEST_P(NcclChannel, Broadcast) {
  const Case c = GetParam();
  int64_t w = job->size(), n = 777;
  for (int64_t root : {w - 1, int64_t(0)}) {
    job->each([&](Rank &rank) {
      at::Tensor t = on(rank, pattern(0, n, rank.rank + 1), c.dtype);
      if (rank.rank != root)
        t.fill_(-1);
      runOn(rank, c.role, [&](const c10::Stream &stream) {
        rank.channel->broadcast(t, root, stream);
      });
      expectValues(t, pattern(0, n, root + 1),
                   "broadcast from " + std::to_string(root) + " on rank " +
                       std::to_string(rank.rank));
    });
  }
}

INSTANTIATE_TEST_SUITE_P(
    Dtypes, NcclChannel,
    ::testing::Values(Case{at::kFloat, StreamRole::Compute},
                      Case{at::kBFloat16, StreamRole::Compute},
                      Case{at::kHalf, StreamRole::Compute},
                      Case{at::kFloat, StreamRole::Communication},
                      Case{at::kBFloat16, StreamRole::Communication},
                      Case{at::kHalf, StreamRole::Communication}),
    [](const auto &info) {
      return std::string(c10::toString(info.param.dtype)) +
             (info.param.role == StreamRole::Compute ? "_compute"
                                                     : "_communication");
    });

TEST(NcclChannelMore, OtherReducedDtypes) {
  int64_t w = job->size(), n = 257;
  for (at::ScalarType dtype :
       {at::kDouble, at::kInt, at::kLong, at::kByte, at::kChar}) {
    job->each([&](Rank &rank) {
      at::Tensor t = on(rank, pattern(0, n, rank.rank + 1), dtype);
      runOn(rank, StreamRole::Compute, [&](const c10::Stream &stream) {
        rank.channel->allReduce(t, ChannelOp::Sum, stream);
      });
      expectValues(t, pattern(0, n, w * (w + 1) / 2),
                   std::string("all-reduce sum of ") + c10::toString(dtype));
    });
  }
}

TEST(NcclChannelMore, BoolSumIsAnyRank) {
  int64_t w = job->size(), n = 300;
  job->each([&](Rank &rank) {
    at::Tensor host = at::arange(n, at::kLong).remainder(rank.rank + 2).eq(0);
    at::Tensor t = on(rank, host, at::kBool);
    runOn(rank, StreamRole::Compute, [&](const c10::Stream &stream) {
      rank.channel->allReduce(t, ChannelOp::Sum, stream);
    });
    at::Tensor want = at::zeros({n}, at::kBool);
    for (int64_t r = 0; r < w; ++r)
      want = want.logical_or(at::arange(n, at::kLong).remainder(r + 2).eq(0));
    expectValues(t, want, "all-reduce of bool");
  });
}

TEST(NcclChannelMore, MovesTakeAnyDtype) {
  int64_t w = job->size(), m = 65;
  job->each([&](Rank &rank) {
    for (at::ScalarType dtype : {at::kShort, at::kComplexFloat}) {
      at::Tensor input = on(rank, pattern(0, m, rank.rank + 1), dtype);
      at::Tensor output = unwritten(rank, w * m, dtype);
      runOn(rank, StreamRole::Compute, [&](const c10::Stream &stream) {
        rank.channel->allGather(output, input, stream);
      });
      expectValues(at::real(output.to(at::kComplexDouble)), gathered(w, m),
                   std::string("all-gather of ") + c10::toString(dtype));
    }
  });
}

/// The message of what `body` throws ("" if nothing).
template <typename Body> std::string thrown(Body body) {
  try {
    body();
  } catch (const std::exception &e) {
    return e.what();
  }
  return "";
}

TEST(NcclChannelMore, ArgumentsAreCheckedBeforeNccl) {
  // Each throws before NCCL is called, so rank 0 alone may try them.
  Rank &rank = job->rank(0);
  Channel &channel = *rank.channel;
  c10::Stream stream = rank.device->stream(StreamRole::Compute);
  auto expectError = [](const std::string &message,
                        const std::vector<std::string> &parts) {
    EXPECT_FALSE(message.empty());
    for (const std::string &part : parts)
      EXPECT_NE(message.find(part), std::string::npos)
          << "'" << part << "' not in: " << message;
  };
  at::Tensor host = at::ones({8});
  expectError(thrown([&] { channel.allReduce(host, ChannelOp::Sum, stream); }),
              {"all-reduce", "cpu"});
  at::Tensor complex = at::ones({8}, rank.device->options(at::kComplexFloat));
  expectError(
      thrown([&] { channel.allReduce(complex, ChannelOp::Sum, stream); }),
      {"all-reduce", "ComplexFloat"});
  at::Tensor flags = at::ones({8}, rank.device->options(at::kBool));
  expectError(thrown([&] { channel.allReduce(flags, ChannelOp::Avg, stream); }),
              {"all-reduce", "Bool", "avg"});
  at::Tensor gpu = at::ones({8}, rank.device->options(at::kFloat));
  c10::Stream cpuStream = cpuDevice()->stream(StreamRole::Compute);
  expectError(
      thrown([&] { channel.allReduce(gpu, ChannelOp::Sum, cpuStream); }),
      {"all-reduce", "stream"});
  at::Tensor wrong = at::ones({8 * job->size() + 1}, gpu.options());
  expectError(thrown([&] { channel.allGather(wrong, gpu, stream); }),
              {"all-gather", "blocks"});
  expectError(thrown([&] { channel.broadcast(gpu, job->size(), stream); }),
              {"broadcast", "root"});
  at::Tensor strided = at::ones({8, 2}, gpu.options()).t();
  expectError(thrown([&] { channel.broadcast(strided, 0, stream); }),
              {"broadcast", "contiguous"});
}

TEST(NcclChannelMore, DescribesItself) {
  for (int64_t r = 0; r < job->size(); ++r) {
    Channel &channel = *job->rank(r).channel;
    EXPECT_EQ(channel.rank(), r);
    EXPECT_EQ(channel.size(), job->size());
    std::string text = channel.describe();
    std::regex want("nccl [0-9]+\\.[0-9]+\\.[0-9]+ \\(rank " +
                    std::to_string(r) + " of " + std::to_string(job->size()) +
                    ", cuda:" + std::to_string(r) + "\\)");
    EXPECT_TRUE(std::regex_match(text, want)) << text;
    EXPECT_EQ(channel.asyncError(), "") << text;
  }
}

// Last: a channel of its own, aborted and destroyed.
TEST(NcclChannelMore, AbortTwiceThenDestroy) {
  auto aborted = std::make_unique<Job>(job->size(), "nccl-test/abort");
  aborted->each([&](Rank &rank) {
    at::Tensor t = on(rank, pattern(0, 64, 1), at::kFloat);
    runOn(rank, StreamRole::Communication, [&](const c10::Stream &stream) {
      rank.channel->allReduce(t, ChannelOp::Sum, stream);
    });
    rank.channel->abort();
    rank.channel->abort();
    EXPECT_NE(rank.channel->asyncError().find("aborted"), std::string::npos);
    std::string after = thrown([&] {
      rank.channel->allReduce(t, ChannelOp::Sum,
                              rank.device->stream(StreamRole::Compute));
    });
    EXPECT_NE(after.find("aborted"), std::string::npos) << after;
  });
  aborted.reset();
  SUCCEED() << "aborted channels destroyed";
}

/// How many ranks: the visible GPUs (probed up to 8), at most
/// DS_NCCL_TEST_RANKS.
int64_t visibleRanks() {
  int64_t count = 1;
  while (count < 8) {
    try {
      createDevice("cuda:" + std::to_string(count));
    } catch (const DeviceError &) {
      break;
    }
    ++count;
  }
  if (const char *cap = std::getenv("DS_NCCL_TEST_RANKS"))
    count = std::max<int64_t>(1, std::min<int64_t>(count, std::atoll(cap)));
  return count;
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::shared_ptr<Device> first;
  try {
    first = createDevice("cuda");
  } catch (const DeviceError &e) {
    std::string what = e.what();
    bool noDevice = what.find("no CUDA device is visible") != std::string::npos;
    std::cout << (noDevice ? "SKIPPED: " : "error: ") << what << "\n";
    return noDevice ? 77 : 1;
  }
  if (!deviceHasChannel(*first)) {
    std::cout << "error: the cuda backend has no channel, though this build "
                 "has NCCL (DS_HAVE_NCCL)\n";
    return 1;
  }
  ranksToUse = visibleRanks();
  std::cout << "NCCL channel test: " << ranksToUse << " rank(s), one per GPU\n";
  try {
    Job shared(ranksToUse, "nccl-test/main");
    std::cout << shared.rank(0).channel->describe() << "\n";
    job = &shared;
    int rc = RUN_ALL_TESTS();
    job = nullptr;
    return rc;
  } catch (const std::exception &e) {
    std::cout << "error: " << e.what() << "\n";
    return 1;
  }
}
