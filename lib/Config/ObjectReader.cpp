//===- ObjectReader.cpp - Typed, path-aware access to JSON objects --------===//

#include "ObjectReader.h"

#include <memory>
#include <utility>

namespace ds::config::detail {

bool isAutoValue(const ordered_json &value) {
  return value.is_string() && value.get_ref<const std::string &>() == "auto";
}

[[noreturn]] void throwAutoNotResolvable(const std::string &path) {
  throw ConfigError(
      path, "\"auto\" cannot be resolved for this key (docs/config.md, "
            "\"auto\" values, lists the keys where it is resolved and how): "
            "give a value, or one with --set " +
                path + "=VALUE");
}

namespace {

/// Failures of the config's cursors: ConfigErrors naming the key path.
class ConfigErrorHook : public json::ErrorHook {
public:
  void fail(const std::string &path, const std::string &detail) const override {
    throw ConfigError(path, detail);
  }

  void wrongType(const ordered_json &value, const std::string &path,
                 const std::string &expected) const override {
    if (isAutoValue(value))
      throwAutoNotResolvable(path);
    json::ErrorHook::wrongType(value, path, expected);
  }
};

/// `value` at `path`, failing with ConfigErrors.
json::PathCursor configCursor(const ordered_json &value, std::string path) {
  static const auto hook = std::make_shared<const ConfigErrorHook>();
  return json::PathCursor(value, std::move(path), hook);
}

} // namespace

double toNumber(const ordered_json &value, const std::string &path) {
  return configCursor(value, path).toNumber();
}

ObjectReader::ObjectReader(const ordered_json &value, std::string path)
    : cursor_(configCursor(value, std::move(path))) {
  cursor_.requireObject();
}

std::string ObjectReader::keyPath(const std::string &key) const {
  return json::joinKey(path(), key);
}

bool ObjectReader::has(const std::string &key) const {
  std::optional<json::PathCursor> member = cursor_.member(key);
  return member && !member->json().is_null();
}

bool ObjectReader::takeAuto(const std::string &key) {
  std::optional<json::PathCursor> member = cursor_.member(key);
  if (!member || !isAutoValue(member->json()))
    return false;
  consumed_.insert(key);
  return true;
}

std::optional<json::PathCursor>
ObjectReader::takeCursor(const std::string &key) {
  std::optional<json::PathCursor> member = cursor_.member(key);
  if (!member)
    return std::nullopt;
  consumed_.insert(key);
  if (member->json().is_null())
    return std::nullopt;
  if (isAutoValue(member->json()))
    throwAutoNotResolvable(member->path());
  return member;
}

const ordered_json *ObjectReader::take(const std::string &key) {
  if (std::optional<json::PathCursor> member = takeCursor(key))
    return &member->json();
  return nullptr;
}

std::optional<bool> ObjectReader::boolean(const std::string &key) {
  if (std::optional<json::PathCursor> member = takeCursor(key))
    return member->toBool();
  return std::nullopt;
}

std::optional<int64_t> ObjectReader::integer(const std::string &key) {
  // DeepSpeed configs write sizes as 5e8, which JSON reads as a float.
  if (std::optional<json::PathCursor> member = takeCursor(key))
    return member->toInt(json::FloatIntegers::AcceptIntegral);
  return std::nullopt;
}

std::optional<double> ObjectReader::number(const std::string &key) {
  if (std::optional<json::PathCursor> member = takeCursor(key))
    return member->toNumber();
  return std::nullopt;
}

std::optional<std::string> ObjectReader::string(const std::string &key) {
  if (std::optional<json::PathCursor> member = takeCursor(key))
    return member->toString();
  return std::nullopt;
}

std::optional<std::vector<std::string>>
ObjectReader::stringList(const std::string &key, bool acceptSingleString) {
  std::optional<json::PathCursor> member = takeCursor(key);
  if (!member)
    return std::nullopt;
  if (acceptSingleString && member->json().is_string()) {
    std::string single = member->toString();
    if (single.empty())
      member->fail("expected a non-empty string");
    return std::vector<std::string>{std::move(single)};
  }
  std::vector<std::string> result = member->toStringList();
  for (size_t i = 0; i < result.size(); ++i)
    if (result[i].empty())
      member->element(i).fail("expected a non-empty string");
  return result;
}

std::optional<ObjectReader> ObjectReader::object(const std::string &key) {
  if (std::optional<json::PathCursor> member = takeCursor(key))
    return ObjectReader(member->json(), member->path());
  return std::nullopt;
}

void ObjectReader::rejectUnknownKeys(const std::string &context) const {
  for (const auto &item : json().items()) {
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
