//===- Zero.cpp - The "zero_optimization" section -------------------------===//
//
// Keys and defaults of DeepSpeed's DeepSpeedZeroConfig (runtime/zero/
// config.py), under their "stage3_" names. Sizes count elements and accept
// integral floats (5e8). Three sizes may be "auto" when the caller knows the
// model's hidden size h, resolved as Accelerate and the HF Trainer do:
// reduce_bucket_size = h*h, stage3_prefetch_bucket_size = int(0.9*h*h),
// stage3_param_persistence_threshold = 10*h.
//
//===----------------------------------------------------------------------===//

#include "Sections.h"
#include "Unsupported.h"

#include <set>

namespace ds::config {

const std::vector<std::string> &defaultLeafModuleClasses() {
  static const std::vector<std::string> classes = {
      "transformers.models.mixtral.modeling_mixtral.MixtralSparseMoeBlock",
      "transformers.models.qwen2_moe.modeling_qwen2_moe.Qwen2MoeSparseMoeBlock",
      "transformers.models.qwen3_moe.modeling_qwen3_moe.Qwen3MoeSparseMoeBlock",
  };
  return classes;
}

namespace detail {

namespace {

std::optional<int64_t> readSize(ObjectReader &zero, const char *key) {
  std::optional<int64_t> size = zero.integer(key);
  if (size)
    requireMin(*size, 0, zero.keyPath(key));
  return size;
}

/// A size that may be "auto", resolved from the hidden size.
std::optional<int64_t> readSizeOrAuto(ObjectReader &zero, const char *key,
                                      const ParseContext &context,
                                      int64_t (*fromHidden)(int64_t)) {
  if (!zero.takeAuto(key))
    return readSize(zero, key);
  if (!context.hiddenSize)
    throw ConfigError(zero.keyPath(key),
                      "\"auto\" needs the model's hidden size, which was not "
                      "given; give a value");
  return fromHidden(*context.hiddenSize);
}

std::vector<std::string> dedupe(const std::vector<std::string> &items) {
  std::vector<std::string> result;
  std::set<std::string> seen;
  for (const std::string &item : items)
    if (seen.insert(item).second)
      result.push_back(item);
  return result;
}

LeafModuleConfig parseLeafModule(std::optional<ObjectReader> section) {
  LeafModuleConfig leaf;
  leaf.classes = defaultLeafModuleClasses();
  if (!section)
    return leaf;
  if (auto classes = section->stringList("classes", true)) {
    leaf.classes = dedupe(*classes);
    leaf.classesGiven = true;
  }
  if (auto names = section->stringList("names", true))
    leaf.names = dedupe(*names);
  if (auto suffixes = section->stringList("name_suffixes", true))
    leaf.nameSuffixes = dedupe(*suffixes);
  section->rejectUnknownKeys();
  return leaf;
}

} // namespace

ZeroConfig parseZero(ObjectReader &zero, const ParseContext &context) {
  rejectUnsupportedFeatures(zero, unsupportedZeroFeatures());
  ZeroConfig config;
  if (auto stage = zero.integer("stage")) {
    requireRange(*stage, 0, 3, zero.keyPath("stage"));
    config.stage = int(*stage);
  }
  config.contiguousGradients =
      zero.boolean("contiguous_gradients").value_or(true);
  config.reduceScatter = zero.boolean("reduce_scatter").value_or(true);
  config.allgatherPartitions =
      zero.boolean("allgather_partitions").value_or(true);
  // DeepSpeed's validator: overlap_comm defaults to (stage == 3).
  config.overlapComm = zero.boolean("overlap_comm").value_or(config.stage == 3);

  if (auto size = readSizeOrAuto(zero, "reduce_bucket_size", context,
                                 [](int64_t h) { return h * h; }))
    config.reduceBucketSize = *size;
  if (auto size = readSize(zero, "allgather_bucket_size"))
    config.allgatherBucketSize = *size;
  // Python's int(0.9 * h * h): the float product, truncated.
  if (auto size = readSizeOrAuto(
          zero, "stage3_prefetch_bucket_size", context,
          [](int64_t h) { return int64_t(0.9 * double(h) * double(h)); }))
    config.stage3PrefetchBucketSize = *size;
  if (auto size = readSizeOrAuto(zero, "stage3_param_persistence_threshold",
                                 context, [](int64_t h) { return 10 * h; }))
    config.stage3ParamPersistenceThreshold = *size;
  if (auto size = readSize(zero, "stage3_max_live_parameters"))
    config.stage3MaxLiveParameters = *size;
  if (auto size = readSize(zero, "stage3_max_reuse_distance"))
    config.stage3MaxReuseDistance = *size;
  if (auto size = readSize(zero, "sub_group_size"))
    config.subGroupSize = *size;

  // The deprecated fp16 name is DeepSpeed's alias of the 16bit one.
  std::optional<bool> gather16 =
      zero.boolean("stage3_gather_16bit_weights_on_model_save");
  std::optional<bool> gatherFp16 =
      zero.boolean("stage3_gather_fp16_weights_on_model_save");
  if (gather16 && gatherFp16 && *gather16 != *gatherFp16)
    zero.fail("stage3_gather_fp16_weights_on_model_save",
              "contradicts stage3_gather_16bit_weights_on_model_save");
  config.stage3Gather16BitWeightsOnModelSave =
      gather16.value_or(gatherFp16.value_or(false));

  config.leafModule = parseLeafModule(zero.object("leaf_module"));
  zero.rejectUnknownKeys();
  return config;
}

} // namespace detail
} // namespace ds::config
