// Loading an artifact: read the file (read(), no mmap) into 64-byte aligned
// memory, verify it, and keep it; the data section is then aligned in place.
#include "modelc/model.h"
#include "modelc/fileio.h"
#include "modelc/shapes.h"
#include "modelc/version.h"

#include "ArtifactVerifier.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mc::rt {

AlignedBytes::AlignedBytes(size_t size) {
  // aligned_alloc wants a multiple of the alignment; keep one byte minimum.
  size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded < size) // overflow
    return;
  data_ = static_cast<uint8_t *>(
      std::aligned_alloc(kAlignment, rounded ? rounded : kAlignment));
  if (data_)
    size_ = size;
}
AlignedBytes::AlignedBytes(AlignedBytes &&o) noexcept
    : data_(o.data_), size_(o.size_) {
  o.data_ = nullptr;
  o.size_ = 0;
}
AlignedBytes &AlignedBytes::operator=(AlignedBytes &&o) noexcept {
  if (this != &o) {
    std::free(data_);
    data_ = o.data_;
    size_ = o.size_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}
AlignedBytes::~AlignedBytes() { std::free(data_); }

Status Model::loadFile(const std::string &path, std::unique_ptr<Model> *out,
                       bool checkTargets) {
  int fd = -1;
  uint64_t size = 0;
  MC_RETURN_IF_ERROR(openRegularFile(path, kMaxInputFileBytes, &fd, &size));
  // The identifier first: a large file of another kind is refused after 12
  // bytes, not after reading all of it.
  uint8_t head[4 + 8 + kTrailerSize] = {};
  if (size >= 12) {
    Status st = readExactly(fd, head, 12, path);
    if (!st || std::memcmp(head + 8, kFileIdentifier, 4) != 0) {
      ::close(fd);
      // The verifier words the refusal (the zeros stand for the rest of
      // the file, which it does not reach).
      return st ? verifyArtifact(head, sizeof head, path, checkTargets) : st;
    }
  }
  AlignedBytes bytes{size_t(size)};
  if (!bytes.data()) {
    ::close(fd);
    return Status::error(path + ": cannot allocate " + std::to_string(size) +
                         " bytes to load it");
  }
  size_t done = size >= 12 ? 12 : 0;
  std::memcpy(bytes.data(), head, done);
  Status st = readExactly(fd, bytes.data() + done, bytes.size() - done, path);
  ::close(fd);
  MC_RETURN_IF_ERROR(st);
  return fromBytes(std::move(bytes), path, out, checkTargets);
}

uint64_t Model::checksums() const {
  const uint8_t *trailer = bytes_.data() + bytes_.size() - kTrailerSize;
  return uint64_t(readLE32(trailer)) << 32 | table_->data_crc32();
}

Status Model::loadMemory(const void *data, size_t size, const std::string &name,
                         std::unique_ptr<Model> *out) {
  if (!data && size)
    return Status::error(name + ": null data");
  AlignedBytes bytes(size);
  if (!bytes.data())
    return Status::error(name + ": cannot allocate " + std::to_string(size) +
                         " bytes to load it");
  if (size)
    std::memcpy(bytes.data(), data, size);
  return fromBytes(std::move(bytes), name, out);
}

Status Model::fromBytes(AlignedBytes bytes, const std::string &name,
                        std::unique_ptr<Model> *out, bool checkTargets) {
  if (!out)
    return Status::error(name + ": no output model given");
  MC_RETURN_IF_ERROR(
      verifyArtifact(bytes.data(), bytes.size(), name, checkTargets));
  std::unique_ptr<Model> m(new Model());
  m->name_ = name;
  m->bytes_ = std::move(bytes);
  m->table_ = fb::GetSizePrefixedModel(m->bytes_.data());
  m->constants_ = m->bytes_.data() + m->table_->data_offset();
  // The verifier has checked every signature entry and its buffer.
  auto collect = [&](const auto *sigs, std::vector<TensorInfo> &into) {
    if (!sigs)
      return;
    for (const fb::TensorSig *sig : *sigs) {
      TensorInfo info;
      info.name = sig->name()->str();
      info.dtype = DType(sig->dtype());
      if (sig->shape())
        info.shape.assign(sig->shape()->begin(), sig->shape()->end());
      info.buffer = sig->buffer();
      info.byteSize = m->table_->buffers()->Get(sig->buffer())->size();
      // The verifier has checked it against the buffer's; all zeros reads
      // as static.
      if (const auto *scale = sig->batch_scale())
        for (int64_t c : *scale)
          if (c) {
            info.batchScale.assign(scale->begin(), scale->end());
            break;
          }
      into.push_back(std::move(info));
    }
  };
  collect(m->table_->inputs(), m->inputs_);
  collect(m->table_->outputs(), m->outputs_);
  // The verifier has checked that State names are non-empty and unique.
  const auto &buffers = *m->table_->buffers();
  for (uint32_t i = 0; i < buffers.size(); ++i) {
    const fb::Buffer *b = buffers.Get(i);
    if (b->kind() != fb::BufferKind::State)
      continue;
    TensorInfo info;
    info.name = b->name()->str();
    info.dtype = DType(b->dtype());
    if (b->shape())
      info.shape.assign(b->shape()->begin(), b->shape()->end());
    info.buffer = i;
    info.byteSize = size_t(b->size());
    m->states_.push_back(std::move(info));
  }
  *out = std::move(m);
  return Status::ok();
}

Shape TensorInfo::shapeAt(int64_t batch) const {
  return shapes::atBatch(shape, batchScale, batch);
}

size_t TensorInfo::byteSizeAt(int64_t batch) const {
  if (!dynamic())
    return byteSize;
  return size_t(numElements(shapeAt(batch))) * dtypeSize(dtype);
}

std::string TensorInfo::typeString() const {
  return dtypeName(dtype) + shapes::symbolicStr(shape, batchScale);
}

BatchBounds Model::batch() const {
  const fb::BatchBounds *b = table_->batch();
  return b ? BatchBounds{b->min(), b->max(), b->opt()} : BatchBounds{};
}

static Status findByName(const std::vector<TensorInfo> &infos,
                         const std::string &name, const char *what,
                         const std::string &model, size_t *index) {
  for (size_t i = 0; i < infos.size(); ++i)
    if (infos[i].name == name) {
      if (index)
        *index = i;
      return Status::ok();
    }
  std::string known;
  for (const TensorInfo &t : infos)
    known += (known.empty() ? "'" : ", '") + t.name + "'";
  return Status::error(model + ": no " + what + " named '" + name +
                       "' (known: " + (known.empty() ? "none" : known) + ")");
}

Status Model::findInput(const std::string &name, size_t *index) const {
  return findByName(inputs_, name, "input", name_, index);
}
Status Model::findOutput(const std::string &name, size_t *index) const {
  return findByName(outputs_, name, "output", name_, index);
}
Status Model::findState(const std::string &name, size_t *index) const {
  return findByName(states_, name, "state buffer", name_, index);
}

} // namespace mc::rt
