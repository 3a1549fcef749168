// Reading regular files with a size limit, and writing files atomically
// (see modelc/fileio.h).
#include "modelc/fileio.h"

#include <algorithm>
#include <filesystem>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mc::rt {
namespace {

std::string errnoText() { return std::strerror(errno); }

/// What a non-regular file is, for the message.
const char *kindOf(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

Status checkStat(const std::string &path, const struct stat &st,
                 uint64_t maxBytes) {
  if (!S_ISREG(st.st_mode))
    return Status::error(path + ": not a regular file (" +
                         kindOf(st.st_mode) + "); modelc reads only regular "
                         "files");
  if (uint64_t(st.st_size) > maxBytes)
    return Status::error(path + ": the file has " +
                         std::to_string(st.st_size) +
                         " bytes, more than the limit of " +
                         std::to_string(maxBytes));
  return Status::ok();
}

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "."
         : slash == 0               ? "/"
                                    : path.substr(0, slash);
}

} // namespace

Status openRegularFile(const std::string &path, uint64_t maxBytes, int *fd,
                       uint64_t *size) {
  // O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer.
  int f = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f < 0)
    return Status::error(path + ": cannot open: " + errnoText());
  struct stat st;
  if (::fstat(f, &st) != 0) {
    std::string msg = path + ": cannot stat: " + errnoText();
    ::close(f);
    return Status::error(msg);
  }
  Status s = checkStat(path, st, maxBytes);
  if (!s) {
    ::close(f);
    return s;
  }
  int flags = ::fcntl(f, F_GETFL);
  if (flags >= 0)
    ::fcntl(f, F_SETFL, flags & ~O_NONBLOCK);
  *fd = f;
  if (size)
    *size = uint64_t(st.st_size);
  return Status::ok();
}

Status checkRegularFile(const std::string &path, uint64_t maxBytes,
                        uint64_t *size) {
  struct stat st;
  // stat, not open: nothing blocks and nothing is read.
  if (::stat(path.c_str(), &st) != 0)
    return Status::error(path + ": cannot open: " + errnoText());
  MC_RETURN_IF_ERROR(checkStat(path, st, maxBytes));
  if (size)
    *size = uint64_t(st.st_size);
  return Status::ok();
}

Status readExactly(int fd, void *dst, size_t n, const std::string &path) {
  uint8_t *p = static_cast<uint8_t *>(dst);
  size_t done = 0;
  while (done < n) {
    // Linux caps one read() near 2 GiB; loop for big files.
    ssize_t got = ::read(fd, p + done, std::min<size_t>(n - done, size_t(1) << 30));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return Status::error(path + ": read failed: " +
                           (got < 0 ? errnoText() : "unexpected end"));
    done += size_t(got);
  }
  return Status::ok();
}

Status readRegularFile(const std::string &path, uint64_t maxBytes,
                       std::vector<uint8_t> *out) {
  int fd = -1;
  uint64_t size = 0;
  MC_RETURN_IF_ERROR(openRegularFile(path, maxBytes, &fd, &size));
  try {
    out->resize(size_t(size));
  } catch (const std::bad_alloc &) {
    ::close(fd);
    return Status::error(path + ": cannot allocate " + std::to_string(size) +
                         " bytes to read it");
  }
  Status st = readExactly(fd, out->data(), out->size(), path);
  ::close(fd);
  return st;
}

Status writeFileAtomically(
    const std::string &path,
    const std::function<Status(const std::string &tmpPath)> &write,
    const AtomicWriteOptions &options) {
  // Only a regular file is replaced: renaming over /dev/full or a FIFO
  // would replace the device node itself (as root) instead of writing to it.
  struct stat existing;
  if (::stat(path.c_str(), &existing) == 0 && !S_ISREG(existing.st_mode))
    return Status::error(path + ": cannot write: it exists and is not a "
                         "regular file (" + kindOf(existing.st_mode) + ")");
  // Same directory as the target, so rename() is atomic (one file system).
  std::string tmp = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0 && errno == ENOENT) {
    std::string dir = std::filesystem::path(path).parent_path().string();
    return Status::error(path + ": cannot write: the directory '" +
                         (dir.empty() ? std::string(".") : dir) +
                         "' does not exist");
  }
  if (fd < 0)
    return Status::error(path + ": cannot create a temporary file: " +
                         errnoText());
  auto failWith = [&](const std::string &msg) {
    if (fd >= 0)
      ::close(fd);
    ::unlink(tmp.c_str());
    return Status::error(msg);
  };
  Status st = write(tmp);
  if (!st)
    return failWith(st.message());
  mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0666 & ~mask) != 0)
    return failWith(path + ": chmod failed: " + errnoText());
  if (options.durable && ::fsync(fd) != 0)
    return failWith(path + ": fsync failed: " + errnoText());
  int rc = ::close(fd);
  fd = -1;
  if (rc != 0)
    return failWith(path + ": close failed: " + errnoText());
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return failWith(path + ": rename failed: " + errnoText());
  if (!options.durable)
    return Status::ok();
  // The rename itself is durable only once the directory is on disk.
  std::string dir = directoryOf(path);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return Status::error(dir + ": cannot open the directory to fsync it: " +
                         errnoText());
  rc = ::fsync(dfd);
  int err = errno;
  ::close(dfd);
  if (rc != 0 && err != EINVAL) // some file systems cannot fsync directories
    return Status::error(dir + ": fsync of the directory failed: " +
                         std::strerror(err));
  return Status::ok();
}

Status writeFileAtomically(const std::string &path, const void *data,
                           size_t size, const AtomicWriteOptions &options) {
  return writeFileAtomically(
      path,
      [&](const std::string &tmp) -> Status {
        FILE *f = std::fopen(tmp.c_str(), "wb");
        if (!f)
          return Status::error(path + ": cannot write: " + errnoText());
        bool ok = size == 0 || std::fwrite(data, 1, size, f) == size;
        ok = std::fflush(f) == 0 && ok;
        int err = errno;
        ok = std::fclose(f) == 0 && ok;
        if (!ok)
          return Status::error(path + ": write failed: " +
                               std::strerror(err ? err : errno));
        return Status::ok();
      },
      options);
}

Status appendToFile(const std::string &path, const void *data, size_t size,
                    const AtomicWriteOptions &options) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return Status::error(path + ": cannot append: " + errnoText());
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error(path + ": cannot append: not a regular file");
  }
  off_t before = st.st_size;
  const char *p = static_cast<const char *>(data);
  size_t left = size;
  std::string error;
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      error = path + ": write failed: " + (n < 0 ? errnoText() : "no progress");
      break;
    }
    p += n;
    left -= size_t(n);
  }
  if (error.empty() && options.durable && ::fdatasync(fd) != 0)
    error = path + ": fdatasync failed: " + errnoText();
  if (!error.empty() && ::ftruncate(fd, before) != 0)
    error += "; and cutting it back to " + std::to_string(before) +
             " bytes failed: " + errnoText();
  if (::close(fd) != 0 && error.empty())
    error = path + ": close failed: " + errnoText();
  return error.empty() ? Status::ok() : Status::error(error);
}

Status finishStdout() {
  bool ok = std::fflush(stdout) == 0;
  int err = errno;
  if (!ok || std::ferror(stdout))
    return Status::error(std::string("cannot write to standard output: ") +
                         (ok ? "write error" : std::strerror(err)));
  return Status::ok();
}

bool sameFile(const std::string &a, const std::string &b) {
  namespace fs = std::filesystem;
  std::error_code ea, eb;
  if (fs::exists(a, ea) && fs::exists(b, eb)) {
    std::error_code ec;
    return fs::equivalent(a, b, ec) && !ec;
  }
  fs::path pa = fs::weakly_canonical(a, ea), pb = fs::weakly_canonical(b, eb);
  if (ea || eb)
    return fs::absolute(a, ea).lexically_normal() ==
           fs::absolute(b, eb).lexically_normal();
  return pa == pb;
}

} // namespace mc::rt
