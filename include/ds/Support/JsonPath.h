//===- JsonPath.h - Places and values of JSON in messages -------*- C++ -*-===//
//-*-//
//
// How the path-aware JSON readers (the config's and the plan's, both built on
// PathCursor) spell where a value is, "zero_optimization.stage",
// "programs.eval.body[12].args[1]", and what was found there, `string "3"`.
//
//===----------------------------------------------------------------------===//

#ifndef DS_SUPPORT_JSONPATH_H
#define DS_SUPPORT_JSONPATH_H

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>

namespace ds::json {

using ordered_json = nlohmann::ordered_json;

/// "a.b" + "c" -> "a.b.c"; "" + "c" -> "c".
inline std::string joinKey(const std::string &path, const std::string &key) {
  return path.empty() ? key : path + "." + key;
}

/// "a.b" + 3 -> "a.b[3]".
inline std::string joinIndex(const std::string &path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

/// A parse failure's message without nlohmann's "[json.exception.parse_error.
/// 101] " prefix: "parse error at line 2, column 5: ...", or "number
/// overflow parsing '1e999'" (an out_of_range the parser throws for a
/// number no double holds).
inline std::string parseFailure(const nlohmann::json::exception &error) {
  std::string what = error.what();
  if (size_t end = what.find("] "); end != std::string::npos)
    what = what.substr(end + 2);
  return what;
}

/// `text` cut to at most 40 characters, "..." marking the cut.
inline std::string shortened(std::string text) {
  if (text.size() > 40)
    text = text.substr(0, 37) + "...";
  return text;
}

/// What a message says was found: `null`, `boolean true`, `number 2.5`,
/// `string "abc"` (long strings shortened), `array`, `object`.
std::string describeValue(const ordered_json &value);

} // namespace ds::json

#endif // DS_SUPPORT_JSONPATH_H
