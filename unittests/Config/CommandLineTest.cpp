//===- CommandLineTest.cpp - Trailing commas, --set, --mixed-precision ----===//

#include "ConfigTestUtils.h"

using namespace ds::config;
using namespace ds::config::test;

TEST(ConfigTrailingCommaTest, CommasBeforeClosersAreBlankedWithTheirLines) {
  std::vector<int64_t> lines;
  std::string text = "{\n  \"a\": [1, 2,],\n  \"b\": {\"c\": 1,\n  },\n}";
  std::string strict = blankTrailingCommas(text, lines);
  EXPECT_EQ(lines, (std::vector<int64_t>{2, 3, 4}));
  // Same length: lines and columns of later errors stay.
  EXPECT_EQ(strict.size(), text.size());
  EXPECT_EQ(ordered_json::parse(strict),
            ordered_json::parse(R"({"a": [1, 2], "b": {"c": 1}})"));
}

TEST(ConfigTrailingCommaTest, CommasInStringsStay) {
  std::vector<int64_t> lines;
  std::string text = R"({"a": ",}", "b": "\",]", "c": 1})";
  EXPECT_EQ(blankTrailingCommas(text, lines), text);
  EXPECT_TRUE(lines.empty());
}

TEST(ConfigTrailingCommaTest, ParsingWarnsWithFileAndLine) {
  ConfigNotes notes;
  ordered_json json =
      parseJsonText("{\"stage\": 2,\n}", "zero2_config.json", &notes);
  EXPECT_EQ(json["stage"], 2);
  ASSERT_EQ(notes.warnings.size(), 1u);
  EXPECT_EQ(notes.warnings[0].line, 1);
  EXPECT_EQ(notes.warnings[0].message().rfind("zero2_config.json:1: trailing "
                                              "comma accepted",
                                              0),
            0u);
  // Still an error: a comma with nothing before it.
  EXPECT_THROW(parseJsonText("{,}", "x.json"), ConfigError);
}

TEST(ConfigOverrideTest, ValuesAreJsonElseStrings) {
  ConfigOverride lr = parseConfigOverride("optimizer.params.lr=1e-4");
  EXPECT_EQ(lr.key, "optimizer.params.lr");
  EXPECT_DOUBLE_EQ(lr.value.get<double>(), 1e-4);
  EXPECT_EQ(parseConfigOverride("scheduler.type=WarmupLR").value, "WarmupLR");
  EXPECT_EQ(parseConfigOverride("optimizer.params.betas=[0.9,0.95]").value,
            ordered_json::parse("[0.9, 0.95]"));
  EXPECT_EQ(parseConfigOverride("bf16.enabled=true").value, true);
  // Only the first '=' splits.
  EXPECT_EQ(parseConfigOverride("a.b=x=y").value, "x=y");
  EXPECT_EQ(parseConfigOverride("engines.student.gradient_clipping=0.5").key,
            "engines.student.gradient_clipping");
}

TEST(ConfigOverrideTest, MalformedOverridesAreErrors) {
  for (const char *text : {"lr", "=1", "a..b=1", ".a=1", "a.=1",
                           "a=", "engines=1", "engines.student=1"}) {
    ConfigError error = configErrorOf([&] { parseConfigOverride(text); });
    expectMessageHas(error, {std::string("--set ") + text + ":"});
  }
}

TEST(ConfigOverrideTest, MixedPrecisionNames) {
  EXPECT_EQ(parseMixedPrecision("bf16"), DType::BFloat16);
  EXPECT_EQ(parseMixedPrecision("fp16"), DType::Float16);
  EXPECT_EQ(parseMixedPrecision("no"), DType::Float32);
  expectMessageHas(configErrorOf([] { parseMixedPrecision("fp8"); }),
                   {"--mixed-precision fp8", "bf16, fp16 or no"});
}

TEST(ConfigOverrideTest, EngineFilesDocument) {
  EXPECT_EQ(
      engineFilesDocument({"student=a.json", "teacher=b/c.json"}),
      ordered_json::parse(
          R"({"engines": {"student": "a.json", "teacher": "b/c.json"}})"));
  expectMessageHas(configErrorOf([] {
                     engineFilesDocument({"a=x.json", "a=y.json"});
                   }),
                   {"given twice"});
  expectMessageHas(configErrorOf([] { engineFilesDocument({"x.json"}); }),
                   {"NAME=FILE"});
}
