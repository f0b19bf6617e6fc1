//===- Auto.cpp - "auto" values as the HF Trainer and Accelerate fill them
//-===//
//
// Configs written for the HF Trainer or Accelerate say "auto" where the
// integration fills in a value from its own arguments
// (transformers/integrations/deepspeed.py, HfTrainerDeepSpeedConfig). We
// have no TrainingArguments: a value comes from the command line
// (--mixed-precision, --set, applied before this), from the model (the
// hidden size), or else from the default the integration would use, with a
// warning. The batch sizes are resolved from the data by BatchSize.cpp;
// everything else stays "auto" and is an error in its section's parser.
//
//===----------------------------------------------------------------------===//

#include "Sections.h"

namespace ds::config::detail {

namespace {

/// Defaults of transformers.TrainingArguments.
constexpr double kHfLearningRate = 5e-5;
constexpr double kHfWeightDecay = 0.0;
constexpr double kHfAdamBeta1 = 0.9;
constexpr double kHfAdamBeta2 = 0.999;
constexpr double kHfAdamEpsilon = 1e-8;
constexpr double kHfMaxGradNorm = 1.0;
/// warmup_steps and warmup_ratio are 0, which the HF Trainer writes as
/// warmup_num_steps 0; DeepSpeed warms up over max(2, n) steps, so 1 (the
/// least we accept) is the same schedule.
constexpr int64_t kHfWarmupSteps = 1;
/// DeepSpeed's DeepSpeedZeroConfig defaults.
constexpr int64_t kDsMaxLiveParameters = 1000000000;
constexpr int64_t kDsMaxReuseDistance = 1000000000;

class AutoResolver {
public:
  AutoResolver(ordered_json &json, const ParseContext &context,
               ConfigNotes &notes)
      : json_(json), context_(context), notes_(notes) {}

  void run();

private:
  /// The value at the dotted `path`, reached through objects only; nullptr
  /// when a part is missing or not an object.
  ordered_json *find(const std::string &path) const;
  bool isAuto(const std::string &path) const {
    const ordered_json *value = find(path);
    return value && isAutoValue(*value);
  }
  /// Replaces the "auto" at `path` (if there is one) with `value`; `why`
  /// follows "\"auto\" = VALUE" in a warning (a default) or a remark.
  void replace(const std::string &path, ordered_json value,
               const std::string &why, bool isDefault);
  /// A default of the HF Trainer, named by its TrainingArguments field.
  void hfDefault(const std::string &path, ordered_json value,
                 const std::string &argument);

  void resolvePrecision();
  void resolveOptimizer();
  void resolveScheduler();
  void resolveZero();

  ordered_json &json_;
  const ParseContext &context_;
  ConfigNotes &notes_;
};

ordered_json *AutoResolver::find(const std::string &path) const {
  ordered_json *node = &json_;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string key = path.substr(start, dot - start);
    if (!node->is_object())
      return nullptr;
    auto it = node->find(key);
    if (it == node->end())
      return nullptr;
    node = &*it;
    if (dot == std::string::npos)
      return node;
    start = dot + 1;
  }
}

void AutoResolver::replace(const std::string &path, ordered_json value,
                           const std::string &why, bool isDefault) {
  ordered_json *slot = find(path);
  if (!slot || !isAutoValue(*slot))
    return;
  std::string detail = "\"auto\" = " + value.dump() + " (" + why + ")";
  (isDefault ? notes_.warnings : notes_.remarks)
      .push_back(ConfigNote{path, detail, "", 0});
  *slot = std::move(value);
}

void AutoResolver::hfDefault(const std::string &path, ordered_json value,
                             const std::string &argument) {
  replace(path, std::move(value),
          "the HF Trainer's default " + argument +
              "; give another with --set " + path + "=VALUE",
          /*isDefault=*/true);
}

void AutoResolver::resolvePrecision() {
  const std::optional<DType> &mode = context_.mixedPrecision;
  for (const auto &[section, dtype] :
       {std::pair<const char *, DType>{"bf16", DType::BFloat16},
        {"bfloat16", DType::BFloat16},
        {"fp16", DType::Float16}}) {
    std::string path = std::string(section) + ".enabled";
    if (mode)
      replace(path, *mode == dtype,
              std::string("--mixed-precision ") +
                  (*mode == DType::Float32 ? "no" : dtypeName(*mode)),
              /*isDefault=*/false);
    else
      replace(path, false,
              "--mixed-precision was not given and defaults to no; give "
              "--mixed-precision bf16 or fp16 to enable it",
              /*isDefault=*/true);
  }
}

void AutoResolver::resolveOptimizer() {
  hfDefault("optimizer.params.lr", kHfLearningRate, "learning_rate");
  hfDefault("optimizer.params.weight_decay", kHfWeightDecay, "weight_decay");
  hfDefault("optimizer.params.betas",
            ordered_json::array({kHfAdamBeta1, kHfAdamBeta2}),
            "adam_beta1, adam_beta2");
  hfDefault("optimizer.params.eps", kHfAdamEpsilon, "adam_epsilon");
}

void AutoResolver::resolveScheduler() {
  replace("scheduler.params.warmup_min_lr", 0.0,
          "the HF Trainer's value; give another with --set "
          "scheduler.params.warmup_min_lr=VALUE",
          /*isDefault=*/true);
  // The HF Trainer fills warmup_max_lr with learning_rate, as it fills the
  // optimizer's lr: follow the optimizer's lr when it has one.
  const ordered_json *lr = find("optimizer.params.lr");
  if (lr && lr->is_number())
    replace("scheduler.params.warmup_max_lr", *lr, "optimizer.params.lr",
            /*isDefault=*/false);
  else
    hfDefault("scheduler.params.warmup_max_lr", kHfLearningRate,
              "learning_rate");
  replace("scheduler.params.warmup_num_steps", kHfWarmupSteps,
          "the HF Trainer's default warmup_steps 0, the same schedule: "
          "DeepSpeed warms up over max(2, n) steps; give another with --set "
          "scheduler.params.warmup_num_steps=VALUE",
          /*isDefault=*/true);
  if (isAuto("scheduler.params.total_num_steps"))
    throw ConfigError("scheduler.params.total_num_steps",
                      "\"auto\" needs the length of the run (the HF Trainer "
                      "fills in its number of training steps), which the "
                      "compiler does not know; give it with --set "
                      "scheduler.params.total_num_steps=N");
}

void AutoResolver::resolveZero() {
  struct BucketKey {
    const char *key;
    const char *formula;
    int64_t (*fromHidden)(int64_t);
  };
  static const BucketKey bucketKeys[] = {
      {"reduce_bucket_size", "h*h", [](int64_t h) { return h * h; }},
      // Python's int(0.9 * h * h): the float product, truncated.
      {"stage3_prefetch_bucket_size", "int(0.9*h*h)",
       [](int64_t h) { return int64_t(0.9 * double(h) * double(h)); }},
      {"stage3_param_persistence_threshold", "10*h",
       [](int64_t h) { return 10 * h; }},
  };
  for (const BucketKey &bucket : bucketKeys) {
    std::string path = std::string("zero_optimization.") + bucket.key;
    if (!isAuto(path))
      continue;
    if (!context_.hiddenSize)
      throw ConfigError(path, "\"auto\" needs the model's hidden size, which "
                              "was not given; give a value");
    int64_t h = *context_.hiddenSize;
    std::string origin = context_.hiddenSizeOrigin.empty()
                             ? std::string()
                             : ", " + context_.hiddenSizeOrigin;
    replace(path, bucket.fromHidden(h),
            std::string(bucket.formula) + " with the hidden size h = " +
                std::to_string(h) + origin + ", as the HF Trainer fills it",
            /*isDefault=*/false);
  }
  const char *deepSpeedDefault = "DeepSpeed's default";
  replace("zero_optimization.stage3_max_live_parameters", kDsMaxLiveParameters,
          deepSpeedDefault, /*isDefault=*/true);
  replace("zero_optimization.stage3_max_reuse_distance", kDsMaxReuseDistance,
          deepSpeedDefault, /*isDefault=*/true);
  replace("zero_optimization.stage3_gather_16bit_weights_on_model_save", false,
          deepSpeedDefault, /*isDefault=*/true);
}

void AutoResolver::run() {
  resolvePrecision();
  hfDefault("gradient_clipping", kHfMaxGradNorm, "max_grad_norm");
  resolveOptimizer();
  resolveScheduler();
  resolveZero();
}

} // namespace

void resolveAutoValues(ordered_json &json, const ParseContext &context,
                       ConfigNotes &notes) {
  AutoResolver(json, context, notes).run();
}

} // namespace ds::config::detail
