//===- JsonCursor.h - Path-aware reading of plan JSON -----------*- C++ -*-===//
//
// A JSON value together with its path in the document ("programs.eval.
// body[12].args[1]") and an optional label naming the enclosing op
// ("aten::linear"), so that every type error says exactly where it is and
// what was expected versus found. The typed conversions are a PathCursor's
// (ds/Support/PathCursor.h, shared with the config's reader) failing with
// PlanErrors; the plan's policy is here: the file origin, the label, required
// fields. Private to lib/Plan.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_PLAN_JSONCURSOR_H
#define DS_LIB_PLAN_JSONCURSOR_H

#include "ds/Plan/Plan.h"
#include "ds/Support/PathCursor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ds::plan::detail {

class JsonCursor {
public:
  /// `origin` names the plan file in messages; it must outlive the cursor
  /// and its children.
  JsonCursor(const ordered_json &value, std::string path,
             const std::string &origin, std::string label = "");

  const ordered_json &json() const { return cursor_.json(); }
  const std::string &path() const { return cursor_.path(); }
  /// "programs.eval.body[3] (aten::relu)": path plus label.
  std::string where() const;

  /// The same position, labelled (labels are inherited by children).
  JsonCursor withLabel(std::string label) const;

  [[noreturn]] void fail(const std::string &detail) const {
    cursor_.fail(detail);
  }

  /// Objects. `field` fails with "missing required field" when absent.
  bool has(const char *key) const;
  JsonCursor field(const char *key) const;
  std::optional<JsonCursor> optionalField(const char *key) const;

  /// Arrays.
  size_t size() const { return cursor_.size(); }
  JsonCursor element(size_t index) const {
    return JsonCursor(cursor_.element(index));
  }

  void requireObject() const { cursor_.requireObject(); }
  void requireArray() const { cursor_.requireArray(); }
  int64_t toInt() const { return cursor_.toInt(); }
  /// Any JSON number (integers too).
  double toNumber() const { return cursor_.toNumber(); }
  bool toBool() const { return cursor_.toBool(); }
  std::string toString() const { return cursor_.toString(); }
  std::vector<int64_t> toIntArray() const { return cursor_.toIntArray(); }

private:
  /// `cursor` fails through a PlanErrorHook (JsonCursor.cpp).
  explicit JsonCursor(json::PathCursor cursor) : cursor_(std::move(cursor)) {}

  json::PathCursor cursor_;
};

} // namespace ds::plan::detail

#endif // DS_LIB_PLAN_JSONCURSOR_H
