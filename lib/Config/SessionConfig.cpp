//===- SessionConfig.cpp - One or several engines -------------------------===//
//
// {"engines": {"student": {...}, "teacher": "teacher.json"}} gives each
// submodule of the TorchScript root its own DeepSpeed config, as Accelerate
// gives each model its own DeepSpeedPlugin. The engines share one data
// stream and one backward, so their batch sizes and GAS must agree, and a
// submodule belongs to at most one engine ("" is the root: whatever no other
// engine owns).
//
//===----------------------------------------------------------------------===//

#include "ds/Config/Config.h"

#include <filesystem>

namespace ds::config {

const EngineEntry *SessionConfig::find(const std::string &key) const {
  for (const EngineEntry &entry : engines)
    if (entry.key == key)
      return &entry;
  return nullptr;
}

namespace {

/// "engines.student", or engines["a.b"] when the key would not read as one
/// path segment.
std::string enginePath(const std::string &key) {
  if (key.empty() || key.find('.') != std::string::npos)
    return "engines[\"" + key + "\"]";
  return "engines." + key;
}

bool isPathSegmentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_';
}

void checkEngineKey(const std::string &key) {
  if (key.empty())
    return;
  bool segmentEmpty = true;
  for (char c : key) {
    if (c == '.') {
      if (segmentEmpty)
        break;
      segmentEmpty = true;
    } else if (isPathSegmentChar(c)) {
      segmentEmpty = false;
    } else {
      segmentEmpty = true;
      break;
    }
  }
  if (segmentEmpty)
    throw ConfigError(enginePath(key),
                      "an engine key must be \"\" (the root) or a dotted "
                      "submodule path such as \"encoder.layers.0\"");
}

/// "a" and "a.b" overlap; "a" and "ab" do not; "" (the rest) overlaps none.
bool overlaps(const std::string &a, const std::string &b) {
  if (a.empty() || b.empty())
    return false;
  auto isPrefixPath = [](const std::string &prefix, const std::string &path) {
    return path.size() > prefix.size() &&
           path.compare(0, prefix.size(), prefix) == 0 &&
           path[prefix.size()] == '.';
  };
  return a == b || isPrefixPath(a, b) || isPrefixPath(b, a);
}

void checkEngineKeys(const ordered_json &engines) {
  std::vector<std::string> keys;
  for (const auto &item : engines.items()) {
    checkEngineKey(item.key());
    for (const std::string &earlier : keys)
      if (overlaps(earlier, item.key()))
        throw ConfigError(enginePath(item.key()),
                          "engine \"" + item.key() + "\" overlaps engine \"" +
                              earlier +
                              "\": a submodule can belong to one engine only");
    keys.push_back(item.key());
  }
}

EngineConfig parseEngineFile(const std::string &key, const std::string &file,
                             const ParseContext &context) {
  try {
    ordered_json json = readJsonFile(file);
    if (json.is_object() && json.contains("engines"))
      throw ConfigError("engines", "an engine's config file cannot itself "
                                   "list engines");
    return parseEngineConfig(json, context);
  } catch (const ConfigError &error) {
    throw ConfigError(error.keyPath(),
                      error.detail() + " (engine \"" + key + "\", named by " +
                          enginePath(key) + ")",
                      error.file().empty() ? file : error.file());
  }
}

EngineEntry parseEngine(const std::string &key, const ordered_json &value,
                        const ParseContext &context,
                        const std::string &baseDir) {
  EngineEntry entry;
  entry.key = key;
  if (value.is_string()) {
    std::filesystem::path file = value.get<std::string>();
    if (file.is_relative() && !baseDir.empty())
      file = std::filesystem::path(baseDir) / file;
    entry.sourceFile = file.lexically_normal().string();
    entry.config = parseEngineFile(key, entry.sourceFile, context);
    return entry;
  }
  if (!value.is_object())
    throw ConfigError(enginePath(key),
                      std::string("expected an engine config (an object) or "
                                  "the path of one (a string), got ") +
                          value.type_name());
  try {
    entry.config = parseEngineConfig(value, context);
  } catch (const ConfigError &error) {
    throw error.withKeyPrefix(enginePath(key));
  }
  return entry;
}

void checkAgreement(const EngineEntry &first, const EngineEntry &other) {
  struct Field {
    const char *key;
    int64_t EngineConfig::*member;
  };
  static const Field fields[] = {
      {"gradient_accumulation_steps", &EngineConfig::gradientAccumulationSteps},
      {"train_micro_batch_size_per_gpu",
       &EngineConfig::trainMicroBatchSizePerGpu},
      {"train_batch_size", &EngineConfig::trainBatchSize},
  };
  for (const Field &field : fields) {
    int64_t expected = first.config.*field.member;
    int64_t actual = other.config.*field.member;
    if (expected == actual)
      continue;
    throw ConfigError(
        enginePath(other.key) + "." + field.key,
        "engine \"" + other.key + "\" has " + field.key + " " +
            std::to_string(actual) + " but engine \"" + first.key + "\" has " +
            std::to_string(expected) +
            "; engines share one data stream and one backward, so they must "
            "agree");
  }
}

} // namespace

SessionConfig parseSessionConfig(const ordered_json &json,
                                 const ParseContext &context,
                                 const std::string &baseDir) {
  SessionConfig session;
  if (!json.is_object() || !json.contains("engines")) {
    session.engines.push_back(
        EngineEntry{"", "", parseEngineConfig(json, context)});
    return session;
  }
  for (const auto &item : json.items())
    if (item.key() != "engines")
      throw ConfigError(item.key(),
                        "a config with \"engines\" can have no other "
                        "top-level key; move it into each engine's config");
  const ordered_json &engines = json["engines"];
  if (!engines.is_object())
    throw ConfigError("engines", std::string("expected an object mapping "
                                             "submodule paths to engine "
                                             "configs, got ") +
                                     engines.type_name());
  if (engines.empty())
    throw ConfigError("engines", "names no engine");
  checkEngineKeys(engines);

  session.multiEngine = true;
  for (const auto &item : engines.items())
    session.engines.push_back(
        parseEngine(item.key(), item.value(), context, baseDir));
  for (size_t i = 1; i < session.engines.size(); ++i)
    checkAgreement(session.engines.front(), session.engines[i]);
  return session;
}

SessionConfig loadSessionConfig(const std::string &path,
                                const ParseContext &context) {
  ordered_json json = readJsonFile(path);
  std::string baseDir = std::filesystem::path(path).parent_path().string();
  try {
    return parseSessionConfig(json, context, baseDir);
  } catch (const ConfigError &error) {
    throw error.withFile(path);
  }
}

std::optional<SessionConfig> tryLoadSessionConfig(const std::string &path,
                                                  const ParseContext &context,
                                                  std::string &error) noexcept {
  try {
    return loadSessionConfig(path, context);
  } catch (const std::exception &exception) {
    error = exception.what();
  } catch (...) {
    error = path + ": unknown error while loading the config";
  }
  return std::nullopt;
}

} // namespace ds::config
