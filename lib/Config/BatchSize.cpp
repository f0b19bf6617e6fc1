//===- BatchSize.cpp - train = micro * GAS * world ------------------------===//
//
// DeepSpeed's rule (runtime/config.py, _set_batch_related_parameters): any
// two of train_batch_size, train_micro_batch_size_per_gpu and
// gradient_accumulation_steps derive the third; train_batch_size alone or
// the micro-batch alone means GAS 1. Where DeepSpeed floors a non-divisible
// derivation and then fails its assertion, we say which division failed.
// "auto" takes the micro-batch from the data (B / world size), as Accelerate
// fills it from its dataloader; then the data must agree with the result.
// A frozen engine (no optimizer) never steps, and DeepSpeed ignores its batch
// sizes (Accelerate's guide gives its teacher a micro-batch of 1 only because
// DeepSpeed requires the key): where they disagree with the data, the data's
// micro-batch replaces them, with a warning for each key it overrides.
//
//===----------------------------------------------------------------------===//

#include "Sections.h"

namespace ds::config::detail {

namespace {

constexpr const char *kTrain = "train_batch_size";
constexpr const char *kMicro = "train_micro_batch_size_per_gpu";
constexpr const char *kGas = "gradient_accumulation_steps";

struct BatchValue {
  std::optional<int64_t> value;
  bool isAuto = false;
};

BatchValue readBatchValue(ObjectReader &root, const char *key) {
  BatchValue result;
  if (root.takeAuto(key)) {
    result.isAuto = true;
    return result;
  }
  result.value = root.integer(key);
  if (result.value)
    requireMin(*result.value, 1, root.keyPath(key));
  return result;
}

int64_t multiply(int64_t a, int64_t b, const char *key) {
  int64_t product;
  if (__builtin_mul_overflow(a, b, &product))
    throw ConfigError(key, "batch size product overflows");
  return product;
}

std::string str(int64_t value) { return std::to_string(value); }

struct BatchSizes {
  int64_t train, micro, gas;
};

/// DeepSpeed's completion of the three from those given; a ConfigError for
/// values that contradict each other or leave a division with a remainder.
BatchSizes derive(std::optional<int64_t> t, std::optional<int64_t> m,
                  std::optional<int64_t> g, int64_t world) {
  if (t && m && g) {
    if (*t != multiply(multiply(*m, *g, kTrain), world, kTrain))
      throw ConfigError(kTrain,
                        "inconsistent batch sizes: train_batch_size (" +
                            str(*t) + ") != train_micro_batch_size_per_gpu (" +
                            str(*m) + ") * gradient_accumulation_steps (" +
                            str(*g) + ") * world size (" + str(world) + ")");
  } else if (t && m) {
    int64_t perStep = multiply(*m, world, kGas);
    if (*t % perStep != 0)
      throw ConfigError(
          kGas,
          "cannot derive gradient_accumulation_steps: train_batch_size (" +
              str(*t) +
              ") is not divisible by "
              "train_micro_batch_size_per_gpu (" +
              str(*m) + ") * world size (" + str(world) + ")");
    g = *t / perStep;
  } else if (t && g) {
    int64_t perRank = multiply(*g, world, kMicro);
    if (*t % perRank != 0)
      throw ConfigError(
          kMicro,
          "cannot derive train_micro_batch_size_per_gpu: train_batch_size (" +
              str(*t) + ") is not divisible by gradient_accumulation_steps (" +
              str(*g) + ") * world size (" + str(world) + ")");
    m = *t / perRank;
  } else if (m && g) {
    t = multiply(multiply(*m, *g, kTrain), world, kTrain);
  } else if (t) {
    g = 1;
    if (*t % world != 0)
      throw ConfigError(
          kMicro,
          "cannot derive train_micro_batch_size_per_gpu: train_batch_size (" +
              str(*t) + ") is not divisible by the world size (" + str(world) +
              ")");
    m = *t / world;
  } else if (m) {
    g = 1;
    t = multiply(*m, world, kTrain);
  } else {
    throw ConfigError(kMicro,
                      "either train_batch_size or "
                      "train_micro_batch_size_per_gpu must be given (a number "
                      "or \"auto\")");
  }
  return {*t, *m, *g};
}

/// A frozen engine's batch sizes on the data's micro-batch `dataMicro` (per
/// rank): DeepSpeed's derivation from the given train_batch_size and GAS,
/// as if the micro-batch were "auto"; where the given train_batch_size does
/// not fit, it is ignored too (train = micro * GAS * world). A given GAS is
/// kept: it contradicts no data, and the engines of a session must agree on
/// it. A warning for each given key whose value the data overrides.
BatchSizes resolveFrozen(const BatchValue &train, const BatchValue &micro,
                         const BatchValue &gas, int64_t dataMicro,
                         int64_t world, ConfigNotes &notes) {
  BatchSizes sizes;
  try {
    sizes = derive(train.value, dataMicro, gas.value, world);
  } catch (const ConfigError &) {
    sizes = derive(std::nullopt, dataMicro, gas.value, world);
  }
  auto ignored = [](const char *key, int64_t value) {
    return std::string("the engine is frozen (no optimizer): its ") + key +
           " " + str(value) +
           " is ignored, as DeepSpeed ignores the batch sizes of an engine "
           "that never steps; ";
  };
  if (micro.value && *micro.value != sizes.micro)
    notes.warnings.push_back(ConfigNote{
        kMicro,
        ignored(kMicro, *micro.value) + "the data's micro-batch is " +
            str(dataMicro) + " rows per rank (B = " + str(dataMicro * world) +
            " over world size " + str(world) + ")",
        "", 0});
  if (train.value && *train.value != sizes.train)
    notes.warnings.push_back(
        ConfigNote{kTrain,
                   ignored(kTrain, *train.value) + "the data gives " +
                       str(sizes.train) + " = " + str(dataMicro) +
                       " rows per rank * gradient_accumulation_steps " +
                       str(sizes.gas) + " * world size " + str(world),
                   "", 0});
  return sizes;
}

} // namespace

void resolveBatchSizes(ObjectReader &root, const ParseContext &context,
                       EngineConfig &config) {
  const int64_t world = context.worldSize;
  BatchValue train = readBatchValue(root, kTrain);
  BatchValue micro = readBatchValue(root, kMicro);
  BatchValue gas = readBatchValue(root, kGas);
  // No optimizer (config.optimizer is parsed later): a frozen engine.
  const bool frozen = !root.has("optimizer");

  std::optional<int64_t> t = train.value, m = micro.value, g = gas.value;

  // Any "auto" among the three asks us to fill in what the data implies: the
  // micro-batch per rank. An "auto" GAS or train batch is then derived.
  const char *autoKey =
      micro.isAuto ? kMicro
                   : (train.isAuto ? kTrain : (gas.isAuto ? kGas : nullptr));
  bool microFromData = false;
  if (autoKey && !m) {
    if (!context.dataMicroBatch)
      throw ConfigError(autoKey,
                        "\"auto\" needs the global micro-batch B of the data, "
                        "which was not given");
    int64_t dataB = *context.dataMicroBatch;
    if (dataB % world != 0)
      throw ConfigError(
          autoKey, "\"auto\": the data's global micro-batch B = " + str(dataB) +
                       " is not divisible by the world size " + str(world));
    m = dataB / world;
    microFromData = true;
  }

  // A frozen engine on data with a micro-batch per rank: the data decides.
  // A config DeepSpeed itself rejects (values that contradict each other
  // whatever the data) stays an error.
  if (frozen && context.dataMicroBatch &&
      *context.dataMicroBatch % world == 0) {
    const int64_t dataMicro = *context.dataMicroBatch / world;
    std::optional<BatchSizes> sizes;
    try {
      sizes = derive(t, m, g, world);
    } catch (const ConfigError &) {
      // Only the data's micro-batch (from "auto") can be at fault here.
      if (!microFromData)
        throw;
    }
    if (!sizes || sizes->micro != dataMicro)
      sizes = resolveFrozen(train, micro, gas, dataMicro, world, config.notes);
    config.trainBatchSize = sizes->train;
    config.trainMicroBatchSizePerGpu = sizes->micro;
    config.gradientAccumulationSteps = sizes->gas;
    return;
  }

  BatchSizes sizes = derive(t, m, g, world);
  t = sizes.train;
  m = sizes.micro;
  g = sizes.gas;

  if (context.dataMicroBatch && *m * world != *context.dataMicroBatch) {
    // Say the fix: the value that fits the data, or "auto", which takes it
    // from the data, and how to override a key without editing the file.
    int64_t dataB = *context.dataMicroBatch;
    std::string fix =
        dataB % world == 0
            ? "set train_micro_batch_size_per_gpu to " + str(dataB / world) +
                  " (B / world size) or to \"auto\", which takes it from "
                  "the data"
            : "B is not divisible by the world size: run on a world size "
              "that divides B, or give data whose B is a multiple of " +
                  str(world);
    if (dataB % world == 0 && !micro.value && t)
      fix += " (train_batch_size " + str(*t) +
             " implies it: change train_batch_size, or give "
             "train_micro_batch_size_per_gpu)";
    if (dataB % world == 0)
      fix += "; to override a key without editing the config: ds-compile "
             "--set KEY=auto, dsopt's overrides={\"KEY\": \"auto\"} (KEY "
             "is the dotted path this error names)";
    throw ConfigError(kMicro, "train_micro_batch_size_per_gpu (" + str(*m) +
                                  ") * world size (" + str(world) +
                                  ") = " + str(*m * world) +
                                  " does not match the data's global "
                                  "micro-batch B = " + str(dataB) +
                                  " (dimension 1 of each batched input): " +
                                  fix);
  }

  config.trainBatchSize = *t;
  config.trainMicroBatchSizePerGpu = *m;
  config.gradientAccumulationSteps = *g;
}

} // namespace ds::config::detail
