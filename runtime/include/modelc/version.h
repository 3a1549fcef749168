// Version numbers shared by the artifact writer and the runtime loader.
#ifndef MODELC_VERSION_H
#define MODELC_VERSION_H

#include <cstdint>

namespace mc::rt {

/// The .mcpk schema version this build writes and reads. The evolution rule
/// is in runtime/schema/mcpk.fbs: additive changes bump the minor (old
/// runtimes still read the file), anything else bumps the major, and a
/// runtime refuses a major it does not know. 2.0 made steps generic (the op's
/// mnemonic and typed attributes instead of an OpKind enum and one table per
/// op family) and added per-target executables; 1.x files are refused with
/// "recompile with modelc >= 0.2" (docs/artifact-format.md). 2.1 added the
/// dynamic batch, 2.2 fused regions (Step.body), 2.3 the launch of a
/// generated kernel (Step.launch), 2.4 a kernel's error record, 2.5 State
/// buffers written by elementwise fused regions, in place, 2.6 views
/// (transpose, reshape, slice of an input) inside fused regions, 2.7 fused
/// regions of more than one output (Step.extra_outputs).
inline constexpr uint32_t kSchemaVersionMajor = 2;
inline constexpr uint32_t kSchemaVersionMinor = 7;
/// The first modelc version that writes schema 2.
inline constexpr char kFirstSchema2Version[] = "0.2.0";

/// The 4-byte flatbuffers file identifier and the 8-byte trailer magic.
inline constexpr char kFileIdentifier[] = "MCPK";
inline constexpr char kTrailerMagic[8] = {'M', 'C', 'P', 'K', 'E', 'N', 'D', 0};
/// Size of the trailer: crc32 of the table, reserved word, magic.
inline constexpr uint64_t kTrailerSize = 16;
/// Alignment of the data section, of every constant in it and of every arena
/// buffer (cache line, and enough for any SIMD load).
inline constexpr uint64_t kAlignment = 64;

/// The project version (e.g. "0.1.0"), recorded as producer_version.
const char *modelcVersion();

} // namespace mc::rt

#endif // MODELC_VERSION_H
