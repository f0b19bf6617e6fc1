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

class ThreadCommunicator final : public runtime::Communicator {
public:
  ThreadCommunicator(ThreadGroup &group, int64_t rank)
      : group_(group), rank_(rank) {}

  int64_t rank() const override { return rank_; }
  int64_t size() const override { return group_.size(); }
  const char *backendName() const override { return "threads"; }

  CommHandle allReduce(const at::Tensor &tensor, ReduceOp op) override {
    countAllReduce(tensor.numel());
    group_.collective(rank_,
                      std::string("allReduce ") + runtime::reduceOpName(op) +
                          " " + std::to_string(tensor.numel()),
                      tensor, tensor,
                      [op](const auto &inputs, const auto &outputs) {
                        at::Tensor result = reduce(inputs, op);
                        for (const at::Tensor &out : outputs)
                          out.copy_(result);
                      });
    return CommHandle();
  }
  CommHandle reduceScatter(const at::Tensor &output, const at::Tensor &input,
                           ReduceOp op) override {
    countReduceScatter(input.numel());
    group_.collective(
        rank_,
        std::string("reduceScatter ") + runtime::reduceOpName(op) + " " +
            std::to_string(input.numel()),
        input, output, [op](const auto &inputs, const auto &outputs) {
          at::Tensor result = reduce(inputs, op).view(-1);
          int64_t n = outputs[0].numel();
          for (size_t r = 0; r < outputs.size(); ++r)
            outputs[r].view(-1).copy_(result.narrow(0, int64_t(r) * n, n));
        });
    return CommHandle();
  }
  CommHandle allGather(const at::Tensor &output,
                       const at::Tensor &input) override {
    countAllGather(output.numel());
    group_.collective(rank_, "allGather " + std::to_string(input.numel()),
                      input.clone(), output,
                      [](const auto &inputs, const auto &outputs) {
                        std::vector<at::Tensor> flat;
                        for (const at::Tensor &in : inputs)
                          flat.push_back(in.reshape(-1));
                        at::Tensor all = at::cat(flat);
                        for (const at::Tensor &out : outputs)
                          out.view(-1).copy_(all);
                      });
    return CommHandle();
  }
  CommHandle broadcast(const at::Tensor &tensor, int64_t root) override {
    countBroadcast(tensor.numel());
    group_.collective(rank_,
                      "broadcast " + std::to_string(tensor.numel()) + " from " +
                          std::to_string(root),
                      tensor.clone(), tensor,
                      [root](const auto &inputs, const auto &outputs) {
                        for (const at::Tensor &out : outputs)
                          out.copy_(inputs[size_t(root)]);
                      });
    return CommHandle();
  }
  CommHandle barrier() override {
    group_.collective(rank_, "barrier", at::Tensor(), at::Tensor(),
                      [](const auto &, const auto &) {});
    return CommHandle();
  }
  [[noreturn]] void abort(int exitCode) override {
    throw std::runtime_error("abort(" + std::to_string(exitCode) + ")");
  }

private:
  ThreadGroup &group_;
  int64_t rank_;
};

} // namespace

std::shared_ptr<runtime::Communicator> ThreadGroup::member(int64_t rank) {
  return std::make_shared<ThreadCommunicator>(*this, rank);
}

void ThreadGroup::collective(
    int64_t rank, const std::string &what, at::Tensor input, at::Tensor output,
    const std::function<void(const std::vector<at::Tensor> &,
                             const std::vector<at::Tensor> &)> &combine) {
  std::unique_lock<std::mutex> lock(mutex_);
  inputs_[size_t(rank)] = std::move(input);
  outputs_[size_t(rank)] = std::move(output);
  if (rank == 0)
    log_.push_back(what);
  uint64_t generation = generation_;
  if (++arrived_ == size_) {
    combine(inputs_, outputs_);
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != generation; });
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
