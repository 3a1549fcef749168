// The dialect's view of the shape rules, used by the verifiers and the type
// inference (which the builders use). The rules themselves live in the
// MLIR-free library modelc/shapes.h (shared with the artifact verifier, the
// kernels and the frontend); each function here returns the result shape, or
// failure after reporting the library's message through `emitError`.
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

/// Checks `input` reshapes to `result` (the same element count; a dynamic
/// batch dim on both sides or neither).
mlir::LogicalResult verifyReshape(llvm::ArrayRef<int64_t> input,
                                  llvm::ArrayRef<int64_t> result,
                                  EmitErrorFn emitError);

/// Checks `input` broadcasts to `result` through `dims`.
mlir::LogicalResult verifyBroadcastInDim(llvm::ArrayRef<int64_t> input,
                                         llvm::ArrayRef<int64_t> dims,
                                         llvm::ArrayRef<int64_t> result,
                                         EmitErrorFn emitError);

mlir::FailureOr<llvm::SmallVector<int64_t>>
inferConcatShape(llvm::ArrayRef<llvm::ArrayRef<int64_t>> inputs, int64_t axis,
                 EmitErrorFn emitError);

mlir::FailureOr<llvm::SmallVector<int64_t>>
inferSliceShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> start,
                llvm::ArrayRef<int64_t> limit, llvm::ArrayRef<int64_t> strides,
                EmitErrorFn emitError);

mlir::FailureOr<llvm::SmallVector<int64_t>>
inferGatherShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> indices,
                 int64_t axis, EmitErrorFn emitError);

mlir::FailureOr<llvm::SmallVector<int64_t>>
inferScatterAddShape(llvm::ArrayRef<int64_t> updates,
                     llvm::ArrayRef<int64_t> indices, int64_t axis,
                     int64_t size, EmitErrorFn emitError);

mlir::FailureOr<llvm::SmallVector<int64_t>>
inferPadShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> low,
              llvm::ArrayRef<int64_t> high, EmitErrorFn emitError);

/// NCHW conv: input [N, C, H, W], weight [O, C/groups, KH, KW].
mlir::FailureOr<llvm::SmallVector<int64_t>>
inferConv2dShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> weight,
                 llvm::ArrayRef<int64_t> strides,
                 llvm::ArrayRef<int64_t> padding,
                 llvm::ArrayRef<int64_t> dilation, int64_t groups,
                 bool channelsLast, EmitErrorFn emitError);

/// NCHW pooling; ceil_mode follows PyTorch (a window must start inside the
/// input or the leading padding).
mlir::FailureOr<llvm::SmallVector<int64_t>>
inferPool2dShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> kernel,
                 llvm::ArrayRef<int64_t> strides,
                 llvm::ArrayRef<int64_t> padding,
                 llvm::ArrayRef<int64_t> dilation, bool ceilMode,
                 bool channelsLast, EmitErrorFn emitError);

} // namespace mc

#endif // MODELC_IR_SHAPEINFERENCE_H
