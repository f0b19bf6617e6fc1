//===- KeyTableTest.cpp - docs/migrating.md's key table against the parser ===//
//
// Each row of the table between <!-- key-table --> and <!-- /key-table -->
// names a key by its dotted path, an example value and a status. The example
// is set at that path in a minimal config, which is parsed: "supported" must
// parse with no note on the key, "remark" with a warning or remark on it,
// "refused" must fail naming it.
//
//===----------------------------------------------------------------------===//

#include "ConfigTestUtils.h"

#include <fstream>
#include <sstream>

using namespace ds::config;
using namespace ds::config::test;

namespace {

struct Row {
  std::string key;
  std::string example;
  std::string status;
  int line = 0;
};

/// The text between the first pair of backticks in `cell`, or "".
std::string backticked(const std::string &cell) {
  size_t open = cell.find('`');
  size_t close = cell.find('`', open + 1);
  if (open == std::string::npos || close == std::string::npos)
    return "";
  return cell.substr(open + 1, close - open - 1);
}

std::string trimmed(const std::string &text) {
  size_t first = text.find_first_not_of(' ');
  size_t last = text.find_last_not_of(' ');
  return first == std::string::npos ? "" : text.substr(first, last - first + 1);
}

std::vector<Row> readTable(const std::string &path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::vector<Row> rows;
  bool inside = false;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line == "<!-- key-table -->")
      inside = true;
    else if (line == "<!-- /key-table -->")
      inside = false;
    else if (inside && line.rfind("| `", 0) == 0) {
      std::vector<std::string> cells;
      std::stringstream stream(line.substr(1));
      for (std::string cell; std::getline(stream, cell, '|');)
        cells.push_back(cell);
      if (cells.size() < 3) {
        ADD_FAILURE() << path << ":" << number << ": fewer than 3 cells";
        continue;
      }
      rows.push_back({backticked(cells[0]), backticked(cells[1]),
                      trimmed(cells[2]), number});
    }
  }
  return rows;
}

/// The base config with `example` set at the dotted `key`.
ordered_json configWith(const std::string &key, const ordered_json &example) {
  ordered_json config = {
      {"train_micro_batch_size_per_gpu", 2},
      {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 0.001}}}}}};
  ordered_json *node = &config;
  std::stringstream path(key);
  std::vector<std::string> parts;
  for (std::string part; std::getline(path, part, '.');)
    parts.push_back(part);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!node->contains(parts[i]))
      (*node)[parts[i]] = ordered_json::object();
    node = &(*node)[parts[i]];
  }
  (*node)[parts.back()] = example;
  return config;
}

bool notesName(const ConfigNotes &notes, const std::string &key) {
  for (const auto *list : {&notes.warnings, &notes.remarks})
    for (const ConfigNote &note : *list)
      if (note.keyPath == key || note.keyPath.rfind(key + ".", 0) == 0)
        return true;
  return false;
}

} // namespace

TEST(ConfigKeyTableTest, EveryRowHasTheStatusItClaims) {
  std::vector<Row> rows = readTable(DS_MIGRATING_MD);
  // A table that failed to parse must not pass as empty.
  ASSERT_GT(rows.size(), 100u);
  for (const Row &row : rows) {
    SCOPED_TRACE("docs/migrating.md:" + std::to_string(row.line) + ": " +
                 row.key);
    ASSERT_FALSE(row.key.empty());
    ordered_json config = configWith(row.key, ordered_json::parse(row.example));
    ParseContext context = makeContext(1, 2, 64);
    if (row.status == "refused") {
      ConfigError error =
          configErrorOf([&] { parseEngineConfig(config, context); });
      expectMessageHas(error, {row.key});
      continue;
    }
    EngineConfig parsed;
    try {
      parsed = parseEngineConfig(config, context);
    } catch (const ConfigError &error) {
      ADD_FAILURE() << "status " << row.status << ", but: " << error.what();
      continue;
    }
    if (row.status == "remark")
      EXPECT_TRUE(notesName(parsed.notes, row.key)) << "no note names the key";
    else if (row.status == "supported")
      EXPECT_FALSE(notesName(parsed.notes, row.key)) << "a note names the key";
    else
      ADD_FAILURE() << "unknown status \"" << row.status << "\"";
  }
}
