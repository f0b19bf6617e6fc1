//===- MetricSink.h - Where monitored scalars go ----------------*- C++ -*-===//
//
// DeepSpeed's monitors receive events (name, value, step) such as
// ("Train/Samples/train_loss", 2.31, 64), the step counting samples. Each
// file monitor of ds-run is a sink; only rank 0 makes them.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TOOLS_DSRUN_METRICSINK_H
#define DS_TOOLS_DSRUN_METRICSINK_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace ds::run {

class MetricSink {
public:
  virtual ~MetricSink() = default;
  virtual void write(const std::string &name, double value, int64_t step) = 0;
  /// Pushes what is buffered to the files.
  virtual void flush() {}
};

/// DeepSpeed's csv_monitor (deepspeed/monitor/csv_monitor.py): one file per
/// event name in `dir`, "/" and " " in the name replaced by "_", rows
/// "step,<last part of the name>" then "<step>,<value>", appended.
class CsvSink final : public MetricSink {
public:
  /// Creates `dir` (and its parents). Throws RuntimeError.
  explicit CsvSink(std::string dir);
  ~CsvSink() override;
  void write(const std::string &name, double value, int64_t step) override;
  void flush() override;

private:
  struct File;
  std::string dir_;
  std::map<std::string, std::unique_ptr<File>> files_;
};

/// Creates `dir` and its parents; RuntimeError naming `what` on failure.
void makeDirectories(const std::string &dir, const std::string &what);

/// Python's repr of a float (the shortest text that reads back equal).
std::string pythonFloat(double value);

} // namespace ds::run

#endif // DS_TOOLS_DSRUN_METRICSINK_H
