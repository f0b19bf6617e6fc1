//===- CommTest.cpp - The Communicator interface on one process -----------===//
//
// The local backend's results, the argument checks every backend shares,
// the timeout setting, and the test backend (ThreadCommunicator) that
// DataParallelTest uses. The MPI backend runs on real ranks in
// MpiCommCheck (ctest: mpi-comm-check-2, -4, mpi-comm-timeout).
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "ThreadCommunicator.h"

#include "ds/Runtime/Communicator.h"

#include <ATen/ATen.h>

#include <cstdlib>

using namespace ds;
using namespace ds::runtime;

namespace {

at::Tensor values(int64_t n, double base) {
  return at::arange(n, at::kFloat) + base;
}

/// Sets an environment variable for one scope.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_.empty())
      unsetenv(name_);
    else
      setenv(name_, old_.c_str(), 1);
  }

private:
  const char *name_;
  std::string old_;
};

} // namespace

TEST(RuntimeLocalCommunicatorTest, OneRankCollectivesAreIdentitiesAndCopies) {
  std::shared_ptr<Communicator> comm = createLocalCommunicator();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_STREQ(comm->backendName(), "local");

  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
    at::Tensor tensor = values(5, 1.5);
    CommHandle handle = comm->allReduce(tensor, op);
    EXPECT_TRUE(handle.isCompleted());
    handle.wait();
    EXPECT_TRUE(tensor.equal(values(5, 1.5))) << reduceOpName(op);
  }
  at::Tensor output = at::zeros({6});
  comm->reduceScatter(output, values(6, 2.0), ReduceOp::Avg).wait();
  EXPECT_TRUE(output.equal(values(6, 2.0)));
  at::Tensor gathered = at::zeros({4}, at::kBFloat16);
  comm->allGather(gathered, values(4, 3.0).to(at::kBFloat16)).wait();
  EXPECT_TRUE(gathered.equal(values(4, 3.0).to(at::kBFloat16)));
  // In place: the input is rank 0's (the only) block of the output.
  at::Tensor flat = values(4, 7.0);
  comm->allGather(flat, flat.narrow(0, 0, 4)).wait();
  EXPECT_TRUE(flat.equal(values(4, 7.0)));
  at::Tensor broadcast = values(3, 1.0);
  comm->broadcast(broadcast, 0).wait();
  EXPECT_TRUE(broadcast.equal(values(3, 1.0)));
  comm->barrier().wait();
  EXPECT_TRUE(CommHandle().isCompleted());
}

TEST(RuntimeCommunicatorTest, BadArgumentsAreRefusedBeforeAnythingStarts) {
  std::shared_ptr<Communicator> comm = createLocalCommunicator();
  EXPECT_THROW_WITH(comm->allReduce(at::zeros({3, 4}).t(), ReduceOp::Sum),
                    CommError,
                    "allReduce: the tensor must be contiguous, got float32 "
                    "[4, 3] with strides [1, 4]");
  EXPECT_THROW_WITH(comm->allReduce(at::Tensor(), ReduceOp::Sum), CommError,
                    "allReduce: the tensor tensor is undefined");
  EXPECT_THROW_WITH(
      comm->allReduce(at::zeros({2}, at::kBool), ReduceOp::Sum), CommError,
      "allReduce: cannot reduce bool tensors (float32, float64, bfloat16, "
      "float16, int32 and int64 only");
  // 16-bit floats reduce (on one rank: an identity).
  at::Tensor half = at::full({2}, 1.5, at::kHalf);
  comm->allReduce(half, ReduceOp::Avg).wait();
  EXPECT_TRUE(half.equal(at::full({2}, 1.5, at::kHalf)));
  EXPECT_THROW_WITH(comm->allReduce(at::zeros({2}, at::kLong), ReduceOp::Avg),
                    CommError, "avg needs a floating-point tensor, got int64");
  comm->allReduce(at::zeros({2}, at::kLong), ReduceOp::Max).wait();
  EXPECT_THROW_WITH(
      comm->reduceScatter(at::zeros({2}), at::zeros({3}), ReduceOp::Sum),
      CommError,
      "reduceScatter: the input must hold size() x output elements: 3 != 1 "
      "x 2");
  EXPECT_THROW_WITH(
      comm->reduceScatter(at::zeros({2}), at::zeros({2}, at::kDouble),
                          ReduceOp::Sum),
      CommError, "input and output dtypes differ (float64 vs float32)");
  at::Tensor buffer = at::zeros({4});
  EXPECT_THROW_WITH(comm->reduceScatter(buffer, buffer, ReduceOp::Sum),
                    CommError, "reduceScatter: input and output overlap");
  EXPECT_THROW_WITH(comm->allGather(at::zeros({5}), at::zeros({4})), CommError,
                    "allGather: the output must hold size() x input elements");
  at::Tensor wide = at::zeros({8});
  EXPECT_THROW_WITH(comm->allGather(wide.narrow(0, 0, 4), wide.narrow(0, 2, 4)),
                    CommError,
                    "the input overlaps the output without being this rank's "
                    "block of it");
  EXPECT_THROW_WITH(comm->broadcast(at::zeros({2}), 1), CommError,
                    "broadcast: root 1 is not a rank (0..0)");
}

// The shared checks take any device; both buffers of a collective must be
// on one. (Meta tensors stand for a device without data: there is no GPU
// here.) Which devices a backend takes is its own check: the MPI
// backend's "must be a CPU tensor" runs in mpi-comm-check.
TEST(RuntimeCommunicatorTest, BuffersOfOneCollectiveShareADevice) {
  std::shared_ptr<Communicator> comm = createLocalCommunicator();
  at::Tensor meta = at::empty({4}, at::TensorOptions().device(at::kMeta));
  EXPECT_THROW_WITH(comm->reduceScatter(at::zeros({4}), meta, ReduceOp::Sum),
                    CommError,
                    "reduceScatter: the input is on meta, the output on cpu");
  EXPECT_THROW_WITH(comm->allGather(meta, at::zeros({4})), CommError,
                    "allGather: the input is on cpu, the output on meta");
  // Waiting for a collective on a stream: the local backend's are done.
  at::Tensor t = at::ones({3});
  CommHandle handle = comm->allReduce(t, ReduceOp::Sum);
  handle.waitOn(c10::Stream(c10::Stream::DEFAULT, c10::Device(c10::kCPU)));
  EXPECT_TRUE(handle.isCompleted());
  EXPECT_TRUE(t.equal(at::ones({3})));
}

TEST(RuntimeCommunicatorTest, TimeoutComesFromTheEnvironment) {
  {
    ScopedEnv env("DS_COMM_TIMEOUT_SECONDS", nullptr);
    CommOptions options = CommOptions::fromEnvironment();
    EXPECT_EQ(options.timeoutSeconds, 60.0);
    EXPECT_EQ(options.onTimeout, CommOptions::OnTimeout::Abort);
  }
  {
    ScopedEnv env("DS_COMM_TIMEOUT_SECONDS", "2.5");
    EXPECT_EQ(CommOptions::fromEnvironment().timeoutSeconds, 2.5);
  }
  {
    ScopedEnv env("DS_COMM_TIMEOUT_SECONDS", "0");
    EXPECT_EQ(CommOptions::fromEnvironment().timeoutSeconds, 0.0);
  }
  for (const char *bad : {"x", "-1", "5s", "nan"}) {
    ScopedEnv env("DS_COMM_TIMEOUT_SECONDS", bad);
    EXPECT_THROW_WITH(CommOptions::fromEnvironment(), CommError,
                      std::string("DS_COMM_TIMEOUT_SECONDS: '") + bad +
                          "' is not a number of seconds >= 0");
  }
}

TEST(RuntimeCommunicatorTest, MpiBackendIsBuilt) {
  // The build machines have Open MPI; a build without it would run one
  // rank only, which the multi-rank tests would not notice.
  EXPECT_TRUE(mpiCommunicatorAvailable());
}

TEST(RuntimeThreadCommunicatorTest, CollectivesOverThreeRanks) {
  test::ThreadGroup group(3);
  std::vector<at::Tensor> reduced(3), scattered(3), gathered(3), sent(3);
  group.run([&](int64_t rank) {
    std::shared_ptr<Communicator> comm = group.member(rank);
    reduced[rank] = values(4, double(rank));
    comm->allReduce(reduced[rank], ReduceOp::Avg).wait();
    scattered[rank] = at::zeros({2});
    comm->reduceScatter(scattered[rank], values(6, double(rank)), ReduceOp::Sum)
        .wait();
    gathered[rank] = at::zeros({6});
    comm->allGather(gathered[rank], values(2, 10.0 * double(rank))).wait();
    sent[rank] = values(3, double(rank));
    comm->broadcast(sent[rank], 2).wait();
  });
  for (int64_t rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(reduced[rank].equal(values(4, 1.0)));
    EXPECT_TRUE(
        scattered[rank].equal((values(6, 0.0) * 3 + 3).narrow(0, 2 * rank, 2)));
    EXPECT_TRUE(gathered[rank].equal(
        at::cat({values(2, 0.0), values(2, 10.0), values(2, 20.0)})));
    EXPECT_TRUE(sent[rank].equal(values(3, 2.0)));
  }
  EXPECT_EQ(group.log(),
            (std::vector<std::string>{"allReduce avg 4", "reduceScatter sum 6",
                                      "allGather 2", "broadcast 3 from 2"}));
}
