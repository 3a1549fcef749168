// The .mcpk writer: flatbuffer table (size-prefixed, identifier "MCPK"),
// zero padding, 64-byte aligned data section, trailer with the table CRC.
#include "codegen/ArtifactWriter.h"
#include "codegen/MemoryPlanner.h"
#include "modelc/fileio.h"
#include "modelc/model.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

namespace mc::codegen {

using rt::Status;

uint64_t PlanBuffer::byteSize() const {
  uint64_t n = rt::dtypeSize(dtype);
  for (int64_t d : shape)
    n *= d < 0 ? 0 : uint64_t(d);
  return n;
}

namespace {

uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

uint32_t crc32Of(const uint8_t *p, uint64_t n, uint32_t crc) {
  uLong c = crc;
  while (n > 0) {
    uInt chunk = n > (1u << 30) ? (1u << 30) : uInt(n);
    c = ::crc32(c, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return uint32_t(c);
}

void putLE32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = uint8_t(v >> (8 * i));
}

/// Builds the size-prefixed table with the given data section placement.
/// ForceDefaults keeps every scalar present, so the table's size does not
/// depend on the values (the writer builds it twice, see below).
flatbuffers::DetachedBuffer buildTable(const Plan &plan,
                                       const std::vector<uint64_t> &offsets,
                                       uint32_t major, uint64_t dataOffset,
                                       uint64_t dataSize, uint32_t dataCrc,
                                       uint64_t stateDataOffset) {
  // Every child (string, vector, table) is created in its own statement,
  // in field order, before the table that holds it: C++ leaves the order
  // in which a call's arguments are evaluated open, so children created
  // inside a Create call's arguments land in the file in an order that
  // depends on the compiler (gcc and clang builds wrote different bytes
  // for the same plan). scripts/reproducible compares two builds' bytes.
  flatbuffers::FlatBufferBuilder b(4096);
  b.ForceDefaults(true);
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const PlanBuffer &pb = plan.buffers[i];
    auto name = b.CreateString(pb.name);
    auto shape = b.CreateVector(pb.shape);
    flatbuffers::Offset<flatbuffers::Vector<int64_t>> scale;
    if (!pb.batchScale.empty())
      scale = b.CreateVector(pb.batchScale);
    buffers.push_back(fb::CreateBuffer(b, name, fb::DType(pb.dtype), shape,
                                       pb.kind, offsets[i], pb.byteSize(),
                                       scale));
  }
  auto encodeAttrs = [&](const rt::OpAttrs &list) {
    std::vector<flatbuffers::Offset<fb::Attr>> attrs;
    for (const rt::OpAttr &a : list.all()) {
      auto name = b.CreateString(a.name);
      flatbuffers::Offset<flatbuffers::Vector<int64_t>> ints;
      if (a.kind == rt::AttrKind::Ints)
        ints = b.CreateVector(a.ints);
      attrs.push_back(
          fb::CreateAttr(b, name, fb::AttrKind(a.kind), a.i, a.f, ints));
    }
    return b.CreateVector(attrs);
  };
  // AMP's decisions travel with the steps (empty strings are not stored).
  auto optional = [&](const std::string &str) {
    return str.empty() ? flatbuffers::Offset<flatbuffers::String>()
                       : b.CreateString(str);
  };
  std::vector<flatbuffers::Offset<fb::Step>> steps;
  for (const PlanStep &s : plan.steps) {
    auto attrs = encodeAttrs(s.attrs);
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::RegionOp>>>
        body;
    if (!s.body.empty()) {
      std::vector<flatbuffers::Offset<fb::RegionOp>> ops;
      for (const PlanRegionOp &r : s.body) {
        auto op = b.CreateString(rt::opName(r.op));
        auto operands = b.CreateVector(r.operands);
        auto attrs = encodeAttrs(r.attrs);
        auto location = b.CreateString(r.location);
        auto precision = optional(r.precision);
        auto reason = optional(r.precisionReason);
        auto shape = b.CreateVector(r.shape);
        flatbuffers::Offset<flatbuffers::Vector<int64_t>> scale;
        if (!r.batchScale.empty())
          scale = b.CreateVector(r.batchScale);
        ops.push_back(fb::CreateRegionOp(b, op, operands, attrs,
                                         fb::DType(r.dtype), location,
                                         precision, reason, shape, scale));
      }
      body = b.CreateVector(ops);
    }
    flatbuffers::Offset<fb::Launch> launch = 0;
    if (s.executable >= 0)
      launch = fb::CreateLaunch(b, s.launch.block, s.launch.perBlock,
                                s.launch.units, s.launch.unitsPerBatch,
                                s.launch.sharedBytes, s.launch.errorRecord);
    auto op = b.CreateString(rt::opName(s.op));
    auto stepInputs = b.CreateVector(s.inputs);
    auto stepOutputs = b.CreateVector(s.outputs);
    auto location = b.CreateString(s.location);
    auto precision = optional(s.precision);
    auto reason = optional(s.precisionReason);
    auto entry = optional(s.entry);
    flatbuffers::Offset<flatbuffers::Vector<uint32_t>> extra;
    if (!s.extraOutputs.empty())
      extra = b.CreateVector(s.extraOutputs);
    steps.push_back(fb::CreateStep(b, op, stepInputs, stepOutputs, attrs,
                                   location, precision, reason, s.executable,
                                   entry, body, launch, extra));
  }
  std::vector<flatbuffers::Offset<fb::Executable>> executables;
  for (const PlanExecutable &e : plan.executables) {
    std::vector<flatbuffers::Offset<flatbuffers::String>> entries;
    for (const std::string &name : e.entryPoints)
      entries.push_back(b.CreateString(name));
    auto target = b.CreateString(e.target);
    auto format = b.CreateString(e.format);
    auto entryVector = b.CreateVector(entries);
    auto data = b.CreateVector(e.data);
    executables.push_back(
        fb::CreateExecutable(b, target, format, entryVector, data));
  }
  auto sigs = [&](const std::vector<PlanSignature> &list) {
    std::vector<flatbuffers::Offset<fb::TensorSig>> out;
    for (const PlanSignature &s : list) {
      // An out-of-range index is written as is; the verifier names it.
      bool ok = s.buffer < plan.buffers.size();
      const PlanBuffer *pb = ok ? &plan.buffers[s.buffer] : nullptr;
      std::vector<int64_t> shape = ok ? pb->shape : std::vector<int64_t>();
      bool scaled = ok && !pb->batchScale.empty();
      auto name = b.CreateString(s.name);
      auto shapeVector = b.CreateVector(shape);
      flatbuffers::Offset<flatbuffers::Vector<int64_t>> scale;
      if (scaled)
        scale = b.CreateVector(pb->batchScale);
      out.push_back(fb::CreateTensorSig(
          b, name, s.buffer, ok ? fb::DType(pb->dtype) : fb::DType::F32,
          shapeVector, scale));
    }
    return b.CreateVector(out);
  };
  auto inputs = sigs(plan.inputs);
  auto outputs = sigs(plan.outputs);
  std::vector<flatbuffers::Offset<flatbuffers::String>> targets;
  for (const std::string &t : plan.targets)
    targets.push_back(b.CreateString(t));
  auto producer = b.CreateString("modelc");
  auto version = b.CreateString(rt::modelcVersion());
  auto entry = b.CreateString(plan.entry);
  auto targetVector = b.CreateVector(targets);
  auto bufferVector = b.CreateVector(buffers);
  auto stepVector = b.CreateVector(steps);
  auto executableVector = b.CreateVector(executables);
  flatbuffers::Offset<fb::BatchBounds> batch;
  if (plan.batch.dynamic())
    batch = fb::CreateBatchBounds(b, plan.batch.min, plan.batch.max,
                                  plan.batch.opt);
  flatbuffers::Offset<fb::PlanStats> stats;
  if (plan.unfused.steps)
    stats = fb::CreatePlanStats(b, plan.unfused.steps,
                                plan.unfused.intermediateBytes,
                                plan.unfused.arenaSize);
  auto model = fb::CreateModel(
      b, major, rt::kSchemaVersionMinor, producer, version, entry,
      targetVector, inputs, outputs, bufferVector, stepVector,
      plan.arenaSize, dataOffset, dataSize, dataCrc, plan.stateSize,
      stateDataOffset, executableVector, batch, stats);
  fb::FinishSizePrefixedModelBuffer(b, model);
  return b.Release();
}

} // namespace

namespace {

/// Where every byte of an artifact goes, decided before any is written, so
/// the file can be written front to back from the plan's buffers (the
/// weights are never copied into a second image of the file).
struct Layout {
  /// A buffer's bytes at an offset of the data section.
  struct Piece {
    uint64_t at;
    const uint8_t *data;
    uint64_t size;
    size_t buffer;
  };
  std::vector<Piece> pieces; // in buffer order
  std::vector<uint64_t> offsets;
  uint32_t major = 0;
  uint64_t stateDataOffset = 0, tableSize = 0;
  uint64_t dataOffset = 0, dataSize = 0, trailerAt = 0;
  flatbuffers::DetachedBuffer table; // once the data's CRC is known
  uint64_t fileSize() const { return trailerAt + rt::kTrailerSize; }
};

/// A run of zero bytes, fed to the CRC and the output in chunks.
const uint8_t *zeroChunk() {
  static const std::vector<uint8_t> zeros(1 << 16, 0);
  return zeros.data();
}
constexpr uint64_t kZeroChunk = 1 << 16;

/// The data section front to back: each of PIECES (in offset order), zeros
/// between and after.
/// Refuses pieces that overlap (the planner never makes them; an image in
/// memory, writeArtifactToBytes, lets the later buffer win as a test may
/// ask).
template <typename Fn>
Status forEachDataRun(const std::vector<Layout::Piece> &pieces,
                      uint64_t dataSize, Fn &&fn) {
  uint64_t at = 0;
  auto zeros = [&](uint64_t to) -> Status {
    while (at < to) {
      uint64_t n = std::min(to - at, kZeroChunk);
      MC_RETURN_IF_ERROR(fn(zeroChunk(), n));
      at += n;
    }
    return Status::ok();
  };
  for (size_t k = 0; k < pieces.size(); ++k) {
    const Layout::Piece &piece = pieces[k];
    if (piece.at < at)
      return Status::error(
          "artifact writer: buffers " + std::to_string(pieces[k - 1].buffer) +
          " and " + std::to_string(piece.buffer) +
          " overlap in the data section (a planning bug)");
    MC_RETURN_IF_ERROR(zeros(piece.at));
    MC_RETURN_IF_ERROR(fn(piece.data, piece.size));
    at += piece.size;
  }
  return zeros(dataSize);
}

/// The table, built for real once the data section's CRC is known.
Status finishTable(const Plan &plan, uint32_t dataCrc, Layout *layout) {
  layout->table =
      buildTable(plan, layout->offsets, layout->major, layout->dataOffset,
                 layout->dataSize, dataCrc, layout->stateDataOffset);
  if (layout->table.size() != layout->tableSize)
    return Status::error("artifact writer: table size changed between "
                         "builds (internal error)");
  if (layout->table.size() - 4 > 0x7fffffffu)
    return Status::error("artifact writer: the table exceeds 2 GiB");
  return Status::ok();
}

Status layOut(const Plan &plan, const WriteOptions &options,
              Layout *layout) {
  // Constants go into the data section in buffer order, 64-byte aligned
  // (layoutConstants, the same layout the planner records). The state
  // region's initial image follows, 64-byte aligned: each State buffer's
  // initial bytes at its planned offset in the region.
  uint64_t constSize = 0;
  std::vector<uint64_t> offsets = layoutConstants(plan, &constSize);
  uint64_t stateDataOffset =
      plan.stateSize ? alignUp(constSize, rt::kAlignment) : 0;
  uint64_t dataSize = plan.stateSize ? stateDataOffset + plan.stateSize
                                     : constSize;
  layout->pieces.clear();
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const PlanBuffer &b = plan.buffers[i];
    bool constant = b.kind == fb::BufferKind::Constant;
    bool state = b.kind == fb::BufferKind::State;
    if (!constant)
      offsets[i] = b.offset;
    if (!constant && !state)
      continue;
    std::string label = std::string(constant ? "constant" : "state") +
                        " buffer " + std::to_string(i) + " '" + b.name + "'";
    if (b.data.size() != b.byteSize())
      return Status::error(
          "artifact writer: " + label + " has " +
          std::to_string(b.data.size()) + " bytes of data, expected " +
          std::to_string(b.byteSize()) + " for " + rt::dtypeName(b.dtype) +
          rt::shapeString(b.shape));
    if (state && (b.offset > plan.stateSize ||
                  b.byteSize() > plan.stateSize - b.offset))
      return Status::error("artifact writer: " + label + " at [" +
                           std::to_string(b.offset) + ", +" +
                           std::to_string(b.byteSize()) +
                           ") lies outside the state region of " +
                           std::to_string(plan.stateSize) +
                           " bytes (was the plan planned?)");
    if (!b.data.empty())
      layout->pieces.push_back(
          {constant ? offsets[i] : stateDataOffset + b.offset, b.data.data(),
           b.data.size(), i});
  }
  layout->dataSize = dataSize;
  layout->stateDataOffset = stateDataOffset;
  layout->major = options.schemaVersionMajorForTesting;

  // The table records where the data section starts, which depends on the
  // table's size: measure with placeholders (the size does not depend on
  // the values); finishTable builds it for real once the data's CRC is
  // known.
  layout->tableSize = buildTable(plan, offsets, layout->major, 0, dataSize,
                                 0, stateDataOffset)
                          .size();
  layout->offsets = std::move(offsets);
  layout->dataOffset = alignUp(layout->tableSize, rt::kAlignment);
  layout->trailerAt = alignUp(layout->dataOffset + dataSize, 8);
  return Status::ok();
}

void writeTrailer(const Layout &layout, uint8_t *trailer) {
  putLE32(trailer, crc32Of(layout.table.data(), layout.table.size(), 0));
  putLE32(trailer + 4, 0);
  std::memcpy(trailer + 8, rt::kTrailerMagic, 8);
}

/// Hands the artifact's bytes to WRITE front to back (the table, zero
/// padding, the data section, padding, the trailer), computing the data
/// section's CRC in a first pass over the plan's buffers.
template <typename Fn>
Status emit(const Plan &plan, Layout &layout, Fn &&write) {
  std::vector<Layout::Piece> pieces = layout.pieces;
  std::stable_sort(pieces.begin(), pieces.end(),
                   [](const Layout::Piece &a, const Layout::Piece &b) {
                     return a.at < b.at;
                   });
  uLong crc = ::crc32(0, nullptr, 0);
  MC_RETURN_IF_ERROR(forEachDataRun(
      pieces, layout.dataSize, [&](const uint8_t *p, uint64_t n) {
        crc = crc32Of(p, n, uint32_t(crc));
        return Status::ok();
      }));
  MC_RETURN_IF_ERROR(finishTable(plan, uint32_t(crc), &layout));
  MC_RETURN_IF_ERROR(write(layout.table.data(), layout.table.size()));
  uint64_t pad = layout.dataOffset - layout.table.size();
  MC_RETURN_IF_ERROR(write(zeroChunk(), pad)); // < 64 bytes
  MC_RETURN_IF_ERROR(forEachDataRun(pieces, layout.dataSize, write));
  pad = layout.trailerAt - (layout.dataOffset + layout.dataSize);
  MC_RETURN_IF_ERROR(write(zeroChunk(), pad)); // < 8 bytes
  uint8_t trailer[rt::kTrailerSize] = {};
  writeTrailer(layout, trailer);
  return write(trailer, sizeof trailer);
}

Status selfCheckFailed(const Status &st) {
  return Status::error("artifact writer produced an invalid artifact "
                       "(a lowering or planning bug): " +
                       st.message());
}

bool wantsVerify(const WriteOptions &options) {
  return options.verify &&
         options.schemaVersionMajorForTesting == rt::kSchemaVersionMajor;
}

} // namespace

Status writeArtifactToBytes(const Plan &plan, std::vector<uint8_t> *out,
                            const WriteOptions &options) {
  Layout layout;
  MC_RETURN_IF_ERROR(layOut(plan, options, &layout));
  // The image in memory: the weights are copied once, from the plan into
  // the artifact's bytes, in buffer order.
  out->assign(layout.fileSize(), 0);
  uint8_t *data = out->data() + layout.dataOffset;
  for (const Layout::Piece &piece : layout.pieces)
    std::memcpy(data + piece.at, piece.data, piece.size);
  MC_RETURN_IF_ERROR(
      finishTable(plan, crc32Of(data, layout.dataSize, 0), &layout));
  std::memcpy(out->data(), layout.table.data(), layout.table.size());
  writeTrailer(layout, out->data() + layout.trailerAt);
  if (wantsVerify(options)) {
    Status st = rt::verifyArtifact(out->data(), out->size(), "<artifact>",
                                  /*checkTargets=*/false);
    if (!st) {
      out->clear();
      return selfCheckFailed(st);
    }
  }
  return Status::ok();
}

Status writeArtifact(const Plan &plan, const std::string &path,
                     const WriteOptions &options) {
  Layout layout;
  MC_RETURN_IF_ERROR(layOut(plan, options, &layout));
  return rt::writeFileAtomically(path, [&](const std::string &tmp) {
    FILE *f = std::fopen(tmp.c_str(), "wb");
    if (!f)
      return Status::error(path + ": cannot write: " +
                           std::strerror(errno));
    Status st = emit(plan, layout, [&](const uint8_t *p, uint64_t n) {
      if (n && std::fwrite(p, 1, n, f) != n)
        return Status::error(path + ": write failed: " +
                             std::strerror(errno));
      return Status::ok();
    });
    if (st && std::fflush(f) != 0)
      st = Status::error(path + ": write failed: " + std::strerror(errno));
    if (std::fclose(f) != 0 && st)
      st = Status::error(path + ": write failed: " + std::strerror(errno));
    if (!st || !wantsVerify(options))
      return st;
    // Check the file as written, through a read-only mapping that touches
    // the table and the padding but not the weights (their CRC is the one
    // just computed from the same bytes).
    int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return Status::error(path + ": cannot reopen to check it: " +
                           std::strerror(errno));
    size_t size = layout.fileSize();
    void *map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED)
      return Status::error(path + ": cannot map to check it: " +
                           std::strerror(errno));
    st = rt::verifyArtifact(static_cast<const uint8_t *>(map), size,
                            "<artifact>", /*checkTargets=*/false,
                            /*checkDataCrc=*/false);
    ::munmap(map, size);
    return st ? st : selfCheckFailed(st);
  });
}

} // namespace mc::codegen
