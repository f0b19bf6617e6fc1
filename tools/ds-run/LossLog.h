//===- LossLog.h - The per-step JSON lines of ds-run ------------*- C++ -*-===//

#ifndef DS_TOOLS_DSRUN_LOSSLOG_H
#define DS_TOOLS_DSRUN_LOSSLOG_H

#include "World.h"

#include "ds/Plan/Plan.h"

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace ds::run {

/// Sums one optimizer step's losses over its micro-steps, per loss output
/// (outputs of kind "loss"; other outputs, logits, are not reported).
class LossMeter {
public:
  /// `planPath` names the plan in errors.
  LossMeter(const plan::Plan &plan, std::string planPath);

  /// One micro-step's forward results. Throws RuntimeError unless each is
  /// a one-element tensor.
  void add(const std::vector<at::Tensor> &outputs);

  /// {"step": step, "loss": L} plus "losses": [...] when the forward returns
  /// several: each output's mean over ranks and micro-steps, L their sum.
  /// Non-finite means are written as null (JSON has no NaN). Resets the
  /// sums for the next step.
  nlohmann::ordered_json line(int64_t step, const World &world);

private:
  const plan::Plan &plan_;
  std::string planPath_;
  /// Adds the pending device sums into sums_.
  void readPending();

  /// The outputs of kind "loss", in plan order.
  std::vector<size_t> losses_;
  /// Per loss output.
  std::vector<double> sums_;
  /// Per output, the losses added since the last readPending(), on their
  /// device (undefined: none).
  std::vector<at::Tensor> pending_;
  int64_t microSteps_ = 0;
};

/// The leader's lines: printed to stdout as they come, and kept for
/// --losses, which is written in one piece (atomically) at the end.
class LossLog {
public:
  explicit LossLog(const World &world) : world_(world) {}
  void emit(const nlohmann::ordered_json &line);
  /// Writes the kept lines to `path` (nothing when empty). Throws.
  void writeFile(const std::string &path) const;

private:
  const World &world_;
  std::string lines_;
};

} // namespace ds::run

#endif // DS_TOOLS_DSRUN_LOSSLOG_H
