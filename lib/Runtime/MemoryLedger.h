//===- MemoryLedger.h - The training buffers' byte counts ------*- C++ -*-===//
//
// The bytes of the transient training buffers (stage 2-3 full gradients and
// receive buffers, stage 1's shard gradient, stage 3's gathered buckets),
// their peak, and the joint peak with the executors' live values
// (docs/runtime.md, "Memory accounting"). Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_MEMORYLEDGER_H
#define DS_LIB_RUNTIME_MEMORYLEDGER_H

#include <algorithm>
#include <cstdint>

namespace ds::runtime::detail {

class MemoryLedger {
public:
  /// A transient buffer of `bytes` was allocated.
  void allocated(int64_t bytes) {
    transient_ += bytes;
    transientPeak_ = std::max(transientPeak_, transient_);
    jointPeak_ = std::max(jointPeak_, live_ + transient_);
  }
  /// A transient buffer of `bytes` was freed.
  void freed(int64_t bytes) { transient_ -= bytes; }
  /// The executors' live values now take `bytes`.
  void setLiveBytes(int64_t bytes) {
    live_ = bytes;
    jointPeak_ = std::max(jointPeak_, live_ + transient_);
  }
  /// The peaks start again from what is held now.
  void resetPeaks() {
    transientPeak_ = transient_;
    jointPeak_ = live_ + transient_;
  }

  int64_t transientBytes() const { return transient_; }
  int64_t transientPeakBytes() const { return transientPeak_; }
  int64_t jointPeakBytes() const { return jointPeak_; }

private:
  int64_t transient_ = 0;
  int64_t transientPeak_ = 0;
  int64_t live_ = 0;
  int64_t jointPeak_ = 0;
};

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_MEMORYLEDGER_H
