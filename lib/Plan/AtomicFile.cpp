//===- AtomicFile.cpp - Replace a file in one step ------------------------===//

#include "ds/Plan/AtomicFile.h"

#include <algorithm>
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

void writeFileAtomic(const std::string &path, std::string_view contents,
                     const WriteTap &tap) {
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
    if (fd < 0 && (errno != EEXIST || attempt > 100)) {
      int error = errno;
      fail(path, "cannot create a temporary file in " + folderOf(path), error);
    }
  }
  // From here on, every way out but the rename closes the descriptor and
  // removes the temporary file: an error below, and an exception from the
  // tap's callback too.
  struct Temporary {
    int fd;
    const std::string &name;
    bool renamed = false;
    ~Temporary() {
      if (fd >= 0)
        ::close(fd);
      if (!renamed)
        ::unlink(name.c_str());
    }
    /// close(): the descriptor is gone whatever it returns (Linux).
    int close() {
      int result = ::close(fd);
      fd = -1;
      return result;
    }
  } file{fd, temp};

  size_t written = 0;
  while (written < contents.size()) {
    // The test hook's full disk: what fits goes out, then write() fails
    // with failErrno, once (never retried, whatever the errno: EINTR too).
    size_t chunk = std::min(contents.size(), tap.failAfter) - written;
    if (chunk == 0)
      fail(path, "write failed", tap.failErrno != 0 ? tap.failErrno : EIO);
    ssize_t n = ::write(file.fd, contents.data() + written, chunk);
    if (n < 0) {
      int error = errno;
      if (error == EINTR)
        continue;
      fail(path, "write failed", error);
    }
    // A regular file that takes no byte of a non-empty write is full.
    if (n == 0)
      fail(path, "write failed", ENOSPC);
    if (tap.written)
      tap.written(contents.substr(written, size_t(n)));
    written += size_t(n);
  }
  if (::fsync(file.fd) != 0) {
    int error = errno;
    fail(path, "flush failed", error);
  }
  if (file.close() != 0) {
    int error = errno;
    fail(path, "flush failed", error);
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    int error = errno;
    fail(path, "rename failed", error);
  }
  file.renamed = true;
}

} // namespace ds::plan
