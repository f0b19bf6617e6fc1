//===- Unsupported.cpp - DeepSpeed features we do not implement -----------===//

#include "Unsupported.h"

namespace ds::config::detail {

static bool isDisabled(const ordered_json &value,
                       const UnsupportedFeature &feature) {
  if (value.is_null())
    return true;
  switch (feature.disabledForm) {
  case DisabledForm::Never:
    return false;
  case DisabledForm::EnabledFalse: {
    if (!value.is_object())
      return false;
    auto enabled = value.find("enabled");
    return enabled != value.end() && enabled->is_boolean() &&
           !enabled->get<bool>();
  }
  case DisabledForm::DefaultValue:
    // Numbers compare by value across int/float (1 == 1.0).
    return value == ordered_json::parse(feature.defaultValue);
  }
  return false;
}

static std::string acceptedForm(const UnsupportedFeature &feature) {
  switch (feature.disabledForm) {
  case DisabledForm::Never:
    return "remove the key";
  case DisabledForm::EnabledFalse:
    return "remove it or set \"enabled\": false";
  case DisabledForm::DefaultValue:
    return "remove it or use DeepSpeed's default " + feature.defaultValue;
  }
  return "";
}

void rejectUnsupportedFeatures(
    ObjectReader &reader, const std::vector<UnsupportedFeature> &features) {
  for (const UnsupportedFeature &feature : features) {
    auto it = reader.json().find(feature.key);
    if (it == reader.json().end())
      continue;
    if (!isDisabled(*it, feature))
      reader.fail(feature.key, "DeepSpeed's \"" + feature.key +
                                   "\" is not supported by this compiler (" +
                                   acceptedForm(feature) + ")");
    reader.markConsumed(feature.key);
  }
}

const std::vector<UnsupportedFeature> &unsupportedTopLevelFeatures() {
  using F = UnsupportedFeature;
  static const std::vector<F> features = {
      // Sections that have no "off" form of their own.
      F{"pipeline", DisabledForm::Never, ""},
      F{"compression_training", DisabledForm::Never, ""},
      F{"sparse_attention", DisabledForm::Never, ""},
      F{"checkpoint", DisabledForm::Never, ""},
      F{"compile", DisabledForm::Never, ""},
      F{"aio", DisabledForm::Never, ""},
      F{"weight_quantization", DisabledForm::Never, ""},
      F{"tensor_parallel", DisabledForm::Never, ""},
      F{"sequence_parallel_size", DisabledForm::Never, ""},
      F{"seq_parallel_communication_data_type", DisabledForm::Never, ""},
      F{"timers", DisabledForm::Never, ""},
      F{"expert_parallel", DisabledForm::Never, ""},
      F{"log_level", DisabledForm::Never, ""},
      F{"vocabulary_size", DisabledForm::Never, ""},
      // Sections with an "enabled" switch.
      F{"flops_profiler", DisabledForm::EnabledFalse, ""},
      F{"comms_logger", DisabledForm::EnabledFalse, ""},
      F{"amp", DisabledForm::EnabledFalse, ""},
      F{"elasticity", DisabledForm::EnabledFalse, ""},
      F{"curriculum_learning", DisabledForm::EnabledFalse, ""},
      F{"data_efficiency", DisabledForm::EnabledFalse, ""},
      F{"autotuning", DisabledForm::EnabledFalse, ""},
      F{"eigenvalue", DisabledForm::EnabledFalse, ""},
      F{"progressive_layer_drop", DisabledForm::EnabledFalse, ""},
      F{"quantize_training", DisabledForm::EnabledFalse, ""},
      F{"nebula", DisabledForm::EnabledFalse, ""},
      F{"hybrid_engine", DisabledForm::EnabledFalse, ""},
      // Flags whose default means "off".
      F{"sparse_gradients", DisabledForm::DefaultValue, "false"},
      F{"zero_allow_untested_optimizer", DisabledForm::DefaultValue, "false"},
      F{"zero_force_ds_cpu_optimizer", DisabledForm::DefaultValue, "true"},
      F{"memory_breakdown", DisabledForm::DefaultValue, "false"},
      F{"dump_state", DisabledForm::DefaultValue, "false"},
      F{"dataloader_drop_last", DisabledForm::DefaultValue, "false"},
      F{"disable_allgather", DisabledForm::DefaultValue, "false"},
      F{"graph_harvesting", DisabledForm::DefaultValue, "false"},
      F{"disable_python_gc", DisabledForm::DefaultValue, "false"},
      F{"use_data_before_expert_parallelism", DisabledForm::DefaultValue,
        "false"},
      F{"managed_gradient_accumulation", DisabledForm::DefaultValue, "true"},
      F{"gradient_allreduce_op", DisabledForm::DefaultValue, "\"mean\""},
  };
  return features;
}

const std::vector<UnsupportedFeature> &unsupportedZeroFeatures() {
  using F = UnsupportedFeature;
  static const std::vector<F> features = {
      F{"zenflow", DisabledForm::Never, ""},
      F{"zeropp_loco_param", DisabledForm::Never, ""},
      F{"stage3_model_persistence_threshold", DisabledForm::Never, ""},
      F{"zero_hpz_partition_size", DisabledForm::DefaultValue, "1"},
      F{"mics_shard_size", DisabledForm::DefaultValue, "-1"},
      F{"mics_hierarchical_params_gather", DisabledForm::DefaultValue, "false"},
      F{"zero_quantized_weights", DisabledForm::DefaultValue, "false"},
      F{"zero_quantized_nontrainable_weights", DisabledForm::DefaultValue,
        "false"},
      F{"zero_quantized_gradients", DisabledForm::DefaultValue, "false"},
      F{"cpu_offload", DisabledForm::DefaultValue, "false"},
      F{"cpu_offload_param", DisabledForm::DefaultValue, "false"},
      F{"cpu_offload_use_pin_memory", DisabledForm::DefaultValue, "false"},
      F{"round_robin_gradients", DisabledForm::DefaultValue, "false"},
      F{"ignore_unused_parameters", DisabledForm::DefaultValue, "true"},
      F{"load_from_fp32_weights", DisabledForm::DefaultValue, "true"},
      F{"elastic_checkpoint", DisabledForm::DefaultValue, "false"},
      F{"legacy_stage1", DisabledForm::DefaultValue, "false"},
      F{"use_multi_rank_bucket_allreduce", DisabledForm::DefaultValue, "true"},
      F{"memory_efficient_linear", DisabledForm::DefaultValue, "true"},
      F{"override_module_apply", DisabledForm::DefaultValue, "true"},
      F{"pipeline_loading_checkpoint", DisabledForm::DefaultValue, "false"},
      F{"log_trace_cache_warnings", DisabledForm::DefaultValue, "false"},
      F{"enable_sanity_checks", DisabledForm::DefaultValue, "false"},
      F{"save_muon_momentum_buffer_in_memory", DisabledForm::DefaultValue,
        "false"},
      F{"stage3_module_granularity_threshold", DisabledForm::DefaultValue, "0"},
      F{"stage3_use_all_reduce_for_fetch_params", DisabledForm::DefaultValue,
        "false"},
      F{"stage3_allgather_sequential", DisabledForm::DefaultValue, "false"},
      F{"stage3_partition_stream_chunk_size", DisabledForm::DefaultValue, "0"},
      F{"parameter_alignment", DisabledForm::DefaultValue, "false"},
      F{"compute_grad_norm", DisabledForm::DefaultValue, "true"},
  };
  return features;
}

} // namespace ds::config::detail
