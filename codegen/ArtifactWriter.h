// Serializing a planned Plan into a .mcpk artifact (layout in
// docs/artifact-format.md). MLIR-free, so it is tested with the runtime.
#ifndef MODELC_CODEGEN_ARTIFACTWRITER_H
#define MODELC_CODEGEN_ARTIFACTWRITER_H

#include "codegen/Plan.h"
#include "modelc/status.h"
#include "modelc/version.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mc::codegen {

struct WriteOptions {
  /// Run the runtime's verifier on the bytes before handing them out, so
  /// the compiler never publishes a file the runtime would reject.
  bool verify = true;
  /// Test-only: the schema major version to record, to test that a runtime
  /// refuses a major it does not know. Anything but the default also skips
  /// `verify` (the file is meant to be refused).
  uint32_t schemaVersionMajorForTesting = rt::kSchemaVersionMajor;
};

/// Serializes `plan` (arena offsets already assigned by planMemory) into
/// `out`. Constants are placed in the data section in buffer order, each
/// 64-byte aligned; the state region's initial image (Plan::stateSize bytes,
/// each State buffer's data at its planned offset) follows them, 64-byte
/// aligned, at the table's state_data_offset.
rt::Status writeArtifactToBytes(const Plan &plan, std::vector<uint8_t> *out,
                                const WriteOptions &options = {});

/// Writes the artifact to `path` atomically: a temporary file in the same
/// directory, renamed over `path` only once complete.
rt::Status writeArtifact(const Plan &plan, const std::string &path,
                         const WriteOptions &options = {});

} // namespace mc::codegen

#endif // MODELC_CODEGEN_ARTIFACTWRITER_H
