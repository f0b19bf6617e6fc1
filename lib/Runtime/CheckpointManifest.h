//===- CheckpointManifest.h - Sizes and hashes of checkpoint files -*- C++ -*-//
//
// Every checkpoint folder the runtime writes holds ds_manifest.json: the size
// and XXH64 of each of the folder's files, computed while they were written
// (docs/checkpoint.md, "Manifest"). Loading and ds-zero-to-fp32 check the
// files against it before reading any, and refuse a changed, cut or missing
// file, naming it; a folder without one (DeepSpeed's own checkpoints) is read
// unverified, with a remark. Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_CHECKPOINTMANIFEST_H
#define DS_LIB_RUNTIME_CHECKPOINTMANIFEST_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ds::runtime::detail {

/// The manifest's file name inside a checkpoint folder. DeepSpeed's readers
/// look for *_model_states.pt and *_optim_states.pt only, and skip it.
inline constexpr const char *kManifestFile = "ds_manifest.json";

struct ManifestEntry {
  uint64_t size = 0;
  uint64_t xxh64 = 0;
};
/// File name (inside the folder) -> its size and hash, in name order.
using Manifest = std::map<std::string, ManifestEntry>;

/// The manifest as JSON: {"format": "ds-checkpoint-manifest", "version": 1,
/// "hash": "xxh64", "files": {NAME: {"size": BYTES, "xxh64": "16 hex"}}}.
std::string manifestText(const Manifest &manifest);
/// Parses a manifest; `path` names it in errors. Throws RuntimeError
/// ("PATH: not a checkpoint manifest: ...") for bad JSON, a key that
/// appears twice in one object, a missing or mistyped key, a negative size,
/// a hash that is not 16 hex digits, a file name with a '/', or another
/// format or a later version.
Manifest parseManifest(std::string_view text, const std::string &path);
/// Writes FOLDER/ds_manifest.json atomically. Throws RuntimeError.
void writeManifest(const std::string &folder, const Manifest &manifest);
/// FOLDER/ds_manifest.json, parsed; nullopt when the folder has none.
/// Throws RuntimeError when it is there but unreadable or malformed.
std::optional<Manifest> readManifest(const std::string &folder);

/// The size and XXH64 of the file at `path`, read once in large blocks.
/// Throws RuntimeError naming it.
ManifestEntry hashFile(const std::string &path);

/// Checks `folder`'s files against `manifest` before anything reads them:
/// every listed file exists with its size, and none of the folder's *.pt
/// files is unlisted; the listed files whose position (in name order)
/// modulo `shares` is `share` are also hashed, so that the ranks of a load
/// split the reading. Throws RuntimeError naming the file with what the
/// manifest says and what was found (a hash that differs: the file or the
/// manifest changed), and when the folder cannot be listed.
void verifyFiles(const std::string &folder, const Manifest &manifest,
                 int64_t share = 0, int64_t shares = 1);

/// What a rank tells rank 0 of one file it wrote into engine `engine`'s
/// staging folder, for the manifest: "ENGINE NAME SIZE XXH64\n" (the hash
/// as 16 hex digits).
std::string digestLine(size_t engine, const std::string &name,
                       const ManifestEntry &entry);
/// Adds every digestLine() of `text` (a rank's, `from` names it: "rank 1")
/// to `manifests` (engine -> its manifest). The whole text must be such
/// lines: throws RuntimeError naming the line for anything else, and for a
/// file listed twice.
void addDigestLines(std::map<size_t, Manifest> &manifests,
                    std::string_view text, const std::string &from);

/// readManifest() and verifyFiles(). Returns "" when the folder was
/// verified, or the remark to show when it has no manifest.
std::string verifyFolder(const std::string &folder, int64_t share = 0,
                         int64_t shares = 1);

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_CHECKPOINTMANIFEST_H
