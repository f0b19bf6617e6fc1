//===- TraceWriter.h - A Chrome trace-event file of one rank ----*- C++ -*-===//
//
// Records what an engine runs (an ExecutionObserver) and writes it as
// Chrome trace-event JSON, which Perfetto (ui.perfetto.dev) and
// chrome://tracing open (docs/tracing.md). pid is the rank; tid 0 holds the
// optimizer steps, program parts and ops, nested by time; each collective
// is a slice on a "collectives" track (tid 1, 2, ... when several are in
// flight at once) from the op that starts it to the end of its `wait`.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_TRACEWRITER_H
#define DS_RUNTIME_TRACEWRITER_H

#include "ds/Runtime/ExecutionObserver.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ds::runtime {

class TraceWriter final : public ExecutionObserver {
public:
  /// `plan` must outlive the writer (its ops are recorded by address).
  TraceWriter(const plan::Plan &plan, int64_t rank);

  /// An optimizer step's span (tid 0), around its micro-steps.
  void stepBegin(int64_t step);
  void stepEnd(int64_t step);

  void partBegin(ProgramPart part) override;
  void partEnd(ProgramPart part) override;
  void opBegin(const plan::Op &op) override;
  void opEnd(const plan::Op &op) override;

  /// Writes {"traceEvents": [...], "displayTimeUnit": "ms"} to `path`.
  /// Throws RuntimeError.
  void write(const std::string &path) const;

  /// FILE.json -> FILE.rank<r>.json (FILE.rank<r>.json when FILE has no
  /// .json suffix): each rank's file of ds-run --trace FILE.
  static std::string rankPath(const std::string &path, int64_t rank);

private:
  using Clock = std::chrono::steady_clock;

  enum class Kind { Step, Part, Op, Collective };
  struct Event {
    Kind kind;
    /// Op and Collective: the op (a collective's start).
    const plan::Op *op = nullptr;
    /// Step: its number; Part: its ProgramPart; Collective: its track.
    int64_t value = 0;
    /// Microseconds since construction.
    double start = 0;
    double duration = 0;
  };
  struct Open {
    Kind kind;
    const plan::Op *op;
    int64_t value;
    Clock::time_point start;
  };
  struct InFlight {
    const plan::Op *op;
    Clock::time_point start;
    int64_t track;
  };

  double micros(Clock::time_point t) const;
  void open(Kind kind, const plan::Op *op, int64_t value);
  void close();
  /// The lowest collectives track free now.
  int64_t freeTrack() const;

  const plan::Plan &plan_;
  int64_t rank_;
  Clock::time_point origin_;
  std::vector<Open> stack_;
  std::vector<Event> events_;
  /// Collectives started and not yet waited, by program and token value.
  std::map<std::pair<int, plan::ValueId>, InFlight> inFlight_;
  /// 0: programs.train, 1: programs.step, 2: others (token namespaces).
  int program_ = 0;
  int64_t tracks_ = 0;
};

} // namespace ds::runtime

#endif // DS_RUNTIME_TRACEWRITER_H
