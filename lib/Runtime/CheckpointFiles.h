//===- CheckpointFiles.h - Files and folders of a checkpoint ----*- C++ -*-===//
//
// The pieces every checkpoint reader and writer shares (docs/checkpoint.md):
// DeepSpeed's file names, torch.save files written with LibTorch's pickler
// (Python's torch.load reads them) and read back, checked access to their
// dict keys with errors naming the file and the key, the `latest` file, the
// staging folder that makes a save all-or-nothing, and the test hooks that
// kill a process or fill the disk in the middle of a save. Private to
// lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_CHECKPOINTFILES_H
#define DS_LIB_RUNTIME_CHECKPOINTFILES_H

#include "CheckpointManifest.h"

#include "ds/Plan/Plan.h"

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ds::runtime::detail {

/// "mp_rank_00_model_states.pt" (stages 0-2, rank 0 writes it), or at
/// stage 3 "zero_pp_rank_<rank>_mp_rank_00_model_states.pt" (every rank).
std::string modelStatesFile(int64_t stage, int64_t rank);
/// "zero_pp_rank_<rank>_mp_rank_00_optim_states.pt" (stages 1-3); bf16
/// engines' carry DeepSpeed's "bf16_" prefix.
std::string optimStatesFile(int64_t rank, bool bf16 = false);
/// The optim states file of `rank` in `folder`: the plain name, else the
/// bf16_ one when only that exists (the plain name when neither does).
std::string findOptimStatesFile(const std::string &folder, int64_t rank);

/// An engine's precision mode as checkpoints record it (`ds_precision`):
/// "bf16", "fp16", "autocast" or "fp32".
std::string precisionMode(const plan::EngineDesc &engine);

/// A dict with string keys and any values, in insertion order.
c10::impl::GenericDict newDict();
/// A list of any values.
c10::impl::GenericList newList();
/// The JSON value as plain Python objects (dict, list, str, int, float,
/// bool, None).
c10::IValue jsonToIValue(const plan::ordered_json &json);

/// `value` as torch.save writes it, written atomically (temporary file and
/// rename). Returns its size and XXH64, hashed as the bytes went out (for
/// the manifest). Test hooks (test/mpi): DS_TEST_CHECKPOINT_ENOSPC=RANK:N
/// makes rank RANK's N-th checkpoint file fail half-way with ENOSPC;
/// DS_TEST_CHECKPOINT_KILL=RANK:N makes rank RANK kill itself (SIGKILL)
/// right after writing its N-th. Throws RuntimeError naming the file
/// ("cannot write PATH: write failed: No space left on device").
ManifestEntry writeTorchFile(const std::string &path, const c10::IValue &value,
                             int64_t rank);
/// The object in a torch.save file. Throws RuntimeError naming the file.
c10::IValue readTorchFile(const std::string &path);

/// Checked access to one dict of a checkpoint file: every error names the
/// file and the key path ("optimizer_state_dict.loss_scaler.cur_scale").
class DictView {
public:
  DictView(c10::IValue value, std::string file, std::string path = "");

  bool has(const std::string &key) const;
  c10::IValue get(const std::string &key) const;
  DictView dict(const std::string &key) const;
  at::Tensor tensor(const std::string &key) const;
  int64_t integer(const std::string &key) const;
  double number(const std::string &key) const;
  std::string string(const std::string &key) const;
  std::vector<c10::IValue> list(const std::string &key) const;
  /// The dict's entries in order (keys as strings).
  std::vector<std::pair<std::string, c10::IValue>> items() const;
  /// "FILE: key path".
  std::string where(const std::string &key) const;
  [[noreturn]] void fail(const std::string &key,
                         const std::string &problem) const;
  const std::string &file() const { return file_; }

private:
  c10::impl::GenericDict dict_;
  std::string file_;
  std::string path_;
};

/// Keys of our own that DeepSpeed's model states lack, with what its files
/// say instead. The ZeRO stage: ds_zero_stage, else the ds_config's
/// zero_optimization.stage, else `unknown`.
int64_t savedZeroStage(const DictView &model, int64_t unknown);
/// ds_trainable, else whether the engine saved optimizer state
/// (param_shapes at stages 1-3, optimizer at stage 0).
bool savedTrainable(const DictView &model);
/// ds_precision, else the ds_config's bf16 / fp16 sections ("fp32" when
/// neither is enabled).
std::string savedPrecision(const DictView &model);
/// frozen_param_shapes's entries (DeepSpeed saves None below stage 2).
std::vector<std::pair<std::string, c10::IValue>>
frozenParamShapes(const DictView &model);

/// The "optimizer_state_dict" of the optim states file at `path`, checked
/// to be ZeRO stage `stage`'s.
DictView readOptimStates(const std::string &path, int64_t stage);
/// The rank's fp32 partition in it ("fp32_flat_groups" at stage 3, else
/// "single_partition_of_fp32_groups": one 1-D tensor), checked to hold
/// `numel` elements; `expected` says where that number comes from.
at::Tensor fp32PartitionIn(const DictView &optimStates, int64_t stage,
                           int64_t numel, const std::string &expected);

/// A list of ints from a checkpoint value (a shape: a list, or a tuple as
/// torch.Size reads); `what` names it in errors.
std::vector<int64_t> intList(const c10::IValue &value, const std::string &what);

/// The bytes of the small text file at `path` (`latest`, a manifest), at
/// most `maxBytes` + 1 of them: more than `maxBytes` means the file is
/// larger (the caller says what that makes it). nullopt when there is no
/// such file; throws RuntimeError ("cannot read PATH: REASON") otherwise.
std::optional<std::string> readSmallFile(const std::string &path,
                                         size_t maxBytes);

/// Throws RuntimeError unless `tag` names a folder inside the checkpoint
/// folder: not empty, no '/', not starting with '.' (not "..", not a
/// staging folder).
void checkTag(const std::string &tag);
/// The tag in DIR/latest, checked with checkTag. Throws RuntimeError naming
/// the file when it is missing, empty, larger than 4 KiB or holds no tag.
std::string readLatest(const std::string &dir);
/// Writes DIR/latest atomically.
void writeLatest(const std::string &dir, const std::string &tag);

bool isDirectory(const std::string &path);
bool isFile(const std::string &path);
/// mkdir -p. Throws RuntimeError.
void makeDirectories(const std::string &path);
/// rm -r (no error when absent). Throws RuntimeError.
void removeTree(const std::string &path);
/// DIR/.<tag>.partial: where a save writes before the folder is published.
std::string stagingFolder(const std::string &dir, const std::string &tag);
/// Puts `staging` in place of DIR/<tag> in one step (rename, or an atomic
/// exchange with an existing folder of that tag, whose old contents are
/// then removed). Throws RuntimeError.
void publishFolder(const std::string &staging, const std::string &target);

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_CHECKPOINTFILES_H
