//===- CheckpointManifest.cpp - Sizes and hashes of checkpoint files ------===//

#include "CheckpointManifest.h"

#include "CheckpointFiles.h"
#include "CheckpointHash.h"

#include "ds/Plan/AtomicFile.h"
#include "ds/Support/JsonPath.h"
#include "ds/TensorIO/RuntimeError.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace ds::runtime::detail {

namespace {

constexpr const char *kFormat = "ds-checkpoint-manifest";
constexpr int64_t kVersion = 1;

[[noreturn]] void malformed(const std::string &path, const std::string &why) {
  throw RuntimeError(path + ": not a checkpoint manifest: " + why);
}

/// "0123456789abcdef" -> the value; nullopt unless 16 lowercase hex digits.
std::optional<uint64_t> parseHex(const std::string &text) {
  if (text.size() != 16)
    return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : -1;
    if (digit < 0)
      return std::nullopt;
    value = value << 4 | uint64_t(digit);
  }
  return value;
}

bool plainName(const std::string &name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos && name != kManifestFile;
}

std::string describe(const ManifestEntry &entry) {
  return std::to_string(entry.size) + " bytes, xxh64 " + hexDigest(entry.xxh64);
}

[[noreturn]] void refuse(const std::string &path, const std::string &why) {
  throw RuntimeError("checkpoint file " + path + ": " + why +
                     "; refusing to load the checkpoint");
}

/// Ours hold a line per file: a huge one is not a manifest.
constexpr size_t kMaxManifestBytes = size_t(64) << 20;

/// Finds the first key that appears twice in one JSON object, as "'files'
/// at the top level" or "'a.pt' in 'files'" (nlohmann keeps the last value
/// of a repeated key and says nothing): give callback() to json::parse.
class RepeatedKeys {
public:
  nlohmann::json::parser_callback_t callback() {
    return [this](int, nlohmann::json::parse_event_t event,
                  nlohmann::json &parsed) {
      using Event = nlohmann::json::parse_event_t;
      if (event == Event::object_start) {
        open_.push_back({open_.empty() ? "" : lastKey_, {}});
      } else if (event == Event::object_end) {
        if (!open_.empty())
          open_.pop_back();
      } else if (event == Event::key) {
        lastKey_ = parsed.get<std::string>();
        if (first_.empty() && !open_.empty() &&
            !open_.back().keys.insert(lastKey_).second)
          first_ =
              "'" + lastKey_ + "'" +
              (open_.back().name.empty() ? std::string(" at the top level")
                                         : " in '" + open_.back().name + "'");
      }
      return true;
    };
  }
  /// "" when no key was repeated.
  const std::string &first() const { return first_; }

private:
  struct Object {
    std::string name; // The key whose value it is; "" at the top.
    std::set<std::string> keys;
  };
  std::vector<Object> open_;
  std::string lastKey_;
  std::string first_;
};

} // namespace

std::string manifestText(const Manifest &manifest) {
  nlohmann::ordered_json files = nlohmann::ordered_json::object();
  for (const auto &[name, entry] : manifest)
    files[name] = {{"size", entry.size}, {"xxh64", hexDigest(entry.xxh64)}};
  nlohmann::ordered_json json = {{"format", kFormat},
                                 {"version", kVersion},
                                 {"hash", "xxh64"},
                                 {"files", files}};
  return json.dump(2) + "\n";
}

Manifest parseManifest(std::string_view text, const std::string &path) {
  nlohmann::json json;
  RepeatedKeys repeated;
  try {
    json = nlohmann::json::parse(text, repeated.callback());
  } catch (const nlohmann::json::exception &error) {
    malformed(path, "bad JSON: " + ds::json::parseFailure(error));
  }
  if (!json.is_object())
    malformed(path, "expected a JSON object");
  // A repeated key would silently take its last value.
  if (!repeated.first().empty())
    malformed(path, "the key " + repeated.first() + " appears twice");
  auto field = [&](const char *key) -> const nlohmann::json & {
    auto it = json.find(key);
    if (it == json.end())
      malformed(path, std::string("no key '") + key + "'");
    return *it;
  };
  const nlohmann::json &format = field("format");
  if (!format.is_string() || format.get<std::string>() != kFormat)
    malformed(path, std::string("'format' is ") + format.dump() +
                        ", expected \"" + kFormat + "\"");
  const nlohmann::json &version = field("version");
  if (!version.is_number_integer() || version.get<int64_t>() < 1)
    malformed(path, "'version' is " + version.dump() +
                        ", expected a positive integer");
  if (version.get<int64_t>() > kVersion)
    malformed(path, "version " + version.dump() +
                        " is newer than this reader's (" +
                        std::to_string(kVersion) + ")");
  const nlohmann::json &hash = field("hash");
  if (!hash.is_string() || hash.get<std::string>() != "xxh64")
    malformed(path, "'hash' is " + hash.dump() + ", expected \"xxh64\"");
  const nlohmann::json &files = field("files");
  if (!files.is_object())
    malformed(path, "'files' is not an object");

  Manifest manifest;
  for (const auto &[name, value] : files.items()) {
    const std::string where = "file '" + name + "'";
    if (!plainName(name))
      malformed(path, where + " is not a file name inside the folder");
    if (!value.is_object() || !value.contains("size") ||
        !value.contains("xxh64"))
      malformed(path, where + ": expected {\"size\": BYTES, \"xxh64\": HEX}");
    const nlohmann::json &size = value["size"];
    // A negative JSON integer is not number_unsigned.
    if (!size.is_number_unsigned())
      malformed(path, where + ": size " + size.dump() +
                          " is not a non-negative integer");
    const nlohmann::json &digest = value["xxh64"];
    std::optional<uint64_t> parsed =
        digest.is_string() ? parseHex(digest.get<std::string>()) : std::nullopt;
    if (!parsed)
      malformed(path, where + ": xxh64 " + digest.dump() +
                          " is not 16 lowercase hex digits");
    manifest[name] = ManifestEntry{size.get<uint64_t>(), *parsed};
  }
  return manifest;
}

void writeManifest(const std::string &folder, const Manifest &manifest) {
  try {
    plan::writeFileAtomic(folder + "/" + kManifestFile, manifestText(manifest));
  } catch (const std::runtime_error &error) {
    throw RuntimeError(error.what());
  }
}

std::optional<Manifest> readManifest(const std::string &folder) {
  const std::string path = folder + "/" + kManifestFile;
  std::optional<std::string> text = readSmallFile(path, kMaxManifestBytes);
  if (!text)
    return std::nullopt;
  if (text->size() > kMaxManifestBytes)
    malformed(path, "larger than 64 MiB");
  return parseManifest(*text, path);
}

ManifestEntry hashFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw RuntimeError("cannot read " + path + ": " + std::strerror(errno));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  Xxh64 hash;
  std::vector<char> block(size_t(4) << 20);
  for (;;) {
    ssize_t n = ::read(fd, block.data(), block.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int error = errno;
      ::close(fd);
      throw RuntimeError("cannot read " + path + ": " + std::strerror(error));
    }
    if (n == 0)
      break;
    hash.update(block.data(), size_t(n));
  }
  ::close(fd);
  return ManifestEntry{hash.size(), hash.digest()};
}

void verifyFiles(const std::string &folder, const Manifest &manifest,
                 int64_t share, int64_t shares) {
  int64_t position = 0;
  for (const auto &[name, expected] : manifest) {
    const std::string path = folder + "/" + name;
    const bool mine = shares <= 1 || position++ % shares == share;
    struct stat info;
    if (::stat(path.c_str(), &info) != 0)
      refuse(path, std::string(errno == ENOENT ? "no such file"
                                               : std::strerror(errno)) +
                       ", but " + kManifestFile + " lists it (" +
                       describe(expected) + "): the checkpoint is incomplete");
    if (!S_ISREG(info.st_mode))
      refuse(path, "not a regular file");
    auto wrongSize = [&](uint64_t found) {
      refuse(path, std::to_string(found) + " bytes, but " + kManifestFile +
                       " says " + describe(expected) +
                       ": the file was cut short, or it or " + kManifestFile +
                       " changed after the save");
    };
    if (uint64_t(info.st_size) != expected.size)
      wrongSize(uint64_t(info.st_size));
    if (!mine)
      continue;
    ManifestEntry found = hashFile(path);
    if (found.size != expected.size)
      wrongSize(found.size);
    if (found.xxh64 != expected.xxh64)
      refuse(path, "xxh64 " + hexDigest(found.xxh64) + ", but " +
                       kManifestFile + " says " + describe(expected) +
                       ": the file or " + kManifestFile +
                       " changed after the save (disk or copy corruption?)");
  }
  // A torch file the manifest does not know would be read unverified (the
  // loaders pick files by name). A folder that cannot be listed cannot be
  // checked for one: refused, not skipped.
  auto unlistable = [&](int error) {
    throw RuntimeError("checkpoint folder " + folder + ": cannot list it (" +
                       std::strerror(error) + ") to check for *.pt files " +
                       kManifestFile +
                       " does not list; refusing to load the checkpoint");
  };
  std::vector<std::string> unlisted;
  DIR *listing = ::opendir(folder.c_str());
  if (!listing)
    unlistable(errno);
  for (;;) {
    errno = 0;
    struct dirent *entry = ::readdir(listing);
    if (!entry) {
      int error = errno;
      ::closedir(listing);
      if (error != 0)
        unlistable(error);
      break;
    }
    std::string_view name = entry->d_name;
    if (name.ends_with(".pt") && !manifest.count(std::string(name)))
      unlisted.emplace_back(name);
  }
  if (!unlisted.empty()) {
    std::sort(unlisted.begin(), unlisted.end());
    refuse(folder + "/" + unlisted[0],
           std::string("not listed in ") + kManifestFile +
               " (a file added or renamed after the save)");
  }
}

std::string digestLine(size_t engine, const std::string &name,
                       const ManifestEntry &entry) {
  return std::to_string(engine) + " " + name + " " +
         std::to_string(entry.size) + " " + hexDigest(entry.xxh64) + "\n";
}

void addDigestLines(std::map<size_t, Manifest> &manifests,
                    std::string_view text, const std::string &from) {
  size_t number = 0;
  while (!text.empty()) {
    ++number;
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view()
                                         : text.substr(end + 1);
    auto bad = [&](const std::string &why) {
      throw RuntimeError("internal error: the file digests from " + from +
                         ", line " + std::to_string(number) + " '" +
                         std::string(line) + "': " + why +
                         " (expected 'ENGINE NAME SIZE XXH64')");
    };
    if (end == std::string_view::npos)
      bad("not ended by a newline");
    std::vector<std::string_view> fields;
    for (size_t at = 0; at <= line.size();) {
      size_t space = line.find(' ', at);
      if (space == std::string_view::npos)
        space = line.size();
      fields.push_back(line.substr(at, space - at));
      at = space + 1;
    }
    if (fields.size() != 4)
      bad(std::to_string(fields.size()) + " fields");
    auto number64 = [&](std::string_view field, const char *what) {
      uint64_t value = 0;
      auto [rest, error] =
          std::from_chars(field.data(), field.data() + field.size(), value);
      if (field.empty() || error != std::errc() ||
          rest != field.data() + field.size())
        bad(std::string(what) + " '" + std::string(field) +
            "' is not a non-negative integer");
      return value;
    };
    const size_t engine = size_t(number64(fields[0], "engine"));
    const std::string name(fields[1]);
    if (!plainName(name))
      bad("'" + name + "' is not a file name");
    ManifestEntry entry;
    entry.size = number64(fields[2], "size");
    std::optional<uint64_t> hash = parseHex(std::string(fields[3]));
    if (!hash)
      bad("xxh64 '" + std::string(fields[3]) +
          "' is not 16 lowercase hex digits");
    entry.xxh64 = *hash;
    if (!manifests[engine].emplace(name, entry).second)
      bad("file '" + name + "' of engine " + std::to_string(engine) +
          " listed twice (written by two ranks?)");
  }
}

std::string verifyFolder(const std::string &folder, int64_t share,
                         int64_t shares) {
  std::optional<Manifest> manifest = readManifest(folder);
  if (!manifest)
    return folder + " has no " + kManifestFile +
           " (written by DeepSpeed, or before checkpoints had manifests): "
           "its files are read without verifying sizes and hashes";
  verifyFiles(folder, *manifest, share, shares);
  return "";
}

} // namespace ds::runtime::detail
