//===- SessionConfig.cpp - One or several engines -------------------------===//
//
// {"engines": {"student": {...}, "teacher": "teacher.json"}} gives each
// submodule of the TorchScript root its own DeepSpeed config, as Accelerate
// gives each model its own DeepSpeedPlugin. The engines share one data
// stream and one backward, so their batch sizes and GAS must agree, and a
// submodule belongs to at most one engine ("" is the root: whatever no other
// engine owns). `--set` overrides are applied here, to each engine's JSON
// before it is parsed, so that an error about an overridden value names the
// override.
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

/// Where one --set applies: every engine (`engine` unset) or one.
struct OverrideTarget {
  const ConfigOverride *override;
  std::optional<std::string> engine;
  /// The path inside the engine's config.
  std::string path;
  bool applied = false;
};

std::string engineList(const std::vector<std::string> &keys) {
  std::string list;
  for (const std::string &key : keys)
    list += (list.empty() ? "\"" : ", \"") + key + "\"";
  return list;
}

std::vector<OverrideTarget>
overrideTargets(const std::vector<ConfigOverride> &overrides,
                const std::vector<std::string> &keys, bool multiEngine) {
  std::vector<OverrideTarget> targets;
  const std::string prefix = "engines.";
  for (const ConfigOverride &override : overrides) {
    if (override.key.rfind(prefix, 0) != 0) {
      targets.push_back({&override, std::nullopt, override.key});
      continue;
    }
    if (!multiEngine)
      throw ConfigError("", "--set " + override.text +
                                ": the config has a single engine; drop the "
                                "engines.NAME. prefix");
    // Engine keys are dotted submodule paths: the longest one that matches.
    std::string rest = override.key.substr(prefix.size());
    const std::string *engine = nullptr;
    for (const std::string &key : keys)
      if (!key.empty() && rest.size() > key.size() + 1 &&
          rest.compare(0, key.size() + 1, key + ".") == 0 &&
          (!engine || key.size() > engine->size()))
        engine = &key;
    if (!engine)
      throw ConfigError("", "--set " + override.text + ": \"" +
                                rest.substr(0, rest.find('.')) +
                                "\" is not an engine of the config (engines: " +
                                engineList(keys) + ")");
    targets.push_back({&override, *engine, rest.substr(engine->size() + 1)});
  }
  return targets;
}

/// Sets `path` in `json` when every object above it exists.
bool setAtPath(ordered_json &json, const std::string &path,
               const ordered_json &value) {
  ordered_json *node = &json;
  size_t start = 0;
  for (size_t dot; (dot = path.find('.', start)) != std::string::npos;
       start = dot + 1) {
    if (!node->is_object())
      return false;
    auto it = node->find(path.substr(start, dot - start));
    if (it == node->end())
      return false;
    node = &*it;
  }
  if (!node->is_object())
    return false;
  (*node)[path.substr(start)] = value;
  return true;
}

std::string parentOf(const std::string &path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? "" : path.substr(0, dot);
}

/// Applies the overrides that concern engine `key`, noting each.
void applyOverrides(const std::string &key, ordered_json &json,
                    std::vector<OverrideTarget> &targets,
                    std::vector<const OverrideTarget *> &applied,
                    ConfigNotes &notes) {
  for (OverrideTarget &target : targets) {
    if (target.engine && *target.engine != key)
      continue;
    if (!setAtPath(json, target.path, target.override->value)) {
      if (target.engine)
        throw ConfigError("", "--set " + target.override->text + ": engine \"" +
                                  key + "\" has no section \"" +
                                  parentOf(target.path) + "\" to set it in");
      continue;
    }
    target.applied = true;
    applied.push_back(&target);
    notes.remarks.push_back(ConfigNote{
        target.path,
        target.override->value.dump() + " from --set " + target.override->text,
        "", 0});
  }
}

/// An error about a value an override set says so.
ConfigError blameOverride(const ConfigError &error,
                          const std::vector<const OverrideTarget *> &applied) {
  for (const OverrideTarget *target : applied) {
    const std::string &path = target->path;
    const std::string &key = error.keyPath();
    if (key == path ||
        (key.size() > path.size() && key.compare(0, path.size(), path) == 0 &&
         (key[path.size()] == '.' || key[path.size()] == '[')))
      return ConfigError(key,
                         error.detail() + " (set by --set " +
                             target->override->text + ")",
                         error.file());
  }
  return error;
}

/// Each note of `from`, its key path under `keyPrefix` and attributed to
/// `file` unless it names one, appended to `to`.
void appendNotes(ConfigNotes &to, const ConfigNotes &from,
                 const std::string &keyPrefix, const std::string &file) {
  auto append = [&](std::vector<ConfigNote> &out,
                    const std::vector<ConfigNote> &in) {
    for (ConfigNote note : in) {
      if (!keyPrefix.empty())
        note.keyPath =
            note.keyPath.empty() ? keyPrefix : keyPrefix + "." + note.keyPath;
      if (note.file.empty())
        note.file = file;
      out.push_back(std::move(note));
    }
  };
  append(to.warnings, from.warnings);
  append(to.remarks, from.remarks);
}

/// A frozen engine (no optimizer) of a session runs on the micro-batches
/// the trainable engines run on. Accelerate's guide still gives its config
/// a micro-batch (DeepSpeed requires one), which must not contradict theirs.
void ignoreFrozenMicroBatch(ordered_json &json, const ParseContext &context,
                            ConfigNotes &notes) {
  const char *key = "train_micro_batch_size_per_gpu";
  if (!json.is_object() || !context.dataMicroBatch)
    return;
  auto optimizer = json.find("optimizer");
  if (optimizer != json.end() && !optimizer->is_null())
    return;
  auto micro = json.find(key);
  if (micro == json.end() || !micro->is_number())
    return;
  // A micro-batch that agrees with the data's is nothing to ignore.
  if (*micro == ordered_json(*context.dataMicroBatch / context.worldSize) &&
      *context.dataMicroBatch % context.worldSize == 0)
    return;
  notes.remarks.push_back(ConfigNote{
      key,
      micro->dump() + " ignored: the engine is frozen (no optimizer) and runs "
                      "on the data's micro-batch, as the trainable engines do",
      "", 0});
  *micro = "auto";
}

/// What every engine of a session shares while it is parsed.
struct SessionParse {
  const ParseContext &context;
  const std::string &baseDir;
  std::vector<std::string> keys;
  std::vector<OverrideTarget> targets;
  ConfigNotes notes;

  /// The context of engine `key`: its own hidden size when known.
  ParseContext engineContext(const std::string &key) const {
    ParseContext engine = context;
    if (context.engineHiddenSize)
      if (std::optional<HiddenSize> hidden =
              context.engineHiddenSize(key, keys)) {
        engine.hiddenSize = hidden->value;
        engine.hiddenSizeOrigin = hidden->origin;
      }
    return engine;
  }

  /// Overrides, then parseEngineConfig; notes go to the session's.
  EngineConfig parse(const std::string &key, ordered_json json,
                     const std::string &keyPrefix, const std::string &file) {
    ConfigNotes overrideNotes;
    std::vector<const OverrideTarget *> applied;
    applyOverrides(key, json, targets, applied, overrideNotes);
    if (keys.size() > 1)
      ignoreFrozenMicroBatch(json, context, overrideNotes);
    EngineConfig config;
    try {
      config = parseEngineConfig(json, engineContext(key));
    } catch (const ConfigError &error) {
      throw blameOverride(error, applied);
    }
    appendNotes(notes, overrideNotes, keyPrefix, file);
    appendNotes(notes, config.notes, keyPrefix, file);
    return config;
  }
};

EngineConfig parseEngineFile(SessionParse &session, const std::string &key,
                             const std::string &file) {
  try {
    ordered_json json = readJsonFile(file, &session.notes);
    if (json.is_object() && json.contains("engines"))
      throw ConfigError("engines", "an engine's config file cannot itself "
                                   "list engines");
    return session.parse(key, std::move(json), "", file);
  } catch (const ConfigError &error) {
    throw ConfigError(error.keyPath(),
                      error.detail() + " (engine \"" + key + "\", named by " +
                          enginePath(key) + ")",
                      error.file().empty() ? file : error.file());
  }
}

EngineEntry parseEngine(SessionParse &session, const std::string &key,
                        const ordered_json &value) {
  EngineEntry entry;
  entry.key = key;
  if (value.is_string()) {
    std::filesystem::path file = value.get<std::string>();
    if (file.is_relative() && !session.baseDir.empty())
      file = std::filesystem::path(session.baseDir) / file;
    entry.sourceFile = file.lexically_normal().string();
    entry.config = parseEngineFile(session, key, entry.sourceFile);
    return entry;
  }
  if (!value.is_object())
    throw ConfigError(enginePath(key),
                      std::string("expected an engine config (an object) or "
                                  "the path of one (a string), got ") +
                          value.type_name());
  try {
    entry.config = session.parse(key, value, enginePath(key), "");
  } catch (const ConfigError &error) {
    throw error.withKeyPrefix(enginePath(key));
  }
  return entry;
}

/// An override that no engine could take names a key nobody has.
void checkOverridesApplied(const std::vector<OverrideTarget> &targets) {
  for (const OverrideTarget &target : targets)
    if (!target.applied)
      throw ConfigError("", "--set " + target.override->text +
                                ": no engine's config has a section \"" +
                                parentOf(target.path) + "\" to set it in");
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
  SessionParse parse{context, baseDir, {}, {}, {}};
  if (!json.is_object() || !json.contains("engines")) {
    parse.keys = {""};
    parse.targets = overrideTargets(context.overrides, parse.keys, false);
    session.engines.push_back(
        EngineEntry{"", "", parse.parse("", json, "", "")});
    checkOverridesApplied(parse.targets);
    session.notes = std::move(parse.notes);
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
    parse.keys.push_back(item.key());
  parse.targets = overrideTargets(context.overrides, parse.keys, true);
  for (const auto &item : engines.items())
    session.engines.push_back(parseEngine(parse, item.key(), item.value()));
  checkOverridesApplied(parse.targets);
  for (size_t i = 1; i < session.engines.size(); ++i)
    checkAgreement(session.engines.front(), session.engines[i]);
  session.notes = std::move(parse.notes);
  return session;
}

SessionConfig loadSessionConfig(const std::string &path,
                                const ParseContext &context) {
  ConfigNotes notes;
  ordered_json json = readJsonFile(path, &notes);
  std::string baseDir = std::filesystem::path(path).parent_path().string();
  try {
    SessionConfig session = parseSessionConfig(json, context, baseDir);
    appendNotes(notes, session.notes, "", path);
    session.notes = std::move(notes);
    return session;
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
