//===- StoreChannel.cpp - Collectives through a c10d store (CPU) ----------===//
//
// Every collective is a numbered round of keys under the channel's prefix:
// rank r posts what others need ("<round>/<r>", or one key per destination
// block for a reduce-scatter), reads what it needs, and the reads are
// counted so that the last reader deletes the round's keys. Reductions add
// the ranks' contributions in rank order on every rank (16-bit floats
// rounded after each addition, Avg divided at the end), so every rank gets
// the same bits, and the same bits as the MPI backend.
//
//===----------------------------------------------------------------------===//

#include "StoreRendezvous.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

namespace ds::runtime {

namespace {

constexpr size_t kChunkBytes = size_t(4) << 20;

size_t chunksOf(size_t bytes) {
  return std::max<size_t>(1, (bytes + kChunkBytes - 1) / kChunkBytes);
}

void accumulate(at::Tensor &sum, const at::Tensor &next, ChannelOp op) {
  if (op == ChannelOp::Max)
    at::maximum_out(sum, sum, next);
  else
    sum.add_(next);
}

class StoreChannel final : public Channel {
public:
  StoreChannel(detail::StoreRendezvous &rendezvous, std::string prefix)
      : storeRef_(rendezvous.store()), store_(*storeRef_), rank_(rendezvous.rank()),
        size_(rendezvous.size()), prefix_(std::move(prefix)) {}

  int64_t rank() const override { return rank_; }
  int64_t size() const override { return size_; }
  std::string describe() const override {
    return "store (rank " + std::to_string(rank_) + " of " +
           std::to_string(size_) + ")";
  }

  void allReduce(const at::Tensor &tensor, ChannelOp op,
                 const c10::Stream &) override {
    std::string round = nextRound();
    post(round + std::to_string(rank_), tensor);
    at::Tensor sum = fetch(round + "0", tensor);
    for (int64_t r = 1; r < size_; ++r)
      accumulate(sum, fetch(round + std::to_string(r), tensor), op);
    finish(sum, op);
    tensor.copy_(sum);
    release(round, size_, tensor.nbytes());
  }

  void reduceScatter(const at::Tensor &output, const at::Tensor &input,
                     ChannelOp op, const c10::Stream &) override {
    std::string round = nextRound();
    int64_t n = output.numel();
    at::Tensor flat = input.view({-1});
    for (int64_t r = 0; r < size_; ++r)
      if (r != rank_)
        post(blockKey(round, rank_, r), flat.narrow(0, r * n, n));
    at::Tensor mine = flat.narrow(0, rank_ * n, n);
    at::Tensor like = output.view({-1});
    at::Tensor sum = rank_ == 0 ? mine.clone() : fetchBlock(round, 0, like);
    for (int64_t r = 1; r < size_; ++r)
      accumulate(sum, r == rank_ ? mine : fetchBlock(round, r, like), op);
    finish(sum, op);
    output.view({-1}).copy_(sum);
  }

  void allGather(const at::Tensor &output, const at::Tensor &input,
                 const c10::Stream &) override {
    std::string round = nextRound();
    int64_t n = input.numel();
    at::Tensor mine = input.view({-1}).clone(); // input may be in output
    post(round + std::to_string(rank_), mine);
    at::Tensor flat = output.view({-1});
    for (int64_t r = 0; r < size_; ++r)
      flat.narrow(0, r * n, n)
          .copy_(r == rank_ ? mine : fetch(round + std::to_string(r), mine));
    release(round, size_, mine.nbytes());
  }

  void broadcast(const at::Tensor &tensor, int64_t root,
                 const c10::Stream &) override {
    std::string round = nextRound();
    std::string key = round + std::to_string(root);
    if (rank_ == root)
      post(key, tensor);
    else
      tensor.copy_(fetch(key, tensor));
    release(round, size_, tensor.nbytes());
  }

  std::string asyncError() override { return ""; }
  void abort() override { aborted_ = true; }

private:
  std::string nextRound() {
    return prefix_ + std::to_string(round_++) + "/";
  }
  static std::string blockKey(const std::string &round, int64_t from,
                              int64_t to) {
    return round + std::to_string(from) + "to" + std::to_string(to);
  }

  /// Sets `key` to `tensor`'s bytes: the chunks, then the count.
  void post(const std::string &key, const at::Tensor &tensor) {
    const auto *data = static_cast<const uint8_t *>(tensor.data_ptr());
    size_t bytes = tensor.nbytes(), chunks = chunksOf(bytes);
    for (size_t c = 0; c < chunks; ++c) {
      size_t begin = c * kChunkBytes, end = std::min(bytes, begin + kChunkBytes);
      store_.set(key + "." + std::to_string(c),
                 std::vector<uint8_t>(data + begin, data + end));
    }
    std::string count = std::to_string(chunks);
    store_.set(key, std::vector<uint8_t>(count.begin(), count.end()));
  }

  /// The value of `key`, once a peer has posted it, shaped like `like`.
  at::Tensor fetch(const std::string &key, const at::Tensor &like) {
    if (!detail::waitForKey(store_, key, [this] { return aborted_.load(); }))
      throw CommError("store channel: aborted");
    at::Tensor tensor = at::empty_like(like, at::MemoryFormat::Contiguous);
    auto *data = static_cast<uint8_t *>(tensor.data_ptr());
    size_t bytes = tensor.nbytes(), chunks = chunksOf(bytes), offset = 0;
    std::vector<uint8_t> count = store_.get(key);
    if (std::string(count.begin(), count.end()) != std::to_string(chunks))
      throw CommError("store channel: a peer sent " +
                      std::string(count.begin(), count.end()) +
                      " chunks for " + key + ", expected " +
                      std::to_string(chunks));
    for (size_t c = 0; c < chunks; ++c) {
      std::vector<uint8_t> chunk = store_.get(key + "." + std::to_string(c));
      if (offset + chunk.size() > bytes)
        throw CommError("store channel: a peer sent more than " +
                        std::to_string(bytes) + " bytes for " + key);
      std::memcpy(data + offset, chunk.data(), chunk.size());
      offset += chunk.size();
    }
    if (offset != bytes)
      throw CommError("store channel: a peer sent " + std::to_string(offset) +
                      " bytes for " + key + ", expected " +
                      std::to_string(bytes));
    return tensor;
  }

  /// Deletes a posted value of `bytes` bytes.
  void erase(const std::string &key, size_t bytes) {
    store_.deleteKey(key);
    for (size_t c = 0, chunks = chunksOf(bytes); c < chunks; ++c)
      store_.deleteKey(key + "." + std::to_string(c));
  }
  /// The block `from` posted for this rank; deleted once read (its only
  /// reader).
  at::Tensor fetchBlock(const std::string &round, int64_t from,
                        const at::Tensor &like) {
    std::string key = blockKey(round, from, rank_);
    at::Tensor block = fetch(key, like);
    erase(key, block.nbytes());
    return block;
  }

  void finish(at::Tensor &sum, ChannelOp op) {
    if (op == ChannelOp::Avg)
      sum.div_(size_);
  }

  /// Counts this rank's reads of `round`; the last of `readers` deletes
  /// the round's per-rank values (of `bytes` bytes each).
  void release(const std::string &round, int64_t readers, size_t bytes) {
    if (store_.add(round + "reads", 1) < readers)
      return;
    for (int64_t r = 0; r < size_; ++r)
      erase(round + std::to_string(r), bytes);
    store_.deleteKey(round + "reads");
  }

  c10::intrusive_ptr<c10d::Store> storeRef_; // Outlives the rendezvous.
  c10d::Store &store_;
  int64_t rank_;
  int64_t size_;
  std::string prefix_;
  int64_t round_ = 0;
  std::atomic<bool> aborted_{false};
};

} // namespace

std::unique_ptr<Channel> createStoreChannel(Rendezvous &rendezvous) {
  auto *store = dynamic_cast<detail::StoreRendezvous *>(&rendezvous);
  if (!store)
    throw CommError("the store channel needs a store rendezvous (RANK, "
                    "WORLD_SIZE, MASTER_ADDR, MASTER_PORT), not " +
                    rendezvous.describe());
  return std::make_unique<StoreChannel>(*store, store->nextChannelPrefix());
}

} // namespace ds::runtime
