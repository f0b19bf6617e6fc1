//===- ObjectReader.h - Typed, path-aware JSON objects ----------*- C++ -*-===//
//
// Every section parser reads its JSON object through an ObjectReader so that
// each error names the key by its full dotted path, type errors say what was
// expected, "auto" is rejected unless the caller resolves it, and keys nobody
// read are reported as unknown. The typed conversions are a PathCursor's
// (ds/Support/PathCursor.h, shared with the plan's reader) failing with
// ConfigErrors; the config's policy is here: "auto", null as unset, integral
// floats (5e8) as integers, consumed and unknown keys. Private to lib/Config.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_CONFIG_OBJECTREADER_H
#define DS_LIB_CONFIG_OBJECTREADER_H

#include "ds/Config/Config.h"
#include "ds/Support/PathCursor.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ds::config::detail {

using json::describeValue;

bool isAutoValue(const ordered_json &value);

/// The number at `path`; else a ConfigError naming `path`.
double toNumber(const ordered_json &value, const std::string &path);

[[noreturn]] void throwAutoNotResolvable(const std::string &path);

class ObjectReader {
public:
  /// `value` must be an object (else a type error naming `path`) and must
  /// outlive the reader.
  ObjectReader(const ordered_json &value, std::string path);

  const std::string &path() const { return cursor_.path(); }
  std::string keyPath(const std::string &key) const;
  const ordered_json &json() const { return cursor_.json(); }

  /// True when the key is present with a non-null value (null means unset,
  /// as Python's None does for DeepSpeed).
  bool has(const std::string &key) const;
  /// True, and the key consumed, when its value is the string "auto".
  bool takeAuto(const std::string &key);
  /// The value, consumed; nullptr when absent or null. "auto" is an error.
  const ordered_json *take(const std::string &key);
  void markConsumed(const std::string &key) { consumed_.insert(key); }

  std::optional<bool> boolean(const std::string &key);
  /// Integers, and floats with an integral value (5e8).
  std::optional<int64_t> integer(const std::string &key);
  std::optional<double> number(const std::string &key);
  std::optional<std::string> string(const std::string &key);
  /// A list of non-empty strings; a single string counts as a list of one
  /// when `acceptSingleString` (as DeepSpeed's leaf_module coerces it).
  std::optional<std::vector<std::string>>
  stringList(const std::string &key, bool acceptSingleString = false);
  std::optional<ObjectReader> object(const std::string &key);

  /// Throws for the first key (in file order) that nobody consumed.
  void rejectUnknownKeys(const std::string &context = "") const;

  [[noreturn]] void fail(const std::string &key,
                         const std::string &detail) const;

private:
  /// take(), as a cursor.
  std::optional<json::PathCursor> takeCursor(const std::string &key);

  json::PathCursor cursor_;
  std::set<std::string> consumed_;
};

/// Range checks; each throws a ConfigError naming `path`.
void requireMin(int64_t value, int64_t min, const std::string &path);
void requireRange(int64_t value, int64_t min, int64_t max,
                  const std::string &path);
void requireMin(double value, double min, const std::string &path);
void requirePositive(double value, const std::string &path);

} // namespace ds::config::detail

#endif // DS_LIB_CONFIG_OBJECTREADER_H
