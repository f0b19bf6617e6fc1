//===- Compile.h - TorchScript model + DeepSpeed config -> plan -*- C++ -*-===//
//
// The whole compile pipeline behind one call: import the model (training and
// eval forwards), run ds-compile-pipeline (CompilePipeline.h: the config
// enters the IR in -ds-assign-engines, then the passes) and emit the plan.
// ds-compile and the Python package (dsopt) are thin drivers over it, so both
// compile exactly the same way, and `ds-opt --pass-pipeline=...` reproduces
// its IR.
//
// Failures come back as text, never as an abort or an escaping exception: a
// Python interpreter that hosts the compiler must survive a bad model.
//
//===----------------------------------------------------------------------===//

#ifndef DS_COMPILER_COMPILE_H
#define DS_COMPILER_COMPILE_H

#include "ds/Plan/Plan.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ds::compiler {

struct CompileOptions {
  /// The TorchScript archive (torch.jit.script / torch.jit.trace, saved).
  std::string modelPath;
  /// The DeepSpeed config: a JSON file (relative engine config paths of the
  /// multi-engine form resolve against its folder) ...
  std::string configPath;
  /// ... or, when configPath is empty, the JSON text itself (Python's dict).
  /// Relative engine config paths then resolve against configBaseDir (the
  /// current directory when empty), and errors name it configSourceName.
  std::string configJson;
  std::string configBaseDir;
  std::string configSourceName = "<config>";
  /// ... or, when both are empty, one config file per engine as NAME=FILE
  /// (ds-compile --config student=zero2.json --config teacher=zero3.json):
  /// the {"engines": {NAME: FILE}} document, files relative to the current
  /// directory.
  std::vector<std::string> engineConfigFiles;
  /// `--mixed-precision` (bf16, fp16 or no; empty: not given) and `--set`
  /// KEY=VALUE overrides (docs/config.md).
  std::string mixedPrecision;
  std::vector<std::string> configOverrides;
  /// Data files whose shapes the plan is specialised on: the stacked form
  /// (`[S, B, ...]`, one shape) or a list of per-micro-step dicts (each
  /// distinct set of shapes once). The first shape is the plan's inputs and
  /// programs, the others its `variants`; its global micro-batch resolves
  /// the config's batch sizes.
  std::vector<std::string> exampleInputsPaths;
  /// Data-parallel ranks; B / worldSize rows make one rank's micro-batch.
  unsigned worldSize = 1;
  /// Forward arguments that are not batched (`[S, ...]` in the data file).
  std::vector<std::string> unbatched;
  /// The device the plan is compiled for: "cpu" or "cuda" (the module's
  /// ds.target_device and the plan's `device`).
  std::string device = "cpu";
  /// Keep the IR after each stage in CompileResult::irAfterPass.
  bool keepIR = false;
  /// Keep only the "final" stage (ds-compile --dump-ir).
  bool keepFinalIR = false;
  /// The plan's `producer` field.
  std::string producer = "ds-compile";
};

struct CompileResult {
  /// Validated by the emitter's caller only when written; the weights path
  /// is absolute so the plan can move.
  ds::plan::Plan plan;
  /// With keepIR: (stage, IR text) in pipeline order. Stages: "import",
  /// then each pass that ran, named by its argument ("ds-assign-engines",
  /// "ds-assign-precision", and for a trainable model "ds-autodiff", ...,
  /// "ds-verify-collectives"), then "final": the IR the plan is emitted
  /// from.
  std::vector<std::pair<std::string, std::string>> irAfterPass;
  /// Warnings the import and passes emitted, one formatted line each.
  std::vector<std::string> warnings;
  /// The passes' remarks, one formatted line each: the decisions they took
  /// (each engine's precision, its buckets' communication dtypes, leaf
  /// modules).
  std::vector<std::string> remarks;

  /// The IR after `stage`, or nullptr when it was not kept or never ran.
  const std::string *findIR(const std::string &stage) const;
};

/// Runs the pipeline. On failure returns nullopt and sets `error` to the
/// message: MLIR diagnostics as "<file>:<line>:<col>: <message>" lines (notes
/// follow as "...: note: ..."), config errors as the config library words
/// them ("<file>: <key.path>: <detail>"). Never throws.
std::optional<CompileResult> compile(const CompileOptions &options,
                                     std::string &error) noexcept;

} // namespace ds::compiler

#endif // DS_COMPILER_COMPILE_H
