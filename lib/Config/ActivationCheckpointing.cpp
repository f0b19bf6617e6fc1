//===- ActivationCheckpointing.cpp - The "activation_checkpointing" section
//===//
//
// DeepSpeed's section configures deepspeed.checkpointing.checkpoint(), which
// model code calls around the blocks it wants recomputed. Here the compiler
// recomputes them (-ds-rematerialize), so the blocks are named in the config
// instead: `modules` (our extension), selected as ZeRO-3 leaf modules are.
// DeepSpeed's own switches tune what has no counterpart on CPU ranks without
// model parallelism; each one that is on is accepted with a remark.
//
//===----------------------------------------------------------------------===//

#include "Sections.h"

namespace ds::config::detail {

namespace {

struct IgnoredSwitch {
  const char *key;
  const char *why;
};

/// The switches DeepSpeed reads, and why each changes nothing here.
const IgnoredSwitch kIgnoredSwitches[] = {
    {"partition_activations",
     "partitions checkpoints over model-parallel ranks; without model "
     "parallelism (mp_world_size 1) there is nothing to partition"},
    {"cpu_checkpointing",
     "moves checkpoints to host memory; the CPU runtime keeps them there "
     "already"},
    {"contiguous_memory_optimization",
     "copies checkpoints into one preallocated buffer; the plan allocates "
     "each value and frees it after its last use"},
    {"synchronize_checkpoint_boundary",
     "synchronizes the CUDA device at checkpoint boundaries; nothing to "
     "synchronize on CPU"},
    {"profile", "times the checkpoint functions; ds-run --report measures "
                "the activation peak instead"},
};

} // namespace

ActivationCheckpointingConfig
parseActivationCheckpointing(ObjectReader &section, ConfigNotes &notes) {
  ActivationCheckpointingConfig config;
  for (const IgnoredSwitch &entry : kIgnoredSwitches)
    if (section.boolean(entry.key).value_or(false))
      notes.remarks.push_back(
          ConfigNote{section.keyPath(entry.key),
                     std::string("true accepted: it ") + entry.why, "", 0});
  // Sizes contiguous_memory_optimization's buffer.
  if (auto number = section.integer("number_checkpoints")) {
    requireMin(*number, 1, section.keyPath("number_checkpoints"));
    notes.remarks.push_back(ConfigNote{
        section.keyPath("number_checkpoints"),
        "accepted: it sizes contiguous_memory_optimization's buffer, which "
        "the plan does not use",
        "", 0});
  }
  config.modules = parseModuleSelection(section.object("modules"), {});
  config.modules.classesGiven = !config.modules.classes.empty();
  section.rejectUnknownKeys();
  if (!config.selectsAny())
    notes.warnings.push_back(ConfigNote{
        section.path(),
        "selects no module, so nothing is recomputed: name the modules to "
        "checkpoint under \"modules\" (\"classes\", \"names\", "
        "\"name_suffixes\", as zero_optimization.leaf_module)",
        "", 0});
  return config;
}

} // namespace ds::config::detail
