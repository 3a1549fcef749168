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

FailureOr<SmallVector<int64_t>> inferBroadcastShape(ArrayRef<int64_t> a,
                                                    ArrayRef<int64_t> b,
                                                    EmitErrorFn emitError) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      emitError() << "shapes " << dimsStr(a) << " and " << dimsStr(b)
                  << " do not broadcast (dimension " << i << ": " << da
                  << " vs " << db << ")";
      return failure();
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

} // namespace mc
