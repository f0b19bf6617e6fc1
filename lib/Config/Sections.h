//===- Sections.h - Parsers of the sections of one engine config -*- C++
//-*-===//
//
// parseEngineConfig (EngineConfig.cpp) hands each section to its parser
// here. Each parser reads its keys through an ObjectReader and leaves
// unknown-key detection of its own object to itself. Private to lib/Config.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_CONFIG_SECTIONS_H
#define DS_LIB_CONFIG_SECTIONS_H

#include "ObjectReader.h"

namespace ds::config::detail {

/// Replaces the "auto" values that --mixed-precision, the hidden size or a
/// default of the HF Trainer or DeepSpeed resolve (Auto.cpp), noting each;
/// "auto" for total_num_steps is an error naming the --set that fixes it.
void resolveAutoValues(ordered_json &json, const ParseContext &context,
                       ConfigNotes &notes);

/// train_batch_size, train_micro_batch_size_per_gpu and
/// gradient_accumulation_steps: DeepSpeed's derivation, "auto" from the data,
/// and the check against the data's global micro-batch.
void resolveBatchSizes(ObjectReader &root, const ParseContext &context,
                       EngineConfig &config);

OptimizerConfig parseOptimizer(ObjectReader &section);

/// `optimizer` is the engine's optimizer: a scheduler needs one.
SchedulerConfig parseScheduler(ObjectReader &section,
                               const std::optional<OptimizerConfig> &optimizer);

/// Offloading to the CPU is noted in `notes` (a remark).
ZeroConfig parseZero(ObjectReader &section, ConfigNotes &notes);

/// A module selection (`classes`, `names`, `name_suffixes`, each a string
/// or a list of them; duplicates dropped); `classes` is the default list
/// until given.
LeafModuleConfig parseModuleSelection(std::optional<ObjectReader> section,
                                      const std::vector<std::string> &classes);

/// `activation_checkpointing`: DeepSpeed's switches are accepted, each one
/// that is on with a remark saying why it changes nothing here; a section
/// that selects no module is a warning.
ActivationCheckpointingConfig
parseActivationCheckpointing(ObjectReader &section, ConfigNotes &notes);

/// tensorboard, csv_monitor, wandb and comet (Monitoring.cpp); an enabled
/// wandb or comet is a remark saying it is not written.
MonitorConfig parseMonitors(ObjectReader &root, ConfigNotes &notes);

/// fp16, bf16 (or its old name bfloat16), torch_autocast, data_types and
/// communication_data_type, with their mutual exclusions.
void parsePrecision(ObjectReader &root, const ParseContext &context,
                    EngineConfig &config);

} // namespace ds::config::detail

#endif // DS_LIB_CONFIG_SECTIONS_H
