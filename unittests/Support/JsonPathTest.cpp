//===- JsonPathTest.cpp - Paths and values of JSON in messages ------------===//

#include "ds/Support/JsonPath.h"

#include <gtest/gtest.h>

namespace ds::json {
namespace {

TEST(SupportJsonPathTest, JoinsKeysAndIndices) {
  EXPECT_EQ(joinKey("", "zero_optimization"), "zero_optimization");
  EXPECT_EQ(joinKey("zero_optimization", "stage"), "zero_optimization.stage");
  EXPECT_EQ(joinIndex("programs.eval.body", 12), "programs.eval.body[12]");
  EXPECT_EQ(joinKey(joinIndex("engines", 0), "seed"), "engines[0].seed");
}

TEST(SupportJsonPathTest, ShortensLongText) {
  EXPECT_EQ(shortened("short"), "short");
  std::string forty(40, 'x');
  EXPECT_EQ(shortened(forty), forty);
  EXPECT_EQ(shortened(std::string(41, 'x')), std::string(37, 'x') + "...");
}

TEST(SupportJsonPathTest, DescribesEachKindOfValue) {
  EXPECT_EQ(describeValue(ordered_json()), "null");
  EXPECT_EQ(describeValue(ordered_json(true)), "boolean true");
  EXPECT_EQ(describeValue(ordered_json(false)), "boolean false");
  EXPECT_EQ(describeValue(ordered_json(-3)), "number -3");
  EXPECT_EQ(describeValue(ordered_json(7u)), "number 7");
  EXPECT_EQ(describeValue(ordered_json(2.5)), "number 2.5");
  EXPECT_EQ(describeValue(ordered_json("abc")), "string \"abc\"");
  EXPECT_EQ(describeValue(ordered_json::array({1, 2})), "array");
  EXPECT_EQ(describeValue(ordered_json::object()), "object");
}

TEST(SupportJsonPathTest, QuotesShortenedStrings) {
  // Shortened before quoting, so that the closing quote survives.
  EXPECT_EQ(describeValue(ordered_json(std::string(50, 'a'))),
            "string \"" + std::string(37, 'a') + "...\"");
  EXPECT_EQ(describeValue(ordered_json("say \"hi\"")),
            "string \"say \\\"hi\\\"\"");
}

} // namespace
} // namespace ds::json
