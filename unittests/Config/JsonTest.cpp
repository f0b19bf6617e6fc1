//===- JsonTest.cpp - Reading JSON files and formatting errors ------------===//

#include "ConfigTestUtils.h"

using namespace ds::config;
using namespace ds::config::test;

TEST(ConfigJsonTest, ReadsFileKeepingKeyOrder) {
  TempDir dir;
  std::string file =
      dir.write("c.json", R"({"zeta": 1, "alpha": 2, "mid": 3})");
  ordered_json json = readJsonFile(file);
  std::vector<std::string> keys;
  for (const auto &item : json.items())
    keys.push_back(item.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"zeta", "alpha", "mid"}));
}

TEST(ConfigJsonTest, MissingFileNamesTheFile) {
  TempDir dir;
  std::string file = (dir.path() / "absent.json").string();
  ConfigError error = configErrorOf([&] { readJsonFile(file); });
  EXPECT_EQ(error.file(), file);
  expectMessageHas(error, {file, "not found"});
}

TEST(ConfigJsonTest, MalformedJsonNamesFileAndPosition) {
  TempDir dir;
  std::string file =
      dir.write("bad.json", "{\n  \"train_batch_size\": 8,\n,}\n");
  ConfigError error = configErrorOf([&] { readJsonFile(file); });
  EXPECT_EQ(error.file(), file);
  expectMessageHas(error, {file, "malformed JSON", "line 3, column 1", "byte"});
}

// Found by the config fuzz target: nlohmann throws out_of_range, not
// parse_error, for a number no double holds.
TEST(ConfigJsonTest, NumberTooLargeIsMalformedJson) {
  ConfigError error = configErrorOf(
      [] { parseJsonText(R"({"gradient_clipping": 1e999})", "big.json"); });
  EXPECT_EQ(error.file(), "big.json");
  expectMessageHas(error, {"big.json", "malformed JSON",
                           "number overflow parsing '1e999'"});
}

TEST(ConfigJsonTest, DuplicateKeyIsAnErrorNamingItsPath) {
  ConfigError error = configErrorOf([] {
    parseJsonText(R"({"zero_optimization": {"stage": 1, "stage": 3}})",
                  "dup.json");
  });
  EXPECT_EQ(error.keyPath(), "zero_optimization.stage");
  expectMessageHas(error, {"dup.json", "duplicate key"});
}

TEST(ConfigJsonTest, DuplicateKeyInsideArrayNamesTheElement) {
  ConfigError error = configErrorOf(
      [] { parseJsonText(R"({"a": [1, {"x": 1, "x": 2}]})", "dup.json"); });
  EXPECT_EQ(error.keyPath(), "a[1].x");
}

TEST(ConfigJsonTest, ErrorMessageJoinsFileKeyAndDetail) {
  ConfigError error("optimizer.params.lr", "must be >= 0");
  EXPECT_STREQ(error.what(), "optimizer.params.lr: must be >= 0");
  ConfigError nested =
      error.withKeyPrefix("engines.student").withFile("ds.json");
  EXPECT_EQ(nested.keyPath(), "engines.student.optimizer.params.lr");
  EXPECT_STREQ(nested.what(),
               "ds.json: engines.student.optimizer.params.lr: must be >= 0");
  // A file already named is kept.
  EXPECT_EQ(nested.withFile("other.json").file(), "ds.json");
}
