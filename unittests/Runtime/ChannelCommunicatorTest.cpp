//===- ChannelCommunicatorTest.cpp - Lanes, groups and aborts -------------===//
//
// The channel communicator's own logic, over a one-rank channel that logs its
// calls and can hold a collective until released: what is queued behind a
// busy collective is launched as one group, gathers do not wait behind
// reductions (their own lane), and a timeout in Throw mode fails every
// pending collective and aborts the channels. The collectives themselves
// are checked against real ranks by store-comm-check (MpiCommCheck --store)
// and, on GPUs, nccl-channel-cuda.
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/Communicator.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace ds::runtime;

namespace {

/// The calls every channel of a test made, in order.
struct CallLog {
  std::mutex mutex;
  std::vector<std::string> calls;
  void add(const std::string &call) {
    std::lock_guard<std::mutex> lock(mutex);
    calls.push_back(call);
  }
  std::vector<std::string> snapshot() {
    std::lock_guard<std::mutex> lock(mutex);
    return calls;
  }
  /// Waits (at most 10 s) until `count` calls are logged.
  bool waitFor(size_t count) {
    for (int i = 0; i < 10000; ++i) {
      if (snapshot().size() >= count)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }
};

/// One rank: reductions are identities, gathers copy. With holdNext(), the
/// next collective waits until release() or abort() (at most 10 s).
class LoggingChannel final : public Channel {
public:
  LoggingChannel(std::string name, CallLog &log) : name_(name), log_(log) {}

  int64_t rank() const override { return 0; }
  int64_t size() const override { return 1; }
  std::string describe() const override { return name_; }

  void allReduce(const at::Tensor &, ChannelOp, const c10::Stream &) override {
    enter("allReduce");
  }
  void reduceScatter(const at::Tensor &output, const at::Tensor &input,
                     ChannelOp, const c10::Stream &) override {
    enter("reduceScatter");
    output.view({-1}).copy_(input.view({-1}));
  }
  void allGather(const at::Tensor &output, const at::Tensor &input,
                 const c10::Stream &) override {
    enter("allGather");
    if (output.data_ptr() != input.data_ptr())
      output.view({-1}).copy_(input.view({-1}));
  }
  void broadcast(const at::Tensor &, int64_t, const c10::Stream &) override {
    enter("broadcast");
  }
  void groupStart() override { log_.add(name_ + ":groupStart"); }
  void groupEnd() override { log_.add(name_ + ":groupEnd"); }
  std::string asyncError() override { return ""; }
  void abort() override {
    log_.add(name_ + ":abort");
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    changed_.notify_all();
  }

  void holdNext() {
    std::lock_guard<std::mutex> lock(mutex_);
    hold_ = true;
    released_ = false;
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }

private:
  void enter(const char *call) {
    log_.add(name_ + ":" + call);
    std::unique_lock<std::mutex> lock(mutex_);
    bool held = hold_;
    hold_ = false;
    if (held)
      changed_.wait_for(lock, std::chrono::seconds(10),
                        [&] { return released_ || aborted_; });
    if (aborted_)
      throw std::runtime_error(name_ + ": aborted");
  }

  std::string name_;
  CallLog &log_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool hold_ = false;
  bool released_ = false;
  bool aborted_ = false;
};

CommOptions throwAfter(double seconds) {
  CommOptions options;
  options.timeoutSeconds = seconds;
  options.onTimeout = CommOptions::OnTimeout::Throw;
  return options;
}

TEST(RuntimeChannelCommunicatorTest, GroupsWhatIsQueuedBehindABusyCollective) {
  CallLog log;
  auto channel = std::make_unique<LoggingChannel>("r", log);
  LoggingChannel *reductions = channel.get();
  reductions->holdNext();
  auto comm = createChannelCommunicator(std::move(channel), nullptr,
                                        cpuDevice(), "test", throwAfter(30));
  std::vector<at::Tensor> tensors;
  for (int i = 0; i < 4; ++i)
    tensors.push_back(at::full({4}, double(i)));
  std::vector<CommHandle> handles;
  handles.push_back(comm->allReduce(tensors[0], ReduceOp::Sum));
  ASSERT_TRUE(log.waitFor(1)); // The first is on the channel, held.
  for (int i = 1; i < 4; ++i)
    handles.push_back(comm->allReduce(tensors[i], ReduceOp::Sum));
  reductions->release();
  waitAll(handles);
  EXPECT_EQ(log.snapshot(),
            (std::vector<std::string>{"r:allReduce", "r:groupStart",
                                      "r:allReduce", "r:allReduce",
                                      "r:allReduce", "r:groupEnd"}));
  for (int i = 0; i < 4; ++i)
    EXPECT_TRUE(tensors[i].eq(double(i)).all().item<bool>());
}

TEST(RuntimeChannelCommunicatorTest, GathersDoNotWaitBehindReductions) {
  CallLog log;
  auto reduce = std::make_unique<LoggingChannel>("r", log);
  auto gather = std::make_unique<LoggingChannel>("g", log);
  LoggingChannel *reductions = reduce.get();
  reductions->holdNext();
  auto comm = createChannelCommunicator(std::move(reduce), std::move(gather),
                                        cpuDevice(), "test", throwAfter(30));
  at::Tensor gradients = at::ones({8});
  CommHandle reduction = comm->reduceScatter(at::empty({8}), gradients,
                                             ReduceOp::Avg);
  ASSERT_TRUE(log.waitFor(1));
  at::Tensor gathered = at::zeros({6});
  comm->allGather(gathered, at::arange(6, at::kFloat)).wait();
  comm->broadcast(gathered, 0).wait();
  EXPECT_TRUE(gathered.equal(at::arange(6, at::kFloat)));
  EXPECT_FALSE(reduction.isCompleted()); // Still held on its own lane.
  reductions->release();
  reduction.wait();
  EXPECT_EQ(log.snapshot(),
            (std::vector<std::string>{"r:reduceScatter", "g:allGather",
                                      "g:broadcast"}));
}

TEST(RuntimeChannelCommunicatorTest, ATimeoutFailsEveryPendingCollective) {
  noteTrainingStep(7);
  CallLog log;
  auto channel = std::make_unique<LoggingChannel>("r", log);
  channel->holdNext(); // Until the abort.
  auto comm = createChannelCommunicator(std::move(channel), nullptr,
                                        cpuDevice(), "test", throwAfter(0.3));
  CommHandle late = comm->allReduce(at::ones({4}), ReduceOp::Sum);
  ASSERT_TRUE(log.waitFor(1));
  CommHandle queued = comm->allReduce(at::ones({4}), ReduceOp::Sum);
  try {
    late.wait();
    ADD_FAILURE() << "expected a CommTimeoutError";
  } catch (const CommTimeoutError &error) {
    EXPECT_NE(std::string(error.what())
                  .find("rank 0: collective allReduce #0 (sum, 4 x float32) "
                        "in training step 7 timed out after 0.3 s"),
              std::string::npos)
        << error.what();
  }
  try {
    queued.wait();
    ADD_FAILURE() << "expected a CommError";
  } catch (const CommTimeoutError &error) {
    ADD_FAILURE() << "the queued collective did not time out: "
                  << error.what();
  } catch (const CommError &error) {
    EXPECT_NE(std::string(error.what()).find("allReduce #1"),
              std::string::npos)
        << error.what();
  }
  std::vector<std::string> calls = log.snapshot();
  EXPECT_NE(std::find(calls.begin(), calls.end(), "r:abort"), calls.end());
  noteTrainingStep(0);
}

} // namespace
