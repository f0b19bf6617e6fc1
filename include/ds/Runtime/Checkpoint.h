//===- Checkpoint.h - DeepSpeed checkpoints: options, zero_to_fp32 -*- C++ -*-//
//
// Engine::saveCheckpoint / loadCheckpoint / save16bitModel (Engine.h) write
// and read DeepSpeed's checkpoint layout (docs/checkpoint.md). This header
// holds their options and the offline half: rebuilding whole fp32 weights
// from the shards of a checkpoint of any ZeRO stage and world size
// (ds-zero-to-fp32), and writing a state dict as pytorch_model.bin or
// model.safetensors, sharded with an index json above a size.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_CHECKPOINT_H
#define DS_RUNTIME_CHECKPOINT_H

#include "ds/TensorIO/Safetensors.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ds::runtime {

struct SaveCheckpointOptions {
  /// Also save the frozen engines of a multi-engine plan (their parameters
  /// never change, so by default only trainable engines are saved).
  bool includeFrozen = false;
};

/// What consolidateCheckpoint() rebuilt.
struct ConsolidatedCheckpoint {
  /// Every parameter (fp32, whole) and buffer, keyed by the names of the
  /// checkpoint's module (relative to the engine's submodule).
  NamedTensors tensors;
  /// The folder that was read (DIR/<tag>).
  std::string path;
  int64_t stage = 0;
  int64_t worldSize = 1;
  /// Lines for the user that are not errors: the folder had no manifest
  /// (DeepSpeed's checkpoints), so its files were read unverified.
  std::vector<std::string> remarks;
};

/// Checks every file of one checkpoint folder (DIR/<tag>) against its
/// ds_manifest.json (sizes and XXH64 hashes). Returns "" when verified, or
/// the remark to show when the folder has no manifest (DeepSpeed's). Throws
/// RuntimeError naming a changed, cut or missing file, or a malformed
/// manifest. consolidateCheckpoint() calls it first.
std::string verifyCheckpointFolder(const std::string &folder);

/// Rebuilds full fp32 weights from DIR/<tag> (tag "": DIR/latest's) as
/// DeepSpeed's zero_to_fp32.py does: stage 0 from the module, stages 1-3
/// from every rank's fp32 partition, laid out by the checkpoint's flat
/// layout. First checks every file against the folder's manifest
/// (ds_manifest.json: sizes and XXH64 hashes; none: a remark). Checks that
/// every rank's file is there and every shape agrees; throws RuntimeError
/// naming the file, key or parameter that is missing, changed or wrong.
ConsolidatedCheckpoint consolidateCheckpoint(const std::string &dir,
                                             const std::string &tag = "");

/// Writes `tensors` into `outDir` (created if needed) as
/// "pytorch_model.bin" (torch.save format) or, with `safetensors`,
/// "model.safetensors". When `maxShardBytes` > 0 and the tensors take more,
/// they are split in order into shards of at most that many bytes (a
/// larger tensor gets a shard of its own), named as Hugging Face names them
/// ("pytorch_model-00001-of-00003.bin", "model-00001-of-00003.safetensors")
/// with an index ("pytorch_model.bin.index.json" /
/// "model.safetensors.index.json": {"metadata": {"total_size"},
/// "weight_map": {name: file}}). Every file is written atomically. Returns
/// the files written (names inside outDir). Throws RuntimeError.
std::vector<std::string> writeStateDict(const std::string &outDir,
                                        const NamedTensors &tensors,
                                        bool safetensors,
                                        int64_t maxShardBytes = 0);

/// A dict of name -> tensor as torch.save writes it (Python's torch.load
/// and nn.Module.load_state_dict read it), written atomically. Throws
/// RuntimeError.
void writeTorchStateDict(const std::string &path, const NamedTensors &tensors);

} // namespace ds::runtime

#endif // DS_RUNTIME_CHECKPOINT_H
