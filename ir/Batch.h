// The dynamic batch of a function: its `?` dims are one size, the batch,
// known only at run time and bounded by the function's `mc.batch`
// attribute, `array<i64: MIN, MAX, OPT>` (1 <= MIN <= OPT <= MAX). Codegen
// plans memory at MAX and records the bounds in the artifact; OPT is the
// size planning and tuning favour. See docs/decisions.md ("Dynamic batch").
#ifndef MODELC_IR_BATCH_H
#define MODELC_IR_BATCH_H

#include "mlir/IR/BuiltinTypes.h"
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

/// The shape of `type` as the shape library (modelc/shapes.h) reads it: a
/// `?` is -c, c times the batch (c from the type's #mc.batch encoding, 1
/// without one).
llvm::SmallVector<int64_t> symbolicShape(mlir::RankedTensorType type);
llvm::SmallVector<int64_t> symbolicShape(mlir::Type type);
/// The inverse: negative dims become `?`, with a #mc.batch encoding when a
/// multiple is not 1.
mlir::RankedTensorType symbolicType(llvm::ArrayRef<int64_t> shape,
                                    mlir::Type element);
/// `type` with another element type, its encoding kept.
mlir::RankedTensorType withElementType(mlir::RankedTensorType type,
                                       mlir::Type element);

/// Parses "MIN..MAX" or "MIN..MAX@OPT" (OPT defaults to MAX); the message
/// names what is wrong.
std::optional<BatchBounds> parseBatchBounds(llvm::StringRef text,
                                            std::string* error);

} // namespace mc

#endif // MODELC_IR_BATCH_H
