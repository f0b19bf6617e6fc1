//===- TestUtil.cpp - Helpers for the runtime unit tests ------------------===//

#include "TestUtil.h"

#include <cstdlib>
#include <dirent.h>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ds::test {

TempDir::TempDir() {
  const char *base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base && *base ? base : "/tmp") + "/ds-runtime-test-XXXXXX";
  if (!::mkdtemp(pattern.data()))
    throw std::runtime_error("mkdtemp failed for " + pattern);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string sourceFile(const std::string &relative) {
  return std::string(DS_TEST_SOURCE_DIR) + "/" + relative;
}

std::string readText(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw std::runtime_error("cannot read " + path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

void writeText(const std::string &path, const std::string &text) {
  std::ofstream file(path, std::ios::binary);
  file << text;
  if (!file)
    throw std::runtime_error("cannot write " + path);
}

std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  for (const auto &entry : std::filesystem::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  return names;
}

plan::ordered_json planJson(const std::string &name) {
  return plan::ordered_json::parse(readText(sourceFile("plans/" + name)));
}

plan::ValueId ProgramBuilder::tensor(plan::DType dtype,
                                     std::vector<int64_t> shape) {
  plan::ValueId id = plan::ValueId(program.values.size());
  program.values.push_back(
      plan::ValueDesc::tensor(id, dtype, std::move(shape)));
  return id;
}

plan::ValueId ProgramBuilder::scalar(plan::ValueType type) {
  plan::ValueId id = plan::ValueId(program.values.size());
  program.values.push_back(plan::ValueDesc::scalar(id, type));
  return id;
}

plan::ValueId ProgramBuilder::list(plan::ValueType elem) {
  plan::ValueId id = plan::ValueId(program.values.size());
  program.values.push_back(plan::ValueDesc::list(id, elem));
  return id;
}

plan::Op &ProgramBuilder::add(plan::Op op) {
  program.body.push_back(std::move(op));
  return program.body.back();
}

plan::Op &ProgramBuilder::call(const std::string &name,
                               std::vector<plan::ValueId> args,
                               std::vector<plan::ValueId> results,
                               std::vector<plan::ValueId> free) {
  plan::Op &op = add(plan::Op::call(name, std::move(args), std::move(results)));
  op.free = std::move(free);
  op.module = "fc";
  op.moduleClass = "torch.nn.modules.linear.Linear";
  op.loc = "model.py:7";
  return op;
}

plan::Plan makePlan(std::vector<plan::InputDesc> inputs,
                    plan::Program program) {
  plan::Plan plan;
  plan.producer = "unittests";
  if (!inputs.empty() && inputs[0].batched && !inputs[0].shape.empty() &&
      inputs[0].shape[0] > 0)
    plan.microBatchPerRank = inputs[0].shape[0];
  plan.engines.push_back({"model", "", plan::ordered_json::object()});
  plan.inputs = std::move(inputs);
  for (size_t i = 0; i < program.results.size(); ++i)
    plan.outputs.push_back({"loss" + std::to_string(i), "loss"});
  plan.programs["eval"] = std::move(program);
  return plan;
}

} // namespace ds::test
