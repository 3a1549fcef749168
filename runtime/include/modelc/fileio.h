// Files in and out, the one way every tool and library here does it: inputs
// must be regular files no larger than a documented limit (a FIFO, a device
// or a directory is refused before anything blocks on it or reads it
// forever), outputs are written whole (a temporary file in the same
// directory, renamed over the target) or not at all. Limits are listed in
// docs/reliability.md.
#ifndef MODELC_FILEIO_H
#define MODELC_FILEIO_H

#include "modelc/status.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mc::rt {

/// The largest input file read whole (artifacts, .npy arrays, checkpoints,
/// ONNX external data): 64 GiB.
constexpr uint64_t kMaxInputFileBytes = uint64_t(64) << 30;

/// Opens PATH for reading without blocking on it (O_NONBLOCK, so a FIFO
/// with no writer does not hang the open) and refuses anything but a
/// regular file of at most MAXBYTES. On success *FD is open (blocking mode
/// restored) and *SIZE is the file's size.
Status openRegularFile(const std::string &path, uint64_t maxBytes, int *fd,
                       uint64_t *size);

/// Checks, without reading it, that PATH is a regular file of at most
/// MAXBYTES: for paths handed to a library that opens them itself.
Status checkRegularFile(const std::string &path, uint64_t maxBytes,
                        uint64_t *size = nullptr);

/// Reads exactly N bytes from FD (at its current offset) into DST; PATH
/// names the file in the error.
Status readExactly(int fd, void *dst, size_t n, const std::string &path);

/// The whole of the regular file PATH (at most MAXBYTES) into *OUT.
Status readRegularFile(const std::string &path, uint64_t maxBytes,
                       std::vector<uint8_t> *out);

struct AtomicWriteOptions {
  /// fsync the file and its directory, so the new contents survive a power
  /// loss (checkpoints); off, the rename is still atomic for other readers.
  bool durable = false;
};

/// Writes PATH whole or not at all: WRITE gets the path of a fresh
/// temporary file in PATH's directory (created empty, mode 0600 until it is
/// renamed) and fills it; when it succeeds, the file gets the usual
/// permissions (0666 less the umask) and is renamed over PATH. On any
/// failure the temporary file is removed and PATH is left as it was. An
/// existing PATH that is not a regular file (/dev/full, a FIFO) is refused.
Status writeFileAtomically(
    const std::string &path,
    const std::function<Status(const std::string &tmpPath)> &write,
    const AtomicWriteOptions &options = {});

/// The same for bytes in memory.
Status writeFileAtomically(const std::string &path, const void *data,
                           size_t size, const AtomicWriteOptions &options = {});

/// Appends bytes to the existing regular file PATH, all of them or none:
/// a write that fails partway (a full disk, a file-size limit) is cut
/// back to PATH's old length, so a log never ends in half a line. With
/// `options.durable`, fdatasync before returning. A PATH that is missing
/// or not a regular file is an error (write it whole first).
Status appendToFile(const std::string &path, const void *data, size_t size,
                    const AtomicWriteOptions &options = {});

/// Flushes stdout and reports whether everything written to it arrived
/// (a full disk or a closed pipe is an error, not a silent truncation).
Status finishStdout();

/// Whether paths a and b name one file: the same file where both exist
/// (links and `..` followed), else the same absolute path once
/// normalized. Tools check an output against their inputs with it before
/// writing: `modelc import m.onnx -o m.onnx` must not destroy the model.
bool sameFile(const std::string &a, const std::string &b);

} // namespace mc::rt

#endif // MODELC_FILEIO_H
