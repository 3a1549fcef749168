// Batched matmul, and the sgemm every kernel calls (detail::sgemm): the
// runtime's thread pool splits the work (along m or n, never k) and each
// thread runs one single-threaded product on its part. A part's shape
// depends on the thread count and the library's kernels and blocking on the
// shape, so the last bits of a product may differ between thread counts
// (same thread count, same bits).
//
// The product: oneDNN's dnnl_sgemm or OpenBLAS's cblas_sgemm, as
// detail::GemmLibrary says (KernelUtil.h; the measurements behind it:
// modelc-gemm-bench, docs/decisions.md).
//
// One pool for everything: OpenBLAS is set to one thread at the first
// kernel call (openblas_set_num_threads(1), process-wide; the pool has
// MODELC_NUM_THREADS / OMP_NUM_THREADS / all cores). With OpenBLAS's own
// threads running next to the pool's, each side's idle threads spin on the
// cores the other needs: on 2 cores, ResNet-18 ran up to 1.7x slower.
// oneDNN runs on OpenMP, as the pool does when the runtime has oneDNN
// (Parallel.cpp): inside a chunk it runs on the calling thread, and
// outside one the caller's OpenMP thread count is 1 for the call.
#include "KernelUtil.h"
#include "modelc/kernels.h"

#include <atomic>
#include <cblas.h>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#ifdef MODELC_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#endif

extern "C" void openblas_set_num_threads(int);

namespace mc::rt {

namespace detail {

namespace {

/// Columns or rows of a split are multiples of this (BLAS micro-tiles).
constexpr int64_t kSplitAlign = 16;
/// Below this many multiply-adds per thread, one thread does it all.
constexpr double kGemmGrainMacs = 1 << 20;
/// What reading one element of B costs, in multiply-adds: a product of few
/// rows streams its weights from memory once and does little arithmetic
/// per element, so its split is decided by the bytes it reads, not by its
/// multiply-adds alone (a 1 x 1024 x 1024 layer: 2^20 multiply-adds, 4 MiB
/// of weights; on two threads it takes 0.6x the time of one).
constexpr double kGemmMacsPerBElement = 3;

void blasSingleThreadedOnce() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

int64_t alignedSplit(int64_t n, int64_t c, int64_t chunks) {
  if (c >= chunks)
    return n;
  int64_t b = (n * c / chunks + kSplitAlign / 2) / kSplitAlign * kSplitAlign;
  return std::min(b, n);
}

#ifdef MODELC_HAVE_DNNL
GemmLibrary initialGemmLibrary() {
  const char *v = std::getenv("MODELC_GEMM");
  if (!v || !*v || std::string(v) == "auto")
    return GemmLibrary::Auto;
  if (std::string(v) == "onednn")
    return GemmLibrary::OneDnn;
  if (std::string(v) == "openblas")
    return GemmLibrary::OpenBlas;
  std::fprintf(stderr,
               "modelc: MODELC_GEMM=%s is not auto, onednn or openblas; "
               "using auto\n",
               v);
  return GemmLibrary::Auto;
}
#else
GemmLibrary initialGemmLibrary() { return GemmLibrary::OpenBlas; }
#endif

std::atomic<GemmLibrary> &gemmChoice() {
  static std::atomic<GemmLibrary> choice{initialGemmLibrary()};
  return choice;
}

} // namespace

GemmLibrary gemmLibrary() {
  return gemmChoice().load(std::memory_order_relaxed);
}

#ifdef MODELC_HAVE_DNNL
bool oneDnnHasAvx512() {
  static const bool avx512 = [] {
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  }();
  return avx512;
}
#else
bool oneDnnHasAvx512() { return false; }
#endif

GemmLibrary gemmLibraryFor(GemmLibrary library, int64_t m, int64_t n,
                           int64_t k) {
  if (library != GemmLibrary::Auto)
    return library;
  if (oneDnnHasAvx512())
    return GemmLibrary::OneDnn;
  return k < kOpenBlasFromK &&
                 double(m) * double(n) * double(k) <= kOneDnnMaxMacs
             ? GemmLibrary::OneDnn
             : GemmLibrary::OpenBlas;
}

namespace {

/// One single-threaded product C = op(A) op(B), row-major, beta 0, through
/// `library` (OneDnn or OpenBlas: a part of a product runs through the
/// whole product's choice).
void gemm1(GemmLibrary library, bool transA, bool transB, int64_t m,
           int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
           int64_t ldb, float *c, int64_t ldc) {
#ifdef MODELC_HAVE_DNNL
  if (library == GemmLibrary::OneDnn) {
    // Outside a parallel region oneDNN would take every OpenMP thread.
    int outer = omp_in_parallel() ? 0 : omp_get_max_threads();
    if (outer > 1)
      omp_set_num_threads(1);
    dnnl_status_t st = dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m,
                                  n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
    if (outer > 1)
      omp_set_num_threads(outer);
    if (st == dnnl_success)
      return;
    // oneDNN could not run it (its scratch allocation failed): the same
    // product through OpenBLAS.
  }
#endif
  blasSingleThreadedOnce();
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), 1.0f,
              a, int(lda), b, int(ldb), 0.0f, c, int(ldc));
}

} // namespace

bool setGemmLibrary(GemmLibrary library) {
#ifndef MODELC_HAVE_DNNL
  if (library != GemmLibrary::OpenBlas)
    return false;
#endif
  gemmChoice().store(library, std::memory_order_relaxed);
  return true;
}

void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           const float *a, int64_t lda, const float *b, int64_t ldb,
           float *c, int64_t ldc) {
  GemmLibrary library = gemmLibraryFor(gemmLibrary(), m, n, k);
  double work = double(m) * double(n) * double(k) +
                kGemmMacsPerBElement * double(n) * double(k);
  int64_t chunks =
      std::min<int64_t>(maxThreads(), int64_t(work / kGemmGrainMacs));
  bool splitN = n >= m;
  int64_t along = splitN ? n : m;
  chunks = std::min<int64_t>(chunks, along / kSplitAlign);
  if (chunks <= 1) {
    gemm1(library, transA, transB, m, n, k, a, lda, b, ldb, c, ldc);
    return;
  }
  parallelFor(chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t t = cb; t < ce; ++t) {
      int64_t lo = alignedSplit(along, t, chunks),
              hi = alignedSplit(along, t + 1, chunks);
      if (hi <= lo)
        continue;
      if (splitN)
        gemm1(library, transA, transB, m, hi - lo, k, a, lda,
              b + (transB ? lo * ldb : lo), ldb, c + lo, ldc);
      else
        gemm1(library, transA, transB, hi - lo, n, k,
              a + (transA ? lo : lo * lda), lda, b, ldb, c + lo * ldc, ldc);
    }
  });
}

} // namespace detail

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
  auto mismatch = [&] {
    return Status::error(
        std::string("matmul: lhs ") + typeString(a.dtype, a.shape) +
        (transposeA ? " (transposed)" : "") + ", rhs " +
        typeString(b.dtype, b.shape) + (transposeB ? " (transposed)" : "") +
        " and result " + typeString(out.dtype, out.shape) +
        " do not agree (expected [..., M, K] x [..., K, N] -> [..., M, N])");
  };
  detail::MatmulDims dims;
  if (!detail::matmulDims(a.shape, b.shape, out.shape, transposeA, transposeB,
                          &dims))
    return mismatch();
  int64_t batch = dims.batch, m = dims.m, n = dims.n, k = dims.k;
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
  int64_t lda = transposeA ? m : k, ldb = transposeB ? k : n;
  if (batch == 1) {
    detail::sgemm(transposeA, transposeB, m, n, k, pa, lda, pb, ldb, pc, n);
    return Status::ok();
  }
  // Batch entries split among threads (each product single-threaded) when
  // each is small; large ones split inside.
  if (double(m) * double(n) * double(k) >= 8.0 * (1 << 20)) {
    for (int64_t i = 0; i < batch; ++i)
      detail::sgemm(transposeA, transposeB, m, n, k, pa + i * m * k, lda,
                    pb + i * k * n, ldb, pc + i * m * n, n);
    return Status::ok();
  }
  detail::GemmLibrary library =
      detail::gemmLibraryFor(detail::gemmLibrary(), m, n, k);
  detail::parallelFor(
      batch,
      std::max<int64_t>(1, int64_t((1 << 20) / std::max(1.0, double(m) * n * k))),
      [&](int64_t b0, int64_t e0) {
        for (int64_t i = b0; i < e0; ++i)
          detail::gemm1(library, transposeA, transposeB, m, n, k,
                        pa + i * m * k, lda, pb + i * k * n, ldb,
                        pc + i * m * n, n);
      });
  return Status::ok();
}

} // namespace mc::rt
