//===- PlanValidator.h - validatePlan's classes -----------------*- C++ -*-===//
//
// validatePlan checks what docs/plan-format.md "Validation on load" lists,
// one file per part of the format: PlanValidate.cpp (the top level, engine
// and state names, inputs, outputs, programs), ValidateTraining.cpp (the
// engines' settings, optimizers and partitions), ValidatePrecision.cpp
// (mixed precision), ValidateProgram.cpp (values, lifetimes and ops of one
// program), ValidateCollectives.cpp (collectives, waits, optimizer steps,
// stage 3 gathers and releases, backward markers). Private to lib/Plan.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_PLAN_PLANVALIDATOR_H
#define DS_LIB_PLAN_PLANVALIDATOR_H

#include "ds/Plan/PlanFormat.h"
#include "ds/Support/JsonPath.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace ds::plan::detail {

inline bool shapesCompatible(const std::vector<int64_t> &a,
                             const std::vector<int64_t> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i] && a[i] != kDynamicDim && b[i] != kDynamicDim)
      return false;
  return true;
}

using json::joinIndex;

inline std::string valueName(ValueId id) { return "%" + std::to_string(id); }

inline std::string quoted(const std::string &text) {
  return "\"" + text + "\"";
}

/// Ops that talk to the other ranks (or step the optimizer, which may, or
/// drop what a collective gathered): never inside branches.
inline bool isCommunication(OpKind kind) {
  return isCollective(kind) || kind == OpKind::Wait ||
         kind == OpKind::OptimizerStep || kind == OpKind::Release;
}

inline bool isBackwardMarker(OpKind kind) {
  return kind == OpKind::BackwardPrologue || kind == OpKind::BackwardEpilogue;
}

/// Ops of the train program's backward, outside branches.
inline bool isBackwardOnly(OpKind kind) {
  return isBackwardMarker(kind) || kind == OpKind::LossScale ||
         kind == OpKind::Cotangent;
}

inline bool isFloat(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64 ||
         dtype == DType::Float16 || dtype == DType::BFloat16;
}

/// Elements of a state entry (its shape is static once checkState ran).
inline int64_t stateNumel(const StateDesc &state) {
  return staticNumel(state.shape).value_or(0);
}

/// "args[1]: " before a message about that field; nothing for "".
inline std::string fieldPrefix(const std::string &field) {
  return field.empty() ? std::string() : field + ": ";
}

/// "operator" names: "ns::name" or "ns::name.overload".
inline bool isQualifiedOperatorName(const std::string &name) {
  size_t sep = name.find("::");
  if (sep == std::string::npos || sep == 0 || sep + 2 >= name.size())
    return false;
  std::string rest = name.substr(sep + 2);
  size_t dot = rest.find('.');
  if (dot == 0 || rest.find("::") != std::string::npos)
    return false;
  return dot == std::string::npos ||
         (dot + 1 < rest.size() &&
          rest.find('.', dot + 1) == std::string::npos);
}

class ProgramValidator {
public:
  ProgramValidator(const Plan &plan, const Program &program,
                   const std::string &origin, const std::string &name);

  void run();

private:
  enum class Status { Undefined, Live, Freed, OutOfScope };
  struct ValueState {
    Status status = Status::Undefined;
    int depth = 0;
    std::string definedAt;
    std::string freedAt;
  };

  [[noreturn]] void fail(const std::string &where,
                         const std::string &detail) const;

  void checkBackwardStart() const;

  /// Values live when forward() ends, i.e. before body[backward_start].
  void snapshotForward();

  /// forward() returns the losses: they must exist when it ends.
  void checkComputedByForward(ValueId id, const std::string &where) const;

  void checkValues() const;
  /// A dynamic tensor's "bound": one entry per dim, >= 0, static dims equal.
  void checkBound(const ValueDesc &value, const std::string &where) const;

  const ValueDesc &desc(ValueId id) const { return program_.values[id]; }

  std::string describe(ValueId id) const;

  void checkId(ValueId id, const std::string &where,
               const std::string &field) const;

  /// Only `wait` (and `free` lists) may name a token.
  void use(ValueId id, const std::string &where, const std::string &field,
           bool tokenAllowed = false) const;

  void define(ValueId id, const std::string &where, const std::string &field,
              std::vector<ValueId> &definedHere, bool tokenAllowed = false);

  void expectType(ValueId id, ValueType type, const std::string &where,
                  const std::string &field, const char *why) const;

  /// Tensor value vs a declared dtype and shape (state, inputs, constants).
  void expectTensor(ValueId id, DType dtype, const std::vector<int64_t> &shape,
                    const std::string &where, const std::string &field,
                    const std::string &what) const;

  /// Does a value of type `type` fit a list element of type `elem`?
  static bool fitsElement(ValueType type, ValueType elem);

  void walkBlock(const std::vector<Op> &ops, const std::string &path,
                 std::vector<ValueId> &definedHere);

  void release(ValueId id, const std::string &where, const std::string &field);

  void checkOp(const Op &op, const std::string &path, const std::string &where,
               std::vector<ValueId> &definedHere);

  /// Which program may hold which op kinds, and never inside branches.
  void checkKindAllowed(const Op &op, const std::string &where) const;

  /// The engine an op names; it must have a partition.
  const EngineDesc &partitionedEngine(const Op &op,
                                      const std::string &where) const;

  /// The partitioned engine an op names, with its `bucket` in range.
  const EngineDesc &bucketedEngine(const Op &op,
                                   const std::string &where) const;

  /// The trainable engine an op names; `frozenDetail` says why a frozen one
  /// cannot be named there.
  const EngineDesc &trainableEngine(const Op &op, const std::string &where,
                                    const std::string &frozenDetail) const;

  std::string bucketName(const std::string &engine, int64_t bucket) const;

  void checkCollective(const Op &op, const std::string &where,
                       std::vector<ValueId> &definedHere);

  /// Stage 3: `release` drops a sharded bucket that was gathered and
  /// waited; no value read from it may outlive it.
  void checkRelease(const Op &op, const std::string &where);

  /// Stage 3: a `state` op of a sharded bucket's parameter lies between the
  /// wait of a gather of that bucket and its release.
  void checkShardedRead(const StateDesc &state, ValueId result,
                        const std::string &where);

  void checkOptimizerStep(const Op &op, const std::string &where);

  /// Stages 2-3: a bucket is reduce-scattered after the last grad op that
  /// writes into it; a later one would be lost.
  void checkGradBeforeReduceScatter(const StateDesc &state,
                                    const std::string &where) const;

  void noteEngineGrad(const StateDesc &state, const std::string &where);

  void checkBackwardMarker(const Op &op, const std::string &where);

  /// A program with prologues and epilogues has one pair for every
  /// trainable engine that has gradients in it.
  void checkBackwardMarkersComplete() const;

  /// At the end of a program: tokens waited, every bucket reduced and
  /// gathered where the engine's stage says, every trainable engine
  /// stepped.
  void checkCollectivesComplete() const;

  const StateDesc *findState(const std::string &name,
                             const std::string &where) const;

  void checkBranch(const Branch &branch, const Op &op, const std::string &path,
                   const std::string &where, const char *side);

  void checkConstant(const Constant &value, ValueId result,
                     const std::string &where) const;

  const Plan &plan_;
  const Program &program_;
  const std::string &origin_;
  std::string path_;
  std::vector<ValueState> states_;
  int depth_ = 0;
  bool isTrain_;
  bool isEval_;
  bool isStep_;
  /// Indexed by value id; empty until the walk reaches backward_start.
  std::vector<bool> liveAfterForward_;

  struct Reduction {
    std::string where;
    ValueId token = -1;
  };
  /// (engine, bucket) -> the all_reduce or reduce_scatter of it.
  std::map<std::pair<std::string, int64_t>, Reduction> reducedAt_;
  /// (engine, bucket) -> the all_gather of it.
  std::map<std::pair<std::string, int64_t>, std::string> gatheredAt_;
  /// Engine -> its optimizer_step.
  std::map<std::string, std::string> steppedAt_;
  /// Engine -> its first grad op, backward_prologue, backward_epilogue.
  std::map<std::string, std::string> firstGradAt_, prologueAt_, epilogueAt_;
  /// Past backward_start (top level of programs.train).
  bool inBackward_ = false;
  /// Token -> the collective that started it / the wait that ended it.
  std::map<ValueId, std::string> startedAt_;
  std::map<ValueId, std::string> waitedAt_;

  /// Stage 3: where each sharded bucket is in its all_gather, wait,
  /// release cycle.
  struct Gather {
    enum class Status { Released, Gathering, Gathered };
    Status status = Status::Released;
    std::string gatheredAt, waitedAt, releasedAt;
    ValueId token = -1;
    /// Results of state ops since the wait, with the op that read them.
    std::vector<std::pair<ValueId, std::string>> reads;
  };
  std::map<std::pair<std::string, int64_t>, Gather> gathers_;
  /// Token -> the sharded bucket its all_gather gathers.
  std::map<ValueId, std::pair<std::string, int64_t>> gatherOf_;
  /// Parameter name -> its sharded bucket (stage 3 engines only).
  std::map<std::string, std::pair<std::string, int64_t>> shardedParam_;
};

class PlanValidator {
public:
  PlanValidator(const Plan &plan, const std::string &origin)
      : plan_(plan), origin_(origin) {}

  void run();

private:
  [[noreturn]] void fail(const std::string &where,
                         const std::string &detail) const;

  void atLeastOne(int64_t value, const char *field) const;

  /// Non-empty and not seen before in `seen`.
  void uniqueName(const std::string &name, const std::string &where,
                  const char *what, std::set<std::string> &seen) const;

  void checkEngines();

  void checkState();

  /// Each variant's inputs are the plan's (names, dtypes, batched) with
  /// shapes no other shape has, and its programs are eval (and train when
  /// the plan trains). Their programs are checked by validatePlan on
  /// Plan::withVariant.
  void checkVariants() const;

  void checkTraining() const;

  /// The engine's typed settings: a ZeRO stage the partition agrees with,
  /// positive batch sizes, and the plan's GAS. (The top-level
  /// micro_batch_per_rank and world_size are what the runtime runs; the
  /// engine's batch is what its config resolved to.)
  void checkEngineSettings(const EngineDesc &engine,
                           const std::string &where) const;

  void checkPrecision(const EngineDesc &engine, const PrecisionDesc &precision,
                      const std::string &where) const;

  /// `gradScaler`: the engine is fp16 autocast, whose scaler is
  /// torch.amp.GradScaler (type "grad_scaler": hysteresis 1, no floor);
  /// else DeepSpeed's fp16 scaler ("dynamic" or "static").
  void checkLossScaler(const LossScalerDesc &scaler, const std::string &where,
                       bool gradScaler) const;

  void checkFinite(double value, const std::string &where) const;

  void checkAtLeast(double value, double low, const std::string &where) const;

  void checkUnit(double value, const std::string &where, bool closed) const;

  static std::string formatNumber(double value);

  void checkOptimizer(const OptimizerDesc &optimizer,
                      const std::string &where) const;

  /// The flat layout of one engine: parameters inside [0, numel) without
  /// overlap, every trainable parameter once; buckets sorted, disjoint,
  /// covering [0, numel), each a multiple of world_size.
  void checkPartition(const EngineDesc &engine, const PartitionDesc &partition,
                      const std::string &where) const;

  void checkInputs();

  void checkOutputs();

  void checkPrograms();

  const Plan &plan_;
  const std::string &origin_;
};

} // namespace ds::plan::detail

#endif // DS_LIB_PLAN_PLANVALIDATOR_H
