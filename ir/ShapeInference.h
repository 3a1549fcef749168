// Shape rules of the mc ops, shared by the verifiers, the type inference
// (which the builders use) and the tracer. Pure functions over dims: each
// returns the result shape, or failure after reporting through `emitError`.
#ifndef MODELC_IR_SHAPEINFERENCE_H
#define MODELC_IR_SHAPEINFERENCE_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"

namespace mc {

using EmitErrorFn = llvm::function_ref<mlir::InFlightDiagnostic()>;

mlir::FailureOr<llvm::SmallVector<int64_t>>
inferMatmulShape(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs,
                 bool transposeA, bool transposeB, EmitErrorFn emitError);

mlir::FailureOr<llvm::SmallVector<int64_t>>
inferTransposeShape(llvm::ArrayRef<int64_t> input,
                    llvm::ArrayRef<int64_t> permutation, EmitErrorFn emitError);

mlir::FailureOr<llvm::SmallVector<int64_t>>
inferReduceShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> dims,
                 bool keepdim, EmitErrorFn emitError);

/// Checks `input` broadcasts to `result` through `dims`.
mlir::LogicalResult verifyBroadcastInDim(llvm::ArrayRef<int64_t> input,
                                         llvm::ArrayRef<int64_t> dims,
                                         llvm::ArrayRef<int64_t> result,
                                         EmitErrorFn emitError);

/// NumPy/PyTorch broadcasting of two shapes (used by the frontend, which
/// then emits explicit broadcast_in_dim ops).
mlir::FailureOr<llvm::SmallVector<int64_t>>
inferBroadcastShape(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b,
                    EmitErrorFn emitError);

} // namespace mc

#endif // MODELC_IR_SHAPEINFERENCE_H
