// Helpers shared by the kernel files: error messages and shape checks that
// never allocate on success (run() must not allocate).
#ifndef MODELC_RUNTIME_KERNELUTIL_H
#define MODELC_RUNTIME_KERNELUTIL_H

#include "Parallel.h"
#include "VecMath.h"
#include "modelc/device.h"
#include "modelc/kernels.h"
#include "modelc/runtime.h"

#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace mc::rt::detail {

/// The vectorized loop the unary kernel runs for `op` over contiguous f32
/// (VecMath.h) and its parallelFor grain; fn is null for ops without one.
/// Shared with the fused kernel's tiles, so fused and unfused compute the
/// same bits.
struct UnaryF32Loop {
  vec::UnaryF32 fn = nullptr;
  int64_t grain = 0;
};
UnaryF32Loop unaryF32Loop(OpId op, bool tanhApproximation);
/// The binary kernel's loop for `op` over same-shape f32, or null.
vec::BinaryF32 binaryF32Loop(OpId op);
/// compare(direction) then cast to f32, as one loop writing 1 or 0 (the
/// compare kernel's IEEE results, the cast's values); null for a direction
/// out of range.
vec::BinaryF32 compareMaskF32Loop(int64_t direction);

/// A matmul's [..., M, K] x [..., K, N] -> [..., M, N] (each operand
/// possibly transposed in its last two dims): the product of the batch
/// dims and M, N, K; false when the shapes do not agree.
struct MatmulDims {
  int64_t batch = 1, m = 0, n = 0, k = 0;
};
inline bool matmulDims(const Shape &a, const Shape &b, const Shape &out,
                       bool transA, bool transB, MatmulDims *d) {
  size_t r = a.size();
  if (r < 2 || b.size() != r || out.size() != r)
    return false;
  d->batch = 1;
  for (size_t i = 0; i + 2 < r; ++i) {
    if (a[i] != b[i] || a[i] != out[i])
      return false;
    d->batch *= a[i];
  }
  d->m = transA ? a[r - 1] : a[r - 2];
  d->k = transA ? a[r - 2] : a[r - 1];
  int64_t kb = transB ? b[r - 1] : b[r - 2];
  d->n = transB ? b[r - 2] : b[r - 1];
  return d->k == kb && out[r - 2] == d->m && out[r - 1] == d->n;
}

/// Strided kernels index with fixed arrays of this size (no allocation).
inline constexpr int kMaxRank = MC_MAX_RANK;

/// How errors name an all-reduce step: "all_reduce of plan step 12 at
/// loc(...) (68904 bytes)".
inline std::string allReduceName(const KernelRequest &r) {
  std::string where = r.location.empty() ? "" : " at " + r.location;
  return "all_reduce of plan step " + std::to_string(r.stepIndex) + where +
         " (" + std::to_string(numElements(r.output.shape) * 4) + " bytes)";
}

inline std::string typeString(DType t, const Shape &s) {
  return std::string(dtypeName(t)) + shapeString(s);
}

inline Status unsupportedDType(const char *op, DType t, const char *supported) {
  return Status::error(std::string(op) + ": unsupported dtype " + dtypeName(t) +
                       " (supported: " + supported + ")");
}

inline Status checkRank(const char *op, const char *what, const Shape &s) {
  if (s.size() > size_t(kMaxRank))
    return Status::error(std::string(op) + ": " + what + " has rank " +
                         std::to_string(s.size()) + ", more than the " +
                         std::to_string(kMaxRank) + " the kernels support");
  for (int64_t d : s)
    if (d < 0)
      return Status::error(std::string(op) + ": " + what + " has shape " +
                           shapeString(s) + " with a negative dimension");
  return Status::ok();
}

/// Row-major strides of `s` into `strides` (s.size() <= kMaxRank).
inline void contiguousStrides(const Shape &s, int64_t *strides) {
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    strides[i] = acc;
    acc *= s[i];
  }
}

/// Normalizes `axis` in [-rank, rank) to [0, rank); false when out of range.
inline bool normalizeAxis(int64_t &axis, size_t rank) {
  int64_t r = int64_t(rank);
  if (axis < 0)
    axis += r;
  return axis >= 0 && axis < r;
}

inline Status sameTypeAndShape(const char *op, const char *what, DType at,
                               const Shape &as, DType bt, const Shape &bs) {
  if (at == bt && as == bs)
    return Status::ok();
  return Status::error(std::string(op) + ": " + what + " " +
                       typeString(bt, bs) + " does not match operand " +
                       typeString(at, as));
}

/// Walks a multi-index over `rank` dims with given strides, tracking the
/// linear offset; no allocation.
struct Odometer {
  int rank = 0;
  int64_t shape[kMaxRank], stride[kMaxRank], idx[kMaxRank];
  int64_t offset = 0;
  /// Appends a dim, the innermost so far. A size-1 dim is dropped, and one
  /// contiguous with the last (its stride times its size is the last one's
  /// stride, broadcast runs of stride 0 too) merges into it: the walk's
  /// order and offsets stay the same, in fewer, longer dims.
  void push(int64_t size, int64_t step) {
    if (size == 1)
      return;
    if (rank > 0 && stride[rank - 1] == step * size) {
      shape[rank - 1] *= size;
      stride[rank - 1] = step;
      return;
    }
    shape[rank] = size;
    stride[rank] = step;
    ++rank;
  }
  void reset() {
    offset = 0;
    for (int d = 0; d < rank; ++d)
      idx[d] = 0;
  }
  /// To the `linear`-th position (row-major).
  void seek(int64_t linear) {
    offset = 0;
    for (int d = rank - 1; d >= 0; --d) {
      idx[d] = shape[d] ? linear % shape[d] : 0;
      linear = shape[d] ? linear / shape[d] : 0;
      offset += idx[d] * stride[d];
    }
  }
  void next() {
    for (int d = rank - 1; d >= 0; --d) {
      offset += stride[d];
      if (++idx[d] < shape[d])
        return;
      offset -= stride[d] * shape[d];
      idx[d] = 0;
    }
  }
  /// The outer `dims` dims alone (the rows of the rest).
  Odometer outer(int dims) const {
    Odometer o;
    o.rank = dims;
    for (int d = 0; d < dims; ++d) {
      o.shape[d] = shape[d];
      o.stride[d] = stride[d];
    }
    return o;
  }
};

/// `shape` with `stride` pushed into `dims` (merged, size-1 dims
/// dropped); returns the element count (0: nothing to walk).
inline int64_t mergedDims(const Shape &shape, const int64_t *stride,
                          Odometer *dims) {
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    n *= shape[d];
    dims->push(shape[d], stride[d]);
  }
  return n;
}

/// Calls row(r, offset) for each of the `rows` rows of `dims` (its last
/// dim is a row, `offset` where row r starts), the rows split among
/// threads in contiguous ranges.
template <typename Row>
void forEachRow(const Odometer &dims, int64_t rows, Row row) {
  int64_t inner = dims.shape[dims.rank - 1];
  parallelFor(rows, std::max<int64_t>(1, kParallelGrain / inner),
              [&](int64_t rb, int64_t re) {
                Odometer o = dims.outer(dims.rank - 1);
                o.seek(rb);
                for (int64_t r = rb; r < re; ++r, o.next())
                  row(r, o.offset);
              });
}

/// out[i_0..i_{r-1}] = src[sum_d i_d * stride[d]] over out's shape (src may
/// point into the middle of a tensor: slices). Dims that are contiguous in
/// both (including runs of broadcast dims, stride 0) are merged first, so
/// the inner loop is a memcpy, a fill or one strided row as long as it can
/// be; rows are split among threads when there are many.
template <typename T>
void stridedCopy(const Shape &shape, const int64_t *stride, const T *src,
                 T *dst) {
  Odometer dims;
  int64_t n = mergedDims(shape, stride, &dims);
  if (n == 0)
    return;
  int m = dims.rank;
  if (m == 0) {
    dst[0] = src[0];
    return;
  }
  const int64_t *sh = dims.shape, *st = dims.stride;
  int64_t inner = sh[m - 1], innerStride = st[m - 1], rows = n / inner;
  if (m >= 2 && st[m - 2] == 1 && inner <= 16 && innerStride != 0) {
    // A transpose to a short last dim (NCHW -> NHWC of an RGB image): the
    // source's contiguous dim is the row dim. Per block of rows, read each
    // of the `inner` source runs along it (contiguous) and write them
    // interleaved, instead of one `inner`-element row per loop trip.
    constexpr int64_t kBlock = 512;
    int64_t len = sh[m - 2], blocks = (len + kBlock - 1) / kBlock,
            outer = rows / len;
    parallelFor(outer * blocks,
                std::max<int64_t>(1, kParallelGrain / (kBlock * inner)),
                [&](int64_t tb, int64_t te) {
                  Odometer base = dims.outer(m - 2);
                  for (int64_t t = tb; t < te; ++t) {
                    int64_t o = t / blocks, i0 = t % blocks * kBlock;
                    int64_t cnt = std::min(kBlock, len - i0);
                    base.seek(o);
                    const T *s = src + base.offset + i0;
                    T *out = dst + (o * len + i0) * inner;
                    for (int64_t j = 0; j < inner; ++j)
                      for (int64_t i = 0; i < cnt; ++i)
                        out[i * inner + j] = s[j * innerStride + i];
                  }
                });
    return;
  }
  if (innerStride == 1 && m >= 3 && inner * int64_t(sizeof(T)) <= 64 &&
      st[m - 3] < st[m - 2]) {
    // A transpose of two dims over short contiguous runs (a weight's
    // [O, I, 3, 3] -> [I, O, 3, 3]): the row order reads each source run
    // a whole dim apart. In tiles of kTile x kTile runs, both the reads
    // and the writes stay within a few kilobytes.
    constexpr int64_t kTile = 16;
    int64_t A = sh[m - 3], Bn = sh[m - 2], sa = st[m - 3], sb = st[m - 2];
    int64_t ta = (A + kTile - 1) / kTile, tb = (Bn + kTile - 1) / kTile;
    int64_t outer = rows / (A * Bn);
    parallelFor(outer * ta * tb,
                std::max<int64_t>(1, kParallelGrain / (kTile * kTile * inner)),
                [&](int64_t b0, int64_t b1) {
                  Odometer base = dims.outer(m - 3);
                  for (int64_t t = b0; t < b1; ++t) {
                    int64_t o = t / (ta * tb), a0 = t / tb % ta * kTile,
                            c0 = t % tb * kTile;
                    base.seek(o);
                    int64_t a1 = std::min(A, a0 + kTile),
                            c1 = std::min(Bn, c0 + kTile);
                    // Runs of a constant length copy without a loop (a 3x3
                    // window).
                    auto tile = [&](auto len) {
                      constexpr int64_t kLen = decltype(len)::value;
                      int64_t n = kLen ? kLen : inner;
                      for (int64_t a = a0; a < a1; ++a)
                        for (int64_t c = c0; c < c1; ++c) {
                          const T *s = src + base.offset + a * sa + c * sb;
                          T *out = dst + ((o * A + a) * Bn + c) * n;
                          for (int64_t j = 0; j < n; ++j)
                            out[j] = s[j];
                        }
                    };
                    if (inner == 9)
                      tile(std::integral_constant<int64_t, 9>());
                    else
                      tile(std::integral_constant<int64_t, 0>());
                  }
                });
    return;
  }
  forEachRow(dims, rows, [&](int64_t row, int64_t offset) {
    const T *s = src + offset;
    T *o = dst + row * inner;
    if (innerStride == 1) {
      std::memcpy(o, s, size_t(inner) * sizeof(T));
    } else if (innerStride == 0) {
      T v = s[0];
      for (int64_t j = 0; j < inner; ++j)
        o[j] = v;
    } else {
      for (int64_t j = 0; j < inner; ++j)
        o[j] = s[j * innerStride];
    }
  });
}

/// dst[sum_d i_d * stride[d]] = src[i] over `shape`, src contiguous (the
/// inverse of stridedCopy: a pad's interior, a zero insertion), with the
/// same merged dims and rows among threads.
template <typename T>
void stridedScatter(const Shape &shape, const int64_t *stride, const T *src,
                    T *dst) {
  Odometer dims;
  int64_t n = mergedDims(shape, stride, &dims);
  if (n == 0)
    return;
  int m = dims.rank;
  if (m == 0) {
    dst[0] = src[0];
    return;
  }
  int64_t inner = dims.shape[m - 1], innerStride = dims.stride[m - 1];
  forEachRow(dims, n / inner, [&](int64_t row, int64_t offset) {
    const T *s = src + row * inner;
    T *o = dst + offset;
    if (innerStride == 1)
      std::memcpy(o, s, size_t(inner) * sizeof(T));
    else
      for (int64_t j = 0; j < inner; ++j)
        o[j * innerStride] = s[j];
  });
}

/// stridedCopy by element size; `srcOffset` is in elements.
inline Status stridedCopyAny(const char *op, DType t, const Shape &shape,
                             const int64_t *stride, const void *src,
                             int64_t srcOffset, void *dst) {
  switch (dtypeSize(t)) {
  case 1:
    stridedCopy(shape, stride, static_cast<const uint8_t *>(src) + srcOffset,
                static_cast<uint8_t *>(dst));
    return Status::ok();
  case 2:
    stridedCopy(shape, stride, static_cast<const uint16_t *>(src) + srcOffset,
                static_cast<uint16_t *>(dst));
    return Status::ok();
  case 4:
    stridedCopy(shape, stride, static_cast<const uint32_t *>(src) + srcOffset,
                static_cast<uint32_t *>(dst));
    return Status::ok();
  case 8:
    stridedCopy(shape, stride, static_cast<const uint64_t *>(src) + srcOffset,
                static_cast<uint64_t *>(dst));
    return Status::ok();
  }
  return Status::error(std::string(op) + ": invalid dtype " +
                       std::to_string(int(t)));
}

/// C [m, n] = op(A) op(B), row-major, f32 (beta 0): split among the pool's
/// threads along the larger of m and n (in multiples of 16), each part one
/// single-threaded product (oneDNN's sgemm where the runtime has oneDNN,
/// else OpenBLAS's; see KernelsLinalg.cpp). Dims fit in int.
void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           const float *a, int64_t lda, const float *b, int64_t ldb,
           float *c, int64_t ldc);
/// The library behind sgemm. Auto, the default where the runtime has
/// oneDNN: oneDNN's for every product where oneDNN runs AVX-512 kernels
/// (oneDnnHasAvx512; modelc-gemm-bench on an AVX-512 EPYC: oneDNN 1.7-5x
/// faster than OpenBLAS on every product; against OpenBLAS's own AVX-512
/// kernels 0.41-0.92 of the time, all but three small products below
/// 0.92); on other hosts oneDNN's for products with k below
/// kOpenBlasFromK and at most kOneDnnMaxMacs multiply-adds, OpenBLAS's
/// otherwise (on an AVX2 EPYC: oneDNN 1.1-1.6x faster on the transformer's,
/// attention's and the MLPs' products, 5x on one row; OpenBLAS 2-20% faster
/// on products of 2^28 and more, and 1.5x in a training step on a
/// [64, 1024] x [1024, 1024] product whose weight comes in cold).
/// MODELC_GEMM=auto|onednn|openblas (read once) picks one. Without oneDNN,
/// always OpenBLAS.
enum class GemmLibrary { Auto, OneDnn, OpenBlas };
inline constexpr double kOneDnnMaxMacs = double(int64_t(1) << 27);
inline constexpr int64_t kOpenBlasFromK = 1024;
GemmLibrary gemmLibrary();
/// Whether the runtime's oneDNN runs AVX-512 kernels on this host (its
/// effective ISA includes avx512_core); false without oneDNN.
bool oneDnnHasAvx512();
/// The library that runs one [m, k] x [k, n] product under `library`.
GemmLibrary gemmLibraryFor(GemmLibrary library, int64_t m, int64_t n,
                           int64_t k);
/// Picks the library from now on (benchmarks and tests compare them);
/// false, and no change, where the runtime lacks it.
bool setGemmLibrary(GemmLibrary library);

//===--- f16 / bf16 through f32 ---===//
//
// Every float kernel accepts f16 and bf16 by widening its float operands to
// f32 (exact), running the f32 kernel, and rounding the f32 result once to
// the narrow type (nearest even). So an f16/bf16 result is, by definition,
// the f32 kernel's result on the same (widened) inputs, rounded once.
// Convolutions and matmuls may instead run oneDNN's bf16 / f16 kernels
// where the CPU has the instructions (cpu/DnnlConv.h): exact products
// summed in f32 and rounded once as well, in the library's order of the
// sum: within an ulp of the narrow type, plus the f32 roundings of the two
// orders of the sum, of the widening path.

inline bool isNarrowFloat(DType t) {
  return t == DType::F16 || t == DType::BF16;
}

/// f16/bf16 <-> f32 of n elements (round to nearest even when narrowing).
void widenToF32(DType t, const void *src, float *dst, int64_t n);
void narrowFromF32(DType t, const float *src, void *dst, int64_t n);

/// Per-thread f32 copies of a kernel's operands and result. They grow on
/// first use and are reused after, so a session's run() allocates only the
/// first time a thread runs a narrow-float step of a given size.
inline constexpr int kMaxStaged = 6;
struct NarrowStaging {
  ConstTensor in[kMaxStaged];
  MutTensor out{DType::F32, {}, nullptr};
  std::vector<float> buf[kMaxStaged + 1];
};
NarrowStaging &narrowStaging();

/// When any of `ins` (N <= kMaxStaged) or `out` is f16 or bf16: sets
/// *handled, runs `kernel(const ConstTensor *in, const MutTensor &out)` on
/// f32 copies of every tensor of that dtype (others, e.g. i32 indices or an
/// i1 result, pass through) and rounds the result back into `out`. Mixing
/// f16 or bf16 with another float dtype is an error naming both. Otherwise
/// leaves *handled false and returns ok: the caller runs its own code.
template <size_t N, typename F>
Status viaF32(const char *op, const ConstTensor *const (&ins)[N],
              const MutTensor &out, bool *handled, F kernel) {
  static_assert(N <= size_t(kMaxStaged), "too many operands to stage");
  *handled = false;
  DType narrow = DType::F32;
  bool found = false, wide = false;
  auto see = [&](DType t) -> Status {
    if (isNarrowFloat(t)) {
      if (found && t != narrow)
        return Status::error(std::string(op) + ": operands mix " +
                             dtypeName(narrow) + " and " + dtypeName(t));
      narrow = t;
      found = true;
    }
    wide |= t == DType::F32;
    return Status::ok();
  };
  for (const ConstTensor *t : ins)
    MC_RETURN_IF_ERROR(see(t->dtype));
  MC_RETURN_IF_ERROR(see(out.dtype));
  if (!found)
    return Status::ok();
  *handled = true;
  if (wide)
    return Status::error(std::string(op) + ": operands mix " +
                         dtypeName(narrow) + " and f32 (one float dtype per "
                         "op; convert with a cast)");
  auto count = [&](const Shape &s, int64_t *n) -> Status {
    MC_RETURN_IF_ERROR(checkRank(op, "operand", s));
    *n = numElements(s);
    return Status::ok();
  };
  NarrowStaging &st = narrowStaging();
  for (size_t i = 0; i < N; ++i) {
    st.in[i] = *ins[i];
    if (ins[i]->dtype != narrow)
      continue;
    int64_t n = 0;
    MC_RETURN_IF_ERROR(count(ins[i]->shape, &n));
    st.buf[i].resize(size_t(n));
    widenToF32(narrow, ins[i]->data, st.buf[i].data(), n);
    st.in[i].dtype = DType::F32;
    st.in[i].data = st.buf[i].data();
  }
  st.out = out;
  int64_t nOut = 0;
  if (out.dtype == narrow) {
    MC_RETURN_IF_ERROR(count(out.shape, &nOut));
    st.buf[N].resize(size_t(nOut));
    st.out.dtype = DType::F32;
    st.out.data = st.buf[N].data();
  }
  MC_RETURN_IF_ERROR(kernel(static_cast<const ConstTensor *>(st.in), st.out));
  if (out.dtype == narrow)
    narrowFromF32(narrow, st.buf[N].data(), out.data, nOut);
  return Status::ok();
}

} // namespace mc::rt::detail

#endif // MODELC_RUNTIME_KERNELUTIL_H
