//===- LocalCommunicator.cpp - The one-rank backend -----------------------===//
//
// World size 1 without any library: a reduction over one rank is the
// identity (Avg divides by 1), scatter and gather copy. Arguments are checked
// exactly as the MPI backend checks them, so that a program that runs on one
// rank does not fail only when launched on several.
//
//===----------------------------------------------------------------------===//

#include "CommChecks.h"

#include <cstdlib>

namespace ds::runtime {

namespace {

class LocalCommunicator final : public Communicator {
public:
  int64_t rank() const override { return 0; }
  int64_t size() const override { return 1; }
  const char *backendName() const override { return "local"; }

  CommHandle allReduce(const at::Tensor &tensor, ReduceOp op) override {
    detail::checkReducible(detail::Collective::AllReduce, "tensor", tensor, op);
    countAllReduce(tensor.numel()); // One rank: counts 0.
    return CommHandle();
  }
  CommHandle reduceScatter(const at::Tensor &output, const at::Tensor &input,
                           ReduceOp op) override {
    detail::checkReduceScatter(output, input, 1, op);
    output.view(-1).copy_(input.view(-1));
    return CommHandle();
  }
  CommHandle allGather(const at::Tensor &output,
                       const at::Tensor &input) override {
    if (!detail::checkAllGather(output, input, 0, 1))
      output.view(-1).copy_(input.view(-1));
    return CommHandle();
  }
  CommHandle broadcast(const at::Tensor &tensor, int64_t root) override {
    detail::checkBuffer(detail::Collective::Broadcast, "tensor", tensor);
    detail::checkRoot(root, 1);
    return CommHandle();
  }
  CommHandle barrier() override { return CommHandle(); }
  [[noreturn]] void abort(int exitCode) override { std::_Exit(exitCode); }
};

} // namespace

std::shared_ptr<Communicator> createLocalCommunicator() {
  return std::make_shared<LocalCommunicator>();
}

} // namespace ds::runtime
