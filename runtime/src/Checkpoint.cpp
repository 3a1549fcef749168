// Checkpoint files: encoding, checked parsing, and the atomic write (temp
// file, fsync, rename, fsync of the directory). Layout in docs/runtime.md.
#include "modelc/checkpoint.h"
#include "modelc/fileio.h"
#include "ArtifactVerifier.h"
#include "modelc/runtime.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace mc::rt {

namespace {

constexpr uint64_t kHeaderSize = 32;
constexpr uint64_t kTrailerBytes = 16;

void putLE(std::vector<uint8_t> &out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(uint8_t(v >> (8 * i)));
}

uint64_t getLE(const uint8_t *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= uint64_t(p[i]) << (8 * i);
  return v;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

/// Milliseconds to sleep at the test hook's points (0: none).
long slowMillis() {
  const char *v = std::getenv("MODELC_TEST_CHECKPOINT_SLOW");
  if (!v || !*v)
    return 0;
  long ms = std::strtol(v, nullptr, 10);
  return ms > 0 ? ms : 0;
}

Status writeAll(int fd, const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, std::min<size_t>(n, size_t(1) << 30));
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return Status::error(std::string("write failed: ") +
                           std::strerror(errno));
    p += w;
    n -= size_t(w);
  }
  return Status::ok();
}

} // namespace

Status encodeCheckpoint(const std::vector<CheckpointEntry> &entries,
                        const std::string &metadata,
                        std::vector<uint8_t> *out) {
  std::vector<uint8_t> &b = *out;
  uint64_t total = kHeaderSize + metadata.size() + kTrailerBytes;
  for (const CheckpointEntry &e : entries)
    total += 4 + e.name.size() + 4 + 8 * e.shape.size() + 8 + e.byteSize;
  b.clear();
  b.reserve(size_t(total));
  b.assign(kCheckpointMagic, kCheckpointMagic + 8);
  putLE(b, kCheckpointVersionMajor, 4);
  putLE(b, kCheckpointVersionMinor, 4);
  if (entries.size() > UINT32_MAX)
    return Status::error("checkpoint: too many entries");
  putLE(b, entries.size(), 4);
  putLE(b, 0, 4);
  putLE(b, metadata.size(), 8);
  b.insert(b.end(), metadata.begin(), metadata.end());
  for (const CheckpointEntry &e : entries) {
    if (e.name.empty() || e.name.size() > UINT32_MAX)
      return Status::error("checkpoint: an entry has an empty name");
    if (e.shape.size() > MC_MAX_RANK)
      return Status::error("checkpoint: entry '" + e.name + "' has rank " +
                           std::to_string(e.shape.size()));
    putLE(b, e.name.size(), 4);
    b.insert(b.end(), e.name.begin(), e.name.end());
    putLE(b, uint8_t(e.dtype), 1);
    putLE(b, e.shape.size(), 1);
    putLE(b, 0, 2);
    for (int64_t d : e.shape)
      putLE(b, uint64_t(d), 8);
    putLE(b, e.byteSize, 8);
    if (e.byteSize)
      b.insert(b.end(), e.data, e.data + e.byteSize);
  }
  uint32_t crc = crc32Bytes(b.data(), b.size(), 0);
  putLE(b, crc, 4);
  putLE(b, 0, 4);
  b.insert(b.end(), kCheckpointTrailerMagic, kCheckpointTrailerMagic + 8);
  return Status::ok();
}

Status parseCheckpoint(std::vector<uint8_t> bytes, const std::string &name,
                       Checkpoint *out) {
  auto fail = [&](const std::string &msg) {
    return Status::error(name + ": " + msg);
  };
  const uint64_t size = bytes.size();
  if (size < kHeaderSize + kTrailerBytes)
    return fail("file is too small to be a modelc checkpoint (" +
                std::to_string(size) + " bytes; truncated?)");
  const uint8_t *p = bytes.data();
  if (std::memcmp(p, kCheckpointMagic, 8) != 0)
    return fail("not a modelc checkpoint (the file does not start with "
                "'MCSTATE')");
  const uint8_t *trailer = p + size - kTrailerBytes;
  if (std::memcmp(trailer + 8, kCheckpointTrailerMagic, 8) != 0)
    return fail("checkpoint trailer magic is missing (truncated or "
                "unfinished file?)");
  if (getLE(trailer + 4, 4) != 0)
    return fail("checkpoint trailer reserved word is not zero (corrupt file)");
  uint32_t stored = uint32_t(getLE(trailer, 4));
  uint32_t computed = crc32Bytes(p, size - kTrailerBytes, 0);
  if (stored != computed)
    return fail("checkpoint checksum mismatch: trailer says " + hex32(stored) +
                ", bytes give " + hex32(computed) + " (corrupt file)");
  uint32_t major = uint32_t(getLE(p + 8, 4)), minor = uint32_t(getLE(p + 12, 4));
  if (major != kCheckpointVersionMajor)
    return fail("checkpoint version " + std::to_string(major) + "." +
                std::to_string(minor) + " is not supported (this runtime reads " +
                std::to_string(kCheckpointVersionMajor) + ".x)");
  uint32_t count = uint32_t(getLE(p + 16, 4));
  if (getLE(p + 20, 4) != 0)
    return fail("checkpoint header reserved word is not zero (a newer "
                "format?)");
  uint64_t end = size - kTrailerBytes, at = kHeaderSize;
  auto need = [&](uint64_t n, const std::string &what) -> Status {
    if (n > end - at)
      return fail("checkpoint " + what + " runs past the end of the file "
                  "(corrupt file)");
    return Status::ok();
  };
  uint64_t metaSize = getLE(p + 24, 8);
  MC_RETURN_IF_ERROR(need(metaSize, "metadata"));
  Checkpoint c;
  c.metadata.assign(reinterpret_cast<const char *>(p + at), size_t(metaSize));
  at += metaSize;
  for (uint32_t k = 0; k < count; ++k) {
    std::string what = "entry " + std::to_string(k);
    MC_RETURN_IF_ERROR(need(4, what));
    uint64_t nameSize = getLE(p + at, 4);
    at += 4;
    MC_RETURN_IF_ERROR(need(nameSize, what + " name"));
    CheckpointEntry e;
    e.name.assign(reinterpret_cast<const char *>(p + at), size_t(nameSize));
    at += nameSize;
    if (e.name.empty())
      return fail(what + " has an empty name");
    what += " '" + e.name + "'";
    MC_RETURN_IF_ERROR(need(4, what));
    uint8_t dtype = p[at], rank = p[at + 1];
    if (p[at + 2] || p[at + 3])
      return fail(what + " has a nonzero reserved field (a newer format?)");
    at += 4;
    if (dtype > uint8_t(DType::I1))
      return fail(what + " has an unknown dtype " + std::to_string(dtype));
    if (rank > MC_MAX_RANK)
      return fail(what + " has rank " + std::to_string(rank) +
                  ", more than " + std::to_string(MC_MAX_RANK));
    e.dtype = DType(dtype);
    MC_RETURN_IF_ERROR(need(uint64_t(rank) * 8 + 8, what));
    uint64_t expect = dtypeSize(e.dtype);
    for (int d = 0; d < rank; ++d, at += 8) {
      int64_t v = int64_t(getLE(p + at, 8));
      if (v < 0 || __builtin_mul_overflow(expect, uint64_t(v), &expect))
        return fail(what + " has an invalid dimension " + std::to_string(v));
      e.shape.push_back(v);
    }
    e.byteSize = getLE(p + at, 8);
    at += 8;
    if (e.byteSize != expect)
      return fail(what + " has " + std::to_string(e.byteSize) +
                  " bytes, expected " + std::to_string(expect) + " for " +
                  dtypeName(e.dtype) + shapeString(e.shape));
    MC_RETURN_IF_ERROR(need(e.byteSize, what + " data"));
    e.data = p + at; // stays valid: the vector's heap block moves with it
    at += e.byteSize;
    for (const CheckpointEntry &o : c.entries)
      if (o.name == e.name)
        return fail("checkpoint has two entries named '" + e.name + "'");
    c.entries.push_back(std::move(e));
  }
  if (at != end)
    return fail("checkpoint has " + std::to_string(end - at) +
                " unexpected bytes after its entries (corrupt file)");
  c.bytes = std::move(bytes);
  *out = std::move(c);
  return Status::ok();
}

Status writeCheckpointFile(const std::string &path,
                           const std::vector<CheckpointEntry> &entries,
                           const std::string &metadata) {
  std::vector<uint8_t> bytes;
  MC_RETURN_IF_ERROR(encodeCheckpoint(entries, metadata, &bytes));
  long slow = slowMillis();
  AtomicWriteOptions options;
  options.durable = true; // a checkpoint must survive a crash after it
  return writeFileAtomically(
      path,
      [&](const std::string &tmp) -> Status {
        int fd = ::open(tmp.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
        if (fd < 0)
          return Status::error(path + ": cannot write: " +
                               std::strerror(errno));
        // The test hook stops halfway (a crash there must leave the old
        // checkpoint) and again before the rename.
        size_t half = slow ? bytes.size() / 2 : bytes.size();
        Status st = writeAll(fd, bytes.data(), half);
        if (st && slow) {
          std::this_thread::sleep_for(std::chrono::milliseconds(slow));
          st = writeAll(fd, bytes.data() + half, bytes.size() - half);
        }
        if (::close(fd) != 0 && st)
          st = Status::error(std::string("close failed: ") +
                             std::strerror(errno));
        if (st && slow)
          std::this_thread::sleep_for(std::chrono::milliseconds(slow));
        return st ? st : Status::error(path + ": " + st.message());
      },
      options);
}

Status readCheckpointFile(const std::string &path, Checkpoint *out) {
  std::vector<uint8_t> bytes;
  MC_RETURN_IF_ERROR(readRegularFile(path, kMaxInputFileBytes, &bytes));
  return parseCheckpoint(std::move(bytes), path, out);
}

} // namespace mc::rt
