//===- ConfigTestUtils.h - Helpers shared by the config tests ---*- C++ -*-===//

#ifndef DS_UNITTESTS_CONFIG_CONFIGTESTUTILS_H
#define DS_UNITTESTS_CONFIG_CONFIGTESTUTILS_H

#include "ds/Config/Config.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <unistd.h>

namespace ds::config::test {

inline ParseContext makeContext(int64_t worldSize = 1,
                                std::optional<int64_t> dataMicroBatch = {},
                                std::optional<int64_t> hiddenSize = {}) {
  ParseContext context;
  context.worldSize = worldSize;
  context.dataMicroBatch = dataMicroBatch;
  context.hiddenSize = hiddenSize;
  return context;
}

/// Parses `text` as one engine's config.
inline EngineConfig parse(const std::string &text,
                          const ParseContext &context = makeContext()) {
  return parseEngineConfig(ordered_json::parse(text), context);
}

/// The ConfigError `body` throws; a test failure if it throws none.
template <typename Body> ConfigError configErrorOf(Body &&body) {
  try {
    body();
  } catch (const ConfigError &error) {
    return error;
  }
  ADD_FAILURE() << "expected a ConfigError";
  return ConfigError("", "<no error>");
}

/// The ConfigError of parsing `text` as one engine's config.
inline ConfigError parseError(const std::string &text,
                              const ParseContext &context = makeContext()) {
  return configErrorOf([&] { parse(text, context); });
}

/// Checks that the message contains every one of `parts`.
inline void expectMessageHas(const ConfigError &error,
                             std::initializer_list<std::string> parts) {
  std::string message = error.what();
  for (const std::string &part : parts)
    EXPECT_NE(message.find(part), std::string::npos)
        << "message \"" << message << "\" lacks \"" << part << "\"";
}

/// A fresh directory under the system temp folder, removed at the end.
class TempDir {
public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("dsconfig-" + std::string(info ? info->name() : "test") + "-" +
             std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path &path() const { return path_; }

  /// Writes `text` to `name` (which may contain folders); returns its path.
  std::string write(const std::string &name, const std::string &text) const {
    std::filesystem::path file = path_ / name;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file.string();
  }

private:
  std::filesystem::path path_;
};

/// Smallest valid engine config.
inline constexpr const char *kMinimal =
    R"({"train_micro_batch_size_per_gpu": 2})";

} // namespace ds::config::test

#endif // DS_UNITTESTS_CONFIG_CONFIGTESTUTILS_H
