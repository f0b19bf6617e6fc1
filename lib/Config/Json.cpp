//===- Json.cpp - Reading JSON documents ----------------------------------===//
//
// nlohmann's parser keeps the last of two equal keys silently; a config with
// "stage" written twice would then run with whichever came last, so a
// parser callback rejects duplicated keys, naming their path. Trailing
// commas, which Python's json rejects but configs copied from guides carry,
// are blanked before parsing (nlohmann has no option for them) and warned
// about.
//
//===----------------------------------------------------------------------===//

#include "ds/Config/Config.h"
#include "ds/Support/JsonPath.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace ds::config {

namespace {

/// Tracks where the parser is, to name a duplicated key by its path.
class DuplicateKeyChecker {
public:
  explicit DuplicateKeyChecker(std::string sourceName)
      : sourceName_(std::move(sourceName)) {}

  bool operator()(int /*depth*/, ordered_json::parse_event_t event,
                  ordered_json &parsed) {
    using Event = ordered_json::parse_event_t;
    switch (event) {
    case Event::object_start:
      frames_.push_back(Frame{/*isArray=*/false, 0, "", {}});
      break;
    case Event::array_start:
      frames_.push_back(Frame{/*isArray=*/true, 0, "", {}});
      break;
    case Event::key: {
      Frame &top = frames_.back();
      top.key = parsed.get<std::string>();
      if (!top.keys.insert(top.key).second)
        throw ConfigError(currentPath(), "duplicate key", sourceName_);
      break;
    }
    case Event::object_end:
    case Event::array_end:
      frames_.pop_back();
      finishElement();
      break;
    case Event::value:
      finishElement();
      break;
    }
    return true;
  }

private:
  struct Frame {
    bool isArray;
    size_t index;
    std::string key;
    std::set<std::string> keys;
  };

  void finishElement() {
    if (!frames_.empty() && frames_.back().isArray)
      ++frames_.back().index;
  }

  std::string currentPath() const {
    std::string path;
    for (const Frame &frame : frames_)
      path = frame.isArray ? json::joinIndex(path, frame.index)
                           : json::joinKey(path, frame.key);
    return path;
  }

  std::string sourceName_;
  std::vector<Frame> frames_;
};

} // namespace

std::string blankTrailingCommas(const std::string &text,
                                std::vector<int64_t> &lines) {
  std::string result = text;
  bool inString = false;
  int64_t line = 1;
  // A comma after `{`, `[` or another comma is an error nlohmann reports.
  char previous = 0;
  for (size_t i = 0; i < result.size(); ++i) {
    char c = result[i];
    if (c == '\n')
      ++line;
    if (inString) {
      if (c == '\\')
        ++i; // An escaped character (a quote, a backslash) ends no string.
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
      previous = c;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
      continue;
    if (c == ',' && previous != '{' && previous != '[' && previous != ',' &&
        previous != 0) {
      size_t next = result.find_first_not_of(" \t\r\n", i + 1);
      if (next != std::string::npos &&
          (result[next] == '}' || result[next] == ']')) {
        result[i] = ' ';
        lines.push_back(line);
        continue;
      }
    }
    previous = c;
  }
  return result;
}

ordered_json parseJsonText(const std::string &text,
                           const std::string &sourceName, ConfigNotes *notes) {
  std::vector<int64_t> commaLines;
  std::string strict = blankTrailingCommas(text, commaLines);
  if (notes)
    for (int64_t line : commaLines)
      notes->warnings.push_back(
          ConfigNote{"",
                     "trailing comma accepted (not valid JSON: Python's "
                     "json.load, and so DeepSpeed, rejects it)",
                     sourceName, line});
  try {
    return ordered_json::parse(strict, DuplicateKeyChecker(sourceName));
  } catch (const ordered_json::parse_error &error) {
    throw ConfigError("",
                      "malformed JSON: " + ds::json::parseFailure(error) +
                          " (byte " + std::to_string(error.byte) + ")",
                      sourceName);
  } catch (const ordered_json::exception &error) {
    // A number too large for a double (out_of_range 406).
    throw ConfigError("", "malformed JSON: " + ds::json::parseFailure(error),
                      sourceName);
  }
}

ordered_json readJsonFile(const std::string &path, ConfigNotes *notes) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw ConfigError("", "config file not found", path);
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError("", "expected a JSON file, got a directory", path);
  std::ifstream stream(path, std::ios::binary);
  if (!stream)
    throw ConfigError("", "cannot open config file for reading", path);
  std::ostringstream text;
  text << stream.rdbuf();
  if (stream.bad())
    throw ConfigError("", "error while reading config file", path);
  return parseJsonText(text.str(), path, notes);
}

} // namespace ds::config
