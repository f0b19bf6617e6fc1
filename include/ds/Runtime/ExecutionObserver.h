//===- ExecutionObserver.h - Watching an executor run -----------*- C++ -*-===//
//
// An Executor with an observer calls it around each part of a program it
// runs (forward, backward, step, eval) and around each op, branches' ops
// nested inside their `if`. ds-run's trace (TraceWriter.h) and its
// wall-clock breakdown (PhaseTimer.h) are observers. Without one the
// executor pays a null-pointer test per op.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_EXECUTIONOBSERVER_H
#define DS_RUNTIME_EXECUTIONOBSERVER_H

#include "ds/Plan/Plan.h"

#include <vector>

namespace ds::runtime {

/// What part of a program an Executor runs: programs.train's forward
/// ([0, backward_start)) and backward (the rest), programs.step, or any
/// other program whole (programs.eval).
enum class ProgramPart { Forward, Backward, Step, Eval };

/// "forward", "backward", "step", "eval".
const char *programPartName(ProgramPart part);

class ExecutionObserver {
public:
  virtual ~ExecutionObserver();
  virtual void partBegin(ProgramPart part) = 0;
  virtual void partEnd(ProgramPart part) = 0;
  /// `op` stays valid while the plan does. A collective's token (its
  /// results[0]) is consumed by the `wait` whose arg it is, in the same
  /// program.
  virtual void opBegin(const plan::Op &op) = 0;
  /// Also called when the op threw.
  virtual void opEnd(const plan::Op &op) = 0;
};

/// Passes every call to each observer in order.
class ObserverList final : public ExecutionObserver {
public:
  void add(ExecutionObserver *observer) { observers_.push_back(observer); }
  bool empty() const { return observers_.empty(); }

  void partBegin(ProgramPart part) override;
  void partEnd(ProgramPart part) override;
  void opBegin(const plan::Op &op) override;
  void opEnd(const plan::Op &op) override;

private:
  std::vector<ExecutionObserver *> observers_;
};

} // namespace ds::runtime

#endif // DS_RUNTIME_EXECUTIONOBSERVER_H
