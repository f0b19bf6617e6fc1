//===- TensorBoardSink.cpp - TensorBoard event files ----------------------===//

#include "TensorBoardSink.h"

#ifdef DS_HAVE_PROTOBUF
#include "TensorBoardEvent.pb.h"
#endif

#include "ds/TensorIO/RuntimeError.h"

#include <array>
#include <chrono>
#include <unistd.h>

namespace ds::run {

namespace {

std::array<uint32_t, 256> crcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k)
      c = c & 1 ? 0x82F63B78u ^ (c >> 1) : c >> 1;
    table[n] = c;
  }
  return table;
}

#ifdef DS_HAVE_PROTOBUF
/// TFRecord's mask, so that CRCs of data holding CRCs stay strong.
uint32_t maskedCrc(const void *data, size_t size) {
  uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

double wallTime() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
#endif

} // namespace

uint32_t crc32c(const void *data, size_t size) {
  static const std::array<uint32_t, 256> table = crcTable();
  const auto *bytes = static_cast<const unsigned char *>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i)
    crc = table[(crc ^ bytes[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

#ifndef DS_HAVE_PROTOBUF
// A ds-run built without protobuf (the runtime-only build on a machine
// without it, runtime/CMakeLists.txt) has no event encoder: a config that asks
// for the monitor is refused before the first step.
TensorBoardSink::TensorBoardSink(const std::string &dir) {
  throw runtime::RuntimeError(
      "tensorboard monitor (" + dir +
      "): this ds-run was built without protobuf (libprotobuf-lite and "
      "protoc were not found when it was configured), which writes the "
      "event files; rebuild with protobuf, or remove \"tensorboard\" from "
      "the config (csv_monitor works without it)");
}

TensorBoardSink::~TensorBoardSink() = default;

void TensorBoardSink::write(const std::string &, double, int64_t) {}

void TensorBoardSink::writeRecord(const std::string &) {}

void TensorBoardSink::flush() {}

#else

TensorBoardSink::TensorBoardSink(const std::string &dir) {
  makeDirectories(dir, "tensorboard");
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  path_ = dir + "/events.out.tfevents." + std::to_string(int64_t(wallTime())) +
          "." + host + "." + std::to_string(getpid());
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_)
    throw runtime::RuntimeError("tensorboard: cannot open " + path_);
  tensorboard::Event event;
  event.set_wall_time(wallTime());
  event.set_file_version("brain.Event:2");
  writeRecord(event.SerializeAsString());
  flush();
}

TensorBoardSink::~TensorBoardSink() {
  if (file_)
    std::fclose(file_);
}

void TensorBoardSink::write(const std::string &name, double value,
                            int64_t step) {
  tensorboard::Event event;
  event.set_wall_time(wallTime());
  event.set_step(step);
  tensorboard::Summary::Value *entry = event.mutable_summary()->add_value();
  entry->set_tag(name);
  entry->set_simple_value(float(value));
  writeRecord(event.SerializeAsString());
}

void TensorBoardSink::writeRecord(const std::string &bytes) {
  unsigned char header[12];
  uint64_t length = bytes.size();
  for (int i = 0; i < 8; ++i)
    header[i] = static_cast<unsigned char>(length >> (8 * i));
  uint32_t lengthCrc = maskedCrc(header, 8);
  uint32_t dataCrc = maskedCrc(bytes.data(), bytes.size());
  for (int i = 0; i < 4; ++i)
    header[8 + i] = static_cast<unsigned char>(lengthCrc >> (8 * i));
  unsigned char footer[4];
  for (int i = 0; i < 4; ++i)
    footer[i] = static_cast<unsigned char>(dataCrc >> (8 * i));
  if (std::fwrite(header, 1, sizeof(header), file_) != sizeof(header) ||
      std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size() ||
      std::fwrite(footer, 1, sizeof(footer), file_) != sizeof(footer))
    throw runtime::RuntimeError("tensorboard: cannot write " + path_);
}

void TensorBoardSink::flush() { std::fflush(file_); }

#endif // DS_HAVE_PROTOBUF

} // namespace ds::run
