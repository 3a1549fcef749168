// libFuzzer target: the artifact loader and verifier, then a session and a
// run of whatever it accepts (what modelc-run does with a file). Whatever
// the bytes, loading returns a status; an accepted artifact creates a
// session (every step has a kernel) and runs without crashing. The seeds'
// table checksums are repaired before loading, half the time, so mutations
// get past the CRC to the semantic checks. Run by scripts/fuzz.
#include "modelc/model.h"

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

/// Rewrites the trailer's CRC-32 of the size prefix and table (layout in
/// docs/artifact-format.md), so a mutant reaches the semantic checks.
void repairTableCrc(std::vector<uint8_t> &b) {
  if (b.size() < 4 + 16)
    return;
  uint32_t n = uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 |
               uint32_t(b[3]) << 24;
  if (uint64_t(n) + 4 > b.size() - 16)
    return;
  uint32_t crc = uint32_t(::crc32(::crc32(0, nullptr, 0), b.data(), n + 4));
  uint8_t *t = b.data() + b.size() - 16;
  for (int i = 0; i < 4; ++i)
    t[i] = uint8_t(crc >> (8 * i));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace mc::rt;
  if (size == 0)
    return 0;
  // The first byte picks whether the checksum is repaired.
  bool repair = data[0] & 1;
  std::vector<uint8_t> bytes(data + 1, data + size);
  if (repair)
    repairTableCrc(bytes);
  std::unique_ptr<Model> model;
  if (!Model::loadMemory(bytes.data(), bytes.size(), "fuzz.mcpk", &model))
    return 0;
  // Keep each execution small: big arenas are legal but slow to fill, and
  // so are big fused regions (a region's values need not be buffers: the
  // CPU's fused kernel keeps a tile of whole rows of each in scratch, and
  // a region of one scalar reduced over 2^31-element rows asks for 49 GB).
  if (model->table().arena_size() > (64u << 20) ||
      model->stateSize() > (64u << 20))
    return 0;
  if (const auto *steps = model->table().steps())
    for (const mc::fb::Step *st : *steps)
      if (st->body())
        for (const mc::fb::RegionOp *op : *st->body()) {
          uint64_t n = 1;
          if (op->shape())
            for (int64_t d : *op->shape())
              n *= uint64_t(d); // the verifier bounds each at 2^36
          if (n > (16u << 20))
            return 0;
        }
  std::unique_ptr<Session> s;
  if (Status st = Session::create(*model, &s); !st) {
    // An accepted artifact has a kernel for every step.
    std::fprintf(stderr, "fuzz-artifact: the verifier accepted an artifact "
                         "no session can run: %s\n",
                 st.message().c_str());
    std::abort();
  }
  // A dynamic batch runs at its max (the stored shapes), then at its min:
  // both bounds the verifier checked, and a rebinding in between.
  std::vector<int64_t> batches{model->batch().max};
  if (model->dynamicBatch() && model->batch().min != model->batch().max)
    batches.push_back(model->batch().min);
  for (int64_t batch : batches) {
    for (size_t k = 0; k < model->inputs().size(); ++k) {
      const TensorInfo &info = model->inputs()[k];
      std::vector<uint8_t> zeros(info.byteSizeAt(batch));
      if (Status st = s->setInput(k, info.dtype, info.shapeAt(batch),
                                  zeros.data(), zeros.size());
          !st) {
        // The signature's shapes at a bound are accepted.
        std::fprintf(stderr, "fuzz-artifact: input %zu at batch %lld: %s\n",
                     k, (long long)batch, st.message().c_str());
        std::abort();
      }
    }
    (void)s->run(); // may fail (e.g. a gather index), never crash
  }
  return 0;
}
