//===- SessionConfigTest.cpp - One or several engines ---------------------===//

#include "ConfigTestUtils.h"

using namespace ds::config;
using namespace ds::config::test;

namespace {

SessionConfig sessionOf(const std::string &text,
                        const ParseContext &context = makeContext(),
                        const std::string &baseDir = "") {
  return parseSessionConfig(parseJsonText(text, "test.json"), context, baseDir);
}

ConfigError sessionError(const std::string &text,
                         const ParseContext &context = makeContext()) {
  return configErrorOf([&] { sessionOf(text, context); });
}

std::vector<std::string> keysOf(const SessionConfig &session) {
  std::vector<std::string> keys;
  for (const EngineEntry &entry : session.engines)
    keys.push_back(entry.key);
  return keys;
}

constexpr const char *kStudent =
    R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
        "zero_optimization": {"stage": 2}})";
constexpr const char *kTeacher =
    R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
        "zero_optimization": {"stage": 3}})";

} // namespace

TEST(ConfigSessionTest, PlainConfigIsOneRootEngine) {
  SessionConfig session = sessionOf(kStudent);
  EXPECT_FALSE(session.multiEngine);
  ASSERT_EQ(session.engines.size(), 1u);
  EXPECT_EQ(session.engines[0].key, "");
  EXPECT_EQ(session.engines[0].config.zero.stage, 2);
  EXPECT_NE(session.find(""), nullptr);
}

TEST(ConfigSessionTest, EnginesKeepTheOrderOfTheFile) {
  SessionConfig session =
      sessionOf(std::string(R"({"engines": {"zeta": )") + kStudent +
                R"(, "alpha": )" + kTeacher + R"(, "mid": )" + kTeacher + "}}");
  EXPECT_TRUE(session.multiEngine);
  EXPECT_EQ(keysOf(session),
            (std::vector<std::string>{"zeta", "alpha", "mid"}));
  EXPECT_FALSE(session.find("zeta")->config.frozen());
  // No optimizer section: a frozen, forward-only engine.
  EXPECT_TRUE(session.find("alpha")->config.frozen());
  EXPECT_EQ(session.find("nope"), nullptr);
}

TEST(ConfigSessionTest, PathValuedEnginesResolveAgainstTheConfigFolder) {
  TempDir dir;
  std::string studentFile = dir.write("configs/student.json", kStudent);
  dir.write("configs/sub/teacher.json", kTeacher);
  std::string main = dir.write("configs/ds.json", R"({"engines": {
      "student": "student.json", "teacher": "sub/teacher.json",
      "": {"train_micro_batch_size_per_gpu": 2,
           "gradient_accumulation_steps": 2}}})");
  SessionConfig session = loadSessionConfig(main, makeContext());
  EXPECT_EQ(keysOf(session),
            (std::vector<std::string>{"student", "teacher", ""}));
  EXPECT_EQ(session.engines[0].sourceFile, studentFile);
  EXPECT_EQ(session.engines[1].config.zero.stage, 3);
  EXPECT_EQ(session.engines[2].sourceFile, "");
}

TEST(ConfigSessionTest, ErrorInAnEngineFileNamesTheFileAndTheEngine) {
  TempDir dir;
  std::string teacher = dir.write(
      "teacher.json",
      R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
          "zero_optimization": {"stage": 5}})");
  std::string main =
      dir.write("ds.json", R"({"engines": {"teacher": "teacher.json"}})");
  ConfigError error =
      configErrorOf([&] { loadSessionConfig(main, makeContext()); });
  EXPECT_EQ(error.file(), teacher);
  EXPECT_EQ(error.keyPath(), "zero_optimization.stage");
  expectMessageHas(error, {"engine \"teacher\""});
}

TEST(ConfigSessionTest, MissingOrMalformedEngineFileIsAnError) {
  TempDir dir;
  std::string main = dir.write(
      "ds.json", R"({"engines": {"a": "absent.json", "b": "bad.json"}})");
  ConfigError missing =
      configErrorOf([&] { loadSessionConfig(main, makeContext()); });
  expectMessageHas(missing, {"absent.json", "not found", "engine \"a\""});

  std::string bad = dir.write("bad.json", "{\"train_batch_size\": }");
  std::string onlyBad =
      dir.write("ds2.json", R"({"engines": {"b": "bad.json"}})");
  ConfigError malformed =
      configErrorOf([&] { loadSessionConfig(onlyBad, makeContext()); });
  EXPECT_EQ(malformed.file(), bad);
  expectMessageHas(malformed, {"malformed JSON", "line 1"});
}

TEST(ConfigSessionTest, InlineEngineErrorsAreNestedUnderTheEngine) {
  TempDir dir;
  std::string main = dir.write("ds.json", R"({"engines": {"student":
      {"train_micro_batch_size_per_gpu": 2,
       "optimizer": {"type": "AdamW", "params": {"lr": -1}}}}})");
  ConfigError error =
      configErrorOf([&] { loadSessionConfig(main, makeContext()); });
  EXPECT_EQ(error.file(), main);
  EXPECT_EQ(error.keyPath(), "engines.student.optimizer.params.lr");
  // Keys with dots are quoted so that the path stays readable.
  ConfigError dotted = sessionError(R"({"engines": {"enc.layers":
      {"train_micro_batch_size_per_gpu": 2, "bogus": 1}}})");
  EXPECT_EQ(dotted.keyPath(), "engines[\"enc.layers\"].bogus");
}

TEST(ConfigSessionTest, GasDisagreementNamesBothEnginesAndValues) {
  ConfigError error = sessionError(R"({"engines": {
      "student": {"train_micro_batch_size_per_gpu": 2,
                  "gradient_accumulation_steps": 4},
      "teacher": {"train_micro_batch_size_per_gpu": 2,
                  "gradient_accumulation_steps": 2}}})");
  EXPECT_EQ(error.keyPath(), "engines.teacher.gradient_accumulation_steps");
  expectMessageHas(error, {"\"teacher\" has gradient_accumulation_steps 2",
                           "\"student\" has 4"});
}

TEST(ConfigSessionTest, MicroBatchDisagreementIsAnError) {
  ConfigError error = sessionError(R"({"engines": {
      "a": {"train_micro_batch_size_per_gpu": 2},
      "b": {"train_micro_batch_size_per_gpu": 4}}})");
  EXPECT_EQ(error.keyPath(), "engines.b.train_micro_batch_size_per_gpu");
  expectMessageHas(error, {"\"b\"", "\"a\"", "4", "2"});
}

TEST(ConfigSessionTest, OverlappingEngineKeysAreAnError) {
  std::string engine = R"({"train_micro_batch_size_per_gpu": 1})";
  ConfigError error = sessionError(R"({"engines": {"a": )" + engine +
                                   R"(, "a.b": )" + engine + "}}");
  EXPECT_EQ(error.keyPath(), "engines[\"a.b\"]");
  expectMessageHas(error, {"\"a.b\" overlaps engine \"a\""});
  // Sibling names that share a prefix, and the root beside others, are fine.
  EXPECT_NO_THROW(sessionOf(R"({"engines": {"a": )" + engine + R"(, "ab": )" +
                            engine + R"(, "": )" + engine + "}}"));
}

TEST(ConfigSessionTest, DuplicateEngineKeysInAFileAreAnError) {
  ConfigError error = configErrorOf(
      [] { parseJsonText(R"({"engines": {"a": {}, "a": {}}})", "ds.json"); });
  EXPECT_EQ(error.keyPath(), "engines.a");
  expectMessageHas(error, {"duplicate key"});
}

TEST(ConfigSessionTest, MalformedEnginesSectionIsAnError) {
  ConfigError extra = sessionError(
      R"({"engines": {"a": {"train_micro_batch_size_per_gpu": 1}},
          "train_batch_size": 8})");
  EXPECT_EQ(extra.keyPath(), "train_batch_size");
  expectMessageHas(extra, {"no other top-level key"});
  EXPECT_EQ(sessionError(R"({"engines": []})").keyPath(), "engines");
  EXPECT_EQ(sessionError(R"({"engines": {}})").keyPath(), "engines");
  EXPECT_EQ(sessionError(R"({"engines": {"a": 3}})").keyPath(), "engines.a");
  EXPECT_EQ(sessionError(R"({"engines": {"a..b": {}}})").keyPath(),
            "engines[\"a..b\"]");
  EXPECT_EQ(sessionError(R"({"engines": {"a b": {}}})").keyPath(),
            "engines.a b");
}

TEST(ConfigSessionTest, TryLoadReportsTheErrorWithoutThrowing) {
  TempDir dir;
  std::string file = (dir.path() / "absent.json").string();
  std::string error;
  std::optional<SessionConfig> session =
      tryLoadSessionConfig(file, makeContext(), error);
  EXPECT_FALSE(session.has_value());
  EXPECT_NE(error.find("absent.json"), std::string::npos);

  std::string good = dir.write("ds.json", kStudent);
  EXPECT_TRUE(tryLoadSessionConfig(good, makeContext(), error).has_value());
}
