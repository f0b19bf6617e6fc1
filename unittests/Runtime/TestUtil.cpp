//===- TestUtil.cpp - Helpers for the runtime unit tests ------------------===//

#include "TestUtil.h"

#include "ds/Plan/PlanFormat.h"

#include <algorithm>
#include <functional>

#include <cstdlib>
#include <dirent.h>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ds::test {

TempDir::TempDir() {
  const char *base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base && *base ? base : "/tmp") + "/ds-runtime-test-XXXXXX";
  if (!::mkdtemp(pattern.data()))
    throw std::runtime_error("mkdtemp failed for " + pattern);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string sourceFile(const std::string &relative) {
  return std::string(DS_TEST_SOURCE_DIR) + "/" + relative;
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
  return plan::ordered_json::parse(readText(sourceFile("plans/" + name)));
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
  plan.engines.push_back({"model", "", plan::ordered_json::object()});
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

} // namespace

void partitionEngine(plan::Plan &plan, const std::string &engineName,
                     int64_t stage, int64_t bucketElements, int64_t gap) {
  plan::EngineDesc *engine = nullptr;
  for (plan::EngineDesc &candidate : plan.engines)
    if (candidate.name == engineName)
      engine = &candidate;
  if (!engine || !engine->optimizer)
    throw std::runtime_error("partitionEngine: no trainable engine " +
                             engineName);
  const int64_t W = plan.worldSize;
  plan::PartitionDesc partition;
  partition.stage = stage;
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
  engine->partition = partition;

  // programs.train: no collectives but stage 2 reduce-scatters.
  plan::Program &train = plan.programs.at("train");
  auto &body = train.body;
  std::vector<plan::ValueId> removed;
  for (const plan::Op &op : body)
    if (op.kind == plan::OpKind::ReduceScatter && op.engine == engineName)
      removed.push_back(op.results[0]);
  body.erase(std::remove_if(body.begin(), body.end(),
                            [&](const plan::Op &op) {
                              if (op.kind == plan::OpKind::ReduceScatter)
                                return op.engine == engineName;
                              return op.kind == plan::OpKind::Wait &&
                                     std::count(removed.begin(), removed.end(),
                                                op.arg) > 0;
                            }),
             body.end());
  if (stage == 2) {
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
                    int64_t bucketElements, int64_t gap) {
  json["world_size"] = 1; // Valid as read; re-partitioned below.
  plan::Plan plan = plan::parsePlan(json, "zero.json");
  plan.worldSize = worldSize;
  partitionEngine(plan, plan.engines[0].name, stage, bucketElements, gap);
  plan::validatePlan(plan, "zero.json");
  return plan;
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
