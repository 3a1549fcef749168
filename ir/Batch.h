// The dynamic batch of a function: its `?` dims are one size, the batch,
// known only at run time and bounded by the function's `mc.batch`
// attribute, `array<i64: MIN, MAX, OPT>` (1 <= MIN <= OPT <= MAX). Codegen
// plans memory at MAX and records the bounds in the artifact; OPT is the
// size planning and tuning favour. See docs/decisions.md ("Dynamic batch").
#ifndef MODELC_IR_BATCH_H
#define MODELC_IR_BATCH_H

#include "mlir/IR/Operation.h"

#include <cstdint>
#include <optional>

namespace mc {

inline constexpr llvm::StringLiteral kBatchAttrName = "mc.batch";

struct BatchBounds {
  int64_t min = 1, max = 1, opt = 1;
};

/// `fn`'s bounds; nullopt when it has none (or they are malformed: the
/// dialect's attribute verifier reports that).
std::optional<BatchBounds> getBatchBounds(mlir::Operation* fn);
void setBatchBounds(mlir::Operation* fn, const BatchBounds& bounds);

/// The dialect's check of an `mc.batch` attribute on `op`.
mlir::LogicalResult verifyBatchAttribute(mlir::Operation* op,
                                         mlir::Attribute value);

/// Parses "MIN..MAX" or "MIN..MAX@OPT" (OPT defaults to MAX); the message
/// names what is wrong.
std::optional<BatchBounds> parseBatchBounds(llvm::StringRef text,
                                            std::string* error);

} // namespace mc

#endif // MODELC_IR_BATCH_H
