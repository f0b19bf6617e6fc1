//===- Report.cpp - Memory and traffic reports ----------------------------===//

#include "ds/Plan/Report.h"

#include "ds/Plan/AtomicFile.h"
#include "ds/Plan/MemoryPrediction.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace ds::plan {

namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return text;
}

const ordered_json *optimizerSection(const ordered_json &config) {
  if (!config.is_object())
    return nullptr;
  auto it = config.find("optimizer");
  if (it == config.end() || it->is_null())
    return nullptr;
  return &*it;
}

int64_t getInt(const ordered_json &object, const char *key,
               const std::string &where) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer())
    throw std::runtime_error("report: " + where + ": \"" + key +
                             "\" must be an integer");
  return it->get<int64_t>();
}

} // namespace

bool engineFrozen(const ordered_json &engineConfig) {
  return optimizerSection(engineConfig) == nullptr;
}

int64_t optimizerStateBytesPerElement(const ordered_json &engineConfig,
                                      int64_t elementBytes) {
  const ordered_json *optimizer = optimizerSection(engineConfig);
  if (!optimizer || !optimizer->is_object())
    return 0;
  std::string type;
  if (auto it = optimizer->find("type");
      it != optimizer->end() && it->is_string())
    type = lower(it->get<std::string>());
  if (type == "sgd") {
    double momentum = 0.0;
    if (auto params = optimizer->find("params");
        params != optimizer->end() && params->is_object())
      if (auto m = params->find("momentum");
          m != params->end() && m->is_number())
        momentum = m->get<double>();
    return momentum > 0.0 ? elementBytes : 0;
  }
  // Adam, AdamW: exp_avg and exp_avg_sq.
  return 2 * elementBytes;
}

Report predictReport(const Plan &plan) {
  Report report;
  report.kind = "predicted";
  report.worldSize = plan.worldSize;
  report.gradientAccumulationSteps = plan.gradientAccumulationSteps;

  RankReport rank;
  int64_t trainableElements = 0, stateElements = 0;
  const bool training = plan.findProgram("train") != nullptr;
  for (const StateDesc &state : plan.state) {
    int64_t numel = staticNumel(state.shape).value_or(0);
    int64_t bytes = numel * dtypeSize(state.dtype);
    stateElements += numel;
    if (state.kind == StateKind::Buffer) {
      rank.bufferBytes += bytes;
      continue;
    }
    rank.paramBytes += bytes;
    if (!training || !state.requiresGrad)
      continue;
    const EngineDesc *engine = nullptr;
    for (const EngineDesc &candidate : plan.engines)
      if (candidate.name == state.engine)
        engine = &candidate;
    if (!engine || engineFrozen(engine->config))
      continue;
    // Every engine's config carries its zero_optimization section.
    if (auto zero = engine->config.find("zero_optimization");
        zero != engine->config.end() && zero->is_object())
      if (auto stage = zero->find("stage");
          stage != zero->end() && stage->is_number_integer())
        report.zeroStage = std::max(report.zeroStage, stage->get<int64_t>());
    trainableElements += numel;
    rank.gradBytes += bytes;
    rank.optimizerStateBytes +=
        numel *
        optimizerStateBytesPerElement(engine->config, dtypeSize(state.dtype));
  }

  const Program *program = plan.findProgram(training ? "train" : "eval");
  rank.activationPeakBytes = program ? predictPeakBytes(*program) : 0;
  rank.peakBytes = rank.activationPeakBytes + rank.paramBytes +
                   rank.bufferBytes + rank.gradBytes + rank.optimizerStateBytes;
  if (plan.worldSize > 1) {
    // Stage 0: the flat gradient buffers are all-reduced once per
    // optimizer step (in buckets; the buckets add up to the buffer).
    rank.comm.allReduce = 2 * trainableElements;
    report.loadBroadcastElements = stateElements;
  }
  for (int64_t r = 0; r < plan.worldSize; ++r) {
    rank.rank = r;
    report.ranks.push_back(rank);
  }
  return report;
}

ordered_json reportToJson(const Report &report) {
  ordered_json json = ordered_json::object();
  json["kind"] = report.kind;
  json["world_size"] = report.worldSize;
  json["zero_stage"] = report.zeroStage;
  json["gradient_accumulation_steps"] = report.gradientAccumulationSteps;
  if (report.kind == "measured")
    json["steps"] = report.steps;
  json["load_broadcast_elements"] = report.loadBroadcastElements;
  json["comm_volume_counting"] =
      "elements per optimizer step, ZeRO counting (all_reduce 2n, "
      "reduce_scatter/all_gather/broadcast n over a full buffer of n); "
      "load-time broadcast excluded";
  ordered_json ranks = ordered_json::array();
  for (const RankReport &rank : report.ranks) {
    ordered_json entry = ordered_json::object();
    entry["rank"] = rank.rank;
    entry["param_bytes"] = rank.paramBytes;
    entry["grad_bytes"] = rank.gradBytes;
    entry["optimizer_state_bytes"] = rank.optimizerStateBytes;
    entry["buffer_bytes"] = rank.bufferBytes;
    entry["activation_peak_bytes"] = rank.activationPeakBytes;
    entry["peak_bytes"] = rank.peakBytes;
    entry["comm_volume_elements"] = {
        {"all_reduce", rank.comm.allReduce},
        {"reduce_scatter", rank.comm.reduceScatter},
        {"all_gather", rank.comm.allGather},
        {"broadcast", rank.comm.broadcast},
        {"total", rank.comm.total()}};
    ranks.push_back(std::move(entry));
  }
  json["ranks"] = std::move(ranks);
  return json;
}

Report reportFromJson(const ordered_json &json) {
  if (!json.is_object())
    throw std::runtime_error("report: expected a JSON object");
  Report report;
  if (auto it = json.find("kind"); it != json.end() && it->is_string())
    report.kind = it->get<std::string>();
  auto optionalInt = [&](const char *key, int64_t &out) {
    if (json.contains(key))
      out = getInt(json, key, "top level");
  };
  optionalInt("world_size", report.worldSize);
  optionalInt("zero_stage", report.zeroStage);
  optionalInt("gradient_accumulation_steps", report.gradientAccumulationSteps);
  optionalInt("steps", report.steps);
  optionalInt("load_broadcast_elements", report.loadBroadcastElements);
  auto ranks = json.find("ranks");
  if (ranks == json.end() || !ranks->is_array())
    throw std::runtime_error("report: \"ranks\" must be an array");
  for (const ordered_json &entry : *ranks) {
    if (!entry.is_object())
      throw std::runtime_error("report: a \"ranks\" entry is not an object");
    RankReport rank;
    rank.rank = getInt(entry, "rank", "ranks[]");
    std::string where = "ranks[" + std::to_string(rank.rank) + "]";
    rank.paramBytes = getInt(entry, "param_bytes", where);
    rank.gradBytes = getInt(entry, "grad_bytes", where);
    rank.optimizerStateBytes = getInt(entry, "optimizer_state_bytes", where);
    rank.peakBytes = getInt(entry, "peak_bytes", where);
    if (entry.contains("buffer_bytes"))
      rank.bufferBytes = getInt(entry, "buffer_bytes", where);
    if (entry.contains("activation_peak_bytes"))
      rank.activationPeakBytes = getInt(entry, "activation_peak_bytes", where);
    auto comm = entry.find("comm_volume_elements");
    if (comm == entry.end() || !comm->is_object())
      throw std::runtime_error("report: " + where +
                               ": \"comm_volume_elements\" must be an object");
    std::string commWhere = where + ".comm_volume_elements";
    rank.comm.allReduce = getInt(*comm, "all_reduce", commWhere);
    rank.comm.reduceScatter = getInt(*comm, "reduce_scatter", commWhere);
    rank.comm.allGather = getInt(*comm, "all_gather", commWhere);
    rank.comm.broadcast = getInt(*comm, "broadcast", commWhere);
    if (getInt(*comm, "total", commWhere) != rank.comm.total())
      throw std::runtime_error("report: " + commWhere +
                               ": \"total\" is not the sum of the others");
    report.ranks.push_back(rank);
  }
  return report;
}

void writeReport(const Report &report, const std::string &path) {
  writeFileAtomic(path, reportToJson(report).dump(2) + "\n");
}

} // namespace ds::plan
