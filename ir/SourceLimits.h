// Limits on .mlir input checked before MLIR's parser sees it: the parser
// recurses once per nested region, attribute or type, so a deep enough
// input overflows the stack instead of getting an error.
#ifndef MODELC_IR_SOURCELIMITS_H
#define MODELC_IR_SOURCELIMITS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace mc {

/// The deepest bracket nesting ({, [, (, <) accepted in .mlir text. Real
/// models nest a few levels; MLIR's recursive-descent parser handles 256
/// with a small fraction of the 8 MiB main-thread stack.
constexpr unsigned kMaxMlirNesting = 256;
/// The largest .mlir / .mlirbc file read: 2 GiB.
constexpr uint64_t kMaxMlirFileBytes = uint64_t(2) << 30;

/// Where TEXT nests brackets deeper than LIMIT, outside string literals and
/// comments: "line L, column C" of the first bracket too deep; nothing when
/// it does not. A pure pre-scan over the bytes (linear, no recursion).
std::optional<std::string> findExcessNesting(llvm::StringRef text,
                                             unsigned limit = kMaxMlirNesting);

/// The .mlir (text) or .mlirbc (bytecode) input PATH ("-": stdin) as a
/// buffer, after checking that it is a regular file within the size limit
/// (docs/reliability.md) and that text nests at most kMaxMlirNesting deep.
/// On failure, *ERROR is a message that starts with PATH.
std::unique_ptr<llvm::MemoryBuffer> loadMlirSource(const std::string &path,
                                                   std::string *error);

} // namespace mc

#endif // MODELC_IR_SOURCELIMITS_H
