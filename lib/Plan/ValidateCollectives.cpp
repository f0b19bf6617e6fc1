//===- ValidateCollectives.cpp - Collectives, optimizer steps, stage 3 ----===//
//
// docs/plan-format.md, "The accumulation boundary" and "Stage 3": where
// collectives, waits, optimizer steps and releases may appear for an
// engine's stage, every bucket reduced and gathered once around the
// engine's update, tokens waited once, stage 3's gather / wait / release
// cycles, and the backward prologue and epilogue markers.
//
//===----------------------------------------------------------------------===//

#include "PlanValidator.h"

namespace ds::plan::detail {

void ProgramValidator::checkKindAllowed(const Op &op,
                                        const std::string &where) const {
  if (isBackwardOnly(op.kind)) {
    if (!isTrain_ || depth_ > 0 || !inBackward_)
      fail(where, std::string(opKindName(op.kind)) +
                      " ops belong to the backward of programs.train (at "
                      "or after backward_start), outside \"if\" branches");
    return;
  }
  bool communication = isCommunication(op.kind);
  if (isStep_ && (!communication || op.kind == OpKind::Release))
    fail(where, "programs.step holds only all_reduce, reduce_scatter, "
                "all_gather, wait and optimizer_step ops" +
                    std::string(op.kind == OpKind::Release
                                    ? " (release belongs to programs.train "
                                      "and programs.eval: programs.step "
                                      "never gathers a sharded bucket)"
                                    : ""));
  if (!communication)
    return;
  // Stage 3: the eval program gathers and releases sharded buckets.
  bool gathering = op.kind == OpKind::AllGather || op.kind == OpKind::Wait ||
                   op.kind == OpKind::Release;
  if (isEval_ && !gathering)
    fail(where, std::string(opKindName(op.kind)) +
                    " ops do not belong to programs.eval");
  if (depth_ > 0)
    fail(where, std::string(opKindName(op.kind)) +
                    " ops are not allowed inside \"if\" branches: every "
                    "rank must run the same collectives in the same order");
}

const EngineDesc &
ProgramValidator::partitionedEngine(const Op &op,
                                    const std::string &where) const {
  const EngineDesc *engine = plan_.findEngine(op.engine);
  if (!engine)
    fail(where, "engine: the plan has no engine named " + quoted(op.engine));
  if (!engine->partition)
    fail(where, "engine: engine " + quoted(op.engine) +
                    " has no partition (a frozen engine has no gradients "
                    "to reduce and no parameters to gather)");
  return *engine;
}

const EngineDesc &
ProgramValidator::bucketedEngine(const Op &op, const std::string &where) const {
  const EngineDesc &engine = partitionedEngine(op, where);
  int64_t buckets = int64_t(engine.partition->buckets.size());
  if (op.bucket < 0 || op.bucket >= buckets)
    fail(where, "bucket: engine " + quoted(engine.name) + " has " +
                    std::to_string(buckets) + " bucket(s), found " +
                    std::to_string(op.bucket));
  return engine;
}

const EngineDesc &
ProgramValidator::trainableEngine(const Op &op, const std::string &where,
                                  const std::string &frozenDetail) const {
  const EngineDesc *engine = plan_.findEngine(op.engine);
  if (!engine)
    fail(where, "engine: the plan has no engine named " + quoted(op.engine));
  if (!engine->optimizer)
    fail(where, "engine: engine " + quoted(op.engine) + frozenDetail);
  return *engine;
}

std::string ProgramValidator::bucketName(const std::string &engine,
                                         int64_t bucket) const {
  return "bucket " + std::to_string(bucket) + " of engine " + quoted(engine);
}

void ProgramValidator::checkCollective(const Op &op, const std::string &where,
                                       std::vector<ValueId> &definedHere) {
  const EngineDesc &engine = bucketedEngine(op, where);
  const PartitionDesc &partition = *engine.partition;
  std::string stage = std::to_string(partition.stage);
  const bool sharded = partition.shardsParameters(size_t(op.bucket));
  if (isEval_ && !(op.kind == OpKind::AllGather && sharded))
    fail(where, std::string(opKindName(op.kind)) +
                    " ops do not belong to programs.eval" +
                    (op.kind == OpKind::AllGather
                         ? " (it gathers only the sharded buckets of ZeRO "
                           "stage 3 engines; " +
                               bucketName(op.engine, op.bucket) + " is " +
                               (partition.stage == 3
                                    ? std::string("persistent)")
                                    : "of a stage " + stage + " engine)")
                         : std::string()));
  if (!engine.optimizer && op.kind != OpKind::AllGather)
    fail(where, std::string(opKindName(op.kind)) + " of engine " +
                    quoted(engine.name) +
                    ", which is frozen: it has no gradients to reduce (a "
                    "frozen stage 3 engine only gathers its parameters)");
  switch (op.kind) {
  case OpKind::AllReduce:
    if (partition.stage != 0)
      fail(where, "all_reduce is for ZeRO stage 0 engines; engine " +
                      quoted(engine.name) + " is at stage " + stage +
                      " (its gradients are reduce_scatter'ed)");
    if (!isStep_)
      fail(where, "all_reduce belongs to programs.step (stage 0 reduces "
                  "at the accumulation boundary)");
    break;
  case OpKind::ReduceScatter:
    if (partition.stage == 0)
      fail(where, "reduce_scatter is for ZeRO stages 1-3; engine " +
                      quoted(engine.name) +
                      " is at stage 0 (its gradients are all_reduce'd)");
    if (partition.stage == 1 && !isStep_)
      fail(where, "a stage 1 engine's reduce_scatter belongs to "
                  "programs.step (stage 1 reduces at the accumulation "
                  "boundary)");
    if (partition.stage >= 2 && !isTrain_)
      fail(where, "a stage " + stage +
                      " engine's reduce_scatter belongs to "
                      "programs.train (after the last grad op that writes "
                      "into its bucket)");
    break;
  default: // AllGather
    if (partition.stage == 0)
      fail(where, "all_gather is for ZeRO stages 1-3; engine " +
                      quoted(engine.name) +
                      " is at stage 0 (its parameters are not sharded)");
    if (sharded && !isTrain_ && !isEval_)
      fail(where, "all_gather of " + bucketName(op.engine, op.bucket) +
                      ", a sharded bucket (ZeRO stage 3), belongs to "
                      "programs.train and programs.eval, before its "
                      "parameters are read (programs.step does not gather "
                      "it: the next forward does)");
    if (!sharded && !isStep_)
      fail(where, std::string(partition.stage == 3
                                  ? "all_gather of a persistent bucket"
                                  : "all_gather") +
                      " belongs to programs.step (after the engine's "
                      "optimizer_step)");
    break;
  }
  if (op.kind == OpKind::ReduceScatter)
    if (auto it = epilogueAt_.find(op.engine); it != epilogueAt_.end())
      fail(where, "reduce_scatter of " + bucketName(op.engine, op.bucket) +
                      " after the engine's backward_epilogue (" + it->second +
                      "): the epilogue ends the engine's reductions");
  auto key = std::make_pair(op.engine, op.bucket);
  if (op.kind == OpKind::AllGather && sharded) {
    Gather &gather = gathers_.at(key);
    if (gather.status != Gather::Status::Released)
      fail(where, "all_gather of " + bucketName(op.engine, op.bucket) +
                      " while it is gathered already (by " + gather.gatheredAt +
                      "); a sharded bucket alternates all_gather, wait and "
                      "release");
    gather.status = Gather::Status::Gathering;
    gather.gatheredAt = where;
  } else if (op.kind == OpKind::AllGather) {
    if (!steppedAt_.count(op.engine))
      fail(where, "all_gather of " + bucketName(op.engine, op.bucket) +
                      " comes before the engine's optimizer_step (it "
                      "gathers the updated shards)");
    if (auto it = gatheredAt_.find(key); it != gatheredAt_.end())
      fail(where, bucketName(op.engine, op.bucket) +
                      " is gathered twice (first by " + it->second + ")");
    gatheredAt_[key] = where;
  } else {
    if (auto it = reducedAt_.find(key); it != reducedAt_.end())
      fail(where, bucketName(op.engine, op.bucket) +
                      " is reduced twice (first by " + it->second.where + ")");
    if (auto it = steppedAt_.find(op.engine); it != steppedAt_.end())
      fail(where, std::string(opKindName(op.kind)) + " of " +
                      bucketName(op.engine, op.bucket) +
                      " comes after the engine's optimizer_step (" +
                      it->second + ")");
  }
  if (op.results.size() != 1)
    fail(where,
         "expected 1 result(s), found " + std::to_string(op.results.size()));
  define(op.results[0], where, "result", definedHere,
         /*tokenAllowed=*/true);
  expectType(op.results[0], ValueType::Token, where, "result", "the result");
  if (op.kind != OpKind::AllGather)
    reducedAt_[key] = {where, op.results[0]};
  else if (sharded) {
    gathers_.at(key).token = op.results[0];
    gatherOf_[op.results[0]] = key;
  }
  startedAt_[op.results[0]] = where;
}

void ProgramValidator::checkRelease(const Op &op, const std::string &where) {
  const EngineDesc &engine = bucketedEngine(op, where);
  const PartitionDesc &partition = *engine.partition;
  if (partition.stage != 3)
    fail(where, "release is for ZeRO stage 3 engines; engine " +
                    quoted(engine.name) + " is at stage " +
                    std::to_string(partition.stage) +
                    " (its parameters are never dropped)");
  std::string bucket = bucketName(op.engine, op.bucket);
  if (!partition.shardsParameters(size_t(op.bucket)))
    fail(where, bucket + " is persistent (its parameters stay whole on every "
                         "rank); only sharded buckets are released");
  Gather &gather = gathers_.at({op.engine, op.bucket});
  if (gather.status == Gather::Status::Released)
    fail(where, "release of " + bucket + ", which is not gathered here (" +
                    (gather.releasedAt.empty()
                         ? std::string("no all_gather of it comes before")
                         : "released already by " + gather.releasedAt) +
                    "); a sharded bucket alternates all_gather, wait and "
                    "release");
  if (gather.status == Gather::Status::Gathering)
    fail(where, "release of " + bucket +
                    " before the wait of its all_gather (" + gather.gatheredAt +
                    ", token " + valueName(gather.token) + ")");
  for (const auto &[id, readAt] : gather.reads)
    if (states_[size_t(id)].status == Status::Live)
      fail(where, "value " + valueName(id) + " (read by " + readAt +
                      ") is still live at the release of " + bucket +
                      ": it views the gathered parameters, which the "
                      "release drops; free it before (read the parameter "
                      "again after the next all_gather)");
  gather.reads.clear();
  gather.status = Gather::Status::Released;
  gather.releasedAt = where;
}

void ProgramValidator::checkShardedRead(const StateDesc &state, ValueId result,
                                        const std::string &where) {
  auto it = shardedParam_.find(state.name);
  if (it == shardedParam_.end())
    return;
  Gather &gather = gathers_.at(it->second);
  std::string bucket = bucketName(it->second.first, it->second.second);
  switch (gather.status) {
  case Gather::Status::Gathered:
    gather.reads.emplace_back(result, where);
    return;
  case Gather::Status::Gathering:
    fail(where, "name: parameter " + quoted(state.name) + " lies in " + bucket +
                    " (ZeRO stage 3, sharded), whose all_gather (" +
                    gather.gatheredAt +
                    ") is not waited yet; read it after the wait");
  case Gather::Status::Released:
    fail(where, "name: parameter " + quoted(state.name) + " lies in " + bucket +
                    " (ZeRO stage 3, sharded), which is not gathered here (" +
                    (gather.releasedAt.empty()
                         ? std::string("no all_gather of it comes before")
                         : "released by " + gather.releasedAt) +
                    "); a state op of it lies between the wait of an "
                    "all_gather of the bucket and its release");
  }
}

void ProgramValidator::checkOptimizerStep(const Op &op,
                                          const std::string &where) {
  if (!isStep_)
    fail(where, "optimizer_step belongs to programs.step (the "
                "accumulation boundary)");
  const EngineDesc *engine = &trainableEngine(
      op, where, " has no optimizer (a frozen engine is never updated)");
  if (auto it = steppedAt_.find(op.engine); it != steppedAt_.end())
    fail(where, "engine " + quoted(op.engine) + " steps twice (first by " +
                    it->second + ")");
  if (engine->partition && engine->partition->stage <= 1) {
    const char *reduction =
        engine->partition->stage == 0 ? "all_reduce" : "reduce_scatter";
    for (size_t b = 0; b < engine->partition->buckets.size(); ++b) {
      auto it = reducedAt_.find({op.engine, int64_t(b)});
      if (it == reducedAt_.end())
        fail(where, "the optimizer_step of engine " + quoted(op.engine) +
                        " comes before the " + reduction + " of " +
                        bucketName(op.engine, int64_t(b)) +
                        " (the update needs the averaged gradients)");
      if (!waitedAt_.count(it->second.token))
        fail(where, "the optimizer_step of engine " + quoted(op.engine) +
                        " comes before the wait for " + it->second.where +
                        " (token " + valueName(it->second.token) + ")");
    }
  }
  steppedAt_[op.engine] = where;
}

void ProgramValidator::checkGradBeforeReduceScatter(
    const StateDesc &state, const std::string &where) const {
  const EngineDesc *engine = plan_.findEngine(state.engine);
  if (!engine || !engine->partition || engine->partition->stage < 2)
    return;
  const PartitionDesc &partition = *engine->partition;
  auto param = std::find_if(
      partition.params.begin(), partition.params.end(),
      [&](const FlatParamDesc &p) { return p.name == state.name; });
  if (param == partition.params.end())
    return;
  int64_t begin = param->offset, end = param->offset + stateNumel(state);
  for (size_t b = 0; b < partition.buckets.size(); ++b) {
    const BucketDesc &bucket = partition.buckets[b];
    if (bucket.offset >= end || bucket.offset + bucket.numel <= begin)
      continue;
    auto it = reducedAt_.find({engine->name, int64_t(b)});
    if (it != reducedAt_.end())
      fail(where, "name: parameter " + quoted(state.name) + " writes into " +
                      bucketName(engine->name, int64_t(b)) + ", which " +
                      it->second.where +
                      " reduce-scattered already (a bucket is "
                      "reduce_scatter'ed after the last grad op that "
                      "writes into it)");
  }
}

void ProgramValidator::noteEngineGrad(const StateDesc &state,
                                      const std::string &where) {
  firstGradAt_.try_emplace(state.engine, where);
  if (auto it = epilogueAt_.find(state.engine); it != epilogueAt_.end())
    fail(where, "name: a gradient of engine " + quoted(state.engine) +
                    " after its backward_epilogue (" + it->second +
                    "); every grad op of an engine lies between its "
                    "prologue and its epilogue");
}

void ProgramValidator::checkBackwardMarker(const Op &op,
                                           const std::string &where) {
  trainableEngine(op, where,
                  " is frozen; only trainable engines have a backward "
                  "prologue and epilogue");
  if (op.kind == OpKind::BackwardPrologue) {
    if (auto it = prologueAt_.find(op.engine); it != prologueAt_.end())
      fail(where, "engine " + quoted(op.engine) +
                      " has a second backward_prologue (first: " + it->second +
                      ")");
    if (auto it = firstGradAt_.find(op.engine); it != firstGradAt_.end())
      fail(where, "the backward_prologue of engine " + quoted(op.engine) +
                      " comes after a gradient of it (" + it->second + ")");
    prologueAt_[op.engine] = where;
    return;
  }
  if (!prologueAt_.count(op.engine))
    fail(where, "the backward_epilogue of engine " + quoted(op.engine) +
                    " has no backward_prologue before it");
  if (auto it = epilogueAt_.find(op.engine); it != epilogueAt_.end())
    fail(where, "engine " + quoted(op.engine) +
                    " has a second backward_epilogue (first: " + it->second +
                    ")");
  for (const auto &[key, reduction] : reducedAt_)
    if (key.first == op.engine && !waitedAt_.count(reduction.token))
      fail(where, "the backward_epilogue of engine " + quoted(op.engine) +
                      " comes before the wait for " + reduction.where +
                      " (the epilogue ends the engine's reductions)");
  epilogueAt_[op.engine] = where;
}

void ProgramValidator::checkBackwardMarkersComplete() const {
  if (prologueAt_.empty() && epilogueAt_.empty())
    return;
  for (const auto &[engine, where] : prologueAt_)
    if (!epilogueAt_.count(engine))
      fail(path_, "engine " + quoted(engine) + " has a backward_prologue (" +
                      where + ") but no backward_epilogue");
  for (const auto &[engine, where] : firstGradAt_)
    if (!prologueAt_.count(engine))
      fail(path_, "engine " + quoted(engine) + " has gradients (" + where +
                      ") but no backward_prologue, while other engines "
                      "have one (a plan marks every trainable engine's "
                      "backward or none)");
}

void ProgramValidator::checkCollectivesComplete() const {
  for (const auto &[token, where] : startedAt_)
    if (!waitedAt_.count(token))
      fail(path_, "token " + valueName(token) + " (started by " + where +
                      ") is never waited (every token is waited exactly "
                      "once, later in the same program)");
  for (const EngineDesc &engine : plan_.engines) {
    if (!engine.partition)
      continue;
    const PartitionDesc &partition = *engine.partition;
    for (size_t b = 0; b < partition.buckets.size(); ++b) {
      auto key = std::make_pair(engine.name, int64_t(b));
      if (isTrain_ && partition.stage >= 2 && engine.optimizer &&
          !reducedAt_.count(key))
        fail(path_, bucketName(engine.name, int64_t(b)) + " (ZeRO stage " +
                        std::to_string(partition.stage) +
                        ") is never reduce_scatter'ed in programs.train");
      if (isStep_ && partition.stage >= 1 && engine.optimizer &&
          !partition.shardsParameters(b) && !gatheredAt_.count(key))
        fail(path_, bucketName(engine.name, int64_t(b)) +
                        " is never all_gather'ed (" +
                        (partition.stage == 3
                             ? std::string("stage 3 gathers the updated "
                                           "shards of its persistent "
                                           "buckets")
                             : std::string("stages 1-2 gather the updated "
                                           "shards")) +
                        " after optimizer_step)");
      if (partition.shardsParameters(b)) {
        const Gather &gather = gathers_.at(key);
        if (gather.status != Gather::Status::Released)
          fail(path_, bucketName(engine.name, int64_t(b)) +
                          " (ZeRO stage 3, sharded) is still gathered when "
                          "the program ends (gathered by " +
                          gather.gatheredAt + "); release it before the end");
      }
    }
  }
  if (isStep_)
    for (const EngineDesc &engine : plan_.engines)
      if (engine.optimizer && !steppedAt_.count(engine.name))
        fail(path_, "engine " + quoted(engine.name) +
                        " has no optimizer_step (every trainable engine "
                        "steps once at the accumulation boundary)");
}

} // namespace ds::plan::detail
