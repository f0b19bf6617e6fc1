//===- AtomicFile.cpp - Replace a file in one step ------------------------===//

#include "ds/Plan/AtomicFile.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <unistd.h>

namespace ds::plan {

namespace {

[[noreturn]] void fail(const std::string &path, const std::string &what,
                       int error) {
  throw std::runtime_error("cannot write " + path + ": " + what + ": " +
                           std::strerror(error));
}

std::string folderOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string baseName(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

} // namespace

void writeFileAtomic(const std::string &path, std::string_view contents) {
  // Same folder as the target, so that rename() never crosses file systems.
  // open() with mode 0666 (not mkstemp's 0600) lets the umask decide the
  // final permissions, as for any ordinary output file.
  static std::atomic<unsigned> counter{0};
  std::string temp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    temp = folderOf(path) + "/." + baseName(path) + ".tmp." +
           std::to_string(::getpid()) + "." + std::to_string(counter++);
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && (errno != EEXIST || attempt > 100))
      fail(path, "cannot create a temporary file in " + folderOf(path), errno);
  }

  size_t written = 0;
  while (written < contents.size()) {
    ssize_t n =
        ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int error = errno;
      ::close(fd);
      ::unlink(temp.c_str());
      fail(path, "write failed", error);
    }
    written += size_t(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int error = errno;
    ::unlink(temp.c_str());
    fail(path, "flush failed", error);
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    int error = errno;
    ::unlink(temp.c_str());
    fail(path, "rename failed", error);
  }
}

} // namespace ds::plan
