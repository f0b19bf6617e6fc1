//===- PathCursor.h - Typed reading of JSON values at a path ----*- C++ -*-===//
//
// A JSON value together with its path in the document, whose typed
// conversions fail with "expected an integer, found string \"3\"" at that
// path. Where a failure goes is the reading library's choice, an ErrorHook:
// the config throws a ConfigError, the plan a PlanError naming the file and
// the op being read. Children (members, elements) share their parent's hook.
//
//===----------------------------------------------------------------------===//

#ifndef DS_SUPPORT_PATHCURSOR_H
#define DS_SUPPORT_PATHCURSOR_H

#include "ds/Support/JsonPath.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ds::json {

/// Receives every failure of a PathCursor and throws the reading library's
/// error; a hook that returns is a bug (the cursor aborts).
class ErrorHook {
public:
  virtual ~ErrorHook() = default;

  /// `detail` is wrong with the value at `path`.
  virtual void fail(const std::string &path,
                    const std::string &detail) const = 0;

  /// `value` at `path` is not `expected` ("an integer"); by default fails
  /// with "expected <expected>, found <describeValue(value)>".
  virtual void wrongType(const ordered_json &value, const std::string &path,
                         const std::string &expected) const;
};

/// How toInt treats floats.
enum class FloatIntegers {
  /// Only JSON integers are integers.
  Reject,
  /// A float with an integral value (5e8) is an integer too.
  AcceptIntegral,
};

class PathCursor {
public:
  /// `value` must outlive the cursor and its children.
  PathCursor(const ordered_json &value, std::string path,
             std::shared_ptr<const ErrorHook> hook);

  const ordered_json &json() const { return *value_; }
  const std::string &path() const { return path_; }
  const std::shared_ptr<const ErrorHook> &hook() const { return hook_; }

  /// The same value and path, failing through `hook`.
  PathCursor withHook(std::shared_ptr<const ErrorHook> hook) const;

  [[noreturn]] void fail(const std::string &detail) const;
  /// Fails through the hook's wrongType.
  [[noreturn]] void wrongType(const std::string &expected) const;

  /// Objects: the member `key`, or nullopt when absent.
  void requireObject() const;
  std::optional<PathCursor> member(const std::string &key) const;

  /// Arrays; `index` < size().
  void requireArray() const;
  size_t size() const;
  PathCursor element(size_t index) const;

  bool toBool() const;
  int64_t toInt(FloatIntegers floats = FloatIntegers::Reject) const;
  /// Any JSON number (integers too).
  double toNumber() const;
  std::string toString() const;
  std::vector<int64_t>
  toIntArray(FloatIntegers floats = FloatIntegers::Reject) const;
  std::vector<std::string> toStringList() const;

private:
  const ordered_json *value_;
  std::string path_;
  std::shared_ptr<const ErrorHook> hook_;
};

} // namespace ds::json

#endif // DS_SUPPORT_PATHCURSOR_H
