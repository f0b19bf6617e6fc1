//===- CommRendezvous.cpp - Ranks meeting through a communicator ----------===//
//
// Under mpirun the ranks have MPI before anything else: a device channel's
// id (NCCL's) is broadcast through it, its length first.
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/Launch.h"

#include <ATen/ATen.h>

#include <cstring>

namespace ds::runtime {

namespace {

class CommRendezvous final : public Rendezvous {
public:
  CommRendezvous(std::shared_ptr<Communicator> comm, const LaunchInfo &launch)
      : comm_(std::move(comm)), launch_(launch) {}

  int64_t rank() const override { return comm_->rank(); }
  int64_t size() const override { return comm_->size(); }
  int64_t localRank() const override { return launch_.localRank; }
  int64_t localSize() const override { return launch_.localSize; }
  std::string describe() const override {
    return launch_.describe() + " (" + comm_->backendName() + ")";
  }

  std::vector<uint8_t> broadcast(const std::string &,
                                 const std::vector<uint8_t> &bytes) override {
    at::Tensor length = at::tensor({int64_t(bytes.size())}, at::kLong);
    comm_->broadcast(length, 0).wait();
    at::Tensor data = at::empty({length.item<int64_t>()}, at::kByte);
    if (comm_->rank() == 0 && !bytes.empty())
      std::memcpy(data.data_ptr(), bytes.data(), bytes.size());
    comm_->broadcast(data, 0).wait();
    const auto *begin = static_cast<const uint8_t *>(data.data_ptr());
    return std::vector<uint8_t>(begin, begin + data.numel());
  }

private:
  std::shared_ptr<Communicator> comm_;
  LaunchInfo launch_;
};

} // namespace

std::unique_ptr<Rendezvous>
createCommRendezvous(std::shared_ptr<Communicator> communicator,
                     const LaunchInfo &launch) {
  return std::make_unique<CommRendezvous>(std::move(communicator), launch);
}

} // namespace ds::runtime
