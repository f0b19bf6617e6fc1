//===- Zero.cpp - The "zero_optimization" section -------------------------===//
//
// Keys and defaults of DeepSpeed's DeepSpeedZeroConfig (runtime/zero/
// config.py), under their "stage3_" names. Sizes count elements and accept
// integral floats (5e8); their "auto" values are resolved before
// (Auto.cpp). offload_optimizer to the CPU is ZeRO-Offload (stages 1-3;
// docs/zero.md, "ZeRO-Offload"); offload_param is accepted and not done.
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

/// offload_optimizer / offload_param: the section's device, "none"
/// (DeepSpeed's default) when absent; devices other than "cpu" and "none"
/// are errors. `pinMemory` receives pin_memory (DeepSpeed's default false).
/// The CPU form's other keys (buffer_count, fast_init, ...) tune DeepSpeed's
/// copies and are accepted as they are.
bool readCpuOffload(ObjectReader &zero, const char *key, bool &pinMemory) {
  std::optional<ObjectReader> offload = zero.object(key);
  if (!offload)
    return false;
  std::string device = offload->string("device").value_or("none");
  if (device != "cpu" && device != "none")
    offload->fail("device", "offloading to \"" + device +
                                "\" is not supported (\"cpu\" offloads to "
                                "host memory; \"none\" offloads nothing)");
  pinMemory = offload->boolean("pin_memory").value_or(false);
  for (const auto &item : offload->json().items())
    offload->markConsumed(item.key());
  return device == "cpu";
}

std::vector<std::string> dedupe(const std::vector<std::string> &items) {
  std::vector<std::string> result;
  std::set<std::string> seen;
  for (const std::string &item : items)
    if (seen.insert(item).second)
      result.push_back(item);
  return result;
}

} // namespace

LeafModuleConfig parseModuleSelection(std::optional<ObjectReader> section,
                                      const std::vector<std::string> &classes) {
  LeafModuleConfig leaf;
  leaf.classes = classes;
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

ZeroConfig parseZero(ObjectReader &zero, ConfigNotes &notes) {
  rejectUnsupportedFeatures(zero, unsupportedZeroFeatures());
  ZeroConfig config;
  if (auto stage = zero.integer("stage")) {
    requireRange(*stage, 0, 3, zero.keyPath("stage"));
    config.stage = int(*stage);
  }
  bool pinMemory = false;
  if (readCpuOffload(zero, "offload_optimizer", pinMemory)) {
    // DeepSpeed offloads the optimizer of its ZeRO optimizers only (stages
    // 1-3); at stage 0 it would silently keep everything on the device.
    if (config.stage == 0)
      zero.fail("offload_optimizer",
                "\"device\": \"cpu\" needs ZeRO stage 1, 2 or 3 "
                "(zero_optimization.stage is 0, where DeepSpeed has no ZeRO "
                "optimizer to offload); set a stage or \"device\": \"none\"");
    config.offloadOptimizer = OffloadConfig{pinMemory};
  }
  bool paramPin = false;
  if (readCpuOffload(zero, "offload_param", paramPin))
    notes.remarks.push_back(ConfigNote{
        zero.keyPath("offload_param"),
        "\"device\": \"cpu\" accepted and not done: parameter offload is "
        "not implemented, the parameters stay on the run's device "
        "(offload_optimizer is)",
        "", 0});

  config.contiguousGradients =
      zero.boolean("contiguous_gradients").value_or(true);
  config.reduceScatter = zero.boolean("reduce_scatter").value_or(true);
  config.allgatherPartitions =
      zero.boolean("allgather_partitions").value_or(true);
  // DeepSpeed's validator: overlap_comm defaults to (stage == 3).
  config.overlapComm = zero.boolean("overlap_comm").value_or(config.stage == 3);

  if (auto size = readSize(zero, "reduce_bucket_size"))
    config.reduceBucketSize = *size;
  if (auto size = readSize(zero, "allgather_bucket_size"))
    config.allgatherBucketSize = *size;
  if (auto size = readSize(zero, "stage3_prefetch_bucket_size"))
    config.stage3PrefetchBucketSize = *size;
  if (auto size = readSize(zero, "stage3_param_persistence_threshold"))
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

  config.leafModule = parseModuleSelection(zero.object("leaf_module"),
                                           defaultLeafModuleClasses());
  zero.rejectUnknownKeys();
  return config;
}

} // namespace detail
} // namespace ds::config
