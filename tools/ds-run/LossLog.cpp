//===- LossLog.cpp - The per-step JSON lines of ds-run --------------------===//
//
// A step's loss is the mean over ranks and micro-steps, as DeepSpeed reports
// it (per output when the forward returns several losses, and their sum as
// "loss": the scalar one shared backward differentiates).
//
//===----------------------------------------------------------------------===//

#include "LossLog.h"

#include "ds/Plan/AtomicFile.h"
#include "ds/TensorIO/DTypes.h"
#include "ds/TensorIO/RuntimeError.h"

#include <ATen/ATen.h>

#include <cmath>
#include <iostream>

namespace ds::run {

using runtime::RuntimeError;

LossMeter::LossMeter(const plan::Plan &plan, std::string planPath)
    : plan_(plan), planPath_(std::move(planPath)) {
  for (size_t k = 0; k < plan.outputs.size(); ++k)
    if (plan.outputs[k].kind == "loss")
      losses_.push_back(k);
  sums_.assign(losses_.size(), 0.0);
  pending_.resize(losses_.size());
}

void LossMeter::add(const std::vector<at::Tensor> &outputs) {
  for (size_t l = 0; l < losses_.size() && losses_[l] < outputs.size(); ++l) {
    size_t k = losses_[l];
    if (outputs[k].numel() != 1)
      throw RuntimeError(planPath_ + ": output " + std::to_string(k) + " (\"" +
                         plan_.outputs[k].name + "\") is " +
                         runtime::describeTensor(outputs[k]) +
                         ", not a scalar; ds-run reports scalar losses");
    // Summed where the loss lives, in float64 (exactly what adding each
    // loss's item() would give): a GPU run reads them once per step.
    at::Tensor loss = outputs[k].detach().reshape({}).to(at::kDouble);
    pending_[l] = pending_[l].defined() ? pending_[l] + loss : loss;
  }
  ++microSteps_;
}

void LossMeter::readPending() {
  std::vector<at::Tensor> defined;
  for (const at::Tensor &sum : pending_)
    if (sum.defined())
      defined.push_back(sum);
  if (defined.empty())
    return;
  at::Tensor host = at::stack(defined).to(at::kCPU); // One host sync.
  size_t next = 0;
  for (size_t k = 0; k < pending_.size(); ++k)
    if (pending_[k].defined()) {
      sums_[k] += host[int64_t(next++)].item<double>();
      pending_[k] = at::Tensor();
    }
}

namespace {

/// JSON has no NaN or infinity: write them as null.
nlohmann::ordered_json number(double value) {
  return std::isfinite(value) ? nlohmann::ordered_json(value)
                              : nlohmann::ordered_json(nullptr);
}

} // namespace

nlohmann::ordered_json LossMeter::line(int64_t step, const World &world) {
  readPending();
  world.sumAcrossRanks(sums_);
  double count = double(microSteps_ * world.size);
  double total = 0.0;
  nlohmann::ordered_json losses = nlohmann::ordered_json::array();
  for (double sum : sums_) {
    double mean = sum / count;
    total += mean;
    losses.push_back(number(mean));
  }
  nlohmann::ordered_json json;
  json["step"] = step;
  // A plan without a loss output (only logits) has no loss to report.
  json["loss"] = sums_.empty() ? nlohmann::ordered_json(nullptr) : number(total);
  if (sums_.size() > 1)
    json["losses"] = std::move(losses);
  sums_.assign(sums_.size(), 0.0);
  microSteps_ = 0;
  return json;
}

void LossLog::emit(const nlohmann::ordered_json &line) {
  if (!world_.isLeader())
    return;
  std::string text = line.dump() + "\n";
  std::cout << text << std::flush;
  lines_ += text;
}

void LossLog::writeFile(const std::string &path) const {
  if (world_.isLeader() && !path.empty())
    plan::writeFileAtomic(path, lines_);
}

} // namespace ds::run
