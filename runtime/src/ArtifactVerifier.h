// Internal helpers shared by the verifier and the loader.
#ifndef MODELC_RUNTIME_ARTIFACTVERIFIER_H
#define MODELC_RUNTIME_ARTIFACTVERIFIER_H

#include "mcpk_generated.h"
#include "modelc/ops.h"

#include <cstdint>
#include <vector>

namespace mc::rt {

/// zlib crc32 over any length (zlib itself takes 32-bit lengths).
uint32_t crc32Bytes(const uint8_t *data, uint64_t size, uint32_t crc);
uint32_t readLE32(const uint8_t *p);
/// A step's attributes as the file holds them (the verifier checks them
/// against the op registry; the session binds kernels to them).
std::vector<OpAttr> decodeAttrs(const fb::Step &step);
/// The attributes of a step or of a fused region's op.
std::vector<OpAttr> decodeAttrList(
    const flatbuffers::Vector<flatbuffers::Offset<fb::Attr>> *list);

} // namespace mc::rt

#endif // MODELC_RUNTIME_ARTIFACTVERIFIER_H
