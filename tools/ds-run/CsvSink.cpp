//===- CsvSink.cpp - DeepSpeed's csv_monitor files ------------------------===//

#include "MetricSink.h"

#include "ds/TensorIO/RuntimeError.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <system_error>

namespace ds::run {

void makeDirectories(const std::string &dir, const std::string &what) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error)
    throw runtime::RuntimeError(what + ": cannot create " + dir + ": " +
                                error.message());
}

std::string pythonFloat(double value) {
  if (std::isnan(value))
    return "nan";
  if (std::isinf(value))
    return value > 0 ? "inf" : "-inf";
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, result.ptr);
  // Python writes 2.0 where to_chars writes 2.
  if (text.find_first_of(".en") == std::string::npos)
    text += ".0";
  return text;
}

struct CsvSink::File {
  std::FILE *stream = nullptr;
  ~File() {
    if (stream)
      std::fclose(stream);
  }
};

CsvSink::CsvSink(std::string dir) : dir_(std::move(dir)) {
  makeDirectories(dir_, "csv_monitor");
}

CsvSink::~CsvSink() = default;

void CsvSink::write(const std::string &name, double value, int64_t step) {
  std::unique_ptr<File> &file = files_[name];
  if (!file) {
    std::string base = name;
    for (char &c : base)
      if (c == '/' || c == ' ')
        c = '_';
    std::string path = dir_ + "/" + base + ".csv";
    file = std::make_unique<File>();
    file->stream = std::fopen(path.c_str(), "a");
    if (!file->stream)
      throw runtime::RuntimeError("csv_monitor: cannot open " + path);
    std::string header = name.substr(name.rfind('/') + 1);
    // Python's csv.writer ends rows with \r\n.
    std::fprintf(file->stream, "step,%s\r\n", header.c_str());
  }
  std::fprintf(file->stream, "%lld,%s\r\n", static_cast<long long>(step),
               pythonFloat(value).c_str());
}

void CsvSink::flush() {
  for (auto &entry : files_)
    std::fflush(entry.second->stream);
}

} // namespace ds::run
