//===- JsonCursor.cpp - Path-aware reading of plan JSON -------------------===//

#include "JsonCursor.h"

#include "ds/Plan/PlanError.h"

#include <memory>
#include <utility>

namespace ds::plan::detail {

namespace {

/// Failures of the plan's cursors: PlanErrors naming the file, the path and
/// the label of the op being read.
class PlanErrorHook : public json::ErrorHook {
public:
  PlanErrorHook(const std::string &origin, std::string label)
      : origin_(&origin), label_(std::move(label)) {}

  const std::string &origin() const { return *origin_; }

  std::string where(const std::string &path) const {
    std::string text = path.empty() ? std::string("(top level)") : path;
    if (!label_.empty())
      text += " (" + label_ + ")";
    return text;
  }

  void fail(const std::string &path, const std::string &detail) const override {
    throw PlanError(*origin_, where(path), detail);
  }

private:
  const std::string *origin_;
  std::string label_;
};

const PlanErrorHook &planHook(const json::PathCursor &cursor) {
  return static_cast<const PlanErrorHook &>(*cursor.hook());
}

} // namespace

JsonCursor::JsonCursor(const ordered_json &value, std::string path,
                       const std::string &origin, std::string label)
    : cursor_(value, std::move(path),
              std::make_shared<const PlanErrorHook>(origin, std::move(label))) {
}

std::string JsonCursor::where() const {
  return planHook(cursor_).where(path());
}

JsonCursor JsonCursor::withLabel(std::string label) const {
  return JsonCursor(cursor_.withHook(std::make_shared<const PlanErrorHook>(
      planHook(cursor_).origin(), std::move(label))));
}

bool JsonCursor::has(const char *key) const {
  return json().is_object() && json().contains(key);
}

JsonCursor JsonCursor::field(const char *key) const {
  std::optional<json::PathCursor> member = cursor_.member(key);
  if (!member)
    fail(std::string("missing required field \"") + key + "\"");
  return JsonCursor(std::move(*member));
}

std::optional<JsonCursor> JsonCursor::optionalField(const char *key) const {
  if (!has(key))
    return std::nullopt;
  return field(key);
}

} // namespace ds::plan::detail
