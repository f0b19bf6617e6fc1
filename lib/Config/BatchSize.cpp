//===- BatchSize.cpp - train = micro * GAS * world ------------------------===//
//
// DeepSpeed's rule (runtime/config.py, _set_batch_related_parameters): any
// two of train_batch_size, train_micro_batch_size_per_gpu and
// gradient_accumulation_steps derive the third; train_batch_size alone or
// the micro-batch alone means GAS 1. Where DeepSpeed floors a non-divisible
// derivation and then fails its assertion, we say which division failed.
// "auto" takes the micro-batch from the data (B / world size), as Accelerate
// fills it from its dataloader; then the data must agree with the result.
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

} // namespace

void resolveBatchSizes(ObjectReader &root, const ParseContext &context,
                       EngineConfig &config) {
  const int64_t world = context.worldSize;
  BatchValue train = readBatchValue(root, kTrain);
  BatchValue micro = readBatchValue(root, kMicro);
  BatchValue gas = readBatchValue(root, kGas);

  std::optional<int64_t> t = train.value, m = micro.value, g = gas.value;

  // Any "auto" among the three asks us to fill in what the data implies: the
  // micro-batch per rank. An "auto" GAS or train batch is then derived.
  const char *autoKey =
      micro.isAuto ? kMicro
                   : (train.isAuto ? kTrain : (gas.isAuto ? kGas : nullptr));
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
  }

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
