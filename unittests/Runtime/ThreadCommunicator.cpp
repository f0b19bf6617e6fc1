//===- ThreadCommunicator.cpp - W ranks as threads of one test ------------===//

#include "ThreadCommunicator.h"

#include <ATen/ATen.h>

#include <exception>
#include <stdexcept>
#include <thread>

namespace ds::test {

using runtime::CommHandle;
using runtime::ReduceOp;

namespace {

/// Ranks added in rank order: the same bits on every rank.
at::Tensor reduce(const std::vector<at::Tensor> &parts, ReduceOp op) {
  at::Tensor result = parts[0].clone();
  for (size_t r = 1; r < parts.size(); ++r) {
    if (op == ReduceOp::Max)
      result = at::maximum(result, parts[r]);
    else
      result.add_(parts[r]);
  }
  if (op == ReduceOp::Avg)
    result.div_(double(parts.size()));
  return result;
}

/// A handle on a slot of an asynchronous group.
class ThreadWork final : public runtime::CommWork {
public:
  ThreadWork(ThreadGroup &group, std::shared_ptr<ThreadGroup::Slot> slot,
             std::string what)
      : group_(group), slot_(std::move(slot)), what_(std::move(what)) {}
  bool isCompleted() override { return group_.isCompleted(*slot_); }
  void wait() override { group_.wait(*slot_); }
  std::string describe() const override { return what_; }
  std::optional<std::chrono::steady_clock::time_point>
  completedAt() const override {
    return group_.completedAt(*slot_);
  }

private:
  ThreadGroup &group_;
  std::shared_ptr<ThreadGroup::Slot> slot_;
  std::string what_;
};

class ThreadCommunicator final : public runtime::Communicator {
public:
  ThreadCommunicator(ThreadGroup &group, int64_t rank)
      : group_(group), rank_(rank) {}

  int64_t rank() const override { return rank_; }
  int64_t size() const override { return group_.size(); }
  const char *backendName() const override { return "threads"; }

  CommHandle allReduce(const at::Tensor &tensor, ReduceOp op) override {
    countAllReduce(tensor.numel());
    return start(std::string("allReduce ") + runtime::reduceOpName(op) + " " +
                     std::to_string(tensor.numel()),
                 tensor, tensor, [op](const auto &inputs, const auto &outputs) {
                   at::Tensor result = reduce(inputs, op);
                   for (const at::Tensor &out : outputs)
                     out.copy_(result);
                 });
  }
  CommHandle reduceScatter(const at::Tensor &output, const at::Tensor &input,
                           ReduceOp op) override {
    countReduceScatter(input.numel());
    return start(std::string("reduceScatter ") + runtime::reduceOpName(op) +
                     " " + std::to_string(input.numel()),
                 input, output, [op](const auto &inputs, const auto &outputs) {
                   at::Tensor result = reduce(inputs, op).view(-1);
                   int64_t n = outputs[0].numel();
                   for (size_t r = 0; r < outputs.size(); ++r)
                     outputs[r].view(-1).copy_(
                         result.narrow(0, int64_t(r) * n, n));
                 });
  }
  CommHandle allGather(const at::Tensor &output,
                       const at::Tensor &input) override {
    countAllGather(output.numel());
    return start("allGather " + std::to_string(input.numel()), input.clone(),
                 output, [](const auto &inputs, const auto &outputs) {
                   std::vector<at::Tensor> flat;
                   for (const at::Tensor &in : inputs)
                     flat.push_back(in.reshape(-1));
                   at::Tensor all = at::cat(flat);
                   for (const at::Tensor &out : outputs)
                     out.view(-1).copy_(all);
                 });
  }
  CommHandle broadcast(const at::Tensor &tensor, int64_t root) override {
    countBroadcast(tensor.numel());
    return start("broadcast " + std::to_string(tensor.numel()) + " from " +
                     std::to_string(root),
                 tensor.clone(), tensor,
                 [root](const auto &inputs, const auto &outputs) {
                   for (const at::Tensor &out : outputs)
                     out.copy_(inputs[size_t(root)]);
                 });
  }
  CommHandle barrier() override {
    return start("barrier", at::Tensor(), at::Tensor(),
                 [](const auto &, const auto &) {});
  }
  [[noreturn]] void abort(int exitCode) override {
    throw std::runtime_error("abort(" + std::to_string(exitCode) + ")");
  }

private:
  CommHandle start(const std::string &what, at::Tensor input, at::Tensor output,
                   const ThreadGroup::Combine &combine) {
    std::shared_ptr<ThreadGroup::Slot> slot = group_.collective(
        rank_, what, std::move(input), std::move(output), combine);
    if (!group_.async())
      return CommHandle(); // Complete.
    return CommHandle(std::make_shared<ThreadWork>(group_, std::move(slot),
                                                   what + " (threads)"));
  }

  ThreadGroup &group_;
  int64_t rank_;
};

} // namespace

std::shared_ptr<runtime::Communicator> ThreadGroup::member(int64_t rank) {
  return std::make_shared<ThreadCommunicator>(*this, rank);
}

std::shared_ptr<ThreadGroup::Slot>
ThreadGroup::collective(int64_t rank, const std::string &what, at::Tensor input,
                        at::Tensor output, const Combine &combine) {
  std::unique_lock<std::mutex> lock(mutex_);
  uint64_t sequence = next_[size_t(rank)]++;
  std::shared_ptr<Slot> &open = open_[sequence];
  if (!open) {
    open = std::make_shared<Slot>();
    open->inputs.resize(size_t(size_));
    open->outputs.resize(size_t(size_));
  }
  std::shared_ptr<Slot> slot = open;
  slot->inputs[size_t(rank)] = std::move(input);
  slot->outputs[size_t(rank)] = std::move(output);
  if (rank == 0)
    log_.push_back(what);
  if (++slot->arrived == size_) {
    combine(slot->inputs, slot->outputs);
    slot->inputs.clear();
    slot->outputs.clear();
    slot->done = true;
    slot->completedAt = std::chrono::steady_clock::now();
    open_.erase(sequence);
    cv_.notify_all();
    return slot;
  }
  if (!async_)
    cv_.wait(lock, [&] { return slot->done; });
  return slot;
}

void ThreadGroup::wait(const Slot &slot) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!cv_.wait_for(lock, std::chrono::seconds(120), [&] { return slot.done; }))
    throw runtime::CommTimeoutError(
        "ThreadGroup: a collective did not complete within 120 s (a rank "
        "failed or runs different collectives)");
}

bool ThreadGroup::isCompleted(const Slot &slot) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return slot.done;
}

std::optional<std::chrono::steady_clock::time_point>
ThreadGroup::completedAt(const Slot &slot) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!slot.done)
    return std::nullopt;
  return slot.completedAt;
}

void ThreadGroup::run(const std::function<void(int64_t rank)> &body) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size_));
  std::vector<std::thread> threads;
  for (int64_t rank = 0; rank < size_; ++rank)
    threads.emplace_back([&, rank] {
      try {
        body(rank);
      } catch (...) {
        errors[size_t(rank)] = std::current_exception();
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  for (std::exception_ptr &error : errors)
    if (error)
      std::rethrow_exception(error);
}

std::vector<std::string> ThreadGroup::log() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return log_;
}

} // namespace ds::test
