// The oneDNN convolution's choice of activation layout, exposed to the
// runtime's benchmarks and tests (modelc/kernels.h's bindConv2d picks it
// per shape).
#ifndef MODELC_RUNTIME_CPU_DNNLCONV_H
#define MODELC_RUNTIME_CPU_DNNLCONV_H

#include "Parallel.h"
#include "VecMath.h"
#include "modelc/kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mc::rt::detail {

/// Plain: the primitive reads and writes NCHW; Blocked: source and
/// destination are reordered to and from the layout the primitive prefers;
/// Auto: bindConv2d's per-shape choice.
enum class ConvLayout { Auto, Plain, Blocked };

Status bindConv2d(const ConstTensor &input, const ConstTensor &weight,
                  const Conv2dParams &params, const Epilogue &epilogue,
                  const MutTensor &out, bool weightsConstant,
                  ConvLayout layout, BoundKernel *bound,
                  size_t *workspaceBytes);

/// A matmul of bf16 (or f16) operands and result through oneDNN's matmul
/// primitive: f32 accumulation and one rounding of each result, as the
/// reference (widen to f32, multiply, narrow) computes it, in another
/// order of the sum (so not bit for bit; and with oneDNN's AMX kernels its
/// order may depend on the thread count). Bound only where the CPU has
/// instructions for the dtype (AVX512_BF16, AMX; not oneDNN's reference or its
/// emulation, which are slower than the reference): else an error, and the
/// caller widens. Constant weights (`bConstant`) are reordered once, here, into
/// the kernel's layout; the data pointers are captured. oneDNN's scratchpad is
/// the workspace (`workspaceBytes`).
Status bindNarrowMatmul(const ConstTensor &a, const ConstTensor &b, bool transA,
                        bool transB, const MutTensor &out, bool bConstant,
                        BoundKernel *bound, size_t *workspaceBytes);

/// The largest |v| of n floats; inf when one is NaN or inf
/// (vec::maxAbsF32 over 64 chunks, split over the threads for long
/// inputs). The fused convolution's guard reads its source (and bias,
/// residual, weights) with it on every call.
inline float maxAbsOrInf(const float *v, int64_t n) {
  constexpr int64_t kChunks = 64;
  float part[kChunks] = {0};
  int64_t per = (n + kChunks - 1) / kChunks;
  // A bias of a few hundred values is not worth waking the threads.
  parallelFor(kChunks, n < 65536 ? kChunks : 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      int64_t i = c * per, end = std::min(n, (c + 1) * per);
      part[c] = i < end ? vec::maxAbsF32(v + i, end - i) : 0.f;
    }
  });
  float m = 0;
  for (float p : part)
    m = std::max(m, p);
  return m;
}

/// Whether a convolution's sums stay finite, so that oneDNN's fused
/// activation gives the unfused ops' bits: `weightL1` bounds every output
/// channel's sum of |w|, the others are maxAbsOrInf of the source, bias and
/// residual (0 where there is none). False for NaN or inf anywhere, and for
/// finite values whose sums could come within a factor 2 of FLT_MAX: a sum
/// that overflows to +inf in one partial and -inf in another is NaN, which
/// the library's relu or clip would turn into a bound.
inline bool convSumsStayFinite(double weightL1, double maxInput, double maxBias,
                               double maxResidual) {
  double bound = double(std::numeric_limits<float>::max()) / 2;
  return weightL1 * maxInput + maxBias + maxResidual < bound;
}

/// A bound on |conv + bias + residual| as computed in f32, given what
/// convSumsStayFinite takes and the weights per output channel: the exact
/// sum's bound, widened by the rounding of its perChannel + 2 additions
/// (gamma_n = n u / (1 - n u), u = 2^-24) and then doubled; inf when n u is
/// not small.
/// The largest |clamp(v, lo, hi)| over |v| <= bound (clamp as the
/// runtime's: hi everywhere for lo > hi; infinity for a NaN bound): what a
/// clamp or relu6 after a bounded value publishes (ValueBound).
inline double clampBound(double bound, double lo, double hi) {
  if (std::isnan(lo) || std::isnan(hi))
    return std::numeric_limits<double>::infinity();
  double a = std::min(std::max(-bound, lo), hi);
  double b = std::min(std::max(bound, lo), hi);
  return std::max(std::fabs(a), std::fabs(b));
}

inline double convResultBound(double weightL1, double maxInput, double maxBias,
                              double maxResidual, int64_t perChannel) {
  double nu = double(perChannel + 2) * 0x1p-24;
  if (!(nu < 0.01))
    return std::numeric_limits<double>::infinity();
  // Relative error only holds above f32's subnormals: each of the terms
  // may also round up by an absolute half-ulp of the smallest subnormal.
  return (weightL1 * maxInput + maxBias + maxResidual) *
             (1 + 2 * nu / (1 - nu)) +
         double(perChannel + 2) * 0x1p-149;
}

} // namespace mc::rt::detail

#endif // MODELC_RUNTIME_CPU_DNNLCONV_H
