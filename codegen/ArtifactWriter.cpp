// The .mcpk writer: flatbuffer table (size-prefixed, identifier "MCPK"),
// zero padding, 64-byte aligned data section, trailer with the table CRC.
#include "codegen/ArtifactWriter.h"
#include "codegen/MemoryPlanner.h"
#include "modelc/fileio.h"
#include "modelc/model.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
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

uint32_t crc32Of(const uint8_t *p, uint64_t n) {
  uLong c = ::crc32(0, nullptr, 0);
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
  flatbuffers::FlatBufferBuilder b(4096);
  b.ForceDefaults(true);
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const PlanBuffer &pb = plan.buffers[i];
    buffers.push_back(fb::CreateBuffer(
        b, b.CreateString(pb.name), fb::DType(pb.dtype),
        b.CreateVector(pb.shape), pb.kind, offsets[i], pb.byteSize(),
        pb.batchScale.empty() ? 0 : b.CreateVector(pb.batchScale)));
  }
  auto encodeAttrs = [&](const rt::OpAttrs &list) {
    std::vector<flatbuffers::Offset<fb::Attr>> attrs;
    for (const rt::OpAttr &a : list.all())
      attrs.push_back(fb::CreateAttr(
          b, b.CreateString(a.name), fb::AttrKind(a.kind), a.i, a.f,
          a.kind == rt::AttrKind::Ints ? b.CreateVector(a.ints)
                                       : flatbuffers::Offset<
                                             flatbuffers::Vector<int64_t>>()));
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
      for (const PlanRegionOp &r : s.body)
        ops.push_back(fb::CreateRegionOp(
            b, b.CreateString(rt::opName(r.op)), b.CreateVector(r.operands),
            encodeAttrs(r.attrs), fb::DType(r.dtype),
            b.CreateString(r.location), optional(r.precision),
            optional(r.precisionReason), b.CreateVector(r.shape),
            r.batchScale.empty() ? 0 : b.CreateVector(r.batchScale)));
      body = b.CreateVector(ops);
    }
    flatbuffers::Offset<fb::Launch> launch = 0;
    if (s.executable >= 0)
      launch = fb::CreateLaunch(b, s.launch.block, s.launch.perBlock,
                                s.launch.units, s.launch.unitsPerBatch,
                                s.launch.sharedBytes);
    steps.push_back(fb::CreateStep(
        b, b.CreateString(rt::opName(s.op)), b.CreateVector(s.inputs),
        b.CreateVector(s.outputs), attrs, b.CreateString(s.location),
        optional(s.precision), optional(s.precisionReason), s.executable,
        optional(s.entry), body, launch));
  }
  std::vector<flatbuffers::Offset<fb::Executable>> executables;
  for (const PlanExecutable &e : plan.executables) {
    std::vector<flatbuffers::Offset<flatbuffers::String>> entries;
    for (const std::string &name : e.entryPoints)
      entries.push_back(b.CreateString(name));
    executables.push_back(fb::CreateExecutable(
        b, b.CreateString(e.target), b.CreateString(e.format),
        b.CreateVector(entries), b.CreateVector(e.data)));
  }
  auto sigs = [&](const std::vector<PlanSignature> &list) {
    std::vector<flatbuffers::Offset<fb::TensorSig>> out;
    for (const PlanSignature &s : list) {
      // An out-of-range index is written as is; the verifier names it.
      bool ok = s.buffer < plan.buffers.size();
      const PlanBuffer *pb = ok ? &plan.buffers[s.buffer] : nullptr;
      std::vector<int64_t> shape = ok ? pb->shape : std::vector<int64_t>();
      bool scaled = ok && !pb->batchScale.empty();
      out.push_back(fb::CreateTensorSig(
          b, b.CreateString(s.name), s.buffer,
          ok ? fb::DType(pb->dtype) : fb::DType::F32, b.CreateVector(shape),
          scaled ? b.CreateVector(pb->batchScale) : 0));
    }
    return b.CreateVector(out);
  };
  auto inputs = sigs(plan.inputs);
  auto outputs = sigs(plan.outputs);
  std::vector<flatbuffers::Offset<flatbuffers::String>> targets;
  for (const std::string &t : plan.targets)
    targets.push_back(b.CreateString(t));
  auto model = fb::CreateModel(
      b, major, rt::kSchemaVersionMinor, b.CreateString("modelc"),
      b.CreateString(rt::modelcVersion()), b.CreateString(plan.entry),
      b.CreateVector(targets), inputs, outputs, b.CreateVector(buffers),
      b.CreateVector(steps), plan.arenaSize, dataOffset, dataSize, dataCrc,
      plan.stateSize, stateDataOffset, b.CreateVector(executables),
      plan.batch.dynamic()
          ? fb::CreateBatchBounds(b, plan.batch.min, plan.batch.max,
                                  plan.batch.opt)
          : 0,
      plan.unfused.steps
          ? fb::CreatePlanStats(b, plan.unfused.steps,
                                plan.unfused.intermediateBytes,
                                plan.unfused.arenaSize)
          : 0);
  fb::FinishSizePrefixedModelBuffer(b, model);
  return b.Release();
}

} // namespace

Status writeArtifactToBytes(const Plan &plan, std::vector<uint8_t> *out,
                            const WriteOptions &options) {
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
  }
  // The table records where the data section starts, which depends on the
  // table's size: measure with placeholders (the size does not depend on
  // the values), then build for real once the data's CRC is known.
  uint32_t major = options.schemaVersionMajorForTesting;
  size_t tableSize =
      buildTable(plan, offsets, major, 0, dataSize, 0, stateDataOffset).size();
  uint64_t dataOffset = alignUp(tableSize, rt::kAlignment);
  uint64_t trailerAt = alignUp(dataOffset + dataSize, 8);

  // The data section is written in place: the weights are copied once,
  // from the plan into the artifact's bytes.
  out->assign(trailerAt + rt::kTrailerSize, 0);
  uint8_t *data = out->data() + dataOffset;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const PlanBuffer &b = plan.buffers[i];
    if (b.data.empty())
      continue;
    if (b.kind == fb::BufferKind::Constant)
      std::memcpy(data + offsets[i], b.data.data(), b.data.size());
    else if (b.kind == fb::BufferKind::State)
      std::memcpy(data + stateDataOffset + b.offset, b.data.data(),
                  b.data.size());
  }
  uint32_t dataCrc = crc32Of(data, dataSize);
  flatbuffers::DetachedBuffer table = buildTable(
      plan, offsets, major, dataOffset, dataSize, dataCrc, stateDataOffset);
  if (table.size() != tableSize)
    return Status::error("artifact writer: table size changed between "
                         "builds (internal error)");
  if (table.size() - 4 > 0x7fffffffu)
    return Status::error("artifact writer: the table exceeds 2 GiB");

  std::memcpy(out->data(), table.data(), table.size());
  uint8_t *trailer = out->data() + trailerAt;
  putLE32(trailer, crc32Of(out->data(), table.size()));
  putLE32(trailer + 4, 0);
  std::memcpy(trailer + 8, rt::kTrailerMagic, 8);

  if (options.verify && major == rt::kSchemaVersionMajor) {
    Status st = rt::verifyArtifact(out->data(), out->size(), "<artifact>",
                                  /*checkTargets=*/false);
    if (!st) {
      out->clear();
      return Status::error("artifact writer produced an invalid artifact "
                           "(a lowering or planning bug): " +
                           st.message());
    }
  }
  return Status::ok();
}

Status writeArtifact(const Plan &plan, const std::string &path,
                     const WriteOptions &options) {
  std::vector<uint8_t> bytes;
  MC_RETURN_IF_ERROR(writeArtifactToBytes(plan, &bytes, options));
  return rt::writeFileAtomically(path, bytes.data(), bytes.size());
}

} // namespace mc::codegen
