// Limits on .mlir input checked before MLIR's parser sees it: the parser
// recurses once per nested region, attribute or type, so a deep enough
// input overflows the stack instead of getting an error.
#ifndef MODELC_IR_SOURCELIMITS_H
#define MODELC_IR_SOURCELIMITS_H

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Operation.h"
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

/// What is wrong with MLIR bytecode BYTES, checked before MLIR's reader
/// runs: regions nested deeper than LIMIT ("nesting deeper than 256 at
/// byte N (an operation's regions)"), an attribute or type kept as text
/// that nests brackets deeper, or a count larger than the bytes that follow
/// it (MLIR's reader allocates for such counts before reading what they
/// count: a few hundred bytes asked for 10 GB). Nothing when none, or where
/// the bytes stop making sense first (the reader then reports them). Walks
/// the sections and the IR's encoding (mlir/Bytecode/Encoding.h) with an
/// explicit stack: MLIR's reader is iterative, but its verifier, its
/// use-list pass and a module's destruction recurse once per region.
/// Attributes and types are not walked here: the reader resolves them with
/// a worklist; findExcessAttributeNesting checks them once parsed.
std::optional<std::string> checkBytecode(llvm::StringRef bytes,
                                         unsigned limit = kMaxMlirNesting);

/// Where an attribute or type held by OP or its nested operations (their
/// attributes, properties, result and block argument types, locations)
/// nests deeper than LIMIT: the outermost one's kind ("an attribute of
/// 'mc.foo'"); nothing when none does. Iterative: the printer and walkers
/// that visit them recurse once per level. Text input cannot get there (the
/// bracket pre-scan), bytecode can; call it on parsed bytecode before
/// anything walks the attributes.
std::optional<std::string>
findExcessAttributeNesting(mlir::Operation *op,
                           unsigned limit = kMaxMlirNesting);

/// Guards MLIR's bytecode reader, configured by CONFIG, for bytecode
/// BYTES (nothing for text). A BytecodeReaderConfig callback reads each
/// custom-encoded attribute and type entry through its dialect's bytecode
/// interface itself, as the reader would, and:
/// - counts the reads that failed since the last one that succeeded: more
///   than 8 * LIMIT in a row is an error ("... do not resolve ... (a
///   reference cycle, or nesting far deeper than LIMIT"). The reader
///   defers entries nested deeper than a few levels to a worklist and
///   retries a deferred entry until it resolves, so entries that refer to
///   one another in a cycle spin forever (a fuzz finding), and a deep chain
///   costs time growing with the square of its depth (300,000 levels:
///   minutes);
/// - reads builtin entries through a reader that checks what MLIR's
///   builtin reader builds unchecked: types are verified, and dense
///   elements need a static shape and a storable element type
///   (`tensor<2xnone>` crashed the reader: a fuzz finding).
void guardBytecodeReader(mlir::ParserConfig &config, llvm::StringRef bytes,
                         unsigned limit = kMaxMlirNesting);

/// The checks of loadMlirSource on a buffer already read (NAME in the
/// message): text nests at most kMaxMlirNesting brackets deep, bytecode
/// passes checkBytecode. On failure, *ERROR starts with NAME.
bool checkMlirSource(llvm::StringRef buffer, const std::string &name,
                     std::string *error);

/// The .mlir (text) or .mlirbc (bytecode) input PATH ("-": stdin) as a
/// buffer, after checking that it is a regular file within the size limit
/// (docs/reliability.md) and that text nests at most kMaxMlirNesting deep.
/// On failure, *ERROR is a message that starts with PATH.
std::unique_ptr<llvm::MemoryBuffer> loadMlirSource(const std::string &path,
                                                   std::string *error);

} // namespace mc

#endif // MODELC_IR_SOURCELIMITS_H
