//===- PathCursorTest.cpp - Typed reading of JSON values at a path --------===//

#include "ds/Support/PathCursor.h"

#include <gtest/gtest.h>

#include <functional>

namespace ds::json {
namespace {

/// What a failure reported: where and what.
struct Failure {
  std::string path;
  std::string detail;
};

class ThrowingHook : public ErrorHook {
public:
  void fail(const std::string &path, const std::string &detail) const override {
    throw Failure{path, detail};
  }
};

/// A hook that reports wrong types its own way, as the config does for
/// "auto".
class CustomTypeHook : public ThrowingHook {
public:
  void wrongType(const ordered_json &value, const std::string &path,
                 const std::string &expected) const override {
    throw Failure{path, "custom: " + expected + " / " + value.dump()};
  }
};

PathCursor cursorAt(const ordered_json &value, std::string path = "doc") {
  return PathCursor(value, std::move(path), std::make_shared<ThrowingHook>());
}

/// The failure `read` reports; fails the test when it reports none.
template <typename Read> Failure failureOf(Read read) {
  try {
    read();
  } catch (const Failure &failure) {
    return failure;
  }
  ADD_FAILURE() << "no failure reported";
  return {};
}

TEST(SupportPathCursorTest, ReadsEachType) {
  ordered_json doc = ordered_json::parse(
      R"({"b": true, "i": -4, "n": 2.5, "s": "x", "ints": [1, 2],
          "names": ["a", "b"]})");
  PathCursor cursor = cursorAt(doc);
  EXPECT_TRUE(cursor.member("b")->toBool());
  EXPECT_EQ(cursor.member("i")->toInt(), -4);
  EXPECT_EQ(cursor.member("i")->toNumber(), -4.0);
  EXPECT_EQ(cursor.member("n")->toNumber(), 2.5);
  EXPECT_EQ(cursor.member("s")->toString(), "x");
  EXPECT_EQ(cursor.member("ints")->toIntArray(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(cursor.member("names")->toStringList(),
            (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(cursor.member("absent").has_value());
}

TEST(SupportPathCursorTest, ChildrenExtendThePath) {
  ordered_json doc = ordered_json::parse(R"({"a": {"b": [10, 20]}})");
  PathCursor root = cursorAt(doc, "");
  PathCursor element = root.member("a")->member("b")->element(1);
  EXPECT_EQ(element.path(), "a.b[1]");
  EXPECT_EQ(element.toInt(), 20);
  EXPECT_EQ(root.member("a")->member("b")->size(), 2u);
}

TEST(SupportPathCursorTest, WrongTypesSayExpectedAndFound) {
  ordered_json doc = ordered_json::parse(
      R"({"s": "3", "i": 1, "n": 2.5, "b": false, "o": {}, "a": []})");
  PathCursor cursor = cursorAt(doc);
  struct Case {
    const char *key;
    std::function<void(const PathCursor &)> read;
    const char *detail;
  };
  std::vector<Case> cases = {
      {"s", [](const PathCursor &c) { c.toInt(); },
       "expected an integer, found string \"3\""},
      {"n", [](const PathCursor &c) { c.toInt(); },
       "expected an integer, found number 2.5"},
      {"s", [](const PathCursor &c) { c.toNumber(); },
       "expected a number, found string \"3\""},
      {"i", [](const PathCursor &c) { c.toBool(); },
       "expected a boolean, found number 1"},
      {"b", [](const PathCursor &c) { c.toString(); },
       "expected a string, found boolean false"},
      {"a", [](const PathCursor &c) { c.requireObject(); },
       "expected an object, found array"},
      {"o", [](const PathCursor &c) { c.size(); },
       "expected an array, found object"},
      {"o", [](const PathCursor &c) { c.toStringList(); },
       "expected a list of strings, found object"},
      {"s", [](const PathCursor &c) { c.member("x"); },
       "expected an object, found string \"3\""},
  };
  for (const Case &c : cases) {
    PathCursor member = *cursor.member(c.key);
    Failure failure = failureOf([&] { c.read(member); });
    EXPECT_EQ(failure.path, std::string("doc.") + c.key);
    EXPECT_EQ(failure.detail, c.detail);
  }
}

TEST(SupportPathCursorTest, ElementFailuresNameTheElement) {
  ordered_json doc = ordered_json::parse(R"([1, "two"])");
  Failure ints = failureOf([&] { cursorAt(doc, "ids").toIntArray(); });
  EXPECT_EQ(ints.path, "ids[1]");
  EXPECT_EQ(ints.detail, "expected an integer, found string \"two\"");
  Failure names = failureOf([&] { cursorAt(doc, "names").toStringList(); });
  EXPECT_EQ(names.path, "names[0]");
  EXPECT_EQ(names.detail, "expected a string, found number 1");
}

TEST(SupportPathCursorTest, IntegralFloatsOnlyWhenAccepted) {
  ordered_json sizes = ordered_json::parse(R"([5e8, 2.5, -1.0])");
  PathCursor cursor = cursorAt(sizes, "sizes");
  EXPECT_EQ(cursor.element(0).toInt(FloatIntegers::AcceptIntegral), 500000000);
  EXPECT_EQ(cursor.element(2).toInt(FloatIntegers::AcceptIntegral), -1);
  EXPECT_EQ(failureOf([&] { cursor.element(0).toInt(); }).detail,
            "expected an integer, found number 500000000.0");
  EXPECT_EQ(failureOf([&] {
              cursor.element(1).toInt(FloatIntegers::AcceptIntegral);
            }).detail,
            "expected an integer, found non-integral number 2.5");
  Failure array =
      failureOf([&] { cursor.toIntArray(FloatIntegers::AcceptIntegral); });
  EXPECT_EQ(array.path, "sizes[1]");
}

TEST(SupportPathCursorTest, IntegersFitInSigned64Bits) {
  ordered_json big = ordered_json::parse("9223372036854775808");
  EXPECT_EQ(failureOf([&] { cursorAt(big).toInt(); }).detail,
            "integer 9223372036854775808 does not fit in 64 bits");
  ordered_json max = ordered_json::parse("9223372036854775807");
  EXPECT_EQ(cursorAt(max).toInt(), INT64_MAX);
}

TEST(SupportPathCursorTest, HooksDecideHowWrongTypesRead) {
  ordered_json doc = ordered_json::parse(R"({"k": "auto"})");
  PathCursor cursor(doc, "", std::make_shared<CustomTypeHook>());
  Failure failure = failureOf([&] { cursor.member("k")->toInt(); });
  EXPECT_EQ(failure.path, "k");
  EXPECT_EQ(failure.detail, "custom: an integer / \"auto\"");
}

TEST(SupportPathCursorTest, WithHookKeepsThePlace) {
  ordered_json doc = ordered_json::parse(R"({"k": 1})");
  PathCursor plain = *cursorAt(doc).member("k");
  PathCursor custom = plain.withHook(std::make_shared<CustomTypeHook>());
  EXPECT_EQ(custom.path(), "doc.k");
  EXPECT_EQ(&custom.json(), &plain.json());
  EXPECT_EQ(failureOf([&] { custom.toString(); }).detail,
            "custom: a string / 1");
  EXPECT_EQ(failureOf([&] { plain.fail("bad"); }).detail, "bad");
}

/// A broken hook: it returns.
class ReturningHook : public ErrorHook {
public:
  void fail(const std::string &, const std::string &) const override {}
};

TEST(SupportPathCursorTest, AHookThatReturnsAborts) {
  ordered_json doc = ordered_json::parse(R"({"k": 1})");
  PathCursor cursor(doc, "", std::make_shared<ReturningHook>());
  EXPECT_DEATH(cursor.fail("bad"), "");
  EXPECT_DEATH(cursor.member("k")->toString(), "");
}

} // namespace
} // namespace ds::json
