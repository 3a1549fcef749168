// Shape rules of the mc ops (see ShapeInference.h).
#include "ir/ShapeInference.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using llvm::SmallVector;

namespace mc {

static std::string dimsStr(ArrayRef<int64_t> dims) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(dims, os);
  os << "]";
  return s;
}

FailureOr<SmallVector<int64_t>> inferMatmulShape(ArrayRef<int64_t> lhs,
                                                 ArrayRef<int64_t> rhs,
                                                 bool transposeA,
                                                 bool transposeB,
                                                 EmitErrorFn emitError) {
  if (lhs.size() < 2 || rhs.size() < 2) {
    emitError() << "expects operands of rank >= 2, got lhs " << dimsStr(lhs)
                << " and rhs " << dimsStr(rhs);
    return failure();
  }
  if (lhs.size() != rhs.size()) {
    emitError() << "expects operands of equal rank (broadcast batch "
                   "dimensions explicitly), got lhs "
                << dimsStr(lhs) << " and rhs " << dimsStr(rhs);
    return failure();
  }
  size_t r = lhs.size();
  if (lhs.drop_back(2) != rhs.drop_back(2)) {
    emitError() << "expects equal batch dimensions, got lhs " << dimsStr(lhs)
                << " and rhs " << dimsStr(rhs);
    return failure();
  }
  int64_t m = transposeA ? lhs[r - 1] : lhs[r - 2];
  int64_t kA = transposeA ? lhs[r - 2] : lhs[r - 1];
  int64_t kB = transposeB ? rhs[r - 1] : rhs[r - 2];
  int64_t n = transposeB ? rhs[r - 2] : rhs[r - 1];
  if (kA != kB) {
    emitError() << "contracting dimensions differ: lhs " << dimsStr(lhs)
                << (transposeA ? " (transposed)" : "") << " has K = " << kA
                << ", rhs " << dimsStr(rhs)
                << (transposeB ? " (transposed)" : "") << " has K = " << kB;
    return failure();
  }
  SmallVector<int64_t> out(lhs.drop_back(2));
  out.push_back(m);
  out.push_back(n);
  return out;
}

FailureOr<SmallVector<int64_t>>
inferTransposeShape(ArrayRef<int64_t> input, ArrayRef<int64_t> permutation,
                    EmitErrorFn emitError) {
  if (permutation.size() != input.size()) {
    emitError() << "permutation " << dimsStr(permutation) << " has "
                << permutation.size() << " entries, expected the input rank "
                << input.size();
    return failure();
  }
  llvm::SmallBitVector seen(input.size());
  SmallVector<int64_t> out;
  for (int64_t p : permutation) {
    if (p < 0 || p >= static_cast<int64_t>(input.size()) || seen[p]) {
      emitError() << "permutation " << dimsStr(permutation)
                  << " is not a permutation of [0, " << input.size() << ")";
      return failure();
    }
    seen.set(p);
    out.push_back(input[p]);
  }
  return out;
}

FailureOr<SmallVector<int64_t>> inferReduceShape(ArrayRef<int64_t> input,
                                                 ArrayRef<int64_t> dims,
                                                 bool keepdim,
                                                 EmitErrorFn emitError) {
  llvm::SmallBitVector reduced(input.size());
  for (int64_t d : dims) {
    if (d < 0 || d >= static_cast<int64_t>(input.size())) {
      emitError() << "reduction dimension " << d << " is out of range for rank "
                  << input.size();
      return failure();
    }
    if (reduced[d]) {
      emitError() << "reduction dimension " << d << " appears twice in "
                  << dimsStr(dims);
      return failure();
    }
    reduced.set(d);
  }
  SmallVector<int64_t> out;
  for (auto [i, size] : llvm::enumerate(input)) {
    if (!reduced[i])
      out.push_back(size);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

LogicalResult verifyBroadcastInDim(ArrayRef<int64_t> input,
                                   ArrayRef<int64_t> dims,
                                   ArrayRef<int64_t> result,
                                   EmitErrorFn emitError) {
  if (dims.size() != input.size())
    return emitError() << "dims " << dimsStr(dims) << " has " << dims.size()
                       << " entries, expected the input rank " << input.size();
  llvm::SmallBitVector seen(result.size());
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (d < 0 || d >= static_cast<int64_t>(result.size()))
      return emitError() << "dims[" << i << "] = " << d
                         << " is out of range for result rank "
                         << result.size();
    if (seen[d])
      return emitError() << "dims " << dimsStr(dims) << " maps two input "
                         << "dimensions to result dimension " << d;
    seen.set(d);
    if (input[i] != 1 && input[i] != result[d])
      return emitError() << "input dimension " << i << " of size " << input[i]
                         << " cannot broadcast to result dimension " << d
                         << " of size " << result[d];
  }
  return success();
}

FailureOr<SmallVector<int64_t>>
inferConcatShape(ArrayRef<ArrayRef<int64_t>> inputs, int64_t axis,
                 EmitErrorFn emitError) {
  if (inputs.empty()) {
    emitError() << "expects at least one input";
    return failure();
  }
  ArrayRef<int64_t> first = inputs.front();
  if (axis < 0 || axis >= static_cast<int64_t>(first.size())) {
    emitError() << "axis " << axis << " is out of range for rank "
                << first.size();
    return failure();
  }
  SmallVector<int64_t> out(first);
  out[axis] = 0;
  for (auto [i, shape] : llvm::enumerate(inputs)) {
    if (shape.size() != first.size()) {
      emitError() << "input " << i << " has rank " << shape.size()
                  << ", expected " << first.size();
      return failure();
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      if (static_cast<int64_t>(d) != axis && shape[d] != first[d]) {
        emitError() << "input " << i << " " << dimsStr(shape)
                    << " differs from input 0 " << dimsStr(first)
                    << " in dimension " << d << ", which is not the axis";
        return failure();
      }
    }
    out[axis] += shape[axis];
  }
  return out;
}

FailureOr<SmallVector<int64_t>>
inferSliceShape(ArrayRef<int64_t> input, ArrayRef<int64_t> start,
                ArrayRef<int64_t> limit, ArrayRef<int64_t> strides,
                EmitErrorFn emitError) {
  size_t r = input.size();
  if (start.size() != r || limit.size() != r || strides.size() != r) {
    emitError() << "start, limit and strides need " << r
                << " entries (the input rank), got " << start.size() << ", "
                << limit.size() << " and " << strides.size();
    return failure();
  }
  SmallVector<int64_t> out;
  for (size_t d = 0; d < r; ++d) {
    if (strides[d] < 1) {
      emitError() << "stride " << strides[d] << " in dimension " << d
                  << " must be >= 1";
      return failure();
    }
    if (start[d] < 0 || start[d] > limit[d] || limit[d] > input[d]) {
      emitError() << "dimension " << d << " of size " << input[d]
                  << " cannot be sliced from " << start[d] << " to "
                  << limit[d] << " (needs 0 <= start <= limit <= size)";
      return failure();
    }
    out.push_back((limit[d] - start[d] + strides[d] - 1) / strides[d]);
  }
  return out;
}

FailureOr<SmallVector<int64_t>> inferGatherShape(ArrayRef<int64_t> input,
                                                 ArrayRef<int64_t> indices,
                                                 int64_t axis,
                                                 EmitErrorFn emitError) {
  if (axis < 0 || axis >= static_cast<int64_t>(input.size())) {
    emitError() << "axis " << axis << " is out of range for rank "
                << input.size();
    return failure();
  }
  SmallVector<int64_t> out(input.begin(), input.begin() + axis);
  out.append(indices.begin(), indices.end());
  out.append(input.begin() + axis + 1, input.end());
  return out;
}

FailureOr<SmallVector<int64_t>> inferPadShape(ArrayRef<int64_t> input,
                                              ArrayRef<int64_t> low,
                                              ArrayRef<int64_t> high,
                                              EmitErrorFn emitError) {
  if (low.size() != input.size() || high.size() != input.size()) {
    emitError() << "low and high need " << input.size()
                << " entries (the input rank), got " << low.size() << " and "
                << high.size();
    return failure();
  }
  SmallVector<int64_t> out;
  for (size_t d = 0; d < input.size(); ++d) {
    if (low[d] < 0 || high[d] < 0) {
      emitError() << "padding of dimension " << d << " is negative (low "
                  << low[d] << ", high " << high[d] << ")";
      return failure();
    }
    out.push_back(input[d] + low[d] + high[d]);
  }
  return out;
}

int64_t pooledSize(int64_t input, int64_t kernel, int64_t stride,
                   int64_t padBegin, int64_t padEnd, int64_t dilation,
                   bool ceilMode) {
  int64_t span = input + padBegin + padEnd - dilation * (kernel - 1) - 1;
  if (span < 0)
    return 0;
  int64_t out = (span + (ceilMode ? stride - 1 : 0)) / stride + 1;
  // PyTorch: the last window must start inside the input or the leading
  // padding, not in the trailing padding.
  if (ceilMode && (out - 1) * stride >= input + padBegin)
    --out;
  return out;
}

/// Checks the [h, w] / [top, left, bottom, right] attribute lengths shared
/// by conv and pooling.
static LogicalResult checkWindowAttrs(ArrayRef<int64_t> strides,
                                      ArrayRef<int64_t> padding,
                                      ArrayRef<int64_t> dilation,
                                      EmitErrorFn emitError) {
  if (strides.size() != 2 || dilation.size() != 2 || padding.size() != 4)
    return emitError() << "expects strides and dilation [h, w] and padding "
                          "[top, left, bottom, right], got "
                       << dimsStr(strides) << ", " << dimsStr(dilation)
                       << " and " << dimsStr(padding);
  for (int64_t v : strides)
    if (v < 1)
      return emitError() << "strides " << dimsStr(strides) << " must be >= 1";
  for (int64_t v : dilation)
    if (v < 1)
      return emitError() << "dilation " << dimsStr(dilation)
                         << " must be >= 1";
  for (int64_t v : padding)
    if (v < 0)
      return emitError() << "padding " << dimsStr(padding)
                         << " must be >= 0";
  return success();
}

FailureOr<SmallVector<int64_t>>
inferConv2dShape(ArrayRef<int64_t> input, ArrayRef<int64_t> weight,
                 ArrayRef<int64_t> strides, ArrayRef<int64_t> padding,
                 ArrayRef<int64_t> dilation, int64_t groups,
                 EmitErrorFn emitError) {
  if (input.size() != 4 || weight.size() != 4) {
    emitError() << "expects input [N, C, H, W] and weight [O, C/groups, KH, "
                   "KW], got "
                << dimsStr(input) << " and " << dimsStr(weight);
    return failure();
  }
  if (failed(checkWindowAttrs(strides, padding, dilation, emitError)))
    return failure();
  if (groups < 1 || input[1] % groups != 0 || weight[0] % groups != 0) {
    emitError() << "groups " << groups << " must divide the input channels "
                << input[1] << " and the output channels " << weight[0];
    return failure();
  }
  if (weight[1] * groups != input[1]) {
    emitError() << "weight " << dimsStr(weight) << " expects "
                << weight[1] * groups << " input channels (" << weight[1]
                << " per group x " << groups << " groups), input "
                << dimsStr(input) << " has " << input[1];
    return failure();
  }
  int64_t oh = pooledSize(input[2], weight[2], strides[0], padding[0],
                          padding[2], dilation[0], false);
  int64_t ow = pooledSize(input[3], weight[3], strides[1], padding[1],
                          padding[3], dilation[1], false);
  if (oh < 1 || ow < 1) {
    emitError() << "the kernel " << dimsStr(weight.drop_front(2))
                << " does not fit the padded input " << dimsStr(input);
    return failure();
  }
  return SmallVector<int64_t>{input[0], weight[0], oh, ow};
}

FailureOr<SmallVector<int64_t>>
inferPool2dShape(ArrayRef<int64_t> input, ArrayRef<int64_t> kernel,
                 ArrayRef<int64_t> strides, ArrayRef<int64_t> padding,
                 ArrayRef<int64_t> dilation, bool ceilMode,
                 EmitErrorFn emitError) {
  if (input.size() != 4) {
    emitError() << "expects input [N, C, H, W], got " << dimsStr(input);
    return failure();
  }
  if (kernel.size() != 2 || kernel[0] < 1 || kernel[1] < 1) {
    emitError() << "kernel " << dimsStr(kernel)
                << " must be [h, w] with sizes >= 1";
    return failure();
  }
  if (failed(checkWindowAttrs(strides, padding, dilation, emitError)))
    return failure();
  if (padding[0] * 2 > kernel[0] || padding[2] * 2 > kernel[0] ||
      padding[1] * 2 > kernel[1] || padding[3] * 2 > kernel[1]) {
    emitError() << "padding " << dimsStr(padding)
                << " must be at most half the kernel " << dimsStr(kernel);
    return failure();
  }
  int64_t oh = pooledSize(input[2], kernel[0], strides[0], padding[0],
                          padding[2], dilation[0], ceilMode);
  int64_t ow = pooledSize(input[3], kernel[1], strides[1], padding[1],
                          padding[3], dilation[1], ceilMode);
  if (oh < 1 || ow < 1) {
    emitError() << "the window " << dimsStr(kernel)
                << " does not fit the padded input " << dimsStr(input);
    return failure();
  }
  return SmallVector<int64_t>{input[0], input[1], oh, ow};
}

} // namespace mc
