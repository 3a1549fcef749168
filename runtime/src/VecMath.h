// Vectorizable f32 math for the CPU kernels: exp and erf written as
// branch-free polynomials (the compiler vectorizes loops over them, which it
// cannot do with std::exp / std::erf), and the hot row loops of the
// kernels. The loops in VecMath.cpp are compiled for several x86-64 levels
// (AVX-512, AVX2+FMA, baseline) and the best one the CPU has is chosen at
// load time.
//
// Accuracy (checked against std::exp / std::erf / std::tanh over the whole
// float range in test/runtime/KernelsFastPathsTest.cpp): fastExp within 1
// ulp (+1 where FMA contracts), with std::exp's overflow, underflow,
// subnormal, inf and NaN behaviour; fastErf within 1e-7 absolute (2 ulp);
// fastTanh within 1.51 ulp.
#ifndef MODELC_RUNTIME_VECMATH_H
#define MODELC_RUNTIME_VECMATH_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace mc::rt::vec {

namespace detail {
/// e^r for x = n ln 2 + r: returns the polynomial e^r and sets *fn = n
/// (as a float), for a clamped x (no NaN).
inline float expOfReduced(float xc, float *fn) {
  // Round to nearest with the 1.5 * 2^23 trick (vectorizes without SSE4.1).
  const float kShift = 12582912.0f;
  float n = (xc * 1.44269504088896341f + kShift) - kShift;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  // Cephes expf polynomial.
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  *fn = n;
  return p * r * r + r + 1.0f;
}
} // namespace detail

/// exp(x): 2^n * e^r with n = round(x / ln 2), r = x - n ln 2 (ln 2 split in
/// two, Cephes' constants) and a degree-7 polynomial for e^r on [-ln2/2,
/// ln2/2]. The scale 2^n is applied as two exact powers of two, so results
/// in the subnormal range round once, as std::exp's.
inline float fastExp(float x) {
  const float kMax = 89.0f, kMin = -105.0f; // beyond: inf / 0 after scaling
  // Written as min / max (minps, maxps: a NaN x becomes the bound, a
  // finite value; the result is fixed up at the end).
  float xc = x < kMax ? x : kMax;
  xc = xc > kMin ? xc : kMin;
  float fn;
  float p = detail::expOfReduced(xc, &fn);
  int32_t n = int32_t(fn);
  int32_t n1 = n >> 1, n2 = n - n1; // both in [-76, 64]
  float s1 = __builtin_bit_cast(float, uint32_t(n1 + 127) << 23);
  float s2 = __builtin_bit_cast(float, uint32_t(n2 + 127) << 23);
  float y = (p * s1) * s2;
  return x == x ? y : x;
}

/// fastExp(x) for x <= 0, bit for bit (checked over every float <= 0),
/// with less work: no overflow clamp, no NaN fix-up (a NaN x gives a
/// finite value the caller must replace), and 2^n (n >= -151 after the
/// clamp) applied as 2^(n + 25), exact, then 2^-25, which rounds once as
/// fastExp's two scales do. Sigmoid and tanh run on it.
inline float fastExpNonPositive(float x) {
  const float kMin = -105.0f;
  float xc = x > kMin ? x : kMin;
  float fn;
  float p = detail::expOfReduced(xc, &fn);
  int32_t n = int32_t(fn); // in [-151, 0]
  float s = __builtin_bit_cast(float, uint32_t(n + 127 + 25) << 23);
  return (p * s) * 2.98023223876953125e-8f; // 2^-25
}

/// tanh(x), branch-free: below 0.55 in magnitude x + x^3 q(x^2), q a
/// degree-4 polynomial fitted here (weighted least squares toward minimax;
/// its relative error is 1e-9, far below float's), above (1 - e) / (1 + e)
/// with e = fastExp(-2|x|) (no cancellation: e <= 0.33), and 1 from 9 on
/// (tanh rounds to 1 above 8.67); the sign copied from x, so -0 stays -0
/// and a tiny x is its own tanh. Every positive float checked against
/// tanh in double: at most 1.51 ulp off (glibc's tanhf: 2.19).
inline float fastTanh(float x) {
  float a = std::fabs(x);
  float t = a * a;
  float q = -0.006274238275747519f;
  q = q * t + 0.02107167858512632f;
  q = q * t + -0.05385230991449528f;
  q = q * t + 0.1333258613992615f;
  q = q * t + -0.3333331755976866f;
  float small = a + a * t * q;
  float ac = a < 9.0f ? a : 9.0f; // also a NaN's: fixed up below
  float e = fastExpNonPositive(-2.0f * ac);
  float big = (1.0f - e) / (1.0f + e);
  float r = a < 0.55f ? small : big;
  r = x == x ? r : x;
  return std::copysign(r, x);
}

/// erf(x) = x P(x^2) / Q(x^2) on [-4, 4] (+-1 beyond, in float): the
/// rational approximation XLA and Eigen use for f32, evaluated in double
/// (in float its rounding costs up to 7 ulp; in double the result is within
/// 1e-7 absolute, 1.6 ulp, of erf, and x * (P/Q) keeps tiny x exact).
inline float fastErf(float xf) {
  double x = xf > 4.0f ? 4.0f : xf;
  x = x < -4.0 ? -4.0 : x;
  double x2 = x * x;
  double p = -2.72614225801306e-10;
  p = p * x2 + 2.77068142495902e-08;
  p = p * x2 + -2.10102402082508e-06;
  p = p * x2 + -5.69250639462346e-05;
  p = p * x2 + -7.34990630326855e-04;
  p = p * x2 + -2.95459980854025e-03;
  p = p * x2 + -1.60960333262415e-02;
  double q = -1.45660718464996e-05;
  q = q * x2 + -2.13374055278905e-04;
  q = q * x2 + -1.68282697438203e-03;
  q = q * x2 + -7.37332916720468e-03;
  q = q * x2 + -1.42647390514189e-02;
  float y = float(x * (p / q));
  return xf == xf ? y : xf;
}

// Loops over n contiguous floats; y may equal x (in place), never overlap
// it otherwise.
using UnaryF32 = void (*)(const float *x, float *y, int64_t n);
using BinaryF32 = void (*)(const float *a, const float *b, float *y, int64_t n);
void expF32(const float *x, float *y, int64_t n);
void sigmoidF32(const float *x, float *y, int64_t n);
/// x * sigmoid(x) (SiLU, swish) in one pass, bit for bit sigmoidF32 into a
/// buffer s then mulF32(x, s) or mulF32(s, x) (the same: sigmoid returns a
/// NaN as it came).
void siluF32(const float *x, float *y, int64_t n);
void tanhF32(const float *x, float *y, int64_t n);
void erfF32(const float *x, float *y, int64_t n);
void geluF32(const float *x, float *y, int64_t n);     // x * Phi(x), erf form
void geluTanhF32(const float *x, float *y, int64_t n); // PyTorch 'tanh'
void reluF32(const float *x, float *y, int64_t n);
/// -x (the sign bit flipped, NaN too, as the scalar `-x`).
void negF32(const float *x, float *y, int64_t n);
/// sqrt, correctly rounded (vsqrtps); NaN for a negative x, as std::sqrt.
void sqrtF32(const float *x, float *y, int64_t n);
void addF32(const float *a, const float *b, float *y, int64_t n);
void subF32(const float *a, const float *b, float *y, int64_t n);
void mulF32(const float *a, const float *b, float *y, int64_t n);
void divF32(const float *a, const float *b, float *y, int64_t n);
void fillF32(float v, float *y, int64_t n);
/// A comparison cast to f32: y = 1 where `a OP b` holds, else 0 (IEEE: a
/// NaN operand makes every one false but Ne), what compare then cast
/// compute through an i1 buffer.
void eqMaskF32(const float *a, const float *b, float *y, int64_t n);
void neMaskF32(const float *a, const float *b, float *y, int64_t n);
void ltMaskF32(const float *a, const float *b, float *y, int64_t n);
void leMaskF32(const float *a, const float *b, float *y, int64_t n);
void gtMaskF32(const float *a, const float *b, float *y, int64_t n);
void geMaskF32(const float *a, const float *b, float *y, int64_t n);
/// min(max(x, lo), hi) as the clamp kernel defines it: a NaN x stays NaN, a
/// NaN bound is no bound.
void clampF32(const float *x, float lo, float hi, float *y, int64_t n);
/// y = (x - m) * a + b.
void scaleShiftF32(const float *x, float m, float a, float b, float *y,
                   int64_t n);
/// bf16 <-> f32, bit for bit as bf16ToFloat / floatToBf16 (modelc/kernels.h:
/// exact widening; nearest-even narrowing, overflow to inf, a NaN truncated
/// and made quiet), without a call per element.
void bf16ToF32(const uint16_t *h, float *y, int64_t n);
void f32ToBf16(const float *x, uint16_t *h, int64_t n);
/// f16 <-> f32, bit for bit as halfToFloat / floatToHalf (exact widening;
/// nearest-even narrowing with subnormals, overflow to inf, a NaN's top
/// payload bits kept and made quiet), branch-free.
void f16ToF32(const uint16_t *h, float *y, int64_t n);
void f32ToF16(const float *x, uint16_t *h, int64_t n);

/// Column reductions over `rows` rows of n contiguous floats, row j at
/// x + j * stride: acc[k] combined with x[j * stride + k] for j in order,
/// so each acc[k] sees its values in the order a scalar loop would (the n
/// columns advance together in vector lanes). Sum: acc[k] += double(v).
/// Max / min: a NaN, once taken, stays (acc[k] is NaN or v is NaN and
/// acc[k] is not: the first NaN in row order is the result), as the
/// reduce kernels' scalar steps.
void sumRowsF64(const float *x, int64_t rows, int64_t stride, int64_t n,
                double *acc);
/// lanes[k % kSumLanes] += double(x[k]) for k in [0, n): a contiguous run
/// of a long sum in kSumLanes independent double accumulators (a fixed
/// order, so the same bits on every run), combined by sumOfLanesF64.
constexpr int kSumLanes = 32;
void sumLanesF64(const float *x, int64_t n, double *lanes);
/// The lanes of sumLanesF64 summed pairwise, in a fixed order.
double sumOfLanesF64(const double *lanes);
void maxRowsF32(const float *x, int64_t rows, int64_t stride, int64_t n,
                float *acc);
/// The largest |x[i]| of n floats, or infinity when one is NaN or inf (a
/// run-time ValueBound measured on a result still in cache).
float maxAbsF32(const float *x, int64_t n);
void minRowsF32(const float *x, int64_t rows, int64_t stride, int64_t n,
                float *acc);

/// One row of softmax / log_softmax (contiguous, n >= 1): max subtracted; a
/// NaN anywhere makes the row NaN. The sum of exponentials is accumulated in
/// 16 float lanes combined pairwise (the same order on every run). A row that
/// fits in cache (up to 64 Ki floats) takes three passes over it (max, exp
/// and sum, scale); a longer softmax row takes two (online softmax: the max
/// and the rescaled sum together, then the output).
void softmaxRow(const float *x, float *y, int64_t n);
void logSoftmaxRow(const float *x, float *y, int64_t n);
/// One row of layer norm: mean and biased variance of x (double lanes), y =
/// (x - mean) * rstd * g + b.
void layerNormRow(const float *x, const float *g, const float *b, float *y,
                  int64_t n, double epsilon);

} // namespace mc::rt::vec

#endif // MODELC_RUNTIME_VECMATH_H
