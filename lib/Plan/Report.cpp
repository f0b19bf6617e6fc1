//===- Report.cpp - Memory and traffic reports ----------------------------===//

#include "ds/Plan/Report.h"

#include "ds/Plan/AtomicFile.h"
#include "ds/Plan/MemoryPrediction.h"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace ds::plan {

namespace {

int64_t getInt(const ordered_json &object, const char *key,
               const std::string &where) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer())
    throw std::runtime_error("report: " + where + ": \"" + key +
                             "\" must be an integer");
  return it->get<int64_t>();
}

/// Bytes per element of an engine's flat buffers: its parameters' dtype.
int64_t elementBytes(const Plan &plan, const PartitionDesc &partition) {
  for (const FlatParamDesc &param : partition.params)
    if (const StateDesc *state = plan.findState(param.name))
      return dtypeSize(state->dtype);
  return 4;
}

/// The dtype of an engine's parameters (one per engine).
DType paramDtype(const Plan &plan, const PartitionDesc &partition) {
  for (const FlatParamDesc &param : partition.params)
    if (const StateDesc *state = plan.findState(param.name))
      return state->dtype;
  return DType::Float32;
}

/// Native bf16 / fp16: the optimizer keeps a float32 master of the shard.
bool keepsMaster(const EngineDesc &engine) {
  return engine.precision && engine.precision->native();
}

/// Adds the volume of `program`'s collectives of engine `engineName`, run
/// `times` per optimizer step, to `comm`.
void countCollectives(const Plan &plan, const Program &program, int64_t times,
                      const std::string &engineName, CommVolume &comm) {
  for (const Op &op : program.body) {
    const EngineDesc *engine = plan.findEngine(op.engine);
    if (!engine || !engine->partition || engine->name != engineName)
      continue;
    const PartitionDesc &partition = *engine->partition;
    if (op.kind == OpKind::OptimizerStep) {
      // The global norm over the shards: one scalar all-reduce.
      if (partition.stage >= 1)
        comm.allReduce += 2 * times;
      // fp16: the overflow flag's MAX all-reduce (every stage).
      if (engine->precision && engine->precision->lossScaler)
        comm.allReduce += 2 * times;
      continue;
    }
    if (!isCollective(op.kind) || op.bucket < 0 ||
        op.bucket >= int64_t(partition.buckets.size()))
      continue;
    int64_t n = partition.buckets[size_t(op.bucket)].numel;
    if (op.kind == OpKind::AllReduce)
      comm.allReduce += 2 * n * times;
    else if (op.kind == OpKind::ReduceScatter)
      comm.reduceScatter += n * times;
    else
      comm.allGather += n * times;
  }
}

ordered_json timingToJson(const CollectiveTiming &timing) {
  ordered_json json = ordered_json::object();
  json["count"] = timing.count;
  json["collective_seconds"] = timing.collectiveSeconds;
  json["wait_seconds"] = timing.waitSeconds;
  return json;
}

ordered_json overlapToJson(const OverlapReport &overlap) {
  ordered_json json = ordered_json::object();
  json["all_reduce"] = timingToJson(overlap.allReduce);
  json["reduce_scatter"] = timingToJson(overlap.reduceScatter);
  json["all_gather"] = timingToJson(overlap.allGather);
  json["broadcast"] = timingToJson(overlap.broadcast);
  CollectiveTiming total = overlap.total();
  json["total"] = timingToJson(total);
  // The share of the collectives' time that compute did not wait for.
  json["hidden_fraction"] =
      total.collectiveSeconds > 0
          ? ordered_json(std::clamp(
                1.0 - total.waitSeconds / total.collectiveSeconds, 0.0, 1.0))
          : ordered_json(nullptr);
  json["train_seconds"] = overlap.trainSeconds;
  return json;
}

double getNumber(const ordered_json &object, const char *key,
                 const std::string &where) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number())
    throw std::runtime_error("report: " + where + ": \"" + key +
                             "\" must be a number");
  return it->get<double>();
}

CollectiveTiming timingFromJson(const ordered_json &json,
                                const std::string &where) {
  if (!json.is_object())
    throw std::runtime_error("report: " + where + " must be an object");
  CollectiveTiming timing;
  timing.count = getInt(json, "count", where);
  timing.collectiveSeconds = getNumber(json, "collective_seconds", where);
  timing.waitSeconds = getNumber(json, "wait_seconds", where);
  return timing;
}

OverlapReport overlapFromJson(const ordered_json &json,
                              const std::string &where) {
  if (!json.is_object())
    throw std::runtime_error("report: " + where + " must be an object");
  auto field = [&](const char *key) {
    auto it = json.find(key);
    if (it == json.end())
      throw std::runtime_error("report: " + where + ": \"" + key +
                               "\" is missing");
    return timingFromJson(*it, where + "." + key);
  };
  OverlapReport overlap;
  overlap.allReduce = field("all_reduce");
  overlap.reduceScatter = field("reduce_scatter");
  overlap.allGather = field("all_gather");
  overlap.broadcast = field("broadcast");
  overlap.trainSeconds = getNumber(json, "train_seconds", where);
  return overlap;
}

ordered_json volumeToJson(const CommVolume &comm) {
  return {{"all_reduce", comm.allReduce},
          {"reduce_scatter", comm.reduceScatter},
          {"all_gather", comm.allGather},
          {"broadcast", comm.broadcast},
          {"total", comm.total()}};
}

/// `object`'s "comm_volume_elements".
CommVolume volumeFromJson(const ordered_json &object,
                          const std::string &where) {
  auto comm = object.find("comm_volume_elements");
  if (comm == object.end() || !comm->is_object())
    throw std::runtime_error("report: " + where +
                             ": \"comm_volume_elements\" must be an object");
  std::string commWhere = where + ".comm_volume_elements";
  CommVolume volume;
  volume.allReduce = getInt(*comm, "all_reduce", commWhere);
  volume.reduceScatter = getInt(*comm, "reduce_scatter", commWhere);
  volume.allGather = getInt(*comm, "all_gather", commWhere);
  volume.broadcast = getInt(*comm, "broadcast", commWhere);
  if (getInt(*comm, "total", commWhere) != volume.total())
    throw std::runtime_error("report: " + commWhere +
                             ": \"total\" is not the sum of the others");
  return volume;
}

ordered_json engineToJson(const EngineReport &engine) {
  ordered_json json = ordered_json::object();
  json["frozen"] = engine.frozen;
  json["zero_stage"] = engine.zeroStage;
  json["param_bytes"] = engine.paramBytes;
  json["grad_bytes"] = engine.gradBytes;
  json["optimizer_state_bytes"] = engine.optimizerStateBytes;
  if (engine.hostBytes)
    json["host_bytes"] = *engine.hostBytes;
  json["comm_volume_elements"] = volumeToJson(engine.comm);
  return json;
}

EngineReport engineFromJson(const std::string &name, const ordered_json &json,
                            const std::string &where) {
  if (!json.is_object())
    throw std::runtime_error("report: " + where + " must be an object");
  EngineReport engine;
  engine.name = name;
  auto frozen = json.find("frozen");
  if (frozen == json.end() || !frozen->is_boolean())
    throw std::runtime_error("report: " + where +
                             ": \"frozen\" must be a boolean");
  engine.frozen = frozen->get<bool>();
  engine.zeroStage = getInt(json, "zero_stage", where);
  engine.paramBytes = getInt(json, "param_bytes", where);
  engine.gradBytes = getInt(json, "grad_bytes", where);
  engine.optimizerStateBytes = getInt(json, "optimizer_state_bytes", where);
  if (json.contains("host_bytes"))
    engine.hostBytes = getInt(json, "host_bytes", where);
  engine.comm = volumeFromJson(json, where);
  return engine;
}

} // namespace

int64_t optimizerStatesPerElement(const OptimizerDesc &optimizer) {
  if (optimizer.type == OptimizerType::SGD)
    return optimizer.momentum != 0.0 ? 1 : 0;
  return 2; // adam, adamw: exp_avg and exp_avg_sq.
}

namespace {

/// The report of a plan with one input shape.
Report predictOneShape(const Plan &plan) {
  Report report;
  report.kind = "predicted";
  report.worldSize = plan.worldSize;
  report.gradientAccumulationSteps = plan.gradientAccumulationSteps;

  RankReport rank;
  const Program *train = plan.findProgram("train");
  const Program *step = plan.findProgram("step");
  const int64_t worldSize = plan.worldSize;
  // Parameters that live in a stage 1-3 engine's parameter buffers.
  std::set<std::string> flat;
  int64_t transientBackward = 0, transientBoundary = 0;
  for (const EngineDesc &engine : plan.engines) {
    EngineReport entry;
    entry.name = engine.name;
    entry.frozen = !engine.optimizer;
    entry.zeroStage = engine.zeroStage;
    const bool trains = train && engine.optimizer && engine.partition;
    // A frozen stage 3 engine shards its parameters too.
    const bool partitioned =
        trains || (train && engine.partition && engine.partition->stage == 3);
    if (partitioned) {
      const PartitionDesc &partition = *engine.partition;
      const int64_t bytes = elementBytes(plan, partition);
      const int64_t shard = partition.shardNumel(worldSize);
      if (trains)
        report.zeroStage = std::max(report.zeroStage, partition.stage);
      if (partition.stage >= 1) {
        int64_t held = partition.numel;
        if (partition.stage == 3) {
          // Persistent buckets whole, this rank's block of the sharded ones.
          held = 0;
          for (size_t b = 0; b < partition.buckets.size(); ++b)
            held += partition.shardsParameters(b)
                        ? partition.buckets[b].numel / worldSize
                        : partition.buckets[b].numel;
        }
        entry.paramBytes += held * bytes;
        for (const FlatParamDesc &param : partition.params)
          flat.insert(param.name);
      }
      if (trains) {
        // Gradients in their buffers' dtype (precision.grad_accum_dtype);
        // native bf16 / fp16: the optimizer state and the float32 master
        // of the shard, 4 bytes each per element.
        const int64_t gradBytes =
            dtypeSize(engine.gradDtype(paramDtype(plan, partition)));
        // Offload (stages 1-3): the state and a master of the shard (a
        // float32 engine's in its own dtype) in host memory.
        const bool offload = engine.offloadOptimizer && partition.stage >= 1;
        const bool master = keepsMaster(engine) || offload;
        const int64_t stateBytes =
            keepsMaster(engine) ? dtypeSize(engine.precision->masterDtype)
                                : bytes;
        entry.gradBytes =
            (partition.stage >= 2 ? shard : partition.numel) * gradBytes;
        const int64_t held =
            (optimizerStatesPerElement(*engine.optimizer) + (master ? 1 : 0)) *
            shard * stateBytes;
        entry.optimizerStateBytes = offload ? 0 : held;
        if (offload)
          entry.hostBytes = held;
        if (partition.stage == 2) // Full gradient buffer + receive buffer.
          transientBackward += (partition.numel + shard) * gradBytes;
        if (partition.stage == 1) // The shard gradient, at the boundary.
          transientBoundary += shard * gradBytes;
      }
    }
    if (worldSize > 1 && train) {
      countCollectives(plan, *train, plan.gradientAccumulationSteps,
                       engine.name, entry.comm);
      if (step)
        countCollectives(plan, *step, 1, engine.name, entry.comm);
    }
    rank.engines.push_back(std::move(entry));
  }

  int64_t stateElements = 0;
  for (const StateDesc &state : plan.state) {
    int64_t numel = staticNumel(state.shape).value_or(0);
    int64_t bytes = numel * dtypeSize(state.dtype);
    stateElements += numel;
    if (state.kind == StateKind::Buffer) {
      rank.bufferBytes += bytes;
    } else if (!flat.count(state.name)) {
      auto owner = std::find_if(
          rank.engines.begin(), rank.engines.end(),
          [&](const EngineReport &e) { return e.name == state.engine; });
      if (owner != rank.engines.end())
        owner->paramBytes += bytes;
      else
        rank.paramBytes += bytes; // Outside every engine.
    }
  }
  for (const EngineReport &entry : rank.engines) {
    rank.paramBytes += entry.paramBytes;
    rank.gradBytes += entry.gradBytes;
    rank.optimizerStateBytes += entry.optimizerStateBytes;
    if (entry.hostBytes)
      rank.hostBytes = rank.hostBytes.value_or(0) + *entry.hostBytes;
    rank.comm += entry.comm;
  }

  const Program *program = train ? train : plan.findProgram("eval");
  rank.activationPeakBytes = program ? predictPeakBytes(*program) : 0;
  if (program) {
    SizeBasis basis = sizeBasis(*program);
    rank.activationPeakIsBound = basis.usesBounds;
    rank.unboundedValues = basis.unboundedValues;
  }
  // Stage 3's gathered buckets and gradient buffers, walked with the live
  // values (without stage 3 engines: the activation peak, no buffers).
  BufferPeaks stage3 = train ? predictStage3Peaks(plan, *train)
                             : BufferPeaks{rank.activationPeakBytes, 0};
  rank.transientBytes =
      std::max(stage3.buffers + transientBackward, transientBoundary);
  rank.peakBytes =
      rank.paramBytes + rank.bufferBytes + rank.gradBytes +
      rank.optimizerStateBytes +
      std::max(stage3.joint + transientBackward, transientBoundary);
  if (worldSize > 1)
    report.loadBroadcastElements = stateElements;
  for (int64_t r = 0; r < worldSize; ++r) {
    rank.rank = r;
    report.ranks.push_back(rank);
  }
  return report;
}

} // namespace

Report predictReport(const Plan &plan) {
  Report report = predictOneShape(plan);
  // Every shape holds the same state; the programs' peaks differ. Each
  // figure is the most over the shapes.
  for (size_t v = 0; v < plan.variants.size(); ++v) {
    Report other = predictOneShape(plan.withVariant(v));
    for (size_t r = 0; r < report.ranks.size(); ++r) {
      RankReport &rank = report.ranks[r];
      const RankReport &shape = other.ranks[r];
      rank.activationPeakBytes =
          std::max(rank.activationPeakBytes, shape.activationPeakBytes);
      rank.activationPeakIsBound |= shape.activationPeakIsBound;
      rank.unboundedValues =
          std::max(rank.unboundedValues, shape.unboundedValues);
      rank.transientBytes = std::max(rank.transientBytes, shape.transientBytes);
      rank.peakBytes = std::max(rank.peakBytes, shape.peakBytes);
    }
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
      "reduce_scatter/all_gather/broadcast n over a full buffer of n, n a "
      "bucket's numel; the global-norm scalar all_reduce of a ZeRO stage 1-3 "
      "engine counts 2); load-time broadcast excluded";
  ordered_json ranks = ordered_json::array();
  for (const RankReport &rank : report.ranks) {
    ordered_json entry = ordered_json::object();
    entry["rank"] = rank.rank;
    entry["param_bytes"] = rank.paramBytes;
    entry["grad_bytes"] = rank.gradBytes;
    entry["optimizer_state_bytes"] = rank.optimizerStateBytes;
    if (rank.hostBytes)
      entry["host_bytes"] = *rank.hostBytes;
    entry["buffer_bytes"] = rank.bufferBytes;
    entry["activation_peak_bytes"] = rank.activationPeakBytes;
    if (report.kind == "predicted") {
      entry["activation_peak_is_bound"] = rank.activationPeakIsBound;
      entry["unbounded_values"] = rank.unboundedValues;
    }
    entry["transient_bytes"] = rank.transientBytes;
    entry["peak_bytes"] = rank.peakBytes;
    entry["comm_volume_elements"] = volumeToJson(rank.comm);
    if (rank.overlap)
      entry["overlap"] = overlapToJson(*rank.overlap);
    ordered_json engines = ordered_json::object();
    for (const EngineReport &engine : rank.engines)
      engines[engine.name] = engineToJson(engine);
    entry["engines"] = std::move(engines);
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
    if (entry.contains("host_bytes"))
      rank.hostBytes = getInt(entry, "host_bytes", where);
    if (entry.contains("buffer_bytes"))
      rank.bufferBytes = getInt(entry, "buffer_bytes", where);
    if (entry.contains("activation_peak_bytes"))
      rank.activationPeakBytes = getInt(entry, "activation_peak_bytes", where);
    if (auto bound = entry.find("activation_peak_is_bound");
        bound != entry.end()) {
      if (!bound->is_boolean())
        throw std::runtime_error(
            "report: " + where +
            ": \"activation_peak_is_bound\" must be a boolean");
      rank.activationPeakIsBound = bound->get<bool>();
    }
    if (entry.contains("unbounded_values"))
      rank.unboundedValues = getInt(entry, "unbounded_values", where);
    if (entry.contains("transient_bytes"))
      rank.transientBytes = getInt(entry, "transient_bytes", where);
    rank.comm = volumeFromJson(entry, where);
    if (auto overlap = entry.find("overlap"); overlap != entry.end())
      rank.overlap = overlapFromJson(*overlap, where + ".overlap");
    if (auto engines = entry.find("engines"); engines != entry.end()) {
      if (!engines->is_object())
        throw std::runtime_error("report: " + where +
                                 ": \"engines\" must be an object");
      for (const auto &item : engines->items())
        rank.engines.push_back(engineFromJson(
            item.key(), item.value(), where + ".engines." + item.key()));
    }
    report.ranks.push_back(rank);
  }
  return report;
}

std::string reportToText(const Report &report) {
  std::string text = report.kind + " report: world size " +
                     std::to_string(report.worldSize) + ", ZeRO stage " +
                     std::to_string(report.zeroStage) +
                     ", gradient accumulation steps " +
                     std::to_string(report.gradientAccumulationSteps) + "\n";
  for (const RankReport &rank : report.ranks) {
    // Figures over live values: "<= N" on a bound, a note without one.
    auto live = [&](int64_t bytes) {
      std::string figure = std::to_string(bytes) + " B";
      if (rank.unboundedValues > 0)
        return figure +
               " (not a bound: " + std::to_string(rank.unboundedValues) +
               " dynamic tensors without a bound count 0)";
      return rank.activationPeakIsBound ? "<= " + figure : figure;
    };
    text += "rank " + std::to_string(rank.rank) + ": params " +
            std::to_string(rank.paramBytes) + " B, grads " +
            std::to_string(rank.gradBytes) + " B, optimizer state " +
            std::to_string(rank.optimizerStateBytes) + " B, buffers " +
            std::to_string(rank.bufferBytes) + " B, activation peak " +
            live(rank.activationPeakBytes) + ", transient " +
            std::to_string(rank.transientBytes) + " B, peak " +
            live(rank.peakBytes) +
            (rank.hostBytes ? ", host " + std::to_string(*rank.hostBytes) + " B"
                            : std::string()) +
            ", comm " + std::to_string(rank.comm.total()) +
            " elements per step\n";
  }
  return text;
}

void writeReport(const Report &report, const std::string &path) {
  writeFileAtomic(path, reportToJson(report).dump(2) + "\n");
}

} // namespace ds::plan
