//===- TensorBoardSink.h - TensorBoard event files --------------*- C++ -*-===//
//
// DeepSpeed's tensorboard monitor writes scalars with torch's SummaryWriter
// into output_path/job_name/. Here the events are protobuf messages
// (TensorBoardEvent.proto, TensorFlow's field numbers) in a TFRecord file,
// events.out.tfevents.<time>.<host>, which TensorBoard and its
// EventAccumulator read.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TOOLS_DSRUN_TENSORBOARDSINK_H
#define DS_TOOLS_DSRUN_TENSORBOARDSINK_H

#include "MetricSink.h"

#include <cstdio>
#include <string>

namespace ds::run {

class TensorBoardSink final : public MetricSink {
public:
  /// Creates `dir` and the event file (its first record names the format
  /// version). Throws RuntimeError.
  explicit TensorBoardSink(const std::string &dir);
  ~TensorBoardSink() override;
  void write(const std::string &name, double value, int64_t step) override;
  void flush() override;

private:
  /// One TFRecord: length, its masked CRC-32C, the bytes, theirs.
  void writeRecord(const std::string &bytes);

  std::string path_;
  std::FILE *file_ = nullptr;
};

/// CRC-32C (Castagnoli) of `size` bytes, as TFRecord checks them.
uint32_t crc32c(const void *data, size_t size);

} // namespace ds::run

#endif // DS_TOOLS_DSRUN_TENSORBOARDSINK_H
