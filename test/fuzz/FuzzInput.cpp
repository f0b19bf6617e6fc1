//===- FuzzInput.cpp - Turning fuzz bytes into the files readers take -----===//

#include "FuzzInput.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <unistd.h>

namespace fs = std::filesystem;

namespace ds::fuzz {
namespace {

bool safeName(std::string_view name) {
  if (name.empty() || name.size() > 64 || name.front() == '/' ||
      name.back() == '/' || name.find("..") != std::string_view::npos ||
      name.front() == '.' || name.find("/.") != std::string_view::npos)
    return false;
  int slashes = 0;
  for (char c : name) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                 (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (c == '/')
      ++slashes;
    else if (!plain)
      return false;
  }
  return slashes <= 1;
}

/// Made once per process under TMPDIR; removed when the process exits.
class ScratchFolder {
public:
  ScratchFolder() {
    const char *tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp && *tmp ? tmp : "/tmp") + "/ds-fuzz-XXXXXX";
    if (!mkdtemp(pattern.data()))
      throw std::runtime_error("cannot make a scratch folder " + pattern);
    path_ = pattern;
  }
  ~ScratchFolder() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const std::string &path() const { return path_; }

private:
  std::string path_;
};

} // namespace

std::vector<Record> splitRecords(const uint8_t *data, size_t size) {
  std::vector<Record> records;
  size_t at = 0;
  while (at < size) {
    size_t nameSize = data[at++];
    if (nameSize > size - at)
      break;
    std::string name(reinterpret_cast<const char *>(data + at), nameSize);
    at += nameSize;
    if (size - at < 4)
      break;
    size_t bytes = size_t(data[at]) | size_t(data[at + 1]) << 8 |
                   size_t(data[at + 2]) << 16 | size_t(data[at + 3]) << 24;
    at += 4;
    if (bytes > size - at)
      bytes = size - at;
    if (safeName(name))
      records.emplace_back(
          name,
          std::string_view(reinterpret_cast<const char *>(data + at), bytes));
    at += bytes;
  }
  return records;
}

bool verbose() {
  static const bool on = std::getenv("DS_FUZZ_VERBOSE") != nullptr;
  return on;
}

std::string freshScratchFolder() {
  static ScratchFolder scratch;
  for (const fs::directory_entry &entry :
       fs::directory_iterator(scratch.path()))
    fs::remove_all(entry.path());
  return scratch.path();
}

std::string writeFile(const std::string &folder, const std::string &name,
                      std::string_view bytes) {
  fs::path path = fs::path(folder) / name;
  std::error_code error;
  fs::create_directories(path.parent_path(), error);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  // Names that clash ("a", then "a/b"): the record is dropped.
  return out ? path.string() : std::string();
}

} // namespace ds::fuzz
