// The hot loops of the f32 kernels, each compiled for AVX-512, AVX2+FMA and
// the x86-64 baseline (GCC/Clang target_clones: the loader picks the best
// the CPU has). Plain loops over contiguous floats that the compiler
// vectorizes; reductions keep explicit lanes so their order is fixed.
#include "VecMath.h"

#include <cmath>
#include <cstring>
#include <limits>

#if defined(__x86_64__) && defined(__ELF__) &&                                  \
    (defined(__GNUC__) || defined(__clang__)) && !defined(__SANITIZE_ADDRESS__)
#define MC_CLONES                                                              \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MC_CLONES
#endif

namespace mc::rt::vec {

namespace {

constexpr int kLanes = 16;

/// Sum of kLanes partial sums, pairwise (a fixed order).
template <typename T> T sumLanes(T *acc) {
  for (int w = kLanes / 2; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i)
      acc[i] += acc[i + w];
  return acc[0];
}

/// Eight floats: GCC / Clang vector extensions, which each target clone
/// compiles to its own registers (two SSE halves on the baseline). Used
/// where the plain-loop form does not vectorize.
typedef float Float8 __attribute__((vector_size(32)));

typedef float Float4 __attribute__((vector_size(16)));
typedef double Double4 __attribute__((vector_size(32)));

/// sumLanes over sixteen float lanes held as two vectors of eight.
inline float sumLanes8(Float8 a, Float8 b) {
  a += b;
  return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

/// sumLanes over sixteen double lanes held as four vectors of four.
inline double sumLanes4(Double4 *v) {
  Double4 a = v[0] + v[2], b = v[1] + v[3];
  a += b;
  return (a[0] + a[2]) + (a[1] + a[3]);
}

/// Max of x[0, n) and whether any is NaN, in two vectors of lanes (a NaN,
/// once taken, stays: nothing compares above it).
inline float rowMax(const float *x, int64_t n, bool *nan) {
  const float kNegInf = -std::numeric_limits<float>::infinity();
  Float8 m0 = {kNegInf, kNegInf, kNegInf, kNegInf,
               kNegInf, kNegInf, kNegInf, kNegInf};
  Float8 m1 = m0;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    Float8 a, b;
    std::memcpy(&a, x + j, sizeof a);
    std::memcpy(&b, x + j + 8, sizeof b);
    m0 = ((a > m0) | (a != a)) ? a : m0;
    m1 = ((b > m1) | (b != b)) ? b : m1;
  }
  float r = kNegInf;
  bool anyNan = false;
  for (int i = 0; i < 8; ++i) {
    anyNan |= (m0[i] != m0[i]) | (m1[i] != m1[i]);
    r = m0[i] > r ? m0[i] : r;
    r = m1[i] > r ? m1[i] : r;
  }
  for (; j < n; ++j) {
    float v = x[j];
    anyNan |= v != v;
    r = v > r ? v : r;
  }
  *nan = anyNan;
  return r;
}

} // namespace

MC_CLONES void expF32(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = fastExp(x[i]);
}

namespace {
/// e = exp(-|x|) never overflows; 1 / (1 + e) for x >= 0, e / (1 + e)
/// below (keeps tiny results, subnormal ones included). A NaN is returned
/// as it came (its sign too), so x * sigmoid(x) keeps x's NaN whichever
/// operand the multiply takes first.
inline float sigmoidOf(float v) {
  float e = fastExpNonPositive(v < 0.0f ? v : -v);
  float num = v < 0.0f ? e : 1.0f;
  float s = num / (1.0f + e);
  return v == v ? s : v;
}
} // namespace

MC_CLONES void sigmoidF32(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = sigmoidOf(x[i]);
}

MC_CLONES void siluF32(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    float s = sigmoidOf(v);
    y[i] = v * s;
  }
}

MC_CLONES void tanhF32(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = fastTanh(x[i]);
}

MC_CLONES void erfF32(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = fastErf(x[i]);
}

MC_CLONES void geluF32(const float *x, float *y, int64_t n) {
  // x * Phi(x), Phi(x) = 0.5 * erfc(-x / sqrt(2)). 1 + erf(x) cancels for
  // x < 0, so Phi comes from erfc(|x| / sqrt(2)) (Numerical Recipes' erfcc,
  // relative error below 1.2e-7 everywhere): 0.5 erfc below 0, 1 - 0.5 erfc
  // above.
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    float z = std::fabs(v) * float(M_SQRT1_2);
    float t = 1.0f / (1.0f + 0.5f * z);
    float p = 0.17087277f;
    p = p * t + -0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t + -1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t + -0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t + -1.26551223f;
    float erfc = t * fastExp(p - z * z);
    float phi = v >= 0.0f ? 1.0f - 0.5f * erfc : 0.5f * erfc;
    y[i] = v * phi;
  }
}

MC_CLONES void geluTanhF32(const float *x, float *y, int64_t n) {
  // 0.5 x (1 + tanh(u)) == x / (1 + exp(-2u)); exp overflowing to inf
  // gives -0.
  const float kBeta = float(M_SQRT2 * M_2_SQRTPI * 0.5); // sqrt(2/pi)
  const float kKappa = 0.044715f;
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    float inner = kBeta * (v + kKappa * v * v * v);
    y[i] = v / (1.0f + fastExp(-2.0f * inner));
  }
}

MC_CLONES void reluF32(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) // NaN stays NaN
    y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

MC_CLONES float maxAbsF32(const float *x, int64_t n) {
  // Sixteen lanes: the maximum, and a sum of x * 0, which is 0 unless some
  // x is NaN or inf (then NaN).
  constexpr int64_t kLanes = 16;
  float m[kLanes] = {0}, z[kLanes] = {0};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t k = 0; k < kLanes; ++k) {
      float a = std::fabs(x[i + k]);
      m[k] = a > m[k] ? a : m[k];
      z[k] += x[i + k] * 0.0f;
    }
  for (; i < n; ++i) {
    float a = std::fabs(x[i]);
    m[0] = a > m[0] ? a : m[0];
    z[0] += x[i] * 0.0f;
  }
  float most = 0, zero = 0;
  for (int64_t k = 0; k < kLanes; ++k) {
    most = m[k] > most ? m[k] : most;
    zero += z[k];
  }
  return zero == 0 ? most : INFINITY;
}

MC_CLONES void sqrtF32(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = std::sqrt(x[i]);
}

MC_CLONES void addF32(const float *a, const float *b, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = a[i] + b[i];
}

MC_CLONES void subF32(const float *a, const float *b, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = a[i] - b[i];
}

MC_CLONES void mulF32(const float *a, const float *b, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = a[i] * b[i];
}

MC_CLONES void divF32(const float *a, const float *b, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = a[i] / b[i];
}

MC_CLONES void clampF32(const float *x, float lo, float hi, float *y,
                        int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] < lo ? lo : x[i];
    y[i] = v > hi ? hi : v;
  }
}

MC_CLONES void negF32(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = -x[i];
}

#define MC_MASK_LOOP(NAME, OP)                                                 \
  MC_CLONES void NAME(const float *a, const float *b, float *y, int64_t n) {   \
    for (int64_t i = 0; i < n; ++i)                                            \
      y[i] = a[i] OP b[i] ? 1.0f : 0.0f;                                       \
  }
MC_MASK_LOOP(eqMaskF32, ==)
MC_MASK_LOOP(neMaskF32, !=)
MC_MASK_LOOP(ltMaskF32, <)
MC_MASK_LOOP(leMaskF32, <=)
MC_MASK_LOOP(gtMaskF32, >)
MC_MASK_LOOP(geMaskF32, >=)
#undef MC_MASK_LOOP

MC_CLONES void fillF32(float v, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = v;
}

MC_CLONES void sumRowsF64(const float *x, int64_t rows, int64_t stride,
                          int64_t n, double *acc) {
  for (int64_t j = 0; j < rows; ++j) {
    const float *p = x + j * stride;
    for (int64_t k = 0; k < n; ++k)
      acc[k] += double(p[k]);
  }
}

MC_CLONES void sumLanesF64(const float *x, int64_t n, double *lanes) {
  double acc[kSumLanes];
  for (int l = 0; l < kSumLanes; ++l)
    acc[l] = lanes[l];
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes)
    for (int l = 0; l < kSumLanes; ++l)
      acc[l] += double(x[i + l]);
  for (int l = 0; i + l < n; ++l)
    acc[l] += double(x[i + l]);
  for (int l = 0; l < kSumLanes; ++l)
    lanes[l] = acc[l];
}

double sumOfLanesF64(const double *lanes) {
  double acc[kSumLanes];
  for (int l = 0; l < kSumLanes; ++l)
    acc[l] = lanes[l];
  for (int w = kSumLanes / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l)
      acc[l] += acc[l + w];
  return acc[0];
}

#define MC_EXTREME_ROWS(NAME, OP)                                              \
  MC_CLONES void NAME(const float *x, int64_t rows, int64_t stride, int64_t n, \
                      float *acc) {                                            \
    for (int64_t j = 0; j < rows; ++j) {                                       \
      const float *p = x + j * stride;                                         \
      for (int64_t k = 0; k < n; ++k) {                                        \
        float m = acc[k], v = p[k];                                            \
        acc[k] = (m != m || m OP v) ? m : v;                                   \
      }                                                                        \
    }                                                                          \
  }
MC_EXTREME_ROWS(maxRowsF32, >=)
MC_EXTREME_ROWS(minRowsF32, <=)
#undef MC_EXTREME_ROWS

MC_CLONES void scaleShiftF32(const float *x, float m, float a, float b,
                             float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = (x[i] - m) * a + b;
}

MC_CLONES void bf16ToF32(const uint16_t *h, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b = uint32_t(h[i]) << 16;
    std::memcpy(y + i, &b, sizeof b);
  }
}

MC_CLONES void f32ToBf16(const float *x, uint16_t *h, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, x + i, sizeof b);
    uint32_t rounded = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
    uint32_t quietNan = (b >> 16) | 0x0040u;
    h[i] = uint16_t((b & 0x7fffffffu) > 0x7f800000u ? quietNan : rounded);
  }
}

MC_CLONES void f16ToF32(const uint16_t *h, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t v = h[i];
    uint32_t sign = (v & 0x8000u) << 16;
    uint32_t exp = (v >> 10) & 0x1fu;
    uint32_t mant = v & 0x3ffu;
    // Zero or subnormal: mant * 2^-24, exact in f32.
    float sub = float(int32_t(mant)) * 5.9604644775390625e-08f;
    uint32_t subBits;
    std::memcpy(&subBits, &sub, sizeof subBits);
    uint32_t special = 0x7f800000u | (mant << 13); // inf, NaN (payload kept)
    uint32_t normal = ((exp + 112) << 23) | (mant << 13);
    uint32_t bits = exp == 0 ? subBits : exp == 31 ? special : normal;
    bits |= sign;
    std::memcpy(y + i, &bits, sizeof bits);
  }
}

MC_CLONES void f32ToF16(const float *x, uint16_t *h, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, x + i, sizeof b);
    uint32_t sign = (b >> 16) & 0x8000u;
    uint32_t a = b & 0x7fffffffu;
    // Normal: rebias the exponent and round the 13 dropped bits to nearest
    // even (a carry out of the mantissa bumps the exponent).
    uint32_t normal = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
    // Below 2^-14: align the 10 mantissa bits at the bottom of a float by
    // adding 2^-1 (0.5 = 2^(-14-10+23)): the float add rounds to nearest
    // even, and the low bits are the subnormal half (or the smallest
    // normal, when it carries), values up to 2^-25 giving zero.
    float af;
    std::memcpy(&af, &a, sizeof af);
    float aligned = af + 0.5f;
    uint32_t alignedBits;
    std::memcpy(&alignedBits, &aligned, sizeof alignedBits);
    uint32_t sub = alignedBits - 0x3f000000u;
    uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
    uint32_t r = a > 0x7f800000u   ? nan
                 : a >= 0x477ff000u ? 0x7c00u // >= 65520, inf: inf
                 : a < 0x38800000u  ? sub
                                    : normal;
    h[i] = uint16_t(sign | r);
  }
}

/// Rows longer than this (floats) do not stay in a core's cache between
/// passes: softmax reads them twice (online), not three times.
constexpr int64_t kOnlineSoftmaxRow = 64 * 1024;

/// Online softmax (Milakov and Gimelshein, 2018): one pass keeps, per lane,
/// a running max and the sum of exp(x - max) rescaled whenever the max
/// grows; the lanes are merged; a second pass writes exp(x - max) / sum.
MC_CLONES void softmaxRowOnline(const float *x, float *y, int64_t n) {
  float m[kLanes], s[kLanes];
  for (int i = 0; i < kLanes; ++i) {
    m[i] = -std::numeric_limits<float>::infinity();
    s[i] = 0.0f;
  }
  bool nan = false;
  auto step = [&](int i, float v) {
    if (std::isnan(v)) {
      nan = true;
    } else if (v > m[i]) {
      // -inf -> v: the old sum (of nothing) is 0 either way.
      s[i] = (m[i] == -std::numeric_limits<float>::infinity()
                  ? 0.0f
                  : s[i] * fastExp(m[i] - v)) +
             1.0f;
      m[i] = v;
    } else if (v != -std::numeric_limits<float>::infinity()) {
      s[i] += fastExp(v - m[i]);
    }
  };
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int i = 0; i < kLanes; ++i)
      step(i, x[j + i]);
  for (; j < n; ++j)
    step(0, x[j]);
  float mx = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < kLanes; ++i)
    mx = std::max(mx, m[i]);
  if (nan || mx == -std::numeric_limits<float>::infinity()) {
    // A NaN anywhere, or a row of -inf (0/0, as the three-pass kernel).
    for (int64_t k = 0; k < n; ++k)
      y[k] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  float sum = 0.0f;
  for (int i = 0; i < kLanes; ++i)
    if (m[i] != -std::numeric_limits<float>::infinity())
      sum += s[i] * fastExp(m[i] - mx);
  float inv = 1.0f / sum;
  for (int64_t k = 0; k < n; ++k)
    y[k] = fastExp(x[k] - mx) * inv;
}

MC_CLONES void softmaxRow(const float *x, float *y, int64_t n) {
  if (n > kOnlineSoftmaxRow)
    return softmaxRowOnline(x, y, n);
  bool nan;
  float m = rowMax(x, n, &nan);
  if (nan) {
    for (int64_t j = 0; j < n; ++j)
      y[j] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  // Sixteen lanes of partial sums in registers (a float array here lived
  // on the stack, a store and a load per vector); summed as sumLanes does.
  Float8 acc0 = {0, 0, 0, 0, 0, 0, 0, 0}, acc1 = acc0;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    float e[16];
    for (int i = 0; i < 16; ++i)
      e[i] = fastExp(x[j + i] - m);
    std::memcpy(y + j, e, sizeof e);
    Float8 e0, e1;
    std::memcpy(&e0, e, sizeof e0);
    std::memcpy(&e1, e + 8, sizeof e1);
    acc0 += e0;
    acc1 += e1;
  }
  for (; j < n; ++j) {
    float e = fastExp(x[j] - m);
    y[j] = e;
    acc0[0] += e;
  }
  float inv = 1.0f / sumLanes8(acc0, acc1);
  for (j = 0; j < n; ++j)
    y[j] *= inv;
}

MC_CLONES void logSoftmaxRow(const float *x, float *y, int64_t n) {
  bool nan;
  float m = rowMax(x, n, &nan);
  if (nan) {
    for (int64_t j = 0; j < n; ++j)
      y[j] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  // x - max - log(sum(exp(x - max))); the sum in double lanes (one log per
  // row: its argument should be as good as we can make it).
  // Sixteen double lanes as four vectors of four, as in layerNormRow.
  const Double4 kZero = {0, 0, 0, 0};
  Double4 acc[4] = {kZero, kZero, kZero, kZero};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    float e[16];
    for (int i = 0; i < 16; ++i)
      e[i] = fastExp(x[j + i] - m);
    for (int q = 0; q < 4; ++q) {
      Float4 v;
      std::memcpy(&v, e + 4 * q, sizeof v);
      acc[q] += __builtin_convertvector(v, Double4);
    }
  }
  for (; j < n; ++j)
    acc[0][0] += double(fastExp(x[j] - m));
  float lse = float(std::log(sumLanes4(acc)));
  for (j = 0; j < n; ++j)
    y[j] = (x[j] - m) - lse;
}

MC_CLONES void layerNormRow(const float *x, const float *g, const float *b,
                            float *y, int64_t n, double epsilon) {
  // Sixteen double lanes as four vectors of four (lanes 0-3, 4-7, 8-11,
  // 12-15), the tail in lane 0, summed pairwise as sumLanes does: the loop
  // form with a double array kept the widening scalar.
  const Double4 kZero = {0, 0, 0, 0};
  Double4 acc[4] = {kZero, kZero, kZero, kZero};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int q = 0; q < 4; ++q) {
      Float4 v;
      std::memcpy(&v, x + j + 4 * q, sizeof v);
      acc[q] += __builtin_convertvector(v, Double4);
    }
  for (; j < n; ++j)
    acc[0][0] += double(x[j]);
  float mean = float(sumLanes4(acc) / double(n));
  // Second pass around the float mean; its rounding error r (the mean of
  // the deviations) is taken out, so a large common offset costs no
  // accuracy: var = E[d^2] - r^2, y = (d - r) * rstd.
  Double4 sd[4] = {kZero, kZero, kZero, kZero};
  Double4 sq[4] = {kZero, kZero, kZero, kZero};
  for (j = 0; j + 16 <= n; j += 16)
    for (int q = 0; q < 4; ++q) {
      Float4 v;
      std::memcpy(&v, x + j + 4 * q, sizeof v);
      Double4 dv = __builtin_convertvector(v - mean, Double4);
      sd[q] += dv;
      sq[q] += dv * dv;
    }
  for (; j < n; ++j) {
    double dv = double(x[j] - mean);
    sd[0][0] += dv;
    sq[0][0] += dv * dv;
  }
  double resid = sumLanes4(sd) / double(n);
  double var = std::max(0.0, sumLanes4(sq) / double(n) - resid * resid);
  float rstd = float(1.0 / std::sqrt(var + epsilon));
  float rf = float(resid);
  for (j = 0; j < n; ++j)
    y[j] = ((x[j] - mean) - rf) * rstd * g[j] + b[j];
}

} // namespace mc::rt::vec
