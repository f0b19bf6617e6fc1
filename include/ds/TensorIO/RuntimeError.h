//===- RuntimeError.h - Errors loading data or running ----------*- C++ -*-===//
//
// Problems the runtime finds outside the plan's own structure: weights or
// data files that do not match the plan, and failures while executing an op
// (a kernel's c10::Error is rethrown as a RuntimeError that names the op).
// Problems with the plan itself are ds::plan::PlanError.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TENSORIO_RUNTIMEERROR_H
#define DS_TENSORIO_RUNTIMEERROR_H

#include <stdexcept>
#include <string>

namespace ds::runtime {

/// Where in a plan an op is: for messages.
struct OpContext {
  /// The plan file (or another name for in-memory plans).
  std::string origin;
  /// "programs.eval.body[12] (aten::linear)".
  std::string where;
  /// "aten::linear", or the op kind ("unpack") for non-call ops.
  std::string op;
  std::string module;
  std::string moduleClass;
  std::string loc;

  /// "<origin>: <where> in module fc1 (torch.nn.Linear) at model.py:12".
  std::string describe() const;
};

class RuntimeError : public std::runtime_error {
public:
  /// An error not tied to an op (files, inputs); `message` is complete.
  explicit RuntimeError(const std::string &message);
  /// An error while running the op described by `context`.
  RuntimeError(OpContext context, const std::string &detail);

  /// Empty `where` for errors not tied to an op.
  const OpContext &context() const { return context_; }
  const std::string &detail() const { return detail_; }

private:
  OpContext context_;
  std::string detail_;
};

} // namespace ds::runtime

#endif // DS_TENSORIO_RUNTIMEERROR_H
