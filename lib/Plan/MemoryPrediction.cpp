//===- MemoryPrediction.cpp - Live-value bytes predicted from a plan ------===//
//
// Mirrors what the executor does (lib/Runtime/Executor.cpp): results are
// stored, then the op's free list is dropped; a branch's values are dropped
// before the if's results are stored.
//
//===----------------------------------------------------------------------===//

#include "ds/Plan/MemoryPrediction.h"

#include <algorithm>

namespace ds::plan {

std::optional<int64_t> staticValueBytes(const ValueDesc &value) {
  if (value.type != ValueType::Tensor || !value.dtype || !value.shape)
    return std::nullopt;
  std::optional<int64_t> numel = staticNumel(*value.shape);
  if (!numel)
    return std::nullopt;
  return *numel * dtypeSize(*value.dtype);
}

namespace {

class Predictor {
public:
  explicit Predictor(const Program &program)
      : program_(program), isState_(program.values.size(), false) {
    markState(program.body);
  }

  /// Walks `ops` starting from `current` live bytes; returns the peak and
  /// leaves in `current` the bytes live after the block.
  int64_t walk(const std::vector<Op> &ops, int64_t &current) const {
    int64_t peak = current;
    for (const Op &op : ops) {
      if (op.kind == OpKind::If) {
        for (const Branch *branch : {&op.thenBranch, &op.elseBranch}) {
          int64_t inside = current;
          peak = std::max(peak, walk(branch->body, inside));
        }
      }
      for (ValueId id : op.results)
        current += bytes(id);
      peak = std::max(peak, current);
      for (ValueId id : op.free)
        current -= bytes(id);
    }
    return peak;
  }

private:
  /// Results of `state` ops are state, accounted separately.
  void markState(const std::vector<Op> &ops) {
    for (const Op &op : ops) {
      if (op.kind == OpKind::State)
        for (ValueId id : op.results)
          if (id >= 0 && id < ValueId(isState_.size()))
            isState_[id] = true;
      markState(op.thenBranch.body);
      markState(op.elseBranch.body);
    }
  }

  int64_t bytes(ValueId id) const {
    if (id < 0 || id >= ValueId(program_.values.size()) || isState_[id])
      return 0;
    return staticValueBytes(program_.values[id]).value_or(0);
  }

  const Program &program_;
  std::vector<bool> isState_;
};

} // namespace

int64_t predictPeakBytes(const Program &program) {
  int64_t current = 0;
  return Predictor(program).walk(program.body, current);
}

} // namespace ds::plan
