// Checkpoint files (.mcst): the training state of a session (every State
// buffer, by name) plus the caller's metadata, written atomically. The byte
// layout is in docs/runtime.md ("Checkpoints"); Session::saveCheckpoint and
// loadCheckpoint use these, and tools may read a checkpoint on its own.
#ifndef MODELC_CHECKPOINT_H
#define MODELC_CHECKPOINT_H

#include "modelc/kernels.h"
#include "modelc/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mc::rt {

/// File magic and trailer magic (8 bytes each) and the format version.
inline constexpr char kCheckpointMagic[8] = {'M', 'C', 'S', 'T',
                                             'A', 'T', 'E', 0};
inline constexpr char kCheckpointTrailerMagic[8] = {'M', 'C', 'S', 'T',
                                                    'E', 'N', 'D', 0};
inline constexpr uint32_t kCheckpointVersionMajor = 1;
inline constexpr uint32_t kCheckpointVersionMinor = 0;

/// One saved tensor. For writing, `data` points at `byteSize` bytes owned by
/// the caller; entries read from a file point into Checkpoint::bytes.
struct CheckpointEntry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  const uint8_t *data = nullptr;
  uint64_t byteSize = 0;
};

struct Checkpoint {
  std::string metadata;
  std::vector<CheckpointEntry> entries;
  std::vector<uint8_t> bytes; // the whole file; entries point into it
};

/// Serializes a checkpoint (layout in docs/runtime.md).
Status encodeCheckpoint(const std::vector<CheckpointEntry> &entries,
                        const std::string &metadata,
                        std::vector<uint8_t> *out);
/// Parses and checks a checkpoint: size, magics, CRC-32, version, every
/// length inside the file, dtypes known, byte sizes matching the shapes,
/// names non-empty and unique. `name` (the path) prefixes errors.
Status parseCheckpoint(std::vector<uint8_t> bytes, const std::string &name,
                       Checkpoint *out);

/// Writes the checkpoint to `path` atomically: a temporary file in the same
/// directory (`path.tmp.XXXXXX`), written, fsync'd, renamed over `path`, and
/// the directory fsync'd; so a crash at any moment leaves either the old or
/// the new file at `path`, never a partial one (a crash may leave the
/// temporary file behind). Test hook: with MODELC_TEST_CHECKPOINT_SLOW=MS
/// in the environment, it sleeps MS milliseconds in the middle of writing
/// and again once the data is written, before the fsync and the rename, so
/// a test can kill it mid-save. (The write itself is
/// rt::writeFileAtomically, modelc/fileio.h.)
Status writeCheckpointFile(const std::string &path,
                           const std::vector<CheckpointEntry> &entries,
                           const std::string &metadata);
Status readCheckpointFile(const std::string &path, Checkpoint *out);

} // namespace mc::rt

#endif // MODELC_CHECKPOINT_H
