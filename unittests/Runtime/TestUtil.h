//===- TestUtil.h - Helpers for the runtime unit tests ----------*- C++ -*-===//

#ifndef DS_UNITTESTS_RUNTIME_TESTUTIL_H
#define DS_UNITTESTS_RUNTIME_TESTUTIL_H

#include "ds/Plan/Plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ds::test {

/// A fresh directory under $TMPDIR, removed with its contents at the end of
/// the test.
class TempDir {
public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

/// unittests/Runtime/<relative> in the source tree.
std::string sourceFile(const std::string &relative);
std::string readText(const std::string &path);
void writeText(const std::string &path, const std::string &text);
/// Names of the entries of `dir` (no "." or "..").
std::vector<std::string> listDir(const std::string &dir);

/// The checked-in plan plans/<name>, parsed but not validated.
plan::ordered_json planJson(const std::string &name);

/// Builds programs for tests: values are appended with fresh ids.
class ProgramBuilder {
public:
  plan::ValueId tensor(plan::DType dtype, std::vector<int64_t> shape);
  plan::ValueId scalar(plan::ValueType type);
  plan::ValueId list(plan::ValueType elem);
  plan::Op &add(plan::Op op);
  /// A call with module info filled in, for error messages.
  plan::Op &call(const std::string &name, std::vector<plan::ValueId> args,
                 std::vector<plan::ValueId> results,
                 std::vector<plan::ValueId> free = {});

  plan::Program program;
};

/// A one-engine plan with the given inputs (batched, micro-batch from the
/// first input's first dimension), no state, and `program` as eval with one
/// "loss" output per result.
plan::Plan makePlan(std::vector<plan::InputDesc> inputs, plan::Program program);

} // namespace ds::test

/// Expects `statement` to throw `type` whose what() contains `text`.
#define EXPECT_THROW_WITH(statement, type, text)                               \
  do {                                                                         \
    try {                                                                      \
      statement;                                                               \
      ADD_FAILURE() << "expected " #type " containing: " << (text);            \
    } catch (const type &error) {                                              \
      EXPECT_NE(std::string(error.what()).find(text), std::string::npos)       \
          << "message: " << error.what()                                       \
          << "\nexpected to contain: " << (text);                              \
    }                                                                          \
  } while (0)

#endif // DS_UNITTESTS_RUNTIME_TESTUTIL_H
