//===- JsonPath.h - Paths into JSON documents for messages ------*- C++ -*-===//
//
// How both path-aware JSON readers, the config's (lib/Config/ObjectReader)
// and the plan's (lib/Plan/JsonCursor), spell where a value is and show it
// in a message: "zero_optimization.stage", "programs.eval.body[12].args[1]".
// Header-only and free of everything but the standard library, so that the
// plan format library uses it without linking the config library.
//
//===----------------------------------------------------------------------===//

#ifndef DS_CONFIG_JSONPATH_H
#define DS_CONFIG_JSONPATH_H

#include <cstddef>
#include <string>

namespace ds::json {

/// "a.b" + "c" -> "a.b.c"; "" + "c" -> "c".
inline std::string joinKey(const std::string &path, const std::string &key) {
  return path.empty() ? key : path + "." + key;
}

/// "a.b" + 3 -> "a.b[3]".
inline std::string joinIndex(const std::string &path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

/// `text` cut to at most 40 characters, "..." marking the cut.
inline std::string shortened(std::string text) {
  if (text.size() > 40)
    text = text.substr(0, 37) + "...";
  return text;
}

} // namespace ds::json

#endif // DS_CONFIG_JSONPATH_H
