// libFuzzer target: the checkpoint loader (rt::parseCheckpoint, what
// --resume and Session::loadCheckpoint run on a file's bytes). Whatever the
// bytes, it returns a status; a checkpoint it accepts encodes and parses
// back to the same entries and metadata. Each input is tried as is and with
// its checksum repaired. Run by scripts/fuzz.
#include "modelc/checkpoint.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <zlib.h>

namespace {

using namespace mc::rt;

/// The bytes with a valid trailer (checksum, reserved word, magic) over
/// what precedes it: random bytes almost never pass the CRC, so without
/// this the parser past the checksum would hardly be reached.
std::vector<uint8_t> withValidTrailer(const uint8_t *data, size_t size) {
  std::vector<uint8_t> b(data, data + size);
  if (b.size() < 16)
    return b;
  size_t body = b.size() - 16;
  uLong crc = crc32(0L, b.data(), uInt(body));
  for (int i = 0; i < 4; ++i) {
    b[body + i] = uint8_t(crc >> (8 * i));
    b[body + 4 + i] = 0;
  }
  std::memcpy(&b[body + 8], kCheckpointTrailerMagic, 8);
  return b;
}

void checkOne(std::vector<uint8_t> input) {
  Checkpoint c;
  if (!parseCheckpoint(std::move(input), "fuzz.mcst", &c))
    return;
  std::vector<uint8_t> bytes;
  if (!encodeCheckpoint(c.entries, c.metadata, &bytes))
    std::abort(); // an accepted checkpoint must encode
  Checkpoint d;
  if (!parseCheckpoint(bytes, "round-trip.mcst", &d) ||
      d.metadata != c.metadata || d.entries.size() != c.entries.size())
    std::abort();
  for (size_t i = 0; i < c.entries.size(); ++i) {
    const CheckpointEntry &x = c.entries[i], &y = d.entries[i];
    if (x.name != y.name || x.dtype != y.dtype || x.shape != y.shape ||
        x.byteSize != y.byteSize ||
        (x.byteSize && std::memcmp(x.data, y.data, x.byteSize) != 0))
      std::abort(); // and parse back to itself
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  checkOne(std::vector<uint8_t>(data, data + size));
  checkOne(withValidTrailer(data, size));
  return 0;
}
