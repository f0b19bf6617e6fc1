//===- ConfigError.cpp - Errors that name the key and the file ------------===//

#include "ds/Config/Config.h"

namespace ds::config {

static std::string formatMessage(const std::string &file,
                                 const std::string &keyPath,
                                 const std::string &detail) {
  std::string message;
  if (!file.empty())
    message += file + ": ";
  if (!keyPath.empty())
    message += keyPath + ": ";
  return message + detail;
}

ConfigError::ConfigError(std::string keyPath, std::string detail,
                         std::string file)
    : std::runtime_error(formatMessage(file, keyPath, detail)),
      keyPath_(std::move(keyPath)), detail_(std::move(detail)),
      file_(std::move(file)) {}

ConfigError ConfigError::withKeyPrefix(const std::string &prefix) const {
  std::string path = keyPath_.empty() ? prefix : prefix + "." + keyPath_;
  return ConfigError(path, detail_, file_);
}

ConfigError ConfigError::withFile(const std::string &file) const {
  if (!file_.empty())
    return *this;
  return ConfigError(keyPath_, detail_, file);
}

std::string ConfigNote::message() const {
  std::string where = file;
  if (line > 0)
    where += ":" + std::to_string(line);
  return formatMessage(where, keyPath, detail);
}

} // namespace ds::config
