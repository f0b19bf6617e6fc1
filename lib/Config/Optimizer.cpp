//===- Optimizer.cpp - The "optimizer" section ----------------------------===//
//
// DeepSpeed lower-cases the names of its own optimizers, so "adam", "Adam"
// and "ADAM" are one optimizer; we do the same for SGD (which DeepSpeed
// looks up in torch.optim by exact name). "Adam" decouples weight decay
// unless "adam_w_mode" is false; "AdamW" always does. Defaults follow the
// class DeepSpeed instantiates: FusedAdam (weight_decay 0) unless
// "torch_adam" picks torch.optim.AdamW (weight_decay 0.01) or
// torch.optim.Adam (0).
//
//===----------------------------------------------------------------------===//

#include "Sections.h"

#include <algorithm>
#include <cctype>

namespace ds::config {

const char *optimizerTypeName(OptimizerType type) {
  switch (type) {
  case OptimizerType::Adam:
    return "Adam";
  case OptimizerType::AdamW:
    return "AdamW";
  case OptimizerType::SGD:
    return "SGD";
  }
  return "?";
}

bool OptimizerConfig::decoupledWeightDecay() const {
  return type == OptimizerType::AdamW ||
         (type == OptimizerType::Adam && adamWMode);
}

namespace detail {

namespace {

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return text;
}

OptimizerType parseOptimizerType(ObjectReader &section) {
  std::optional<std::string> name = section.string("type");
  if (!name)
    section.fail("type", "missing: the optimizer needs a \"type\" (Adam, "
                         "AdamW or SGD)");
  std::string lower = lowercase(*name);
  if (lower == "adam")
    return OptimizerType::Adam;
  if (lower == "adamw")
    return OptimizerType::AdamW;
  if (lower == "sgd")
    return OptimizerType::SGD;
  section.fail("type", "optimizer \"" + *name +
                           "\" is not supported (supported: Adam, AdamW, SGD)");
}

std::array<double, 2> parseBetas(const ordered_json &value,
                                 const std::string &path) {
  if (!value.is_array() || value.size() != 2)
    throw ConfigError(path, "expected a list of two numbers, found " +
                                describeValue(value));
  std::array<double, 2> betas{};
  for (size_t i = 0; i < 2; ++i) {
    std::string elementPath = json::joinIndex(path, i);
    betas[i] = toNumber(value[i], elementPath);
    if (!(betas[i] >= 0.0 && betas[i] < 1.0))
      throw ConfigError(elementPath, "must be in [0, 1), got " +
                                         ordered_json(betas[i]).dump());
  }
  return betas;
}

void parseAdamParams(ObjectReader &params, OptimizerConfig &optimizer) {
  if (const ordered_json *betas = params.take("betas"))
    optimizer.betas = parseBetas(*betas, params.keyPath("betas"));
  if (auto eps = params.number("eps")) {
    requireMin(*eps, 0.0, params.keyPath("eps"));
    optimizer.eps = *eps;
  }
  optimizer.torchAdam = params.boolean("torch_adam").value_or(false);
  std::optional<bool> adamWMode = params.boolean("adam_w_mode");
  if (optimizer.type == OptimizerType::AdamW) {
    // DeepSpeed ignores adam_w_mode for AdamW; a false there is a mistake.
    if (adamWMode && !*adamWMode)
      params.fail("adam_w_mode",
                  "AdamW always decouples weight decay; use type \"Adam\" "
                  "with \"adam_w_mode\": false for L2-style decay");
    optimizer.adamWMode = true;
  } else {
    optimizer.adamWMode = adamWMode.value_or(true);
  }
  // torch.optim.AdamW defaults weight_decay to 0.01; FusedAdam and
  // torch.optim.Adam to 0.
  optimizer.weightDecay =
      optimizer.torchAdam && optimizer.decoupledWeightDecay() ? 0.01 : 0.0;
  if (auto bias = params.boolean("bias_correction"); bias && !*bias)
    params.fail("bias_correction",
                "\"bias_correction\": false is not supported");
  if (auto amsgrad = params.boolean("amsgrad"); amsgrad && *amsgrad)
    params.fail("amsgrad", "\"amsgrad\": true is not supported");
}

void parseSgdParams(ObjectReader &params, OptimizerConfig &optimizer) {
  optimizer.adamWMode = false;
  if (auto momentum = params.number("momentum")) {
    requireMin(*momentum, 0.0, params.keyPath("momentum"));
    optimizer.momentum = *momentum;
  }
  if (auto dampening = params.number("dampening"))
    optimizer.dampening = *dampening;
  optimizer.nesterov = params.boolean("nesterov").value_or(false);
  // torch.optim.SGD's own check.
  if (optimizer.nesterov &&
      (optimizer.momentum <= 0.0 || optimizer.dampening != 0.0))
    params.fail("nesterov",
                "nesterov momentum requires momentum > 0 and dampening 0");
}

} // namespace

OptimizerConfig parseOptimizer(ObjectReader &section) {
  OptimizerConfig optimizer;
  optimizer.type = parseOptimizerType(section);
  if (auto legacy = section.boolean("legacy_fusion"); legacy && *legacy)
    section.fail("legacy_fusion", "\"legacy_fusion\": true is not supported");

  ordered_json noParams = ordered_json::object();
  std::optional<ObjectReader> given = section.object("params");
  ObjectReader params =
      given ? *given : ObjectReader(noParams, section.keyPath("params"));

  if (params.has("max_grad_norm"))
    params.fail("max_grad_norm",
                "\"max_grad_norm\" is not supported as an optimizer "
                "parameter; use the top-level \"gradient_clipping\"");
  if (auto lr = params.number("lr")) {
    requireMin(*lr, 0.0, params.keyPath("lr"));
    optimizer.lr = *lr;
  }
  if (optimizer.type == OptimizerType::SGD)
    parseSgdParams(params, optimizer);
  else
    parseAdamParams(params, optimizer);
  if (auto weightDecay = params.number("weight_decay")) {
    requireMin(*weightDecay, 0.0, params.keyPath("weight_decay"));
    optimizer.weightDecay = *weightDecay;
  }

  params.rejectUnknownKeys(std::string("for optimizer ") +
                           optimizerTypeName(optimizer.type));
  section.rejectUnknownKeys();
  return optimizer;
}

} // namespace detail
} // namespace ds::config
