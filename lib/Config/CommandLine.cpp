//===- CommandLine.cpp - --set, --mixed-precision, --config NAME=FILE -----===//
//
// What the HF Trainer and Accelerate take from their own arguments comes
// from the compiler's command line instead. The syntax is checked here; a
// session applies the overrides (SessionConfig.cpp), so that an override
// naming a key no engine has is an error there.
//
//===----------------------------------------------------------------------===//

#include "ds/Config/Config.h"

namespace ds::config {

namespace {

/// True when `path` is a non-empty dotted path without empty segments.
bool isDottedPath(const std::string &path) {
  if (path.empty() || path.front() == '.' || path.back() == '.')
    return false;
  return path.find("..") == std::string::npos;
}

} // namespace

ConfigOverride parseConfigOverride(const std::string &text) {
  size_t equals = text.find('=');
  if (equals == std::string::npos)
    throw ConfigError("", "--set " + text + ": expected KEY=VALUE");
  ConfigOverride result;
  result.text = text;
  result.key = text.substr(0, equals);
  std::string value = text.substr(equals + 1);
  if (!isDottedPath(result.key))
    throw ConfigError("", "--set " + text +
                              ": the key must be a dotted path such as "
                              "optimizer.params.lr (engines.NAME.PATH for "
                              "engine NAME only)");
  if (result.key == "engines" || (result.key.rfind("engines.", 0) == 0 &&
                                  result.key.find('.', 8) == std::string::npos))
    throw ConfigError("", "--set " + text +
                              ": engines.NAME must be followed by a key of "
                              "that engine's config (engines.NAME.PATH)");
  if (value.empty())
    throw ConfigError("", "--set " + text + ": the value is empty");
  // Numbers, booleans, lists and quoted strings as JSON; a bare word (a
  // scheduler's type) as a string.
  ordered_json parsed = ordered_json::parse(value, nullptr,
                                            /*allow_exceptions=*/false);
  result.value = parsed.is_discarded() ? ordered_json(value) : parsed;
  return result;
}

DType parseMixedPrecision(const std::string &text) {
  if (text == "bf16")
    return DType::BFloat16;
  if (text == "fp16")
    return DType::Float16;
  if (text == "no")
    return DType::Float32;
  throw ConfigError("", "--mixed-precision " + text +
                            ": expected bf16, fp16 or no");
}

ordered_json engineFilesDocument(const std::vector<std::string> &namedFiles) {
  ordered_json engines = ordered_json::object();
  for (const std::string &entry : namedFiles) {
    size_t equals = entry.find('=');
    if (equals == std::string::npos || equals == 0 ||
        equals + 1 == entry.size())
      throw ConfigError("", "--config " + entry +
                                ": with several configs, each is NAME=FILE "
                                "(NAME: the engine's submodule)");
    std::string name = entry.substr(0, equals);
    if (engines.contains(name))
      throw ConfigError("", "--config " + entry + ": engine \"" + name +
                                "\" is given twice");
    engines[name] = entry.substr(equals + 1);
  }
  ordered_json document = ordered_json::object();
  document["engines"] = std::move(engines);
  return document;
}

} // namespace ds::config
