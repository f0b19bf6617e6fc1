//===- JsonCursor.h - Path-aware reading of plan JSON -----------*- C++ -*-===//
//
// A JSON value together with its path in the document ("programs.eval.
// body[12].args[1]") and an optional label naming the enclosing op
// ("aten::linear"), so that every type error says exactly where it is and
// what was expected versus found. Paths and shortened values are spelled as
// the config's reader spells them (ds/Config/JsonPath.h). Private to
// lib/Plan.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_PLAN_JSONCURSOR_H
#define DS_LIB_PLAN_JSONCURSOR_H

#include "ds/Plan/Plan.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ds::plan::detail {

/// `string "abc"`, `number 2.5`, `object`, ... for "found ..." messages.
std::string describeJson(const ordered_json &value);

class JsonCursor {
public:
  JsonCursor(const ordered_json &value, std::string path,
             const std::string &origin, std::string label = "");

  const ordered_json &json() const { return *value_; }
  const std::string &path() const { return path_; }
  /// "programs.eval.body[3] (aten::relu)": path plus label.
  std::string where() const;

  /// The same position, labelled (labels are inherited by children).
  JsonCursor withLabel(std::string label) const;

  [[noreturn]] void fail(const std::string &detail) const;

  /// Objects. `field` fails with "missing required field" when absent.
  bool has(const char *key) const;
  JsonCursor field(const char *key) const;
  std::optional<JsonCursor> optionalField(const char *key) const;

  /// Arrays.
  size_t size() const;
  JsonCursor element(size_t index) const;

  void requireObject() const;
  void requireArray() const;
  int64_t toInt() const;
  /// Any JSON number (integers too).
  double toNumber() const;
  bool toBool() const;
  std::string toString() const;
  std::vector<int64_t> toIntArray() const;

private:
  const ordered_json *value_;
  std::string path_;
  const std::string *origin_;
  std::string label_;
};

} // namespace ds::plan::detail

#endif // DS_LIB_PLAN_JSONCURSOR_H
