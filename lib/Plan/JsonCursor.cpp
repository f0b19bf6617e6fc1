//===- JsonCursor.cpp - Path-aware reading of plan JSON -------------------===//

#include "JsonCursor.h"

#include "ds/Config/JsonPath.h"
#include "ds/Plan/PlanError.h"

#include <utility>

namespace ds::plan::detail {

std::string describeJson(const ordered_json &value) {
  switch (value.type()) {
  case ordered_json::value_t::null:
    return "null";
  case ordered_json::value_t::boolean:
    return value.get<bool>() ? "bool true" : "bool false";
  case ordered_json::value_t::number_integer:
  case ordered_json::value_t::number_unsigned:
  case ordered_json::value_t::number_float:
    return "number " + value.dump();
  case ordered_json::value_t::string:
    return "string " +
           ordered_json(json::shortened(value.get<std::string>())).dump();
  case ordered_json::value_t::array:
    return "array";
  case ordered_json::value_t::object:
    return "object";
  default:
    return "binary";
  }
}

JsonCursor::JsonCursor(const ordered_json &value, std::string path,
                       const std::string &origin, std::string label)
    : value_(&value), path_(std::move(path)), origin_(&origin),
      label_(std::move(label)) {}

std::string JsonCursor::where() const {
  std::string text = path_.empty() ? std::string("(top level)") : path_;
  if (!label_.empty())
    text += " (" + label_ + ")";
  return text;
}

JsonCursor JsonCursor::withLabel(std::string label) const {
  return JsonCursor(*value_, path_, *origin_, std::move(label));
}

void JsonCursor::fail(const std::string &detail) const {
  throw PlanError(*origin_, where(), detail);
}

bool JsonCursor::has(const char *key) const {
  return value_->is_object() && value_->contains(key);
}

JsonCursor JsonCursor::field(const char *key) const {
  requireObject();
  auto it = value_->find(key);
  if (it == value_->end())
    fail(std::string("missing required field \"") + key + "\"");
  return JsonCursor(*it, json::joinKey(path_, key), *origin_, label_);
}

std::optional<JsonCursor> JsonCursor::optionalField(const char *key) const {
  if (!has(key))
    return std::nullopt;
  return field(key);
}

size_t JsonCursor::size() const {
  requireArray();
  return value_->size();
}

JsonCursor JsonCursor::element(size_t index) const {
  requireArray();
  return JsonCursor((*value_)[index], json::joinIndex(path_, index), *origin_,
                    label_);
}

void JsonCursor::requireObject() const {
  if (!value_->is_object())
    fail("expected an object, found " + describeJson(*value_));
}

void JsonCursor::requireArray() const {
  if (!value_->is_array())
    fail("expected an array, found " + describeJson(*value_));
}

int64_t JsonCursor::toInt() const {
  if (value_->is_number_unsigned() &&
      value_->get<uint64_t>() > uint64_t(INT64_MAX))
    fail("integer " + value_->dump() + " does not fit in 64 bits");
  if (!value_->is_number_integer())
    fail("expected an integer, found " + describeJson(*value_));
  return value_->get<int64_t>();
}

double JsonCursor::toNumber() const {
  if (!value_->is_number())
    fail("expected a number, found " + describeJson(*value_));
  return value_->get<double>();
}

bool JsonCursor::toBool() const {
  if (!value_->is_boolean())
    fail("expected true or false, found " + describeJson(*value_));
  return value_->get<bool>();
}

std::string JsonCursor::toString() const {
  if (!value_->is_string())
    fail("expected a string, found " + describeJson(*value_));
  return value_->get<std::string>();
}

std::vector<int64_t> JsonCursor::toIntArray() const {
  std::vector<int64_t> values;
  values.reserve(size());
  for (size_t i = 0; i < size(); ++i)
    values.push_back(element(i).toInt());
  return values;
}

} // namespace ds::plan::detail
