// Adaptors from the dialect to the shape library (modelc/shapes.h): the
// rules live there, MLIR-free; here they report through MLIR diagnostics.
#include "ir/ShapeInference.h"

#include "modelc/shapes.h"

#include "mlir/IR/BuiltinTypeInterfaces.h"

using namespace mlir;
using llvm::SmallVector;

namespace mc {

namespace shapes = rt::shapes;

namespace {

/// Shapes and attributes as the library reads them: a dynamic dim (`?`, the
/// batch) is its kBatch.
shapes::Dims dims(ArrayRef<int64_t> a) {
  shapes::Dims out(a.begin(), a.end());
  for (int64_t& d : out)
    if (ShapedType::isDynamic(d))
      d = shapes::kBatch;
  return out;
}

/// The library's result, or failure after reporting its message.
FailureOr<SmallVector<int64_t>> report(const rt::Status &status,
                                       const shapes::Dims &out,
                                       EmitErrorFn emitError) {
  if (!status) {
    emitError() << status.message();
    return failure();
  }
  // Symbolic: a dim of the batch stays -c; callers build the type with
  // symbolicType (ir/Batch.h), which adds the #mc.batch encoding.
  return SmallVector<int64_t>(out.begin(), out.end());
}

} // namespace

FailureOr<SmallVector<int64_t>> inferMatmulShape(ArrayRef<int64_t> lhs,
                                                 ArrayRef<int64_t> rhs,
                                                 bool transposeA,
                                                 bool transposeB,
                                                 EmitErrorFn emitError) {
  shapes::Dims out;
  rt::Status s =
      shapes::matmul(dims(lhs), dims(rhs), transposeA, transposeB, &out);
  return report(s, out, emitError);
}

FailureOr<SmallVector<int64_t>>
inferTransposeShape(ArrayRef<int64_t> input, ArrayRef<int64_t> permutation,
                    EmitErrorFn emitError) {
  shapes::Dims out;
  rt::Status s = shapes::transpose(dims(input), dims(permutation), &out);
  return report(s, out, emitError);
}

FailureOr<SmallVector<int64_t>> inferReduceShape(ArrayRef<int64_t> input,
                                                 ArrayRef<int64_t> reduced,
                                                 bool keepdim,
                                                 EmitErrorFn emitError) {
  shapes::Dims out;
  rt::Status s = shapes::reduce(dims(input), dims(reduced), keepdim, &out);
  return report(s, out, emitError);
}

LogicalResult verifyBroadcastInDim(ArrayRef<int64_t> input,
                                   ArrayRef<int64_t> broadcastDims,
                                   ArrayRef<int64_t> result,
                                   EmitErrorFn emitError) {
  rt::Status s =
      shapes::broadcastInDim(dims(input), dims(broadcastDims), dims(result));
  if (!s)
    return emitError() << s.message();
  return success();
}

LogicalResult verifyReshape(ArrayRef<int64_t> input, ArrayRef<int64_t> result,
                            EmitErrorFn emitError) {
  rt::Status s = shapes::reshape(dims(input), dims(result));
  if (!s)
    return emitError() << s.message();
  return success();
}

FailureOr<SmallVector<int64_t>>
inferConcatShape(ArrayRef<ArrayRef<int64_t>> inputs, int64_t axis,
                 EmitErrorFn emitError) {
  std::vector<shapes::Dims> in;
  for (ArrayRef<int64_t> shape : inputs)
    in.push_back(dims(shape));
  shapes::Dims out;
  rt::Status s = shapes::concat(in, axis, &out);
  return report(s, out, emitError);
}

FailureOr<SmallVector<int64_t>>
inferSliceShape(ArrayRef<int64_t> input, ArrayRef<int64_t> start,
                ArrayRef<int64_t> limit, ArrayRef<int64_t> strides,
                EmitErrorFn emitError) {
  shapes::Dims out;
  rt::Status s = shapes::slice(dims(input), dims(start), dims(limit),
                               dims(strides), &out);
  return report(s, out, emitError);
}

FailureOr<SmallVector<int64_t>> inferGatherShape(ArrayRef<int64_t> input,
                                                 ArrayRef<int64_t> indices,
                                                 int64_t axis,
                                                 EmitErrorFn emitError) {
  shapes::Dims out;
  rt::Status s = shapes::gather(dims(input), dims(indices), axis, &out);
  return report(s, out, emitError);
}

FailureOr<SmallVector<int64_t>> inferScatterAddShape(ArrayRef<int64_t> updates,
                                                     ArrayRef<int64_t> indices,
                                                     int64_t axis, int64_t size,
                                                     EmitErrorFn emitError) {
  shapes::Dims out;
  rt::Status s =
      shapes::scatterAdd(dims(updates), dims(indices), axis, size, &out);
  return report(s, out, emitError);
}

FailureOr<SmallVector<int64_t>> inferPadShape(ArrayRef<int64_t> input,
                                              ArrayRef<int64_t> low,
                                              ArrayRef<int64_t> high,
                                              EmitErrorFn emitError) {
  shapes::Dims out;
  rt::Status s = shapes::pad(dims(input), dims(low), dims(high), &out);
  return report(s, out, emitError);
}

FailureOr<SmallVector<int64_t>>
inferConv2dShape(ArrayRef<int64_t> input, ArrayRef<int64_t> weight,
                 ArrayRef<int64_t> strides, ArrayRef<int64_t> padding,
                 ArrayRef<int64_t> dilation, int64_t groups, bool channelsLast,
                 EmitErrorFn emitError) {
  shapes::Dims out;
  rt::Status s =
      shapes::conv2d(dims(input), dims(weight), dims(strides), dims(padding),
                     dims(dilation), groups, &out, channelsLast);
  return report(s, out, emitError);
}

FailureOr<SmallVector<int64_t>>
inferPool2dShape(ArrayRef<int64_t> input, ArrayRef<int64_t> kernel,
                 ArrayRef<int64_t> strides, ArrayRef<int64_t> padding,
                 ArrayRef<int64_t> dilation, bool ceilMode, bool channelsLast,
                 EmitErrorFn emitError) {
  shapes::Dims out;
  rt::Status s =
      shapes::pool2d(dims(input), dims(kernel), dims(strides), dims(padding),
                     dims(dilation), ceilMode, &out, channelsLast);
  return report(s, out, emitError);
}

} // namespace mc
