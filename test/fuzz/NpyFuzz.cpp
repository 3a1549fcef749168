// libFuzzer target: the .npy reader (rt::parseNpy, what readNpy runs on a
// file's bytes). Whatever the bytes, it returns a status; an array it
// accepts encodes and parses back to the same array. Run by scripts/fuzz.
#include "modelc/npy.h"

#include <cstdint>
#include <cstdlib>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace mc::rt;
  NpyArray a;
  if (!parseNpy(data, size, "fuzz.npy", &a))
    return 0;
  std::vector<uint8_t> bytes;
  if (!encodeNpy(a.dtype, a.shape, a.data.data(), &bytes))
    std::abort(); // an accepted array must encode
  NpyArray b;
  if (!parseNpy(bytes.data(), bytes.size(), "round-trip.npy", &b) ||
      b.dtype != a.dtype || b.shape != a.shape || b.data != a.data)
    std::abort(); // and parse back to itself
  return 0;
}
