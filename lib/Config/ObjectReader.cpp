//===- ObjectReader.cpp - Typed, path-aware access to JSON objects --------===//

#include "ObjectReader.h"

#include <cmath>
#include <limits>

namespace ds::config::detail {

std::string describeValue(const ordered_json &value) {
  if (value.is_object() || value.is_array())
    return value.type_name();
  return std::string(value.type_name()) + " " + json::shortened(value.dump());
}

bool isAutoValue(const ordered_json &value) {
  return value.is_string() && value.get_ref<const std::string &>() == "auto";
}

[[noreturn]] void throwAutoNotResolvable(const std::string &path) {
  throw ConfigError(
      path, "\"auto\" cannot be resolved for this key; \"auto\" is resolved "
            "only for train_batch_size, train_micro_batch_size_per_gpu, "
            "gradient_accumulation_steps (from the data and world size) and, "
            "when the model's hidden size is known, "
            "zero_optimization.reduce_bucket_size, "
            "stage3_prefetch_bucket_size and "
            "stage3_param_persistence_threshold: give a value");
}

[[noreturn]] static void throwTypeError(const ordered_json &value,
                                        const std::string &path,
                                        const char *expected) {
  if (isAutoValue(value))
    throwAutoNotResolvable(path);
  throw ConfigError(path, std::string("expected ") + expected + ", got " +
                              describeValue(value));
}

bool toBool(const ordered_json &value, const std::string &path) {
  if (!value.is_boolean())
    throwTypeError(value, path, "a boolean");
  return value.get<bool>();
}

int64_t toInteger(const ordered_json &value, const std::string &path) {
  if (value.is_number_integer() && !value.is_number_unsigned())
    return value.get<int64_t>();
  if (value.is_number_unsigned()) {
    uint64_t raw = value.get<uint64_t>();
    if (raw > uint64_t(std::numeric_limits<int64_t>::max()))
      throw ConfigError(path, "integer " + value.dump() + " is too large");
    return int64_t(raw);
  }
  if (value.is_number_float()) {
    // DeepSpeed configs write sizes as 5e8, which JSON reads as a float.
    double raw = value.get<double>();
    if (std::isfinite(raw) && raw == std::trunc(raw) && raw >= -9.2e18 &&
        raw <= 9.2e18)
      return int64_t(raw);
    throw ConfigError(path, "expected an integer, got non-integral number " +
                                value.dump());
  }
  throwTypeError(value, path, "an integer");
}

double toNumber(const ordered_json &value, const std::string &path) {
  if (!value.is_number())
    throwTypeError(value, path, "a number");
  return value.get<double>();
}

std::string toString(const ordered_json &value, const std::string &path) {
  if (!value.is_string())
    throwTypeError(value, path, "a string");
  return value.get<std::string>();
}

ObjectReader::ObjectReader(const ordered_json &value, std::string path)
    : object_(&value), path_(std::move(path)) {
  if (!value.is_object()) {
    if (isAutoValue(value))
      throwAutoNotResolvable(path_);
    throw ConfigError(path_.empty() ? std::string() : path_,
                      "expected an object, got " + describeValue(value));
  }
}

std::string ObjectReader::keyPath(const std::string &key) const {
  return json::joinKey(path_, key);
}

bool ObjectReader::has(const std::string &key) const {
  auto it = object_->find(key);
  return it != object_->end() && !it->is_null();
}

bool ObjectReader::takeAuto(const std::string &key) {
  auto it = object_->find(key);
  if (it == object_->end() || !isAutoValue(*it))
    return false;
  consumed_.insert(key);
  return true;
}

const ordered_json *ObjectReader::take(const std::string &key) {
  auto it = object_->find(key);
  if (it == object_->end())
    return nullptr;
  consumed_.insert(key);
  if (it->is_null())
    return nullptr;
  if (isAutoValue(*it))
    throwAutoNotResolvable(keyPath(key));
  return &*it;
}

std::optional<bool> ObjectReader::boolean(const std::string &key) {
  if (const ordered_json *value = take(key))
    return toBool(*value, keyPath(key));
  return std::nullopt;
}

std::optional<int64_t> ObjectReader::integer(const std::string &key) {
  if (const ordered_json *value = take(key))
    return toInteger(*value, keyPath(key));
  return std::nullopt;
}

std::optional<double> ObjectReader::number(const std::string &key) {
  if (const ordered_json *value = take(key))
    return toNumber(*value, keyPath(key));
  return std::nullopt;
}

std::optional<std::string> ObjectReader::string(const std::string &key) {
  if (const ordered_json *value = take(key))
    return toString(*value, keyPath(key));
  return std::nullopt;
}

std::optional<std::vector<std::string>>
ObjectReader::stringList(const std::string &key, bool acceptSingleString) {
  const ordered_json *value = take(key);
  if (!value)
    return std::nullopt;
  std::string path = keyPath(key);
  if (acceptSingleString && value->is_string()) {
    if (value->get_ref<const std::string &>().empty())
      throw ConfigError(path, "expected a non-empty string");
    return std::vector<std::string>{value->get<std::string>()};
  }
  if (!value->is_array())
    throwTypeError(*value, path, "a list of strings");
  std::vector<std::string> result;
  for (size_t i = 0; i < value->size(); ++i) {
    std::string elementPath = json::joinIndex(path, i);
    std::string element = toString((*value)[i], elementPath);
    if (element.empty())
      throw ConfigError(elementPath, "expected a non-empty string");
    result.push_back(std::move(element));
  }
  return result;
}

std::optional<ObjectReader> ObjectReader::object(const std::string &key) {
  if (const ordered_json *value = take(key))
    return ObjectReader(*value, keyPath(key));
  return std::nullopt;
}

void ObjectReader::rejectUnknownKeys(const std::string &context) const {
  for (const auto &item : object_->items()) {
    if (consumed_.count(item.key()))
      continue;
    std::string detail = "unknown key";
    if (!context.empty())
      detail += " " + context;
    detail += " (see docs/config.md for the keys we accept)";
    throw ConfigError(keyPath(item.key()), detail);
  }
}

void ObjectReader::fail(const std::string &key,
                        const std::string &detail) const {
  throw ConfigError(keyPath(key), detail);
}

void requireMin(int64_t value, int64_t min, const std::string &path) {
  if (value < min)
    throw ConfigError(path, "must be >= " + std::to_string(min) + ", got " +
                                std::to_string(value));
}

void requireRange(int64_t value, int64_t min, int64_t max,
                  const std::string &path) {
  if (value < min || value > max)
    throw ConfigError(path, "must be in [" + std::to_string(min) + ", " +
                                std::to_string(max) + "], got " +
                                std::to_string(value));
}

static std::string formatNumber(double value) {
  return ordered_json(value).dump();
}

void requireMin(double value, double min, const std::string &path) {
  if (!(value >= min))
    throw ConfigError(path, "must be >= " + formatNumber(min) + ", got " +
                                formatNumber(value));
}

void requirePositive(double value, const std::string &path) {
  if (!(value > 0))
    throw ConfigError(path, "must be > 0, got " + formatNumber(value));
}

} // namespace ds::config::detail
