//===- Options.h - ds-run command line --------------------------*- C++ -*-===//

#ifndef DS_TOOLS_DSRUN_OPTIONS_H
#define DS_TOOLS_DSRUN_OPTIONS_H

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ds::run {

/// A bad command line; the message names the offending flag or value.
class UsageError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct Options {
  std::string planPath;
  std::string dataPath;
  /// Optimizer steps to run; default: as many whole steps as the data holds.
  std::optional<int64_t> steps;
  /// Run the eval program instead of training.
  bool eval = false;
  /// JSON-lines output, written atomically at the end.
  std::string lossesPath;
  std::vector<std::string> unbatched;
  /// Replaces the plan's weights.
  std::string weightsPath;
  /// Final parameters and buffers (safetensors), written atomically.
  std::string saveParamsPath;
  /// Measured memory and communication report (JSON, docs/runtime.md
  /// "Reports"), written atomically by rank 0 when training ends.
  std::string reportPath;
  /// Checkpoints (docs/checkpoint.md): saved into this folder every
  /// `saveEvery` steps (0: only at the end) and when the run ends.
  std::string saveCheckpointDir;
  int64_t saveEvery = 0;
  /// Also save frozen engines.
  bool saveFrozen = false;
  /// save_16bit_model into this folder when the run ends.
  std::string save16BitDir;
  /// Its file name (default DeepSpeed's pytorch_model.bin).
  std::optional<std::string> save16BitFile;
  bool save16BitExcludeFrozen = false;
  /// Chrome trace-event JSON of the training run, one file per rank
  /// (TraceWriter::rankPath; docs/tracing.md).
  std::string tracePath;
  /// Resume from this folder's latest checkpoint.
  std::string resumeDir;
  /// Overrides the configs' "seed".
  std::optional<int64_t> seed;
  /// --device; empty: the plan's.
  std::string device;
  bool help = false;
};

/// Parses argv. Throws UsageError.
Options parseOptions(int argc, char **argv);

/// The --help text.
std::string usageText();

} // namespace ds::run

#endif // DS_TOOLS_DSRUN_OPTIONS_H
