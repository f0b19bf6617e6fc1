//===- TestUtil.cpp - Helpers for the plan and runtime unit tests ---------===//

#include "TestUtil.h"

#include "ds/Plan/PlanFormat.h"

#include <algorithm>
#include <functional>
#include <set>

#include <cstdlib>
#include <dirent.h>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ds::test {

TempDir::TempDir() {
  const char *base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base && *base ? base : "/tmp") + "/ds-unit-test-XXXXXX";
  if (!::mkdtemp(pattern.data()))
    throw std::runtime_error("mkdtemp failed for " + pattern);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string fixture(const std::string &relative) {
  return std::string(DS_TEST_FIXTURES_DIR) + "/" + relative;
}

std::string readText(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw std::runtime_error("cannot read " + path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

void writeText(const std::string &path, const std::string &text) {
  std::ofstream file(path, std::ios::binary);
  file << text;
  if (!file)
    throw std::runtime_error("cannot write " + path);
}

std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  for (const auto &entry : std::filesystem::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  return names;
}

plan::ordered_json planJson(const std::string &name) {
  return plan::ordered_json::parse(readText(fixture("plans/" + name)));
}

plan::ordered_json batchVariant(const plan::ordered_json &json, int64_t rows) {
  plan::ordered_json variant = {{"micro_batch_per_rank", rows},
                                {"inputs", json["inputs"]},
                                {"programs",
                                 {{"eval", json["programs"]["eval"]},
                                  {"train", json["programs"]["train"]}}}};
  for (plan::ordered_json &input : variant["inputs"])
    input["shape"][0] = rows;
  // The inputs' values take the new batch; every other value's shape is
  // left unknown (which dims follow the batch is the compiler's business).
  for (auto &[name, program] : variant["programs"].items()) {
    std::set<int64_t> inputs;
    for (const plan::ordered_json &op : program["body"])
      if (op["kind"] == "input")
        inputs.insert(op["result"].get<int64_t>());
    for (plan::ordered_json &value : program["values"]) {
      if (!value.contains("shape"))
        continue;
      if (inputs.count(value["id"].get<int64_t>()))
        value["shape"][0] = rows;
      else
        value.erase("shape");
    }
  }
  return variant;
}

plan::ValueId ProgramBuilder::tensor(plan::DType dtype,
                                     std::vector<int64_t> shape) {
  plan::ValueId id = plan::ValueId(program.values.size());
  program.values.push_back(
      plan::ValueDesc::tensor(id, dtype, std::move(shape)));
  return id;
}

plan::ValueId ProgramBuilder::scalar(plan::ValueType type) {
  plan::ValueId id = plan::ValueId(program.values.size());
  program.values.push_back(plan::ValueDesc::scalar(id, type));
  return id;
}

plan::ValueId ProgramBuilder::list(plan::ValueType elem) {
  plan::ValueId id = plan::ValueId(program.values.size());
  program.values.push_back(plan::ValueDesc::list(id, elem));
  return id;
}

plan::Op &ProgramBuilder::add(plan::Op op) {
  program.body.push_back(std::move(op));
  return program.body.back();
}

plan::Op &ProgramBuilder::call(const std::string &name,
                               std::vector<plan::ValueId> args,
                               std::vector<plan::ValueId> results,
                               std::vector<plan::ValueId> free) {
  plan::Op &op = add(plan::Op::call(name, std::move(args), std::move(results)));
  op.free = std::move(free);
  op.module = "fc";
  op.moduleClass = "torch.nn.modules.linear.Linear";
  op.loc = "model.py:7";
  return op;
}

plan::Plan makePlan(std::vector<plan::InputDesc> inputs,
                    plan::Program program) {
  plan::Plan plan;
  plan.producer = "unittests";
  if (!inputs.empty() && inputs[0].batched && !inputs[0].shape.empty() &&
      inputs[0].shape[0] > 0)
    plan.microBatchPerRank = inputs[0].shape[0];
  plan::EngineDesc engine;
  engine.name = "model";
  engine.batch.trainBatchSize = plan.microBatchPerRank;
  engine.batch.microBatchPerGpu = plan.microBatchPerRank;
  plan.engines.push_back(std::move(engine));
  plan.inputs = std::move(inputs);
  for (size_t i = 0; i < program.results.size(); ++i)
    plan.outputs.push_back({"loss" + std::to_string(i), "loss"});
  plan.programs["eval"] = std::move(program);
  return plan;
}

namespace {

int64_t roundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

/// Whether `ops` (recursively) hold a grad op writing into [begin, end) of
/// the engine's flat buffer.
bool writesInto(const plan::Plan &plan, const plan::PartitionDesc &partition,
                const std::vector<plan::Op> &ops, int64_t begin, int64_t end) {
  for (const plan::Op &op : ops) {
    if (op.kind == plan::OpKind::Grad)
      for (const plan::FlatParamDesc &param : partition.params) {
        if (param.name != op.name)
          continue;
        int64_t numel =
            plan::staticNumel(plan.findState(param.name)->shape).value_or(0);
        if (param.offset < end && param.offset + numel > begin)
          return true;
      }
    if (writesInto(plan, partition, op.thenBranch.body, begin, end) ||
        writesInto(plan, partition, op.elseBranch.body, begin, end))
      return true;
  }
  return false;
}

plan::ValueId token(plan::Program &program) {
  plan::ValueId id = plan::ValueId(program.values.size());
  program.values.push_back(plan::ValueDesc::scalar(id, plan::ValueType::Token));
  return id;
}

/// Whether `op` (recursively) has a state op naming one of `names`; the
/// results of top-level state ops go to `reads`.
bool readsAny(const plan::Op &op, const std::set<std::string> &names,
              std::vector<plan::ValueId> *reads) {
  if (op.kind == plan::OpKind::State && names.count(op.name)) {
    if (reads)
      reads->insert(reads->end(), op.results.begin(), op.results.end());
    return true;
  }
  bool found = false;
  for (const plan::Branch *branch : {&op.thenBranch, &op.elseBranch})
    for (const plan::Op &inner : branch->body)
      found |= readsAny(inner, names, nullptr);
  return found;
}

/// Removes the engine's collectives and releases (and the waits of their
/// tokens) from `program`.
void removeCollectives(plan::Program &program, const std::string &engine) {
  auto &body = program.body;
  std::vector<plan::ValueId> removed;
  auto ours = [&](const plan::Op &op) {
    return (op.kind == plan::OpKind::ReduceScatter ||
            op.kind == plan::OpKind::AllGather ||
            op.kind == plan::OpKind::AllReduce ||
            op.kind == plan::OpKind::Release) &&
           op.engine == engine;
  };
  for (const plan::Op &op : body)
    if (ours(op) && !op.results.empty())
      removed.push_back(op.results[0]);
  body.erase(std::remove_if(body.begin(), body.end(),
                            [&](const plan::Op &op) {
                              return ours(op) ||
                                     (op.kind == plan::OpKind::Wait &&
                                      std::count(removed.begin(), removed.end(),
                                                 op.arg) > 0);
                            }),
             body.end());
}

/// Stage 3: the gathers, waits and releases of the engine's sharded buckets
/// in `program`, one set per part [begin, end) of its top-level body (see
/// partitionEngine). Returns how many ops it put before `mark` that belong
/// to the parts ending at or before it (backward_start's shift).
size_t placeGathers(plan::Program &program, const std::string &engine,
                    const plan::PartitionDesc &partition,
                    const std::vector<std::pair<size_t, size_t>> &parts,
                    bool gatherUnread, size_t mark) {
  auto &body = program.body;
  struct Insert {
    size_t position; // Before the original op at this index.
    int order;       // 0 release, 1 gather, 2 wait.
    int64_t bucket;
    size_t part;
    plan::Op op;
  };
  std::vector<Insert> inserts;
  for (size_t b = 0; b < partition.buckets.size(); ++b) {
    if (!partition.shardsParameters(b))
      continue;
    std::set<std::string> names;
    for (const plan::FlatParamDesc &param : partition.params)
      if (partition.bucketAt(param.offset) == int64_t(b))
        names.insert(param.name);
    for (size_t part = 0; part < parts.size(); ++part) {
      auto [begin, end] = parts[part];
      std::vector<size_t> readers;
      size_t releaseAt = begin;
      for (size_t i = begin; i < end; ++i) {
        std::vector<plan::ValueId> reads;
        if (!readsAny(body[i], names, &reads))
          continue;
        readers.push_back(i);
        releaseAt = std::max(releaseAt, i + 1); // A read inside a branch.
        for (plan::ValueId id : reads) {
          size_t freedBy = body.size();
          for (size_t j = i; j < body.size(); ++j)
            if (std::count(body[j].free.begin(), body[j].free.end(), id)) {
              freedBy = j;
              break;
            }
          releaseAt = std::max(releaseAt, std::min(freedBy + 1, body.size()));
        }
      }
      if (readers.empty() && !gatherUnread)
        continue;
      plan::ValueId t = token(program);
      size_t waitAt = readers.empty() ? begin : readers.front();
      inserts.push_back({begin, 1, int64_t(b), part,
                         plan::Op::collective(plan::OpKind::AllGather, engine,
                                              int64_t(b), t)});
      inserts.push_back({waitAt, 2, int64_t(b), part, plan::Op::wait(t)});
      inserts.push_back({releaseAt, 0, int64_t(b), part,
                         plan::Op::release(engine, int64_t(b))});
    }
  }
  // A release and a wait at the same place as the gather: after it.
  for (Insert &insert : inserts)
    if (insert.order != 1)
      for (const Insert &gather : inserts)
        if (gather.order == 1 && gather.bucket == insert.bucket &&
            gather.part == insert.part && gather.position == insert.position)
          insert.order = insert.order == 2 ? 3 : 4;
  std::stable_sort(inserts.begin(), inserts.end(),
                   [](const Insert &a, const Insert &b) {
                     if (a.position != b.position)
                       return a.position < b.position;
                     if (a.order != b.order)
                       return a.order < b.order;
                     return a.bucket < b.bucket;
                   });
  std::vector<plan::Op> rebuilt;
  size_t shift = 0, next = 0;
  for (size_t i = 0; i <= body.size(); ++i) {
    for (; next < inserts.size() && inserts[next].position == i; ++next) {
      const Insert &insert = inserts[next];
      if (i < mark || (i == mark && parts[insert.part].second <= mark))
        ++shift;
      rebuilt.push_back(std::move(inserts[next].op));
    }
    if (i < body.size())
      rebuilt.push_back(std::move(body[i]));
  }
  body = std::move(rebuilt);
  return shift;
}

} // namespace

void partitionEngine(plan::Plan &plan, const std::string &engineName,
                     int64_t stage, int64_t bucketElements, int64_t gap,
                     const Stage3Options &stage3) {
  plan::EngineDesc *engine = nullptr;
  for (plan::EngineDesc &candidate : plan.engines)
    if (candidate.name == engineName)
      engine = &candidate;
  if (!engine || !engine->optimizer)
    throw std::runtime_error("partitionEngine: no trainable engine " +
                             engineName);
  const int64_t W = plan.worldSize;
  engine->zeroStage = stage;
  plan::PartitionDesc partition;
  partition.stage = stage;
  if (stage == 3) {
    // Parameters whole inside buckets; persistent ones apart.
    int64_t start = 0, used = 0;
    bool open = false, persistent = false;
    auto close = [&] {
      if (!open)
        return;
      int64_t n = roundUp(std::max<int64_t>(used, 1), W);
      partition.buckets.push_back({start, n, persistent});
      start += n;
      used = 0;
      open = false;
    };
    for (const plan::StateDesc &state : plan.state) {
      if (state.kind != plan::StateKind::Param || !state.requiresGrad ||
          state.engine != engineName)
        continue;
      int64_t numel = plan::staticNumel(state.shape).value_or(0);
      bool small =
          stage3.persistentNumel > 0 && numel <= stage3.persistentNumel;
      if (open && (small != persistent || used + numel > bucketElements))
        close();
      if (!open) {
        open = true;
        persistent = small;
      }
      partition.params.push_back({state.name, start + used});
      used += numel + gap;
    }
    close();
    partition.numel = start;
  } else {
    int64_t end = 0;
    for (const plan::StateDesc &state : plan.state) {
      if (state.kind != plan::StateKind::Param || !state.requiresGrad ||
          state.engine != engineName)
        continue;
      partition.params.push_back({state.name, end});
      end += plan::staticNumel(state.shape).value_or(0) + gap;
    }
    int64_t chunk = roundUp(std::max<int64_t>(bucketElements, 1), W);
    for (int64_t offset = 0; offset < end; offset += chunk)
      partition.buckets.push_back(
          {offset, roundUp(std::min(chunk, end - offset), W)});
    partition.numel =
        partition.buckets.empty()
            ? 0
            : partition.buckets.back().offset + partition.buckets.back().numel;
  }
  engine->partition = partition;

  // programs.train: no collectives but stage 2-3 reduce-scatters (and stage
  // 3's gathers); programs.eval: only stage 3's gathers.
  plan::Program &train = plan.programs.at("train");
  auto &body = train.body;
  removeCollectives(train, engineName);
  removeCollectives(plan.programs.at("eval"), engineName);
  if (stage >= 2) {
    std::vector<plan::ValueId> tokens;
    // After the last op writing into each bucket; buckets nobody writes go
    // at the end.
    std::vector<std::pair<size_t, size_t>> places; // (insert before, bucket)
    for (size_t b = 0; b < partition.buckets.size(); ++b) {
      const plan::BucketDesc &bucket = partition.buckets[b];
      size_t after = body.size();
      for (size_t i = body.size(); i-- > size_t(*train.backwardStart);)
        if (writesInto(plan, partition, {body[i]}, bucket.offset,
                       bucket.offset + bucket.numel)) {
          after = i + 1;
          break;
        }
      places.push_back({after, b});
    }
    std::vector<std::vector<plan::Op>> inserts(body.size() + 1);
    for (const auto &[position, b] : places) {
      plan::ValueId t = token(train);
      tokens.push_back(t);
      inserts[position].push_back(plan::Op::collective(
          plan::OpKind::ReduceScatter, engineName, int64_t(b), t));
    }
    std::vector<plan::Op> rebuilt;
    for (size_t i = 0; i <= body.size(); ++i) {
      std::sort(inserts[i].begin(), inserts[i].end(),
                [](const plan::Op &a, const plan::Op &b) {
                  return a.bucket < b.bucket;
                });
      for (plan::Op &op : inserts[i])
        rebuilt.push_back(std::move(op));
      if (i < body.size())
        rebuilt.push_back(std::move(body[i]));
    }
    std::sort(tokens.begin(), tokens.end());
    for (plan::ValueId t : tokens)
      rebuilt.push_back(plan::Op::wait(t));
    body = std::move(rebuilt);
  }
  if (stage == 3) {
    size_t start = size_t(*train.backwardStart);
    std::vector<std::pair<size_t, size_t>> parts = {{0, start},
                                                    {start, body.size()}};
    if (stage3.keepForBackward)
      parts = {{0, body.size()}};
    train.backwardStart =
        int64_t(start) +
        int64_t(placeGathers(train, engineName, partition, parts,
                             /*gatherUnread=*/true, start));
    plan::Program &eval = plan.programs.at("eval");
    placeGathers(eval, engineName, partition, {{0, eval.body.size()}},
                 /*gatherUnread=*/false, 0);
  }

  // programs.step, for every trainable engine: reductions first, then per
  // engine its waits, update and gathers.
  plan::Program step;
  std::vector<std::pair<std::string, std::vector<plan::ValueId>>> reductions;
  for (const plan::EngineDesc &e : plan.engines) {
    if (!e.optimizer || !e.partition)
      continue;
    std::vector<plan::ValueId> tokens;
    if (e.partition->stage <= 1)
      for (size_t b = 0; b < e.partition->buckets.size(); ++b) {
        plan::ValueId t = token(step);
        tokens.push_back(t);
        step.body.push_back(plan::Op::collective(
            e.partition->stage == 0 ? plan::OpKind::AllReduce
                                    : plan::OpKind::ReduceScatter,
            e.name, int64_t(b), t));
      }
    reductions.push_back({e.name, tokens});
  }
  std::vector<plan::ValueId> gathers;
  for (const auto &[name, tokens] : reductions) {
    for (plan::ValueId t : tokens)
      step.body.push_back(plan::Op::wait(t));
    step.body.push_back(plan::Op::optimizerStep(name));
    const plan::EngineDesc *e = plan.findEngine(name);
    if (e->partition->stage >= 1)
      for (size_t b = 0; b < e->partition->buckets.size(); ++b) {
        if (e->partition->shardsParameters(b))
          continue; // Stage 3: the next forward gathers it.
        plan::ValueId t = token(step);
        gathers.push_back(t);
        step.body.push_back(
            plan::Op::collective(plan::OpKind::AllGather, name, int64_t(b), t));
      }
  }
  for (plan::ValueId t : gathers)
    step.body.push_back(plan::Op::wait(t));
  plan.programs["step"] = std::move(step);
}

plan::Plan zeroPlan(plan::ordered_json json, int64_t worldSize, int64_t stage,
                    int64_t bucketElements, int64_t gap,
                    const Stage3Options &stage3) {
  json["world_size"] = 1; // Valid as read; re-partitioned below.
  plan::Plan plan = plan::parsePlan(json, "zero.json");
  plan.worldSize = worldSize;
  partitionEngine(plan, plan.engines[0].name, stage, bucketElements, gap,
                  stage3);
  plan::validatePlan(plan, "zero.json");
  return plan;
}

plan::ordered_json withBackwardWeightRead(plan::ordered_json json) {
  plan::ordered_json &train = json["programs"]["train"];
  train["values"].push_back({{"id", 15},
                             {"type", "tensor"},
                             {"dtype", "float32"},
                             {"shape", {3, 4}}});
  train["values"].push_back({{"id", 16},
                             {"type", "tensor"},
                             {"dtype", "float32"},
                             {"shape", {4, 4}}});
  // After mse_loss_backward (body[9], which defines %9 = g_y).
  plan::ordered_json read = {
      {"kind", "state"}, {"name", "fc.weight"}, {"result", 15}};
  plan::ordered_json mm = {{"kind", "call"},
                           {"op", "aten::mm"},
                           {"args", {9, 15}},
                           {"results", {16}},
                           {"free", {15, 16}}};
  train["body"].insert(train["body"].begin() + 10, mm);
  train["body"].insert(train["body"].begin() + 10, read);
  return json;
}

plan::ordered_json optimizerJson(const plan::ordered_json &changes) {
  plan::ordered_json json = {
      {"type", "adamw"},     {"lr", 0.01},          {"betas", {0.9, 0.999}},
      {"eps", 1e-8},         {"weight_decay", 0.1}, {"momentum", 0.0},
      {"dampening", 0.0},    {"nesterov", false},   {"gradient_clipping", 1.0},
      {"scheduler", nullptr}};
  for (const auto &item : changes.items())
    json[item.key()] = item.value();
  return json;
}

} // namespace ds::test
