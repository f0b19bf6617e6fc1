//===- DataFile.h - Training data for ds-run --------------------*- C++ -*-===//
//
// A data file holds one tensor per forward argument, keyed by the argument's
// name or by position ("in0", "in1", ...): a dict saved with torch.save, or
// a .safetensors file. Batched arguments are shaped [S, B, ...] (S
// micro-steps, B = micro_batch_per_rank * world_size rows), unbatched ones
// [S, ...]. Rank r of W takes rows [r*b, (r+1)*b) of each micro-step.
// A torch.save file may instead hold a list of S such dicts without the S
// dimension, one per micro-step ([B, ...] / [...]), whose shapes may differ
// from one micro-step to the next; each must match a compiled program.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TENSORIO_DATAFILE_H
#define DS_TENSORIO_DATAFILE_H

#include "ds/Plan/Plan.h"
#include "ds/TensorIO/Safetensors.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace c10 {
struct IValue;
} // namespace c10

namespace ds::runtime {

struct DataOptions {
  /// Arguments the user declared unbatched (`--unbatched NAME`); each must
  /// be an input the plan marks `batched: false`.
  std::vector<std::string> unbatched;
};

/// Reads a data file: a `.safetensors` file, or anything else as a
/// torch.save'd dict of str -> Tensor; tensors in the file's key order.
/// Throws RuntimeError naming the file.
NamedTensors readTensorFile(const std::string &path);

/// The list form of a data file: one dict per micro-step, in order. nullopt
/// when the file holds the stacked form (a dict, or a .safetensors file).
/// Throws RuntimeError naming the file.
std::optional<std::vector<NamedTensors>>
readMicroStepDicts(const std::string &path);

class DataFile {
public:
  /// Loads `path` (".safetensors", anything else is read as torch.save) and
  /// checks it against the plan's inputs. Throws RuntimeError naming the
  /// file and the key.
  static DataFile load(const std::string &path, const plan::Plan &plan,
                       const DataOptions &options = {});

  const std::string &path() const { return path_; }
  /// S: the number of micro-steps in the file.
  int64_t numMicroSteps() const { return numMicroSteps_; }
  /// Throws RuntimeError unless the file has at least `needed` micro-steps;
  /// `why` says where the number comes from ("2 steps x 3 accumulation").
  void requireMicroSteps(int64_t needed, const std::string &why) const;

  /// Rank `rank`'s inputs for micro-step `step`, in the plan's order: views
  /// into the file's tensors, no copy.
  std::vector<at::Tensor> sliceMicroStep(int64_t step, int64_t rank,
                                         int64_t worldSize) const;

private:
  DataFile() = default;
  static DataFile loadStacked(const std::string &path,
                              const NamedTensors &entries,
                              const plan::Plan &plan, size_t shape);
  static DataFile loadMicroStepList(const std::string &path,
                                    const std::vector<c10::IValue> &list,
                                    const plan::Plan &plan);

  std::string path_;
  std::vector<at::Tensor> tensors_; // One per plan input, in plan order.
  /// The list form: each micro-step's tensors, in plan order.
  std::vector<std::vector<at::Tensor>> steps_;
  std::vector<bool> batched_;
  int64_t microBatchPerRank_ = 1;
  int64_t numMicroSteps_ = 0;
};

} // namespace ds::runtime

#endif // DS_TENSORIO_DATAFILE_H
