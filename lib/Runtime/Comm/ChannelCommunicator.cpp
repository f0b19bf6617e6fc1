//===- ChannelCommunicator.cpp - A Communicator over a device channel -----===//
//
// Threads meet here. The caller checks and counts a collective, records an
// event on its compute stream and queues the collective on its lane:
// reductions (all-reduce, reduce-scatter) on one, gathers (all-gather,
// broadcast) on another when the communicator has a second channel, each
// with its own stream and issue thread, so that ZeRO-3's parameter gathers
// do not wait behind gradient reductions (two channels, two NCCL
// communicators: each keeps its own order, and no NCCL kernel of one
// communicator waits on another stream). A lane's thread makes its stream
// wait for the caller's event, issues the collective on its channel and
// records a timing event after it (NCCL returns at once; the store channel
// returns when the data has moved); the collectives queued on a lane when
// its thread gets to them are launched as one group (ncclGroupStart/End). The watchdog polls the pending collectives: it keeps their
// tensors alive until their event completes (a buffer used on two streams
// must not be reused before both are done), notes when each completed, and
// ends a collective that outlives the timeout by aborting the channel
// (ncclCommAbort), as the MPI backend does with MPI_Abort.
//
// Completion times come from the device's timing events, placed on the
// host's clock through an anchor event recorded and synchronised when the
// communicator starts: the overlap report then measures the GPU's own
// completion, not when the watchdog happened to look.
//
//===----------------------------------------------------------------------===//

#include "CommChecks.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <list>
#include <mutex>
#include <thread>

namespace ds::runtime {

namespace {

using Clock = std::chrono::steady_clock;

ChannelOp channelOp(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return ChannelOp::Sum;
  case ReduceOp::Avg:
    return ChannelOp::Avg;
  case ReduceOp::Max:
    return ChannelOp::Max;
  }
  return ChannelOp::Sum;
}

/// Maps the device's timing events onto the host's steady clock.
struct EventClock {
  std::unique_ptr<Event> anchor;
  Clock::time_point anchorTime;
};

class ChannelWork final : public CommWork {
public:
  ChannelWork(std::string description, Device &device)
      : description_(std::move(description)),
        ready_(device.createEvent(false)), done_(device.createEvent(true)) {}

  // Filled by the caller before the work is queued.
  std::vector<at::Tensor> keep;
  /// (host tensor, its device copy): copied back by wait().
  std::vector<std::pair<at::Tensor, at::Tensor>> copyBack;
  std::function<void(const c10::Stream &)> launch;

  Event &ready() { return *ready_; }
  /// When the communication thread took it up (the timeout counts from
  /// there: a collective queued behind a slow one is not late); nullopt
  /// before.
  std::optional<Clock::time_point> issuedAt() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return issuedAt_;
  }

  // On the lane's thread, in three steps so that several works can be
  // launched in one group: begin (false: failed before its turn, an
  // aborted channel; it is done), launch (the error, or empty), finish.
  bool begin(std::shared_ptr<EventClock> clock) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_.empty()) {
      issued_ = true;
      changed_.notify_all();
      return false;
    }
    issuedAt_ = Clock::now();
    clock_ = std::move(clock);
    return true;
  }

  std::string launchOn(const c10::Stream &stream) {
    try {
      ready_->block(stream);
      launch(stream);
      return "";
    } catch (const c10::Error &e) {
      return e.what_without_backtrace();
    } catch (const std::exception &e) {
      return e.what();
    }
  }

  void finish(const c10::Stream &stream, std::string error) {
    if (error.empty()) {
      try {
        done_->record(stream);
      } catch (const std::exception &e) {
        error = e.what();
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    issued_ = true;
    if (error_.empty())
      error_ = error;
    changed_.notify_all();
  }

  /// On the watchdog: the collective failed or timed out.
  void fail(const std::string &message, bool timedOut) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_.empty()) {
      error_ = message;
      timedOut_ = timedOut;
    }
    changed_.notify_all();
  }

  /// Issued and finished (or failed); the watchdog's view.
  bool finished() {
    std::lock_guard<std::mutex> lock(mutex_);
    return !error_.empty() || (issued_ && done_->query());
  }

  /// The caller's view: host tensors hold the result once this says so.
  bool isCompleted() override {
    if (!finished())
      return false;
    if (!failed())
      copyBackToHost();
    return true;
  }
  bool failed() {
    std::lock_guard<std::mutex> lock(mutex_);
    return !error_.empty();
  }

  void wait() override {
    waitIssued();
    rethrow();
    done_->synchronize();
    rethrow(); // The watchdog may have failed it meanwhile.
    copyBackToHost();
  }

  void waitOn(const c10::Stream &stream) override {
    if (!copyBack.empty())
      return wait(); // The caller reads host memory.
    waitIssued();
    rethrow();
    done_->block(stream);
  }

  std::string describe() const override { return description_; }

  std::optional<Clock::time_point> completedAt() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!issued_ || !error_.empty() || !done_->query())
      return std::nullopt;
    double seconds = clock_->anchor->secondsUntil(*done_);
    return clock_->anchorTime +
           std::chrono::duration_cast<Clock::duration>(
               std::chrono::duration<double>(seconds));
  }

private:
  void copyBackToHost() {
    std::lock_guard<std::mutex> lock(copyMutex_);
    for (auto &[host, onDevice] : copyBack)
      host.copy_(onDevice);
    copyBack.clear();
  }
  /// Until the communication thread is done with it: afterwards it no
  /// longer touches the events.
  void waitIssued() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return issued_; });
  }
  void rethrow() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_.empty())
      return;
    if (timedOut_)
      throw CommTimeoutError(error_);
    throw CommError(description_ + ": " + error_);
  }

  std::string description_;
  std::unique_ptr<Event> ready_;
  std::unique_ptr<Event> done_;
  std::shared_ptr<EventClock> clock_;
  std::optional<Clock::time_point> issuedAt_;
  mutable std::mutex mutex_;
  std::mutex copyMutex_;
  std::condition_variable changed_;
  bool issued_ = false;
  std::string error_;
  bool timedOut_ = false;
};

/// A channel, the stream it works on, the collectives waiting for it and the
/// thread that issues them in order.
struct Lane {
  std::unique_ptr<Channel> channel;
  StreamRole role;
  std::deque<std::shared_ptr<ChannelWork>> queue;
  std::thread issuer;
};

class ChannelCommunicator final : public Communicator {
public:
  ChannelCommunicator(std::unique_ptr<Channel> channel,
                      std::unique_ptr<Channel> gatherChannel,
                      std::shared_ptr<Device> device, std::string name,
                      const CommOptions &options)
      : device_(std::move(device)), name_(std::move(name)), options_(options),
        clock_(newClock()) {
    lanes_.push_back(std::make_unique<Lane>());
    lanes_.back()->channel = std::move(channel);
    lanes_.back()->role = StreamRole::Communication;
    if (gatherChannel) {
      lanes_.push_back(std::make_unique<Lane>());
      lanes_.back()->channel = std::move(gatherChannel);
      lanes_.back()->role = StreamRole::Gather;
    }
    for (auto &lane : lanes_)
      lane->issuer = std::thread([this, l = lane.get()] { issueLoop(*l); });
    watchdog_ = std::thread([this] { watchLoop(); });
  }

  ~ChannelCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      changed_.notify_all();
    }
    for (auto &lane : lanes_)
      lane->issuer.join(); // Issues what was queued first.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      watchdogStopping_ = true;
      changed_.notify_all();
    }
    watchdog_.join();
  }

  int64_t rank() const override { return reductions().channel->rank(); }
  int64_t size() const override { return reductions().channel->size(); }
  const char *backendName() const override { return name_.c_str(); }

  CommHandle allReduce(const at::Tensor &tensor, ReduceOp op) override {
    detail::checkReducible(detail::Collective::AllReduce, "tensor", tensor, op);
    checkPlace(detail::Collective::AllReduce, "tensor", tensor);
    countAllReduce(tensor.numel());
    auto work = newWork(detail::Collective::AllReduce, tensor,
                        reduceOpName(op));
    at::Tensor buffer = onDevice(*work, tensor, true);
    ChannelOp reduce = channelOp(op);
    Channel *channel = reductions().channel.get();
    work->launch = [channel, buffer, reduce](const c10::Stream &stream) {
      channel->allReduce(buffer, reduce, stream);
    };
    return start(std::move(work), reductions());
  }

  CommHandle reduceScatter(const at::Tensor &output, const at::Tensor &input,
                           ReduceOp op) override {
    detail::checkReduceScatter(output, input, size(), op);
    checkPlace(detail::Collective::ReduceScatter, "input", input);
    countReduceScatter(input.numel());
    auto work = newWork(detail::Collective::ReduceScatter, input,
                        reduceOpName(op));
    at::Tensor in = onDevice(*work, input, false);
    at::Tensor out = onDevice(*work, output, false, /*empty=*/true);
    ChannelOp reduce = channelOp(op);
    Channel *channel = reductions().channel.get();
    work->launch = [channel, out, in, reduce](const c10::Stream &stream) {
      channel->reduceScatter(out, in, reduce, stream);
    };
    return start(std::move(work), reductions());
  }

  CommHandle allGather(const at::Tensor &output,
                       const at::Tensor &input) override {
    bool inPlace = detail::checkAllGather(output, input, rank(), size());
    checkPlace(detail::Collective::AllGather, "input", input);
    countAllGather(output.numel());
    auto work = newWork(detail::Collective::AllGather, output, nullptr);
    at::Tensor out = onDevice(*work, output, inPlace, /*empty=*/!inPlace);
    at::Tensor in = inPlace ? out.view({-1}).narrow(0, rank() * input.numel(),
                                                    input.numel())
                            : onDevice(*work, input, false);
    Channel *channel = gathers().channel.get();
    work->launch = [channel, out, in](const c10::Stream &stream) {
      channel->allGather(out, in, stream);
    };
    return start(std::move(work), gathers());
  }

  CommHandle broadcast(const at::Tensor &tensor, int64_t root) override {
    detail::checkBuffer(detail::Collective::Broadcast, "tensor", tensor);
    detail::checkRoot(root, size());
    checkPlace(detail::Collective::Broadcast, "tensor", tensor);
    countBroadcast(tensor.numel());
    auto work = newWork(detail::Collective::Broadcast, tensor, nullptr);
    at::Tensor buffer = onDevice(*work, tensor, true);
    Channel *channel = gathers().channel.get();
    work->launch = [channel, buffer, root](const c10::Stream &stream) {
      channel->broadcast(buffer, root, stream);
    };
    return start(std::move(work), gathers());
  }

  CommHandle barrier() override {
    at::Tensor token = at::zeros({1}, device_->options(at::kFloat));
    auto work = newWork(detail::Collective::Barrier, at::Tensor(), nullptr);
    work->keep.push_back(token);
    Channel *channel = reductions().channel.get();
    work->launch = [channel, token](const c10::Stream &stream) {
      channel->allReduce(token, ChannelOp::Sum, stream);
    };
    return start(std::move(work), reductions());
  }

  [[noreturn]] void abort(int exitCode) override {
    abortChannels();
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(exitCode);
  }

private:
  Lane &reductions() const { return *lanes_.front(); }
  Lane &gathers() const { return *lanes_.back(); }

  void abortChannels() {
    for (auto &lane : lanes_)
      lane->channel->abort();
  }

  /// On the channel's device, or on the CPU (staged through the device).
  void checkPlace(detail::Collective kind, const char *role,
                  const at::Tensor &tensor) {
    if (device_->device().is_cpu())
      return detail::checkOnHost(kind, role, tensor);
    if (!tensor.device().is_cpu() && tensor.device() != device_->device())
      throw CommError(std::string(detail::collectiveName(kind)) + ": the " +
                      role + " is on " + tensor.device().str() + "; the " +
                      name_ + " channel takes " + device_->device().str() +
                      " or CPU tensors");
  }

  std::shared_ptr<ChannelWork> newWork(detail::Collective kind,
                                       const at::Tensor &tensor,
                                       const char *op) {
    return std::make_shared<ChannelWork>(
        detail::describeCollective(kind, count_++, tensor, op), *device_);
  }

  /// A fresh anchor: an event on the communication stream, synchronised,
  /// and the host time then. Renewed every minute while idle, since the
  /// GPU's clock drifts from the host's and elapsed times are floats.
  std::shared_ptr<EventClock> newClock() {
    auto clock = std::make_shared<EventClock>();
    clock->anchor = device_->createEvent(true);
    clock->anchor->record(device_->stream(StreamRole::Communication));
    clock->anchor->synchronize();
    clock->anchorTime = Clock::now();
    return clock;
  }

  /// `tensor` where the channel works: itself when it is on the device,
  /// else a device copy, uninitialised when `empty` (an output), which the
  /// collective's completion copies back when `copyBack` or `empty`.
  at::Tensor onDevice(ChannelWork &work, const at::Tensor &tensor,
                      bool copyBack, bool empty = false) {
    at::Tensor buffer = tensor;
    if (tensor.device() != device_->device()) {
      buffer = empty ? at::empty_like(tensor, device_->options(
                                                  tensor.scalar_type()))
                     : tensor.to(device_->device());
      if (copyBack || empty)
        work.copyBack.emplace_back(tensor, buffer);
    }
    work.keep.push_back(buffer);
    return buffer;
  }

  CommHandle start(std::shared_ptr<ChannelWork> work, Lane &lane) {
    // After the work queued so far on the caller's stream: what produced
    // the input (and a host tensor's copy to the device).
    work->ready().record(device_->stream(StreamRole::Compute));
    std::lock_guard<std::mutex> lock(mutex_);
    lane.queue.push_back(work);
    pending_.push_back(work);
    changed_.notify_all();
    return CommHandle(std::move(work));
  }

  /// Issues the lane's collectives in order; what is queued when the lane
  /// gets to it is launched as one group.
  void issueLoop(Lane &lane) {
    c10::DeviceGuard guard(device_->device());
    c10::Stream stream = device_->stream(lane.role);
    while (true) {
      std::vector<std::shared_ptr<ChannelWork>> batch;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || !lane.queue.empty(); });
        if (lane.queue.empty())
          return;
        batch.assign(lane.queue.begin(), lane.queue.end());
        lane.queue.clear();
      }
      std::shared_ptr<EventClock> clock;
      {
        std::lock_guard<std::mutex> lock(clockMutex_);
        clock = clock_;
      }
      std::vector<ChannelWork *> live;
      for (const auto &work : batch)
        if (work->begin(clock))
          live.push_back(work.get());
      issueGroup(*lane.channel, stream, live);
    }
  }

  static void issueGroup(Channel &channel, const c10::Stream &stream,
                         const std::vector<ChannelWork *> &works) {
    bool grouped = works.size() > 1;
    std::string groupError;
    auto call = [&](void (Channel::*member)(), const char *what) {
      try {
        (channel.*member)();
      } catch (const std::exception &e) {
        if (groupError.empty())
          groupError = std::string(what) + ": " + e.what();
      }
    };
    if (grouped)
      call(&Channel::groupStart, "groupStart");
    std::vector<std::string> errors;
    for (ChannelWork *work : works)
      errors.push_back(groupError.empty() ? work->launchOn(stream)
                                          : groupError);
    if (grouped)
      call(&Channel::groupEnd, "groupEnd");
    for (size_t i = 0; i < works.size(); ++i)
      works[i]->finish(stream, errors[i].empty() ? groupError : errors[i]);
  }

  void watchLoop() {
    c10::DeviceGuard guard(device_->device());
    std::unique_lock<std::mutex> lock(mutex_);
    Clock::time_point idleSince = Clock::now();
    while (!(watchdogStopping_ && pending_.empty())) {
      changed_.wait_for(lock, std::chrono::milliseconds(10));
      if (aborted_ && (watchdogStopping_ || pending_.empty()))
        return;
      std::list<std::shared_ptr<ChannelWork>> pending = pending_;
      lock.unlock();
      if (pending.empty() && !aborted_ &&
          Clock::now() - idleSince > std::chrono::seconds(60)) {
        std::shared_ptr<EventClock> fresh = newClock();
        std::lock_guard<std::mutex> clockLock(clockMutex_);
        clock_ = std::move(fresh);
        idleSince = Clock::now();
      } else if (!pending.empty()) {
        idleSince = Clock::now();
      }
      std::string asyncError;
      for (auto &lane : lanes_)
        if (asyncError.empty() && !aborted_)
          asyncError = lane->channel->asyncError();
      for (const auto &work : pending) {
        if (aborted_) {
          work->fail("the " + name_ + " channel was aborted", false);
        } else {
          bool finished = false;
          try {
            finished = work->finished();
          } catch (const std::exception &error) { // A device error.
            end(*work, std::string("failed: ") + error.what(), false);
            continue;
          }
          std::optional<Clock::time_point> issued = work->issuedAt();
          if (!finished && !asyncError.empty()) {
            end(*work, "failed: " + asyncError, false);
            continue;
          }
          if (!finished && issued && options_.timeoutSeconds > 0 &&
              Clock::now() - *issued >
                  std::chrono::duration<double>(options_.timeoutSeconds)) {
            end(*work,
                detail::timeoutMessage(rank(), work->describe(),
                                       options_.timeoutSeconds),
                true);
            continue;
          }
          if (!finished)
            continue;
        }
        lock.lock();
        pending_.remove(work);
        lock.unlock();
      }
      lock.lock();
    }
  }

  /// A collective that cannot finish: the job ends, or (OnTimeout::Throw)
  /// the collective fails and the channel is aborted.
  void end(ChannelWork &work, const std::string &message, bool timedOut) {
    std::string text =
        timedOut ? message
                 : "rank " + std::to_string(rank()) + ": collective " +
                       work.describe() + " " + message;
    if (options_.onTimeout == CommOptions::OnTimeout::Throw) {
      // The collectives issued after it cannot complete either: the next
      // round of the watchdog fails every pending one.
      work.fail(text, timedOut);
      aborted_ = true;
      abortChannels();
      return;
    }
    aborted_ = true;
    std::fprintf(stderr, "%s%s; aborted the %s channel\n",
                 options_.messagePrefix.c_str(), text.c_str(), name_.c_str());
    abort(1);
  }

  std::shared_ptr<Device> device_;
  std::string name_;
  CommOptions options_;
  std::mutex clockMutex_;
  std::shared_ptr<EventClock> clock_;
  std::atomic<uint64_t> count_{0};

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::list<std::shared_ptr<ChannelWork>> pending_;
  bool stopping_ = false;
  bool watchdogStopping_ = false;
  std::atomic<bool> aborted_{false};
  std::thread watchdog_;
};

} // namespace

std::shared_ptr<Communicator>
createChannelCommunicator(std::unique_ptr<Channel> channel,
                          std::unique_ptr<Channel> gatherChannel,
                          std::shared_ptr<Device> device, std::string name,
                          const CommOptions &options) {
  return std::make_shared<ChannelCommunicator>(
      std::move(channel), std::move(gatherChannel), std::move(device),
      std::move(name), options);
}

} // namespace ds::runtime
