//===- PathCursor.cpp - Typed reading of JSON values at a path ------------===//

#include "ds/Support/PathCursor.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>

namespace ds::json {

void ErrorHook::wrongType(const ordered_json &value, const std::string &path,
                          const std::string &expected) const {
  fail(path, "expected " + expected + ", found " + describeValue(value));
}

PathCursor::PathCursor(const ordered_json &value, std::string path,
                       std::shared_ptr<const ErrorHook> hook)
    : value_(&value), path_(std::move(path)), hook_(std::move(hook)) {}

PathCursor PathCursor::withHook(std::shared_ptr<const ErrorHook> hook) const {
  return PathCursor(*value_, path_, std::move(hook));
}

void PathCursor::fail(const std::string &detail) const {
  hook_->fail(path_, detail);
  std::abort();
}

void PathCursor::wrongType(const std::string &expected) const {
  hook_->wrongType(*value_, path_, expected);
  std::abort();
}

void PathCursor::requireObject() const {
  if (!value_->is_object())
    wrongType("an object");
}

std::optional<PathCursor> PathCursor::member(const std::string &key) const {
  requireObject();
  auto it = value_->find(key);
  if (it == value_->end())
    return std::nullopt;
  return PathCursor(*it, joinKey(path_, key), hook_);
}

void PathCursor::requireArray() const {
  if (!value_->is_array())
    wrongType("an array");
}

size_t PathCursor::size() const {
  requireArray();
  return value_->size();
}

PathCursor PathCursor::element(size_t index) const {
  requireArray();
  return PathCursor((*value_)[index], joinIndex(path_, index), hook_);
}

bool PathCursor::toBool() const {
  if (!value_->is_boolean())
    wrongType("a boolean");
  return value_->get<bool>();
}

int64_t PathCursor::toInt(FloatIntegers floats) const {
  if (value_->is_number_unsigned()) {
    uint64_t raw = value_->get<uint64_t>();
    if (raw > uint64_t(std::numeric_limits<int64_t>::max()))
      fail("integer " + value_->dump() + " does not fit in 64 bits");
    return int64_t(raw);
  }
  if (value_->is_number_integer())
    return value_->get<int64_t>();
  if (value_->is_number_float() && floats == FloatIntegers::AcceptIntegral) {
    double raw = value_->get<double>();
    if (std::isfinite(raw) && raw == std::trunc(raw) && raw >= -9.2e18 &&
        raw <= 9.2e18)
      return int64_t(raw);
    fail("expected an integer, found non-integral number " + value_->dump());
  }
  wrongType("an integer");
}

double PathCursor::toNumber() const {
  if (!value_->is_number())
    wrongType("a number");
  return value_->get<double>();
}

std::string PathCursor::toString() const {
  if (!value_->is_string())
    wrongType("a string");
  return value_->get<std::string>();
}

std::vector<int64_t> PathCursor::toIntArray(FloatIntegers floats) const {
  std::vector<int64_t> values;
  values.reserve(size());
  for (size_t i = 0; i < size(); ++i)
    values.push_back(element(i).toInt(floats));
  return values;
}

std::vector<std::string> PathCursor::toStringList() const {
  if (!value_->is_array())
    wrongType("a list of strings");
  std::vector<std::string> values;
  values.reserve(size());
  for (size_t i = 0; i < size(); ++i)
    values.push_back(element(i).toString());
  return values;
}

} // namespace ds::json
