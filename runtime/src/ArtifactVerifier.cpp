// Verification of a .mcpk before anything reads it: layout, flatbuffers
// Verifier, version, checksums, then every semantic rule the executor relies
// on (indices, sizes, offsets, per-step shapes). The order and the rules are
// documented in docs/artifact-format.md; a file that passes cannot make the
// executor read or write outside its buffers.
#include "ArtifactVerifier.h"
#include "modelc/model.h"
#include "modelc/runtime.h"
#include "modelc/shapes.h"
#include "modelc/device.h"
#include "modelc/version.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>
#include <zlib.h>

namespace mc::rt {

uint32_t crc32Bytes(const uint8_t *data, uint64_t size, uint32_t crc) {
  // zlib takes 32-bit lengths; feed big sections in chunks.
  uLong c = crc;
  while (size > 0) {
    uInt chunk = size > (1u << 30) ? (1u << 30) : uInt(size);
    c = ::crc32(c, data, chunk);
    data += chunk;
    size -= chunk;
  }
  return uint32_t(c);
}

uint32_t readLE32(const uint8_t *p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
         uint32_t(p[3]) << 24;
}

std::vector<OpAttr> decodeAttrs(const fb::Step &step) {
  return decodeAttrList(step.attrs());
}

std::vector<OpAttr> decodeAttrList(
    const flatbuffers::Vector<flatbuffers::Offset<fb::Attr>> *list) {
  std::vector<OpAttr> attrs;
  if (list)
    for (const fb::Attr *a : *list) {
      OpAttr x;
      x.name = a->name() ? a->name()->str() : "";
      x.kind = AttrKind(a->kind());
      x.i = a->i();
      x.f = a->f();
      if (a->ints())
        x.ints.assign(a->ints()->begin(), a->ints()->end());
      attrs.push_back(std::move(x));
    }
  return attrs;
}

namespace {

/// A region op's registry id (Copy when unknown; the caller checks).
int findOpId(const fb::RegionOp *r) {
  OpId id = OpId::Copy;
  if (r->op())
    findOp(r->op()->string_view(), &id);
  return int(id);
}

/// Whether a body op of `body` reads value `v` (an input) through a load:
/// a broadcast or a view, which may read element j for element i.
bool readsThroughLoad(
    const flatbuffers::Vector<flatbuffers::Offset<fb::RegionOp>> &body,
    uint32_t v) {
  for (const fb::RegionOp *r : body)
    if ((OpId(findOpId(r)) == OpId::BroadcastInDim ||
         shapes::isViewOp(OpId(findOpId(r)))) &&
        r->operands())
      for (uint32_t o : *r->operands())
        if (o == v)
          return true;
  return false;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

/// Printable rendering of untrusted bytes for an error message.
std::string quoteBytes(const uint8_t *p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\' && p[i] != '\'') {
      s += char(p[i]);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", p[i]);
      s += buf;
    }
  }
  return s;
}

bool validDType(fb::DType t) { return uint8_t(t) <= uint8_t(fb::DType::I1); }

/// The flatbuffers Verifier checks a vector's length word for 4-byte
/// alignment but not its 8-byte elements; reading misaligned int64s is UB.
bool aligned8(const flatbuffers::Vector<int64_t> *v) {
  return !v || v->size() == 0 ||
         reinterpret_cast<uintptr_t>(v->Data()) % alignof(int64_t) == 0;
}

std::vector<int64_t> toInts(const flatbuffers::Vector<int64_t> *v) {
  return v ? std::vector<int64_t>(v->begin(), v->end())
           : std::vector<int64_t>();
}

struct BufInfo {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  fb::BufferKind kind = fb::BufferKind::Arena;
  uint64_t offset = 0, size = 0;
  /// A dynamic batch: per dim 0 or c (the dim is c * batch); empty when
  /// every dim is static (an all-zero batch_scale is stored empty here).
  Shape scale;
};

/// A batch_scale vector, empty when it has no dynamic dim.
Shape normalizedScale(const flatbuffers::Vector<int64_t> *v) {
  Shape s = toInts(v);
  bool anyScaled = std::any_of(s.begin(), s.end(), [](int64_t c) { return c; });
  return anyScaled ? s : Shape();
}

class Verifier {
public:
  Verifier(const uint8_t *bytes, size_t size, const std::string &name,
           bool checkTargets, bool checkDataCrc)
      : p_(bytes), size_(size), name_(name), checkTargets_(checkTargets),
        checkDataCrc_(checkDataCrc) {}

  Status run();

private:
  Status fail(const std::string &msg) const {
    return Status::error(name_ + ": " + msg);
  }
  Status checkLayout();
  /// Model.batch: 1 <= min <= opt <= max <= INT32_MAX.
  Status checkBatchBounds();
  Status checkBuffers();
  /// A buffer's batch_scale against its shape and kind (`label` names it).
  Status checkBatchScale(const fb::Buffer &fbuf, const std::string &label,
                         BufInfo &b);
  /// Every step's rules; with a dynamic batch at the upper bound (the stored
  /// shapes) and again at the lower one: the shape rules are linear in the
  /// batch, so relations that hold at both bounds hold between them.
  Status checkSteps();
  Status checkSignature(
      const char *what,
      const flatbuffers::Vector<flatbuffers::Offset<fb::TensorSig>> *sigs);
  Status checkStep(size_t index, const fb::Step &step);
  /// The step's attributes against the op's registry entry: each declared
  /// one present (unit attributes may be absent) with its kind, no others.
  /// Fills attrs_.
  Status checkAttrs(OpId op,
                    const flatbuffers::Vector<flatbuffers::Offset<fb::Attr>>
                        *list,
                    const std::string &where);
  Status checkFused(const fb::Step &step, const std::vector<uint32_t> &in,
                    const std::vector<uint32_t> &out,
                    const std::string &where);
  Status checkStepKind(OpId kind, const fb::Step &step,
                       const std::vector<uint32_t> &in,
                       const std::vector<uint32_t> &out,
                       const std::string &where);
  /// The kinds of schema 1.1 (ops of real models).
  Status checkModelOps(OpId kind, const fb::Step &step,
                       const std::vector<uint32_t> &in,
                       const std::vector<uint32_t> &out,
                       const std::string &where);

  std::string bufDesc(uint32_t i) const {
    const BufInfo &b = bufs_[i];
    return "buffer " + std::to_string(i) +
           (b.name.empty() ? "" : " '" + b.name + "'") + " " +
           dtypeName(b.dtype) + shapeString(b.shape);
  }

  const uint8_t *p_;
  size_t size_;
  const std::string &name_;
  bool checkTargets_;
  bool checkDataCrc_;
  uint64_t tableEnd_ = 0; // 4 + N
  const fb::Model *model_ = nullptr;
  std::vector<BufInfo> bufs_;
  OpAttrs attrs_; // of the step being checked
  const fb::BatchBounds *batch_ = nullptr; // null for a static model
  /// Appended to a step's description while checking at a batch other than
  /// the stored one.
  std::string batchNote_;
  /// The batch the second pass checks at (0: shapes as stored).
  int64_t checkBatch_ = 0;
};

Status Verifier::checkAttrs(
    OpId op, const flatbuffers::Vector<flatbuffers::Offset<fb::Attr>> *list,
    const std::string &where) {
  const OpInfo &info = opInfo(op);
  if (list)
    for (const fb::Attr *a : *list)
      if (!aligned8(a->ints()))
        return fail(where + ": attribute vector is misaligned (corrupt file)");
  std::vector<OpAttr> attrs = decodeAttrList(list);
  for (size_t k = 0; k < attrs.size(); ++k) {
    const OpAttr &x = attrs[k];
    const AttrSpec *spec = nullptr;
    for (const AttrSpec &s : info.attrs)
      if (x.name == s.name)
        spec = &s;
    if (!spec)
      return fail(where + ": unknown attribute '" + x.name + "' of mc." +
                  info.mnemonic);
    for (size_t j = 0; j < k; ++j)
      if (attrs[j].name == x.name)
        return fail(where + ": attribute '" + x.name + "' appears twice");
    if (x.kind != spec->kind)
      return fail(where + ": attribute '" + x.name + "' has kind " +
                  std::to_string(int(x.kind)) + ", expected " +
                  std::to_string(int(spec->kind)));
    if (x.kind == AttrKind::Bool && x.i != 0 && x.i != 1)
      return fail(where + ": boolean attribute '" + x.name + "' is " +
                  std::to_string(x.i) + ", expected 0 or 1");
  }
  for (const AttrSpec &s : info.attrs) {
    bool present = false;
    for (const OpAttr &a : attrs)
      present |= a.name == s.name;
    if (!present && !s.optional)
      return fail(where + ": attribute '" + s.name + "' is missing");
  }
  attrs_ = OpAttrs(std::move(attrs));
  return Status::ok();
}

// The runtime's element types are the schema's, value for value (the loader
// casts one to the other).
static_assert(uint8_t(fb::DType::F32) == uint8_t(DType::F32) &&
                  uint8_t(fb::DType::F16) == uint8_t(DType::F16) &&
                  uint8_t(fb::DType::BF16) == uint8_t(DType::BF16) &&
                  uint8_t(fb::DType::I32) == uint8_t(DType::I32) &&
                  uint8_t(fb::DType::I64) == uint8_t(DType::I64) &&
                  uint8_t(fb::DType::I1) == uint8_t(DType::I1) &&
                  uint8_t(fb::DType::MAX) == uint8_t(DType::I1),
              "the schema's DType and the runtime's are one encoding");
static_assert(uint8_t(fb::AttrKind::Bool) == uint8_t(AttrKind::Bool) &&
                  uint8_t(fb::AttrKind::Int) == uint8_t(AttrKind::Int) &&
                  uint8_t(fb::AttrKind::Float) == uint8_t(AttrKind::Float) &&
                  uint8_t(fb::AttrKind::Ints) == uint8_t(AttrKind::Ints),
              "the schema's AttrKind and the registry's are one encoding");

Status Verifier::run() {
  // 1. Big enough for a size prefix, a root offset, the identifier and the
  //    trailer.
  const uint64_t minSize = 4 + 8 + kTrailerSize;
  if (size_ < minSize)
    return fail("file is too small to be a modelc artifact (" +
                std::to_string(size_) + " bytes, need at least " +
                std::to_string(minSize) + ")");
  // 2. The identifier first (its bytes are always in range by now), so a
  //    file of another kind is called that rather than "corrupt".
  if (std::memcmp(p_ + 8, kFileIdentifier, 4) != 0)
    return fail("not a modelc artifact: file identifier is '" +
                quoteBytes(p_ + 8, 4) + "', expected 'MCPK'");
  // 3. The size prefix must leave room for the trailer.
  uint32_t n = readLE32(p_);
  tableEnd_ = 4 + uint64_t(n);
  if (n < 8 || tableEnd_ > size_ - kTrailerSize)
    return fail("table size " + std::to_string(n) +
                " in the size prefix does not fit in the file (" +
                std::to_string(size_) + " bytes; truncated?)");
  // 4. Trailer: magic, reserved word.
  const uint8_t *trailer = p_ + size_ - kTrailerSize;
  if (std::memcmp(trailer + 8, kTrailerMagic, 8) != 0)
    return fail("trailer magic is '" + quoteBytes(trailer + 8, 8) +
                "', expected 'MCPKEND\\x00' (truncated or unfinished file?)");
  if (readLE32(trailer + 4) != 0)
    return fail("trailer reserved word is " + hex32(readLE32(trailer + 4)) +
                ", expected 0");
  // 5. The flatbuffers Verifier: every offset and vector in the table.
  flatbuffers::Verifier fbv(p_, size_t(tableEnd_));
  if (!fb::VerifySizePrefixedModelBuffer(fbv))
    return fail("the flatbuffers table is malformed (flatbuffers Verifier "
                "failed; corrupt file)");
  model_ = fb::GetSizePrefixedModel(p_);
  // 6. Version, before anything that depends on this schema's meaning.
  if (model_->schema_version_major() != kSchemaVersionMajor) {
    std::string version = std::to_string(model_->schema_version_major()) +
                          "." +
                          std::to_string(model_->schema_version_minor());
    if (model_->schema_version_major() < kSchemaVersionMajor)
      return fail("schema version " + version +
                  " is older than this runtime reads (major " +
                  std::to_string(kSchemaVersionMajor) +
                  "); recompile the model with modelc >= " +
                  kFirstSchema2Version);
    return fail("schema version " + version +
                " is not supported: this runtime reads major version " +
                std::to_string(kSchemaVersionMajor) +
                " (minor <= any); was the file written by a newer modelc?");
  }
  // 6b. Targets, before any other work: a file this machine cannot run is
  //     refused here, naming what it holds and what the machine offers.
  if (checkTargets_) {
    std::vector<std::string> offered = offeredTargets();
    std::string holds, offers;
    // A file compiled for several targets runs where any of them does.
    bool runnable = true;
    if (const auto *targets = model_->targets()) {
      runnable = targets->size() == 0;
      for (const flatbuffers::String *t : *targets) {
        holds += (holds.empty() ? "" : ", ") + t->str();
        runnable |= std::find(offered.begin(), offered.end(), t->str()) !=
                    offered.end();
      }
    }
    if (const auto *exes = model_->executables())
      for (const fb::Executable *e : *exes)
        if (e->format())
          holds += std::string(holds.empty() ? "" : ", ") + "executable " +
                   e->format()->str();
    for (const std::string &t : offered)
      offers += (offers.empty() ? "" : ", ") + t;
    if (!runnable)
      return fail("the artifact targets " + holds +
                  ", which this machine cannot run (it offers: " +
                  (offers.empty() ? std::string("nothing") : offers) +
                  "); compile it with --target for one of those");
  }
  // 7. Checksum of the size prefix and the table.
  uint32_t stored = readLE32(trailer), computed = crc32Bytes(p_, tableEnd_, 0);
  if (stored != computed)
    return fail("table checksum mismatch: trailer says " + hex32(stored) +
                ", bytes give " + hex32(computed) + " (corrupt file)");
  // 8. Semantics.
  MC_RETURN_IF_ERROR(checkLayout());
  MC_RETURN_IF_ERROR(checkBatchBounds());
  MC_RETURN_IF_ERROR(checkBuffers());
  MC_RETURN_IF_ERROR(checkSignature("input", model_->inputs()));
  MC_RETURN_IF_ERROR(checkSignature("output", model_->outputs()));
  return checkSteps();
}

Status Verifier::checkBatchBounds() {
  batch_ = model_->batch();
  if (!batch_)
    return Status::ok();
  int64_t lo = batch_->min(), opt = batch_->opt(), hi = batch_->max();
  if (!(1 <= lo && lo <= opt && opt <= hi && hi <= INT32_MAX))
    return fail("batch bounds min " + std::to_string(lo) + ", opt " +
                std::to_string(opt) + ", max " + std::to_string(hi) +
                " are invalid: need 1 <= min <= opt <= max <= " +
                std::to_string(INT32_MAX));
  return Status::ok();
}

Status Verifier::checkBatchScale(const fb::Buffer &fbuf,
                                 const std::string &label, BufInfo &b) {
  if (!aligned8(fbuf.batch_scale()))
    return fail(label + ": batch_scale vector is misaligned (corrupt file)");
  b.scale = normalizedScale(fbuf.batch_scale());
  if (b.scale.empty())
    return Status::ok();
  if (!batch_)
    return fail(label + ": batch_scale " + shapeString(b.scale) +
                " makes a dim dynamic, but the model has no batch bounds "
                "(Model.batch)");
  if (b.scale.size() != b.shape.size())
    return fail(label + ": batch_scale " + shapeString(b.scale) + " has " +
                std::to_string(b.scale.size()) + " entries, expected " +
                std::to_string(b.shape.size()) + " (one per dim of " +
                shapeString(b.shape) + ")");
  if (b.kind != fb::BufferKind::Arena)
    return fail(label + ": a " + fb::EnumNameBufferKind(b.kind) +
                " buffer has batch_scale " + shapeString(b.scale) +
                "; only Arena buffers may depend on the batch");
  for (size_t d = 0; d < b.scale.size(); ++d) {
    int64_t c = b.scale[d], atMax = 0;
    if (c < 0)
      return fail(label + ": batch_scale " + shapeString(b.scale) + ": entry " +
                  std::to_string(d) + " is " + std::to_string(c) +
                  ", expected >= 0");
    if (c > 0 && (__builtin_mul_overflow(c, batch_->max(), &atMax) ||
                  b.shape[d] != atMax))
      return fail(label + ": dimension " + std::to_string(d) + " is " +
                  std::to_string(c) + " * batch, so its stored size must be " +
                  std::to_string(c) + " * " + std::to_string(batch_->max()) +
                  " (the batch's max), but shape " + shapeString(b.shape) +
                  " has " + std::to_string(b.shape[d]));
  }
  return Status::ok();
}

Status Verifier::checkSteps() {
  const auto *steps = model_->steps();
  if (!steps)
    return Status::ok();
  for (flatbuffers::uoffset_t i = 0; i < steps->size(); ++i)
    MC_RETURN_IF_ERROR(checkStep(i, *steps->Get(i)));
  if (!batch_ || batch_->min() == batch_->max())
    return Status::ok();
  // Byte sizes and offsets stay at the max: the overlap rules are about the
  // slots the planner gave, which every batch uses a prefix of.
  int64_t lo = batch_->min();
  for (BufInfo &b : bufs_)
    b.shape = shapes::atBatch(b.shape, b.scale, lo);
  checkBatch_ = lo;
  batchNote_ = " at batch " + std::to_string(lo) + " (the lower bound of [" +
               std::to_string(lo) + ", " + std::to_string(batch_->max()) + "])";
  for (flatbuffers::uoffset_t i = 0; i < steps->size(); ++i)
    MC_RETURN_IF_ERROR(checkStep(i, *steps->Get(i)));
  return Status::ok();
}

Status Verifier::checkLayout() {
  uint64_t off = model_->data_offset(), dsize = model_->data_size();
  uint64_t trailerStart = size_ - kTrailerSize;
  if (off % kAlignment != 0)
    return fail("data_offset " + std::to_string(off) +
                " is not 64-byte aligned");
  if (off < tableEnd_ || off > trailerStart || dsize > trailerStart - off)
    return fail("data section [" + std::to_string(off) + ", +" +
                std::to_string(dsize) + ") is not between the table (ends at " +
                std::to_string(tableEnd_) + ") and the trailer (starts at " +
                std::to_string(trailerStart) + ")");
  // Padding is zero, so every byte of the file is covered by a check.
  auto zeros = [&](uint64_t from, uint64_t to) -> Status {
    for (uint64_t i = from; i < to; ++i)
      if (p_[i] != 0)
        return fail("padding byte at offset " + std::to_string(i) +
                    " is not zero (corrupt file)");
    return Status::ok();
  };
  MC_RETURN_IF_ERROR(zeros(tableEnd_, off));
  MC_RETURN_IF_ERROR(zeros(off + dsize, trailerStart));
  // Schema 1.2: the state region's initial image lies inside the data
  // section (so data_crc32 covers it). Older files have both fields 0.
  uint64_t soff = model_->state_data_offset(), ssize = model_->state_size();
  if (soff % kAlignment != 0)
    return fail("state_data_offset " + std::to_string(soff) +
                " is not 64-byte aligned");
  if (soff > dsize || ssize > dsize - soff)
    return fail("state image [" + std::to_string(soff) + ", +" +
                std::to_string(ssize) +
                ") (state_data_offset, state_size) is not inside the data "
                "section of " +
                std::to_string(dsize) + " bytes");
  if (!checkDataCrc_)
    return Status::ok();
  uint32_t crc = crc32Bytes(p_ + off, dsize, 0);
  if (crc != model_->data_crc32())
    return fail("data section checksum mismatch: table says " +
                hex32(model_->data_crc32()) + ", bytes give " + hex32(crc) +
                " (corrupt weights)");
  return Status::ok();
}

Status Verifier::checkBuffers() {
  const auto *buffers = model_->buffers();
  if (!buffers)
    return fail("the model has no buffers table");
  uint32_t count = buffers->size();
  bufs_.resize(count);
  uint64_t arenaSize = model_->arena_size(), dataSize = model_->data_size();
  uint64_t stateSize = model_->state_size();
  for (uint32_t i = 0; i < count; ++i) {
    const fb::Buffer &fbuf = *buffers->Get(i);
    BufInfo &b = bufs_[i];
    b.name = fbuf.name() ? fbuf.name()->str() : "";
    std::string label = "buffer " + std::to_string(i) +
                        (b.name.empty() ? "" : " '" + b.name + "'");
    if (!validDType(fbuf.dtype()))
      return fail(label + ": unknown dtype " +
                  std::to_string(int(fbuf.dtype())));
    b.dtype = DType(fbuf.dtype());
    const auto *shape = fbuf.shape();
    if (shape && shape->size() > MC_MAX_RANK)
      return fail(label + ": rank " + std::to_string(shape->size()) +
                  " exceeds the maximum " + std::to_string(MC_MAX_RANK));
    if (!aligned8(shape))
      return fail(label + ": shape vector is misaligned (corrupt file)");
    b.shape = toInts(shape);
    // No negative dims, at most kMaxTensorElements: the byte size below
    // cannot overflow.
    int64_t elements = 0;
    if (Status limit = checkElementCount(b.shape, &elements); !limit)
      return fail(label + ": " + limit.message());
    uint64_t bytes = uint64_t(elements) * dtypeSize(b.dtype);
    b.size = fbuf.size();
    b.offset = fbuf.offset();
    if (b.size != bytes)
      return fail(label + ": size is " + std::to_string(b.size) +
                  " bytes, expected " + std::to_string(bytes) + " for " +
                  dtypeName(b.dtype) + shapeString(b.shape));
    if (b.offset % kAlignment != 0)
      return fail(label + ": offset " + std::to_string(b.offset) +
                  " is not 64-byte aligned");
    uint64_t limit;
    const char *region;
    b.kind = fbuf.kind();
    if (b.kind == fb::BufferKind::Arena) {
      limit = arenaSize;
      region = "arena_size";
    } else if (b.kind == fb::BufferKind::Constant) {
      limit = dataSize;
      region = "data section size";
    } else if (b.kind == fb::BufferKind::State) {
      limit = stateSize;
      region = "state_size";
      // A checkpoint saves and restores state by name.
      if (b.name.empty())
        return fail(label + ": a State buffer needs a name (checkpoints "
                            "refer to state by name)");
      for (uint32_t j = 0; j < i; ++j)
        if (bufs_[j].kind == fb::BufferKind::State && bufs_[j].name == b.name)
          return fail(label + ": State buffer name '" + b.name +
                      "' is used by buffer " + std::to_string(j) + " too");
    } else {
      return fail(label + ": unknown buffer kind " +
                  std::to_string(int(fbuf.kind())));
    }
    MC_RETURN_IF_ERROR(checkBatchScale(fbuf, label, b));
    if (b.offset > limit || b.size > limit - b.offset)
      return fail(label + ": bytes [" + std::to_string(b.offset) + ", +" +
                  std::to_string(b.size) + ") exceed the " + region + " " +
                  std::to_string(limit));
  }
  return Status::ok();
}

Status Verifier::checkSignature(
    const char *what,
    const flatbuffers::Vector<flatbuffers::Offset<fb::TensorSig>> *sigs) {
  bool batchInput = false; // some input has a dim of the batch
  uint32_t count = sigs ? sigs->size() : 0;
  for (uint32_t i = 0; i < count; ++i) {
    const fb::TensorSig &sig = *sigs->Get(i);
    std::string sname = sig.name() ? sig.name()->str() : "";
    std::string label =
        std::string(what) + " " + std::to_string(i) + " '" + sname + "'";
    if (sname.empty())
      return fail(std::string(what) + " " + std::to_string(i) + " has no name");
    for (uint32_t j = 0; j < i; ++j) {
      const auto *other = sigs->Get(j)->name();
      if (other && other->str() == sname)
        return fail(label + ": name is used by " + what + " " +
                    std::to_string(j) + " too");
    }
    if (sig.buffer() >= bufs_.size())
      return fail(label + ": refers to buffer " + std::to_string(sig.buffer()) +
                  ", but the model has " + std::to_string(bufs_.size()));
    const BufInfo &b = bufs_[sig.buffer()];
    if (!validDType(sig.dtype()))
      return fail(label + ": unknown dtype " +
                  std::to_string(int(sig.dtype())));
    if (!aligned8(sig.shape()))
      return fail(label + ": shape vector is misaligned (corrupt file)");
    Shape shape = toInts(sig.shape());
    if (DType(sig.dtype()) != b.dtype || shape != b.shape)
      return fail(label + ": signature says " + dtypeName(DType(sig.dtype())) +
                  shapeString(shape) + " but its " + bufDesc(sig.buffer()) +
                  " differs");
    if (b.kind != fb::BufferKind::Arena)
      return fail(label + ": " + bufDesc(sig.buffer()) + " is a " +
                  fb::EnumNameBufferKind(b.kind) +
                  " buffer; inputs and outputs must be Arena buffers");
    if (!aligned8(sig.batch_scale()))
      return fail(label + ": batch_scale vector is misaligned (corrupt file)");
    Shape scale = normalizedScale(sig.batch_scale());
    if (scale != b.scale)
      return fail(label + ": signature batch_scale " + shapeString(scale) +
                  " differs from its " + bufDesc(sig.buffer()) +
                  "'s batch_scale " + shapeString(b.scale));
    bool input = std::strcmp(what, "input") == 0;
    for (size_t d = 0; input && d < scale.size(); ++d)
      if (scale[d] > 1)
        return fail(label + ": dimension " + std::to_string(d) +
                    " has batch scale " + std::to_string(scale[d]) +
                    "; an input's dim is static (0) or the batch itself (1)");
    batchInput |= input && !scale.empty();
  }
  if (batch_ && std::strcmp(what, "input") == 0 && !batchInput)
    return fail("the model has batch bounds [" + std::to_string(batch_->min()) +
                ", " + std::to_string(batch_->max()) +
                "] but no input has a batch dimension, so a run could not "
                "tell its batch size");
  return Status::ok();
}

Status Verifier::checkStep(size_t index, const fb::Step &step) {
  std::string loc = step.location() ? step.location()->str() : "";
  std::string opText = step.op() ? step.op()->str() : "";
  OpId kind = OpId::Copy;
  bool known = findOp(opText, &kind) && opInfo(kind).isStep;
  std::string where = "step " + std::to_string(index) + " (mc." + opText +
                      (loc.empty() ? "" : " at " + loc) + ")" + batchNote_;
  if (!known)
    return fail(where + ": unknown op '" + opText +
                "' (this runtime knows the ops of modelc " + modelcVersion() +
                "; was the file written by a newer compiler?)");
  MC_RETURN_IF_ERROR(checkAttrs(kind, step.attrs(), where));
  if (kind != OpId::Fused && step.body() && step.body()->size())
    return fail(where + ": has a fused-region body, but only mc.fused steps "
                        "have one");
  if (kind != OpId::Fused && step.extra_outputs() &&
      step.extra_outputs()->size())
    return fail(where + ": has extra_outputs, but only mc.fused steps "
                        "have them");
  if (step.executable() != -1) {
    const auto *exes = model_->executables();
    int64_t n = exes ? int64_t(exes->size()) : 0;
    if (step.executable() < 0 || step.executable() >= n)
      return fail(where + ": executable " +
                  std::to_string(step.executable()) +
                  " is out of range (the file has " + std::to_string(n) +
                  " executables; -1 means the device's own kernel)");
    const fb::Executable *e = exes->Get(uint32_t(step.executable()));
    std::string entry = step.entry() ? step.entry()->str() : "";
    bool found = false;
    if (e->entry_points())
      for (const flatbuffers::String *name : *e->entry_points())
        found |= name->str() == entry;
    if (!found)
      return fail(where + ": entry '" + entry + "' is not an entry point of "
                  "executable " + std::to_string(step.executable()));
    const fb::Launch *l = step.launch();
    if (!l)
      return fail(where + ": launches entry '" + entry +
                  "' without a launch (Step.launch)");
    if (l->block() < 1 || l->block() > 1024 || l->per_block() < 1)
      return fail(where + ": launch of '" + entry + "' has block " +
                  std::to_string(l->block()) + " and per_block " +
                  std::to_string(l->per_block()) +
                  " (a block is 1..1024 threads covering at least one unit)");
    if (l->shared_bytes() > (228u << 10))
      return fail(where + ": launch of '" + entry + "' asks for " +
                  std::to_string(l->shared_bytes()) +
                  " bytes of shared memory (at most 228 KiB per block)");
  } else if (step.entry() && step.entry()->size()) {
    return fail(where + ": names entry '" + step.entry()->str() +
                "' but no executable");
  } else if (step.launch()) {
    return fail(where + ": has a launch but no executable");
  }
  std::vector<uint32_t> in, out;
  if (step.inputs())
    in.assign(step.inputs()->begin(), step.inputs()->end());
  if (step.outputs())
    out.assign(step.outputs()->begin(), step.outputs()->end());
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] >= bufs_.size())
      return fail(where + ": input " + std::to_string(i) +
                  " refers to buffer " + std::to_string(in[i]) +
                  ", but the model has " + std::to_string(bufs_.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] >= bufs_.size())
      return fail(where + ": output " + std::to_string(i) +
                  " refers to buffer " + std::to_string(out[i]) +
                  ", but the model has " + std::to_string(bufs_.size()));
    if (bufs_[out[i]].kind == fb::BufferKind::Constant)
      return fail(where + ": output " + std::to_string(i) + " (" +
                  bufDesc(out[i]) +
                  ") is a Constant buffer; step outputs must be Arena (or "
                  "State, for elementwise kinds)");
  }
  // Elementwise kinds (the same element count in and out, element i read
  // before element i is written): Copy to Cast, Abs to Not, and (schema
  // 2.5) an elementwise fused region. Only these may write State buffers
  // (a global store is a Copy; an optimizer update may write its parameter
  // in place).
  bool elementwise = opInfo(kind).fusible && kind != OpId::BroadcastInDim;
  const auto *body = step.body();
  bool elementwiseRegion =
      kind == OpId::Fused && body && body->size() > 0 &&
      isElementwiseRegion(attrs_.getBool("attention"),
                          OpId(findOpId(body->Get(0))),
                          OpId(findOpId(body->Get(body->size() - 1))));
  elementwise |= elementwiseRegion;
  for (size_t i = 0; i < out.size(); ++i)
    if (bufs_[out[i]].kind == fb::BufferKind::State && !elementwise)
      return fail(where + ": output " + std::to_string(i) + " (" +
                  bufDesc(out[i]) +
                  ") is a State buffer; only Copy and elementwise kinds may "
                  "write state");
  if (kind == OpId::Fused)
    MC_RETURN_IF_ERROR(checkFused(step, in, out, where));
  else
    MC_RETURN_IF_ERROR(checkStepKind(kind, step, in, out, where));
  // Outputs never share bytes with each other.
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t j = i + 1; j < out.size(); ++j) {
      const BufInfo &a = bufs_[out[i]], &b = bufs_[out[j]];
      if (a.kind == b.kind && a.size && b.size &&
          a.offset < b.offset + b.size && b.offset < a.offset + a.size)
        return fail(where + ": outputs " + std::to_string(i) + " " +
                    bufDesc(out[i]) + " and " + std::to_string(j) + " " +
                    bufDesc(out[j]) + " overlap");
    }
  // Outputs may not partly overlap an input: kernels other than the
  // elementwise ones read inputs after writing outputs. An exactly shared
  // buffer is fine for same-shape elementwise ops (in place).
  // Schema 1.1's elementwise kinds (Abs .. Not) read element i before
  // writing it, too.
  bool inPlaceOk = elementwise && kind != OpId::Cast;
  for (uint32_t o : out) {
    const BufInfo &ob = bufs_[o];
    for (size_t k = 0; k < in.size(); ++k) {
      uint32_t i = in[k];
      const BufInfo &ib = bufs_[i];
      // Only buffers of one region (the arena, or the state region) share
      // bytes.
      if (ib.kind != ob.kind || ob.size == 0 || ib.size == 0)
        continue;
      bool disjoint =
          ob.offset + ob.size <= ib.offset || ib.offset + ib.size <= ob.offset;
      bool same = ob.offset == ib.offset && ob.size == ib.size;
      // A region in place: the input read element for element, as the
      // output's type and shape, never through a broadcast (which may
      // read element j for element i).
      if (!disjoint && same && elementwiseRegion &&
          (ib.dtype != ob.dtype || ib.shape != ob.shape ||
           readsThroughLoad(*body, uint32_t(k))))
        return fail(where + ": output " + bufDesc(o) + " is input " +
                    std::to_string(k) + " " + bufDesc(i) +
                    ", which the region reads " +
                    (ib.dtype != ob.dtype || ib.shape != ob.shape
                         ? "as another type or shape"
                         : "through a broadcast or a view") +
                    "; a region runs in place only on an input it reads "
                    "element for element");
      if (!disjoint && !(same && inPlaceOk))
        return fail(where + ": output " + bufDesc(o) + " overlaps input " +
                    bufDesc(i) + " in the " +
                    (ob.kind == fb::BufferKind::State ? "state region"
                                                      : "arena"));
    }
  }
  return Status::ok();
}

// A fused region (schema 2.2; rules at Step.body in mcpk.fbs): each body op
// is checked by the same per-op rules as a step of its own, on virtual
// buffers that stand for its values (the stored shape and dtype of each).
// A rank-0 input read by an elementwise op stands for its splat.
Status Verifier::checkFused(const fb::Step &step,
                            const std::vector<uint32_t> &in,
                            const std::vector<uint32_t> &out,
                            const std::string &where) {
  const bool attention = attrs_.getBool("attention");
  const auto *body = step.body();
  if (!body || body->size() == 0)
    return fail(where + ": a fused step needs a body (its region's ops)");
  const auto *extra = step.extra_outputs();
  const size_t numExtra = extra ? extra->size() : 0;
  if (out.size() != 1 + numExtra)
    return fail(where + ": expected " + std::to_string(1 + numExtra) +
                " output" + (numExtra ? "s (the last body op's and " +
                                            std::to_string(numExtra) +
                                            " extra_outputs)"
                                      : "") +
                ", found " + std::to_string(out.size()));
  if (in.empty())
    return fail(where + ": a fused step needs at least one input");
  const Shape resultShape = bufs_[out[0]].shape;
  // The shape every value of an elementwise region has: the output's, or,
  // when a trailing reduction ends the region, its operand's.
  Shape outShape = resultShape;
  const fb::RegionOp *lastOp = body->Get(body->size() - 1);
  bool reduction = !attention && isReduction(OpId(findOpId(lastOp)));
  if (reduction) {
    if (!lastOp->operands() || lastOp->operands()->size() != 1 ||
        lastOp->operands()->Get(0) < in.size() ||
        lastOp->operands()->Get(0) >= in.size() + body->size() - 1)
      return fail(where + ": the reduction ending the region must read a "
                          "value the region computes");
    const fb::RegionOp *src =
        body->Get(lastOp->operands()->Get(0) - uint32_t(in.size()));
    if (!aligned8(src->shape()) || !aligned8(src->batch_scale()))
      return fail(where + ": shape vector is misaligned (corrupt file)");
    outShape = toInts(src->shape());
    Shape scale = normalizedScale(src->batch_scale());
    if (checkBatch_ && !scale.empty() && scale.size() == outShape.size())
      outShape = shapes::atBatch(outShape, scale, checkBatch_);
  }
  if (attention && outShape.size() < 2)
    return fail(where + ": an attention region's output " + bufDesc(out[0]) +
                " needs rank >= 2");
  const size_t lead = attention ? outShape.size() - 2 : 0;
  auto sameLead = [&](const Shape &sh) {
    return sh.size() == outShape.size() &&
           std::equal(sh.begin(), sh.begin() + lead, outShape.begin());
  };
  const size_t realBuffers = bufs_.size();
  struct Restore {
    std::vector<BufInfo> &bufs;
    size_t n;
    ~Restore() { bufs.resize(n); }
  } restore{bufs_, realBuffers};
  auto virtualBuffer = [&](DType t, const Shape &shape,
                           const std::string &name) {
    BufInfo b;
    b.name = name;
    b.dtype = t;
    b.shape = shape;
    bufs_.push_back(b);
    return uint32_t(bufs_.size() - 1);
  };
  // value number -> buffer index (inputs: their own buffers).
  std::vector<uint32_t> value(in.begin(), in.end());
  // The views among the values (schema 2.6).
  shapes::RegionViews views(in.size(), in.size() + body->size());
  for (flatbuffers::uoffset_t k = 0; k < body->size(); ++k) {
    const fb::RegionOp *r = body->Get(k);
    std::string opText = r->op() ? r->op()->str() : "";
    std::string bwhere = where + ", body op " + std::to_string(k) + " (mc." +
                         opText + ")";
    OpId id;
    if (!findOp(opText, &id) || (!opInfo(id).isStep && id != OpId::Reshape))
      return fail(bwhere + ": unknown op '" + opText + "'");
    if (!validDType(r->dtype()))
      return fail(bwhere + ": invalid dtype " +
                  std::to_string(int(r->dtype())));
    if (!aligned8(r->shape()) || !aligned8(r->batch_scale()))
      return fail(bwhere + ": shape vector is misaligned (corrupt file)");
    Shape shape = toInts(r->shape());
    Shape scale = normalizedScale(r->batch_scale());
    if (!scale.empty() && (!batch_ || scale.size() != shape.size()))
      return fail(bwhere + ": batch_scale " + shapeString(scale) +
                  " does not fit shape " + shapeString(shape) +
                  (batch_ ? "" : " (the model has no dynamic batch)"));
    for (int64_t d : shape)
      if (d < 0)
        return fail(bwhere + ": negative dim in shape " + shapeString(shape));
    // The kernels multiply a body op's dims (a trailing reduction's operand
    // sets the region's iteration space): bounded like a buffer's.
    if (Status limit = checkElementCount(shape); !limit)
      return fail(bwhere + ": " + limit.message());
    if (checkBatch_ && !scale.empty())
      shape = shapes::atBatch(shape, scale, checkBatch_);
    const OpInfo &info = opInfo(id);
    bool anchor = !attention && k == 0 && info.epilogueAnchor;
    // The anchor's reshape: body op 1, reading the anchor's result (a view
    // of an input may sit there too, when the anchor has no reshape).
    auto readsAnchor = [&](const fb::RegionOp *op) {
      return op->operands() && op->operands()->size() == 1 &&
             op->operands()->Get(0) == in.size();
    };
    bool reshapedAnchor = anchor && body->size() > 1 &&
                          OpId(findOpId(body->Get(1))) == OpId::Reshape &&
                          readsAnchor(body->Get(1));
    bool load = id == OpId::BroadcastInDim;
    std::vector<uint32_t> operandValues;
    if (r->operands())
      operandValues.assign(r->operands()->begin(), r->operands()->end());
    for (uint32_t v : operandValues)
      if (v >= value.size())
        return fail(bwhere + ": operand value " + std::to_string(v) +
                    " is not defined before it (the region has " +
                    std::to_string(in.size()) + " inputs and " +
                    std::to_string(k) + " earlier ops)");
    // A view (schema 2.6): a transpose, reshape or slice of an input or of
    // another view, read in place by the ops after it (the anchor's
    // reshape is the case below).
    bool anchorReshape = id == OpId::Reshape && !attention && k == 1 &&
                         opInfo(OpId(findOpId(body->Get(0)))).epilogueAnchor &&
                         readsAnchor(r);
    bool readsInputOrView =
        operandValues.size() == 1 && views.viewable(operandValues[0]);
    if (shapes::isViewOp(id) && !anchorReshape && readsInputOrView) {
      if (k + 1 == body->size())
        return fail(bwhere + ": a region's last op computes its result; a "
                             "view cannot be it");
      uint32_t from = operandValues[0];
      MC_RETURN_IF_ERROR(checkAttrs(id, r->attrs(), bwhere));
      const BufInfo &src = bufs_[value[from]];
      if (DType(r->dtype()) != src.dtype)
        return fail(bwhere + ": a view keeps its operand's dtype " +
                    dtypeName(src.dtype) + ", not " +
                    dtypeName(DType(r->dtype())));
      uint32_t self = uint32_t(value.size());
      if (Status s = views.add(self, id, attrs_, shape, from, src.shape); !s)
        return fail(bwhere + ": " + s.message());
      shapes::Dims sizes, strides;
      views.view(self).flatten(&sizes, &strides);
      if (sizes.size() > 16)
        return fail(bwhere + ": the view needs " +
                    std::to_string(sizes.size()) +
                    " strided dims, above the 16 a fused step supports");
      uint32_t result = virtualBuffer(DType(r->dtype()), shape,
                                      "value " + std::to_string(value.size()));
      if (id != OpId::Reshape) // its step rules: the attributes' limits
        MC_RETURN_IF_ERROR(
            checkStepKind(id, step, {value[from]}, {result}, bwhere));
      value.push_back(result);
      continue;
    }
    // The anchor's reshape (body op 1): its bytes, seen at the output's
    // shape.
    if (id == OpId::Reshape) {
      if (attention || k != 1 || operandValues.size() != 1 ||
          operandValues[0] != uint32_t(in.size()) ||
          !opInfo(OpId(findOpId(body->Get(0)))).epilogueAnchor)
        return fail(bwhere + ": a fused region may reshape only its anchor's "
                             "result, right after it");
      uint32_t a = value.back();
      if (shape != outShape ||
          numElements(bufs_[a].shape) != numElements(outShape) ||
          DType(r->dtype()) != bufs_[a].dtype)
        return fail(bwhere + ": reshapes the anchor's " + bufDesc(a) +
                    " to " + shapeString(shape) + " " +
                    dtypeName(DType(r->dtype())) + ", but the output is " +
                    shapeString(outShape) + " and the element count or "
                    "type must stay");
      value.push_back(virtualBuffer(DType(r->dtype()), shape,
                                    "value " + std::to_string(value.size())));
      continue;
    }
    bool reduceOp = reduction && k + 1 == body->size();
    bool allowed = attention ? (info.fusible || id == OpId::Matmul ||
                                id == OpId::Softmax)
                             : (anchor || info.fusible || reduceOp);
    if (!allowed)
      return fail(bwhere + ": cannot be in a" +
                  (attention ? "n attention region (matmul, softmax and "
                               "elementwise ops)"
                             : " fused region (only elementwise ops, after at "
                               "most one matmul or conv2d as the first op)"));
    if (attention ? !sameLead(shape)
                  : (shape != outShape && !reshapedAnchor && !reduceOp))
      return fail(bwhere + ": computes " + shapeString(shape) +
                  (attention ? ", but every value of an attention region has "
                               "the output's rank and leading dims: "
                             : ", but every value of a fused region has the "
                               "output's shape: ") +
                  shapeString(outShape));
    std::vector<uint32_t> operands;
    for (uint32_t v : operandValues) {
      if (views.isView(v) && (anchor || load))
        return fail(bwhere + ": reads the view " + std::to_string(v) +
                    "; a view is read by the region's elementwise, matmul or "
                    "softmax ops");
      if (views.isView(v) && (attention ? !sameLead(bufs_[value[v]].shape)
                                          : bufs_[value[v]].shape != outShape))
        return fail(bwhere + ": reads the view " + std::to_string(v) + " " +
                    bufDesc(value[v]) + ", which lacks the " +
                    (attention ? "output's rank and leading dims "
                               : "region's shape ") +
                    shapeString(outShape));
      if ((anchor || load) && v >= in.size())
        return fail(bwhere + ": must read only the step's inputs (value " +
                    std::to_string(v) + " is a body op's result)");
      uint32_t b = value[v];
      if (v < in.size() && !load) {
        // A scalar input read by an elementwise op: its splat.
        if (bufs_[b].shape.empty() && info.fusible && !shape.empty())
          b = virtualBuffer(bufs_[b].dtype, shape,
                            "splat of input " + std::to_string(v));
        else if (attention && !sameLead(bufs_[b].shape))
          return fail(bwhere + ": reads input " + bufDesc(b) +
                      ", which lacks the output's rank and leading dims (" +
                      shapeString(outShape) + "); broadcast it in the region");
      }
      operands.push_back(b);
    }
    MC_RETURN_IF_ERROR(checkAttrs(id, r->attrs(), bwhere));
    if (reduceOp) {
      std::vector<int64_t> dims = attrs_.getInts("dims");
      bool trailing = !dims.empty();
      for (size_t i = 0; i < dims.size(); ++i)
        trailing &= dims[i] == int64_t(outShape.size() - dims.size() + i);
      if (!trailing)
        return fail(bwhere + ": a reduction ending a fused region must "
                             "reduce the trailing dims of " +
                    shapeString(outShape) + ", not " + shapeString(dims));
    }
    if (attention && id == OpId::Softmax &&
        attrs_.getInt("axis") != int64_t(shape.size()) - 1)
      return fail(bwhere + ": an attention region's softmax must be over the "
                           "last dim");
    uint32_t result = virtualBuffer(DType(r->dtype()), shape,
                                    "value " + std::to_string(value.size()));
    MC_RETURN_IF_ERROR(checkStepKind(id, step, operands, {result}, bwhere));
    value.push_back(result);
  }
  // An elementwise region computes: besides its anchor, the anchor's
  // reshape and broadcast loads, some op (an elementwise one, or the
  // trailing reduction). A region of loads alone is a copy, which the
  // compiler emits as a step of its own.
  if (!attention) {
    bool computes = false;
    for (flatbuffers::uoffset_t k = 0; k < body->size(); ++k) {
      OpId id = OpId(findOpId(body->Get(k)));
      computes |= !(k == 0 && opInfo(id).epilogueAnchor) &&
                  id != OpId::BroadcastInDim && !shapes::isViewOp(id);
    }
    if (!computes)
      return fail(where + ": the region computes nothing (its body is only " +
                  "an anchor, its reshape, broadcasts and views; a fused region " +
                  "needs an elementwise op or a reduction)");
  }
  // Extra outputs (schema 2.7): values elementwise ops of a plain
  // elementwise region compute, each once, of its output's type and shape.
  if (numExtra) {
    OpId first = OpId(findOpId(body->Get(0)));
    if (attention || reduction || opInfo(first).epilogueAnchor)
      return fail(where + ": has " + std::to_string(numExtra) +
                  " extra_outputs, but only a plain elementwise region (no "
                  "attention, anchor or reduction) may have more than one "
                  "output");
    std::vector<bool> seen(value.size(), false);
    for (uint32_t i = 0; i < numExtra; ++i) {
      uint32_t v = extra->Get(i);
      std::string what = where + ": extra output " + std::to_string(i) +
                         " (value " + std::to_string(v) + ")";
      if (v < in.size() || v + 1 >= value.size())
        return fail(what + " must be a body op's result other than the "
                           "last's (the region has " +
                    std::to_string(in.size()) + " inputs and " +
                    std::to_string(body->size()) + " ops)");
      OpId id = OpId(findOpId(body->Get(v - uint32_t(in.size()))));
      if (!opInfo(id).fusible || id == OpId::BroadcastInDim ||
          views.isView(v))
        return fail(what + " is computed by mc." + opName(id) +
                    "; an extra output is an elementwise op's result");
      if (seen[v])
        return fail(what + " is an output already");
      seen[v] = true;
      const BufInfo &vb = bufs_[value[v]], &ob = bufs_[out[i + 1]];
      if (vb.dtype != ob.dtype || vb.shape != ob.shape)
        return fail(what + " is " + dtypeName(vb.dtype) +
                    shapeString(vb.shape) + ", but output " +
                    std::to_string(i + 1) + " is " + bufDesc(out[i + 1]));
    }
  }
  const BufInfo &last = bufs_[value.back()];
  if (last.dtype != bufs_[out[0]].dtype || last.shape != resultShape)
    return fail(where + ": the body's last op computes " +
                std::string(dtypeName(last.dtype)) + shapeString(last.shape) +
                ", but the output " + bufDesc(out[0]) + " is " +
                dtypeName(bufs_[out[0]].dtype) + shapeString(resultShape));
  return Status::ok();
}

Status Verifier::checkStepKind(OpId kind, const fb::Step &step,
                               const std::vector<uint32_t> &in,
                               const std::vector<uint32_t> &out,
                               const std::string &where) {
  using K = OpId;
  auto counts = [&](size_t ni, size_t no) -> Status {
    if (in.size() != ni || out.size() != no)
      return fail(where + ": expected " + std::to_string(ni) +
                  " input(s) and " + std::to_string(no) + " output(s), found " +
                  std::to_string(in.size()) + " and " +
                  std::to_string(out.size()));
    return Status::ok();
  };

  const OpAttrs &A = attrs_;
  auto sameTypeShape = [&](uint32_t a, uint32_t b, const char *what) {
    if (bufs_[a].dtype == bufs_[b].dtype && bufs_[a].shape == bufs_[b].shape)
      return Status::ok();
    return fail(where + ": " + what + " " + bufDesc(b) +
                " must have the dtype and shape of input 0, " + bufDesc(a));
  };
  auto sameType = [&](uint32_t a, uint32_t b) {
    if (bufs_[a].dtype == bufs_[b].dtype)
      return Status::ok();
    return fail(where + ": output " + bufDesc(b) +
                " must have the dtype of input 0, " + bufDesc(a));
  };
  auto dtypeIn = [&](uint32_t a, std::initializer_list<DType> ok,
                     const char *okText) {
    for (DType t : ok)
      if (bufs_[a].dtype == t)
        return Status::ok();
    return fail(where + ": unsupported dtype " +
                std::string(dtypeName(bufs_[a].dtype)) + " of input 0 (" +
                bufDesc(a) + "); supported: " + okText);
  };
  auto shapeErr = [&](const std::string &expected) {
    return fail(where + ": output " + bufDesc(out[0]) + ": expected shape " +
                expected);
  };
  // A rule of the shape library (modelc/shapes.h): its error, or output 0
  // against the shape it computes.
  auto ruleShape = [&](const Status &rule, const Shape &expect) {
    if (!rule)
      return fail(where + ": output " + bufDesc(out[0]) + ": " +
                  rule.message());
    if (bufs_[out[0]].shape != expect)
      return shapeErr(shapeString(expect));
    return Status::ok();
  };

  switch (kind) {
  case K::AllReduceStart: {
    // The 1-D f32 bucket of every input's elements, in order.
    if (in.empty() || out.size() != 1)
      return fail(where + ": expected at least 1 input and 1 output, found " +
                  std::to_string(in.size()) + " and " +
                  std::to_string(out.size()));
    int64_t total = 0;
    for (size_t k = 0; k < in.size(); ++k) {
      if (bufs_[in[k]].dtype != DType::F32)
        return fail(where + ": input " + std::to_string(k) + " " +
                    bufDesc(in[k]) + " must be f32 (buckets hold f32)");
      total += numElements(bufs_[in[k]].shape);
    }
    if (bufs_[out[0]].dtype != DType::F32)
      return fail(where + ": output " + bufDesc(out[0]) + " must be f32");
    if (A.getInt("ranks") < 1)
      return fail(where + ": ranks " + std::to_string(A.getInt("ranks")) +
                  " must be >= 1");
    return ruleShape(Status::ok(), Shape{total});
  }
  case K::AllReduceWait: {
    MC_RETURN_IF_ERROR(counts(1, 1));
    MC_RETURN_IF_ERROR(sameTypeShape(in[0], out[0], "output"));
    MC_RETURN_IF_ERROR(dtypeIn(in[0], {DType::F32}, "f32"));
    double scale = A.getFloat("scale");
    if (!(scale > 0) || std::isinf(scale))
      return fail(where + ": scale " + std::to_string(scale) +
                  " must be finite and > 0");
    return Status::ok();
  }
  case K::Copy:
    MC_RETURN_IF_ERROR(counts(1, 1));
    MC_RETURN_IF_ERROR(sameType(in[0], out[0]));
    if (numElements(bufs_[in[0]].shape) != numElements(bufs_[out[0]].shape))
      return fail(where + ": output " + bufDesc(out[0]) +
                  " must have the element count of input " + bufDesc(in[0]));
    return Status::ok();
  case K::Add:
  case K::Sub:
  case K::Mul:
  case K::Div:
  case K::Maximum:
    MC_RETURN_IF_ERROR(counts(2, 1));
    MC_RETURN_IF_ERROR(sameTypeShape(in[0], in[1], "input 1"));
    MC_RETURN_IF_ERROR(sameTypeShape(in[0], out[0], "output"));
    return dtypeIn(in[0], {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64},
                   "f32, f16, bf16, i32, i64");
  case K::Neg:
  case K::Relu:
    MC_RETURN_IF_ERROR(counts(1, 1));
    MC_RETURN_IF_ERROR(sameTypeShape(in[0], out[0], "output"));
    return dtypeIn(in[0], {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64},
                   "f32, f16, bf16, i32, i64");
  case K::Exp:
  case K::Log:
  case K::Tanh:
  case K::Sin:
  case K::Cos:
  case K::Tan:
  case K::Asin:
  case K::Acos:
  case K::Atan:
  case K::Sinh:
  case K::Cosh:
  case K::Asinh:
  case K::Acosh:
  case K::Atanh:
  case K::Sigmoid:
  case K::Sqrt:
    MC_RETURN_IF_ERROR(counts(1, 1));
    MC_RETURN_IF_ERROR(sameTypeShape(in[0], out[0], "output"));
    return dtypeIn(in[0], {DType::F32, DType::F16, DType::BF16}, "f32, f16, bf16");
  case K::Cast:
    MC_RETURN_IF_ERROR(counts(1, 1));
    if (bufs_[in[0]].shape != bufs_[out[0]].shape)
      return shapeErr(shapeString(bufs_[in[0]].shape) + " (that of input 0)");
    return Status::ok();
  case K::BroadcastInDim: {
    MC_RETURN_IF_ERROR(counts(1, 1));
    MC_RETURN_IF_ERROR(sameType(in[0], out[0]));
    const Shape &r = bufs_[out[0]].shape;
    return ruleShape(
        shapes::broadcastInDim(bufs_[in[0]].shape, A.getInts("dims"), r), r);
  }
  case K::Transpose: {
    MC_RETURN_IF_ERROR(counts(1, 1));
    MC_RETURN_IF_ERROR(sameType(in[0], out[0]));
    Shape expect;
    Status rule = shapes::transpose(bufs_[in[0]].shape,
                                    A.getInts("permutation"), &expect);
    return ruleShape(rule, expect);
  }
  case K::ReduceSum:
  case K::ReduceMean:
  case K::ReduceMax:
  case K::ReduceMin: {
    MC_RETURN_IF_ERROR(counts(1, 1));
    MC_RETURN_IF_ERROR(sameType(in[0], out[0]));
    if (kind == K::ReduceMax || kind == K::ReduceMin)
      MC_RETURN_IF_ERROR(dtypeIn(in[0], {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64},
                                 "f32, f16, bf16, i32, i64"));
    else
      MC_RETURN_IF_ERROR(dtypeIn(in[0], {DType::F32, DType::F16, DType::BF16}, "f32, f16, bf16"));
    std::vector<int64_t> dims = A.getInts("dims");
    const Shape &a = bufs_[in[0]].shape;
    // Sorted: the kernels' contract (the compiler writes them so); the rest
    // is the rule's.
    if (!std::is_sorted(dims.begin(), dims.end()))
      return fail(where + ": reduce dims " + shapeString(dims) +
                  " must be sorted, unique and in [0, " +
                  std::to_string(a.size()) + ") for input " + bufDesc(in[0]));
    Shape expect;
    return ruleShape(shapes::reduce(a, dims, A.getBool("keepdim"), &expect),
                     expect);
  }
  case K::Softmax:
  case K::LogSoftmax: {
    MC_RETURN_IF_ERROR(counts(1, 1));
    MC_RETURN_IF_ERROR(sameTypeShape(in[0], out[0], "output"));
    MC_RETURN_IF_ERROR(dtypeIn(in[0], {DType::F32, DType::F16, DType::BF16}, "f32, f16, bf16"));
    Status rule =
        shapes::checkAxis(A.getInt("axis"), bufs_[in[0]].shape.size());
    if (!rule)
      return fail(where + ": " + rule.message() + " (input " +
                  bufDesc(in[0]) + ")");
    return Status::ok();
  }
  case K::Matmul: {
    MC_RETURN_IF_ERROR(counts(2, 1));
    MC_RETURN_IF_ERROR(dtypeIn(in[0], {DType::F32, DType::F16, DType::BF16}, "f32, f16, bf16"));
    for (uint32_t b : {in[1], out[0]})
      if (bufs_[b].dtype != bufs_[in[0]].dtype)
        return fail(where + ": " + bufDesc(b) +
                    " must have the dtype of input 0, " + bufDesc(in[0]));
    Shape expect;
    Status rule = shapes::matmul(bufs_[in[0]].shape, bufs_[in[1]].shape,
                                 A.getBool("transpose_a"),
                                 A.getBool("transpose_b"), &expect);
    return ruleShape(rule, expect);
  }
  default:
    return checkModelOps(kind, step, in, out, where);
  }
}

Status Verifier::checkModelOps(OpId kind, const fb::Step &step,
                               const std::vector<uint32_t> &in,
                               const std::vector<uint32_t> &out,
                               const std::string &where) {
  using K = OpId;
  const OpAttrs &A = attrs_;
  auto counts = [&](size_t ni, size_t no) -> Status {
    if (in.size() != ni || out.size() != no)
      return fail(where + ": expected " + std::to_string(ni) +
                  " input(s) and " + std::to_string(no) + " output(s), found " +
                  std::to_string(in.size()) + " and " +
                  std::to_string(out.size()));
    return Status::ok();
  };
  // Buffer b must have the dtype and shape of buffer a (input i / output).
  auto sameAs = [&](uint32_t a, const std::string &aWhat, uint32_t b,
                    const std::string &bWhat) {
    if (bufs_[a].dtype == bufs_[b].dtype && bufs_[a].shape == bufs_[b].shape)
      return Status::ok();
    return fail(where + ": " + bWhat + " " + bufDesc(b) +
                " must have the dtype and shape of " + aWhat + ", " +
                bufDesc(a));
  };
  auto dtypeOf = [&](uint32_t a, const std::string &what,
                     std::initializer_list<DType> ok, const char *okText) {
    for (DType t : ok)
      if (bufs_[a].dtype == t)
        return Status::ok();
    return fail(where + ": unsupported dtype " +
                std::string(dtypeName(bufs_[a].dtype)) + " of " + what + " (" +
                bufDesc(a) + "); supported: " + okText);
  };
  auto shapeErr = [&](const Shape &expected, const std::string &why) {
    return fail(where + ": output " + bufDesc(out[0]) + ": expected shape " +
                shapeString(expected) + " (" + why + ")");
  };
  // A rule of the shape library (modelc/shapes.h): its error, or output 0
  // against the shape it computes.
  auto ruleShape = [&](const Status &rule, const Shape &expect,
                       const std::string &why) {
    if (!rule)
      return fail(where + ": output " + bufDesc(out[0]) + ": " +
                  rule.message());
    if (bufs_[out[0]].shape != expect)
      return shapeErr(expect, why);
    return Status::ok();
  };
  // An attribute vector of `n` entries each >= `min` (and, for the window
  // attributes of conv and pooling, <= INT32_MAX, so kernel index arithmetic
  // cannot overflow).
  auto vec = [&](const std::vector<int64_t> &v, const char *name,
                 size_t n, int64_t min, const char *meaning,
                 std::vector<int64_t> *outv,
                 int64_t max = INT64_MAX) -> Status {
    *outv = v;
    if (outv->size() != n)
      return fail(where + ": " + name + " has " +
                  std::to_string(outv->size()) + " entries, expected " +
                  std::to_string(n) + " (" + meaning + ")");
    for (size_t i = 0; i < n; ++i)
      if ((*outv)[i] < min)
        return fail(where + ": " + name + " " + shapeString(*outv) +
                    ": entry " + std::to_string(i) + " is " +
                    std::to_string((*outv)[i]) + ", expected >= " +
                    std::to_string(min));
      else if ((*outv)[i] > max)
        return fail(where + ": " + name + " " + shapeString(*outv) +
                    ": entry " + std::to_string(i) + " is " +
                    std::to_string((*outv)[i]) + ", expected <= " +
                    std::to_string(max));
    return Status::ok();
  };
  auto axisIn = [&](int64_t axis, size_t rank, uint32_t buf,
                    const char *what) -> Status {
    Status rule = shapes::checkAxis(axis, rank);
    if (!rule)
      return fail(where + ": " + rule.message() + " (" + what + " " +
                  bufDesc(buf) + ")");
    return Status::ok();
  };
  auto epsilonOk = [&](double eps) -> Status {
    if (!(eps >= 0) || std::isinf(eps))
      return fail(where + ": epsilon " + std::to_string(eps) +
                  " must be finite and >= 0");
    return Status::ok();
  };
  const std::vector<DType> numeric{DType::F32, DType::I32, DType::I64};

  switch (kind) {
  case K::Abs:
  case K::Minimum:
  case K::Clamp:
  case K::Erf:
  case K::Gelu:
  case K::Pow:
  case K::Not: {
    bool isBinary = kind == K::Minimum || kind == K::Pow;
    MC_RETURN_IF_ERROR(counts(isBinary ? 2 : 1, 1));
    if (isBinary)
      MC_RETURN_IF_ERROR(sameAs(in[0], "input 0", in[1], "input 1"));
    MC_RETURN_IF_ERROR(sameAs(in[0], "input 0", out[0], "output"));
    if (kind == K::Not)
      return dtypeOf(in[0], "input 0", {DType::I1}, "i1");
    if (kind == K::Abs || kind == K::Minimum || kind == K::Clamp)
      return dtypeOf(in[0], "input 0", {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64},
                     "f32, f16, bf16, i32, i64");
    return dtypeOf(in[0], "input 0", {DType::F32, DType::F16, DType::BF16}, "f32, f16, bf16");
  }
  case K::Compare: {
    MC_RETURN_IF_ERROR(counts(2, 1));
    MC_RETURN_IF_ERROR(sameAs(in[0], "input 0", in[1], "input 1"));
    int64_t dir = A.getInt("direction");
    if (dir < 0 || dir > int64_t(CompareOp::Ge))
      return fail(where + ": unknown compare direction " +
                  std::to_string(int(dir)));
    bool eqNe =
        dir == int64_t(CompareOp::Eq) || dir == int64_t(CompareOp::Ne);
    if (eqNe)
      MC_RETURN_IF_ERROR(dtypeOf(in[0], "input 0",
                                 {DType::F32, DType::F16, DType::BF16,
                                  DType::I32, DType::I64, DType::I1},
                                 "f32, f16, bf16, i32, i64, i1"));
    else
      MC_RETURN_IF_ERROR(
          dtypeOf(in[0], "input 0", {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64},
                  "f32, f16, bf16, i32, i64 (i1 only for EQ and NE)"));
    if (bufs_[out[0]].dtype != DType::I1 ||
        bufs_[out[0]].shape != bufs_[in[0]].shape)
      return fail(where + ": output " + bufDesc(out[0]) + " must be i1" +
                  shapeString(bufs_[in[0]].shape) +
                  " (i1 with the shape of input 0)");
    return Status::ok();
  }
  case K::Dropout: {
    MC_RETURN_IF_ERROR(counts(3, 1));
    MC_RETURN_IF_ERROR(sameAs(in[0], "input 0", out[0], "output"));
    MC_RETURN_IF_ERROR(dtypeOf(in[0], "input 0",
                               {DType::F32, DType::F16, DType::BF16},
                               "f32, f16, bf16"));
    for (size_t i : {1, 2}) {
      const char *what = i == 1 ? "input 1 (the seed)" : "input 2 (the offset)";
      MC_RETURN_IF_ERROR(dtypeOf(in[i], what, {DType::I64}, "i64"));
      if (!bufs_[in[i]].shape.empty())
        return fail(where + ": " + what + " " + bufDesc(in[i]) +
                    " must be a scalar");
    }
    double p = A.getFloat("p");
    if (!(p >= 0 && p <= 1))
      return fail(where + ": p " + std::to_string(p) + " is outside [0, 1]");
    return Status::ok();
  }
  case K::Select: {
    MC_RETURN_IF_ERROR(counts(3, 1));
    MC_RETURN_IF_ERROR(
        dtypeOf(in[0], "input 0 (the predicate)", {DType::I1}, "i1"));
    MC_RETURN_IF_ERROR(sameAs(in[1], "input 1", in[2], "input 2"));
    MC_RETURN_IF_ERROR(sameAs(in[1], "input 1", out[0], "output"));
    if (bufs_[in[0]].shape != bufs_[in[1]].shape)
      return fail(where + ": predicate " + bufDesc(in[0]) +
                  " must have the shape of input 1, " + bufDesc(in[1]));
    return Status::ok();
  }
  case K::Concat: {
    if (in.empty() || out.size() != 1)
      return fail(where + ": expected at least 1 input and 1 output, found " +
                  std::to_string(in.size()) + " and " +
                  std::to_string(out.size()));
    std::vector<Shape> inputs;
    for (size_t k = 0; k < in.size(); ++k) {
      if (bufs_[in[k]].dtype != bufs_[out[0]].dtype)
        return fail(where + ": input " + std::to_string(k) + " " +
                    bufDesc(in[k]) + " must have the dtype of output " +
                    bufDesc(out[0]));
      inputs.push_back(bufs_[in[k]].shape);
    }
    Shape expect;
    return ruleShape(shapes::concat(inputs, A.getInt("axis"), &expect), expect,
                     "the inputs joined along the axis");
  }
  case K::Slice: {
    MC_RETURN_IF_ERROR(counts(1, 1));
    if (bufs_[in[0]].dtype != bufs_[out[0]].dtype)
      return fail(where + ": output " + bufDesc(out[0]) +
                  " must have the dtype of input 0, " + bufDesc(in[0]));
    const Shape &a = bufs_[in[0]].shape;
    std::vector<int64_t> start, strides;
    MC_RETURN_IF_ERROR(vec(A.getInts("start"), "start", a.size(), 0,
                           "one per input dim", &start));
    MC_RETURN_IF_ERROR(vec(A.getInts("strides"), "strides", a.size(), 1,
                           "one per input dim", &strides));
    Shape expect;
    Status rule = shapes::slice(a, start, A.getInts("limit"), strides, &expect);
    return ruleShape(rule, expect,
                     "ceil((limit - start) / stride) per dim of input " +
                         bufDesc(in[0]));
  }
  case K::Gather: {
    MC_RETURN_IF_ERROR(counts(2, 1));
    MC_RETURN_IF_ERROR(dtypeOf(in[1], "input 1 (the indices)",
                               {DType::I32, DType::I64}, "i32, i64"));
    const Shape &a = bufs_[in[0]].shape, &idx = bufs_[in[1]].shape;
    int64_t axis = A.getInt("axis");
    if (bufs_[out[0]].dtype != bufs_[in[0]].dtype)
      return fail(where + ": output " + bufDesc(out[0]) +
                  " must have the dtype of input 0, " + bufDesc(in[0]));
    Shape expect;
    MC_RETURN_IF_ERROR(ruleShape(shapes::gather(a, idx, axis, &expect), expect,
                                 "data shape[:axis] + indices shape + data "
                                 "shape[axis+1:]"));
    if (a[axis] == 0 && numElements(idx) > 0)
      return fail(where + ": input 0 " + bufDesc(in[0]) +
                  " has size 0 along axis " + std::to_string(axis) +
                  ", so no index can be in range");
    return Status::ok();
  }
  case K::ScatterAdd: {
    MC_RETURN_IF_ERROR(counts(2, 1));
    MC_RETURN_IF_ERROR(dtypeOf(in[0], "input 0", {DType::F32}, "f32"));
    MC_RETURN_IF_ERROR(dtypeOf(in[1], "input 1 (the indices)",
                               {DType::I32, DType::I64}, "i32, i64"));
    const Shape &u = bufs_[in[0]].shape, &idx = bufs_[in[1]].shape;
    const Shape &r = bufs_[out[0]].shape;
    int64_t axis = A.getInt("axis"), size = A.getInt("size");
    if (bufs_[out[0]].dtype != bufs_[in[0]].dtype)
      return fail(where + ": output " + bufDesc(out[0]) +
                  " must have the dtype of input 0, " + bufDesc(in[0]));
    if (axis >= 0 && size_t(axis) < r.size() && r[size_t(axis)] != size)
      return fail(where + ": output " + bufDesc(out[0]) + " has size " +
                  std::to_string(r[size_t(axis)]) + " along axis " +
                  std::to_string(axis) + ", not the attribute size " +
                  std::to_string(size));
    Shape expect;
    return ruleShape(shapes::scatterAdd(u, idx, axis, size, &expect), expect,
                     "updates shape[:axis] + [size] + updates "
                     "shape[axis + rank(indices):]");
  }
  case K::Pad: {
    MC_RETURN_IF_ERROR(counts(1, 1));
    const Shape &a = bufs_[in[0]].shape, &r = bufs_[out[0]].shape;
    if (bufs_[in[0]].dtype != bufs_[out[0]].dtype || a.size() != r.size())
      return fail(where + ": output " + bufDesc(out[0]) +
                  " must have the dtype and rank of input 0, " +
                  bufDesc(in[0]));
    std::vector<int64_t> low, high;
    MC_RETURN_IF_ERROR(
        vec(A.getInts("low"), "low", a.size(), 0, "one per input dim", &low));
    MC_RETURN_IF_ERROR(
        vec(A.getInts("high"), "high", a.size(), 0, "one per input dim", &high));
    Shape expect;
    return ruleShape(shapes::pad(a, low, high, &expect), expect,
                     "input shape + low + high");
  }
  case K::Conv2d: {
    MC_RETURN_IF_ERROR(counts(2, 1));
    MC_RETURN_IF_ERROR(dtypeOf(in[0], "input 0", {DType::F32, DType::F16, DType::BF16}, "f32, f16, bf16"));
    for (uint32_t b : {in[1], out[0]})
      if (bufs_[b].dtype != bufs_[in[0]].dtype)
        return fail(where + ": " + bufDesc(b) +
                    " must have the dtype of input 0, " + bufDesc(in[0]));
    const Shape &x = bufs_[in[0]].shape, &w = bufs_[in[1]].shape;
    std::vector<int64_t> strides, padding, dilation;
    MC_RETURN_IF_ERROR(vec(A.getInts("strides"), "strides", 2, 1, "[h, w]",
                           &strides, INT32_MAX));
    MC_RETURN_IF_ERROR(vec(A.getInts("padding"), "padding", 4, 0,
                           "[top, left, bottom, right]", &padding, INT32_MAX));
    MC_RETURN_IF_ERROR(vec(A.getInts("dilation"), "dilation", 2, 1, "[h, w]",
                           &dilation, INT32_MAX));
    Shape expect;
    bool last = A.getBool("channels_last");
    MC_RETURN_IF_ERROR(ruleShape(
        shapes::conv2d(x, w, strides, padding, dilation, A.getInt("groups"),
                       &expect, last),
        expect,
        last ? "[N, (H + pad_top + pad_bottom - dilation*(KH-1) - 1) / "
               "stride + 1, same for W, O] (channels_last)"
             : "[N, O, (H + pad_top + pad_bottom - dilation*(KH-1) - 1) / "
               "stride + 1, same for W]"));
    int64_t o = w[0], map = last ? 1 : 2;
    if (__int128(w[1]) * w[2] * w[3] > INT32_MAX ||
        __int128(expect[map]) * expect[map + 1] > INT32_MAX || o > INT32_MAX ||
        w[2] > INT32_MAX || w[3] > INT32_MAX)
      return fail(where + ": a matrix dimension of the convolution exceeds "
                          "the BLAS int range");
    return Status::ok();
  }
  case K::MaxPool2d:
  case K::AvgPool2d: {
    MC_RETURN_IF_ERROR(counts(1, 1));
    MC_RETURN_IF_ERROR(dtypeOf(in[0], "input 0", {DType::F32, DType::F16, DType::BF16}, "f32, f16, bf16"));
    if (bufs_[out[0]].dtype != bufs_[in[0]].dtype)
      return fail(where + ": output " + bufDesc(out[0]) +
                  " must have the dtype of input 0, " + bufDesc(in[0]));
    std::vector<int64_t> kernel, strides, padding, dilation;
    MC_RETURN_IF_ERROR(
        vec(A.getInts("kernel"), "kernel", 2, 1, "[h, w]", &kernel, INT32_MAX));
    MC_RETURN_IF_ERROR(vec(A.getInts("strides"), "strides", 2, 1, "[h, w]",
                           &strides, INT32_MAX));
    MC_RETURN_IF_ERROR(vec(A.getInts("padding"), "padding", 4, 0,
                           "[top, left, bottom, right]", &padding, INT32_MAX));
    MC_RETURN_IF_ERROR(vec(A.getInts("dilation"), "dilation", 2, 1, "[h, w]",
                           &dilation, INT32_MAX));
    Shape expect;
    bool last = A.getBool("channels_last");
    MC_RETURN_IF_ERROR(ruleShape(
        shapes::pool2d(bufs_[in[0]].shape, kernel, strides, padding, dilation,
                       A.getBool("ceil_mode"), &expect, last),
        expect,
        std::string(last ? "[N, " : "[N, C, ") +
            "(H + pad_top + pad_bottom - dilation*(KH-1) - 1) / stride + 1, "
            "same for W" +
            (last ? ", C] (channels_last)" : "]") + ", rounded " +
            (A.getBool("ceil_mode") ? "up (ceil_mode)" : "down")));
    return Status::ok();
  }
  case K::BatchNorm:
  case K::LayerNorm: {
    bool bn = kind == K::BatchNorm;
    MC_RETURN_IF_ERROR(counts(bn ? 5 : 3, 1));
    MC_RETURN_IF_ERROR(dtypeOf(in[0], "input 0", {DType::F32, DType::F16, DType::BF16}, "f32, f16, bf16"));
    MC_RETURN_IF_ERROR(sameAs(in[0], "input 0", out[0], "output"));
    MC_RETURN_IF_ERROR(epsilonOk(A.getFloat("epsilon")));
    const Shape &x = bufs_[in[0]].shape;
    int64_t axis = A.getInt(bn ? "feature_axis" : "axis");
    MC_RETURN_IF_ERROR(axisIn(axis, x.size(), in[0], "input 0"));
    Shape param = bn ? Shape{x[axis]} : Shape(x.begin() + axis, x.end());
    static const char *const bnNames[] = {"scale", "offset", "mean",
                                          "variance"};
    static const char *const lnNames[] = {"gamma", "beta"};
    for (size_t k = 1; k < in.size(); ++k) {
      const BufInfo &b = bufs_[in[k]];
      DType xt = bufs_[in[0]].dtype;
      if (b.dtype != xt || b.shape != param)
        return fail(where + ": input " + std::to_string(k) + " (" +
                    (bn ? bnNames[k - 1] : lnNames[k - 1]) + ") " +
                    bufDesc(in[k]) + " must be " + dtypeName(xt) +
                    shapeString(param) +
                    (bn ? " (the size of the feature axis)"
                        : " (the normalized dims of input 0)"));
    }
    return Status::ok();
  }
  default:
    break;
  }
  // Elementwise ops without attributes need no case: the operands and the
  // output share one shape and dtype, one the dialect accepts (the op
  // registry's types, from ODS).
  const OpInfo &info = opInfo(kind);
  if (info.fusible && info.attrs.empty() && info.operands >= 1) {
    MC_RETURN_IF_ERROR(counts(size_t(info.operands), 1));
    for (size_t k = 1; k < in.size(); ++k)
      MC_RETURN_IF_ERROR(
          sameAs(in[0], "input 0", in[k], "input " + std::to_string(k)));
    MC_RETURN_IF_ERROR(sameAs(in[0], "input 0", out[0], "output"));
    std::string types = info.types, mine = dtypeName(bufs_[in[0]].dtype);
    if (!typeListHas(types, mine))
      return fail(where + ": unsupported dtype " + mine + " of input 0 (" +
                  bufDesc(in[0]) + "); supported: " + types);
    return Status::ok();
  }
  return fail(where + ": unhandled op kind");
}

} // namespace

Status verifyArtifact(const uint8_t *bytes, size_t size,
                      const std::string &name, bool checkTargets,
                      bool checkDataCrc) {
  if (!bytes && size)
    return Status::error(name + ": no bytes");
  return Verifier(bytes, size, name, checkTargets, checkDataCrc).run();
}

} // namespace mc::rt
