//===- MemoryPrediction.cpp - Live-value bytes predicted from a plan ------===//
//
// Mirrors what the executor does (lib/Runtime/Executor.cpp): results are
// stored, then the op's free list is dropped; a branch's values are dropped
// before the if's results are stored.
//
//===----------------------------------------------------------------------===//

#include "ds/Plan/MemoryPrediction.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

namespace ds::plan {

/// Bytes of tensor `value` were its shape `shape`; nullopt when a size is
/// dynamic or unknown.
static std::optional<int64_t>
bytesAtShape(const ValueDesc &value,
             const std::optional<std::vector<int64_t>> &shape) {
  if (value.type != ValueType::Tensor || !value.dtype || !shape)
    return std::nullopt;
  std::optional<int64_t> numel = staticNumel(*shape);
  if (!numel)
    return std::nullopt;
  return *numel * dtypeSize(*value.dtype);
}

std::optional<int64_t> staticValueBytes(const ValueDesc &value) {
  return bytesAtShape(value, value.shape);
}

std::optional<int64_t> valueBytesBound(const ValueDesc &value) {
  if (std::optional<int64_t> bytes = staticValueBytes(value))
    return bytes;
  return bytesAtShape(value, value.bound);
}

namespace {

/// Bytes of a program's values as the walks count them: state (the results
/// of `state` ops) is accounted separately, dynamic tensors count their
/// bound, and values of unknown size count 0.
class ValueBytes {
public:
  explicit ValueBytes(const Program &program)
      : program_(program), isState_(program.values.size(), false) {
    markState(program.body);
  }

  int64_t operator()(ValueId id) const {
    if (id < 0 || id >= ValueId(program_.values.size()) || isState_[id])
      return 0;
    return valueBytesBound(program_.values[id]).value_or(0);
  }

  SizeBasis basis() const {
    SizeBasis basis;
    for (size_t id = 0; id < program_.values.size(); ++id) {
      const ValueDesc &value = program_.values[id];
      if (value.type != ValueType::Tensor || isState_[id])
        continue;
      if (!valueBytesBound(value))
        ++basis.unboundedValues;
      else if (!staticValueBytes(value))
        basis.usesBounds = true;
    }
    return basis;
  }

private:
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

  const Program &program_;
  std::vector<bool> isState_;
};

class Predictor {
public:
  explicit Predictor(const Program &program) : bytes(program) {}

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
  ValueBytes bytes;
};

/// Predictor's walk plus stage 3's gathered buckets and gradient buffers.
class BufferWalker {
public:
  BufferWalker(const Plan &plan, const Program &program)
      : program_(program), bytes(program) {
    for (const EngineDesc &engine : plan.engines) {
      // Frozen stage 3 engines too: their sharded buckets are gathered
      // like a trainable engine's, but they have no gradient buffer.
      if (!engine.partition || engine.partition->stage != 3)
        continue;
      Engine3 info;
      info.partition = &*engine.partition;
      for (const FlatParamDesc &param : engine.partition->params) {
        if (const StateDesc *state = plan.findState(param.name))
          info.elementBytes = dtypeSize(state->dtype); // One per engine.
        info.params.insert(param.name);
      }
      // Gradients in their buffers' dtype (precision.grad_accum_dtype).
      if (engine.optimizer)
        info.gradientBytes =
            (engine.partition->numel +
             engine.partition->shardNumel(plan.worldSize)) *
            dtypeSize(engine.gradDtype(
                info.params.empty()
                    ? DType::Float32
                    : plan.findState(*info.params.begin())->dtype));
      engines_[engine.name] = info;
    }
  }

  BufferPeaks run() {
    walk(program_.body);
    return peaks_;
  }

private:
  struct Engine3 {
    const PartitionDesc *partition = nullptr;
    int64_t elementBytes = 4;
    int64_t gradientBytes = 0;
    std::set<std::string> params;
    bool gradientAllocated = false;
    size_t reduceScattersWaited = 0;
  };

  void note() {
    peaks_.joint = std::max(peaks_.joint, values_ + buffers_);
    peaks_.buffers = std::max(peaks_.buffers, buffers_);
  }

  void allocateGradient(Engine3 &engine) {
    if (engine.gradientAllocated)
      return;
    engine.gradientAllocated = true;
    buffers_ += engine.gradientBytes;
    note();
  }

  /// The stage 3 engines whose parameters `ops` (at any depth) write
  /// gradients into.
  void gradEngines(const std::vector<Op> &ops, std::set<Engine3 *> &out) {
    for (const Op &op : ops) {
      if (op.kind == OpKind::Grad)
        for (auto &[name, engine] : engines_)
          if (engine.params.count(op.name))
            out.insert(&engine);
      gradEngines(op.thenBranch.body, out);
      gradEngines(op.elseBranch.body, out);
    }
  }

  void walk(const std::vector<Op> &ops) {
    for (const Op &op : ops) {
      Engine3 *engine = nullptr;
      if (auto it = engines_.find(op.engine); it != engines_.end())
        engine = &it->second;
      switch (op.kind) {
      case OpKind::If: {
        // Gradient buffers a branch would allocate: counted from the start
        // (an upper bound when the branch is not taken).
        std::set<Engine3 *> writers;
        gradEngines(op.thenBranch.body, writers);
        gradEngines(op.elseBranch.body, writers);
        for (Engine3 *writer : writers)
          allocateGradient(*writer);
        int64_t before = values_;
        for (const Branch *branch : {&op.thenBranch, &op.elseBranch}) {
          values_ = before;
          walk(branch->body);
        }
        values_ = before;
        break;
      }
      case OpKind::Grad:
        for (auto &[name, candidate] : engines_)
          if (candidate.params.count(op.name))
            allocateGradient(candidate);
        break;
      case OpKind::ReduceScatter:
        if (engine) {
          allocateGradient(*engine);
          if (!op.results.empty())
            reduceScatterOf_[op.results[0]] = engine;
        }
        break;
      case OpKind::AllGather:
        if (engine && engine->partition->shardsParameters(size_t(op.bucket))) {
          buffers_ += engine->partition->buckets[size_t(op.bucket)].numel *
                      engine->elementBytes;
          note();
        }
        break;
      case OpKind::Release:
        if (engine && op.bucket >= 0 &&
            op.bucket < int64_t(engine->partition->buckets.size()))
          buffers_ -= engine->partition->buckets[size_t(op.bucket)].numel *
                      engine->elementBytes;
        break;
      case OpKind::Wait:
        if (auto it = reduceScatterOf_.find(op.arg);
            it != reduceScatterOf_.end()) {
          Engine3 &waited = *it->second;
          if (++waited.reduceScattersWaited ==
                  waited.partition->buckets.size() &&
              waited.gradientAllocated) {
            buffers_ -= waited.gradientBytes;
            waited.gradientAllocated = false;
            waited.reduceScattersWaited = 0;
          }
        }
        break;
      default:
        break;
      }
      for (ValueId id : op.results)
        values_ += bytes(id);
      note();
      for (ValueId id : op.free)
        values_ -= bytes(id);
    }
  }

  const Program &program_;
  ValueBytes bytes;
  std::map<std::string, Engine3> engines_;
  std::map<ValueId, Engine3 *> reduceScatterOf_;
  int64_t values_ = 0;
  int64_t buffers_ = 0;
  BufferPeaks peaks_;
};

} // namespace

SizeBasis sizeBasis(const Program &program) {
  return ValueBytes(program).basis();
}

int64_t predictPeakBytes(const Program &program) {
  int64_t current = 0;
  return Predictor(program).walk(program.body, current);
}

BufferPeaks predictStage3Peaks(const Plan &plan, const Program &program) {
  return BufferWalker(plan, program).run();
}

} // namespace ds::plan
