//===- ActivationCheckpointingTest.cpp - activation_checkpointing ---------===//

#include "ConfigTestUtils.h"

using namespace ds::config;
using namespace ds::config::test;

namespace {

const char *kBase = R"({"train_batch_size": 4, "optimizer": {"type": "SGD"},
                        "activation_checkpointing": )";

EngineConfig parseSection(const std::string &section) {
  return parse(kBase + section + "}");
}

bool notesMention(const std::vector<ConfigNote> &notes,
                  const std::string &key) {
  for (const ConfigNote &note : notes)
    if (note.keyPath == key)
      return true;
  return false;
}

} // namespace

TEST(ConfigActivationCheckpointingTest, ModulesSelectLikeLeafModules) {
  EngineConfig config = parseSection(
      R"({"modules": {"classes": ["Block", "Block"], "names": "blocks.0",
                      "name_suffixes": ["attn"]}})");
  const LeafModuleConfig &modules = config.activationCheckpointing.modules;
  EXPECT_EQ(modules.classes, std::vector<std::string>{"Block"});
  EXPECT_TRUE(modules.classesGiven);
  EXPECT_EQ(modules.names, std::vector<std::string>{"blocks.0"});
  EXPECT_EQ(modules.nameSuffixes, std::vector<std::string>{"attn"});
  EXPECT_TRUE(config.activationCheckpointing.selectsAny());
  EXPECT_TRUE(config.notes.warnings.empty());
}

TEST(ConfigActivationCheckpointingTest, AbsentSectionSelectsNothing) {
  EngineConfig config = parse(R"({"train_batch_size": 4})");
  EXPECT_FALSE(config.activationCheckpointing.selectsAny());
  // No default classes, unlike leaf_module.
  EXPECT_TRUE(config.activationCheckpointing.modules.classes.empty());
}

TEST(ConfigActivationCheckpointingTest, DeepSpeedSwitchesAreRemarked) {
  EngineConfig config = parseSection(
      R"({"partition_activations": true, "cpu_checkpointing": false,
          "contiguous_memory_optimization": true, "number_checkpoints": 4,
          "synchronize_checkpoint_boundary": true, "profile": false,
          "modules": {"classes": "Block"}})");
  const std::vector<ConfigNote> &remarks = config.notes.remarks;
  EXPECT_TRUE(
      notesMention(remarks, "activation_checkpointing.partition_activations"));
  EXPECT_TRUE(notesMention(
      remarks, "activation_checkpointing.contiguous_memory_optimization"));
  EXPECT_TRUE(
      notesMention(remarks, "activation_checkpointing.number_checkpoints"));
  EXPECT_TRUE(notesMention(
      remarks, "activation_checkpointing.synchronize_checkpoint_boundary"));
  // Switches left off say nothing.
  EXPECT_FALSE(
      notesMention(remarks, "activation_checkpointing.cpu_checkpointing"));
  EXPECT_FALSE(notesMention(remarks, "activation_checkpointing.profile"));
}

TEST(ConfigActivationCheckpointingTest, NoModulesIsAWarning) {
  EngineConfig config = parseSection(R"({"partition_activations": false})");
  ASSERT_EQ(config.notes.warnings.size(), 1u);
  EXPECT_EQ(config.notes.warnings[0].keyPath, "activation_checkpointing");
  EXPECT_NE(config.notes.warnings[0].detail.find("selects no module"),
            std::string::npos);
}

TEST(ConfigActivationCheckpointingTest, BadKeysAndValuesAreErrors) {
  expectMessageHas(parseError(std::string(kBase) + R"({"bogus": 1}})"),
                   {"activation_checkpointing.bogus", "unknown key"});
  expectMessageHas(
      parseError(std::string(kBase) + R"({"modules": {"class": ["B"]}}})"),
      {"activation_checkpointing.modules.class", "unknown key"});
  expectMessageHas(
      parseError(std::string(kBase) + R"({"modules": {"names": [""]}}})"),
      {"activation_checkpointing.modules.names"});
  expectMessageHas(
      parseError(std::string(kBase) + R"({"number_checkpoints": 0}})"),
      {"activation_checkpointing.number_checkpoints"});
  expectMessageHas(
      parseError(std::string(kBase) + R"({"cpu_checkpointing": "yes"}})"),
      {"activation_checkpointing.cpu_checkpointing", "expected"});
}
