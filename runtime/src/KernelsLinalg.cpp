// Batched matmul through OpenBLAS's cblas_sgemm (one call per batch entry).
#include "KernelUtil.h"
#include "modelc/kernels.h"

#include <cblas.h>
#include <climits>
#include <cstring>

namespace mc::rt {

Status matmul(const ConstTensor &a, const ConstTensor &b, bool transposeA,
              bool transposeB, const MutTensor &out) {
  {
    bool narrow = false;
    const ConstTensor *const ins[] = {&a, &b};
    Status st = detail::viaF32(
        "matmul", ins, out, &narrow,
        [&](const ConstTensor *in, const MutTensor &o) { return matmul(in[0], in[1], transposeA, transposeB, o); });
    if (narrow || !st)
      return st;
  }
  using detail::typeString;
  MC_RETURN_IF_ERROR(detail::checkRank("matmul", "lhs", a.shape));
  MC_RETURN_IF_ERROR(detail::checkRank("matmul", "rhs", b.shape));
  MC_RETURN_IF_ERROR(detail::checkRank("matmul", "result", out.shape));
  for (DType t : {a.dtype, b.dtype, out.dtype})
    if (t != DType::F32)
      return detail::unsupportedDType("matmul", t, "f32");
  size_t r = a.shape.size();
  auto mismatch = [&] {
    return Status::error(
        std::string("matmul: lhs ") + typeString(a.dtype, a.shape) +
        (transposeA ? " (transposed)" : "") + ", rhs " +
        typeString(b.dtype, b.shape) + (transposeB ? " (transposed)" : "") +
        " and result " + typeString(out.dtype, out.shape) +
        " do not agree (expected [..., M, K] x [..., K, N] -> [..., M, N])");
  };
  if (r < 2 || b.shape.size() != r || out.shape.size() != r)
    return mismatch();
  int64_t batch = 1;
  for (size_t d = 0; d + 2 < r; ++d) {
    if (a.shape[d] != b.shape[d] || a.shape[d] != out.shape[d])
      return mismatch();
    batch *= a.shape[d];
  }
  int64_t m = transposeA ? a.shape[r - 1] : a.shape[r - 2];
  int64_t k = transposeA ? a.shape[r - 2] : a.shape[r - 1];
  int64_t kb = transposeB ? b.shape[r - 1] : b.shape[r - 2];
  int64_t n = transposeB ? b.shape[r - 2] : b.shape[r - 1];
  if (k != kb || out.shape[r - 2] != m || out.shape[r - 1] != n)
    return mismatch();
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
    return Status::error("matmul: a dimension exceeds the BLAS int range");
  const float *pa = static_cast<const float *>(a.data);
  const float *pb = static_cast<const float *>(b.data);
  float *pc = static_cast<float *>(out.data);
  if (m == 0 || n == 0 || batch == 0)
    return Status::ok();
  if (k == 0) { // an empty sum; BLAS may skip writing C here
    std::memset(pc, 0, size_t(batch * m * n) * sizeof(float));
    return Status::ok();
  }
  int lda = int(transposeA ? m : k), ldb = int(transposeB ? k : n);
  for (int64_t i = 0; i < batch; ++i)
    cblas_sgemm(CblasRowMajor, transposeA ? CblasTrans : CblasNoTrans,
                transposeB ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
                1.0f, pa + i * m * k, lda, pb + i * k * n, ldb, 0.0f,
                pc + i * m * n, int(n));
  return Status::ok();
}

} // namespace mc::rt
