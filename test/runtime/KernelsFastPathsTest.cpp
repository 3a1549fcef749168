// The fast paths of the CPU kernels against references in double: the
// polynomial exp / erf / tanh (over the whole range, special values
// included),
// sigmoid and gelu, the vectorized softmax / log_softmax / layer_norm rows,
// tensors large enough to be split among threads, the batched im2col conv
// plan, the thread-split sgemm (along n, along m, over a batch; through
// oneDNN and through OpenBLAS, and the default's choice), merged-dim
// strided copies (broadcast, transpose) and reductions; and determinism:
// the same inputs give the same bits on every run.
#include "KernelUtil.h"
#include "TestUtil.h"
#include "VecMath.h"
#include "modelc/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <limits>

using namespace mc::rt;
using mc::test::cin;
using mc::test::mout;
using mc::test::randomFloats;
using mc::test::ravel;
using mc::test::relErr;
using mc::test::unravel;

namespace {

/// Distance in units in the last place of the float nearest `ref`.
double ulps(float got, double ref) {
  float r = float(ref);
  double ulp = r == 0 || std::fabs(r) < std::numeric_limits<float>::min()
                   ? std::numeric_limits<float>::denorm_min()
                   : std::ldexp(1.0, std::ilogb(r) - 23);
  return std::fabs(double(got) - ref) / ulp;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

} // namespace

TEST(KernelsFastPaths, ExpWithinTwoUlpEverywhereWithStdExpSpecials) {
  std::vector<float> x;
  for (double v = -110; v < 95; v += 0.0021)
    x.push_back(float(v));
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.7f, 88.72283f, 88.72284f,
                  88.8f, -87.33f, -87.34f, -100.0f, -103.9f, -103.98f, -104.0f,
                  -149.0f, inf, -inf, std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::lowest()})
    x.push_back(v);
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  Shape s{int64_t(x.size())};
  ASSERT_GT(x.size(), 64 * 1024u); // split among threads
  std::vector<float> y(x.size());
  ASSERT_TRUE(unary(OpId::Exp, cin(x, s), mout(y, s)));
  for (size_t i = 0; i < x.size(); ++i) {
    float want = std::exp(x[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(y[i])) << x[i];
    } else if (std::isinf(want) || want == 0) {
      EXPECT_EQ(y[i], want) << x[i];
    } else {
      ASSERT_LE(ulps(y[i], std::exp(double(x[i]))), 2.0) << "exp(" << x[i]
                                                          << ") = " << y[i];
    }
  }
}

TEST(KernelsFastPaths, TanhWithinTwoUlpEverywhereWithSpecials) {
  // Every 1021st positive float (about 2.1M, a stride that visits every
  // exponent and scattered mantissas), both signs, the region boundaries
  // densely, and the special values.
  std::vector<float> x;
  for (uint64_t b = 0; b < 0x7f800000u; b += 1021) {
    float v = __builtin_bit_cast(float, uint32_t(b));
    x.push_back(v);
    x.push_back(-v);
  }
  for (float c : {0.55f, 9.0f, 8.67f})
    for (int k = -2000; k <= 2000; ++k)
      x.push_back(c + float(k) * 1e-6f * c);
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-38f, inf, -inf,
                  std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::lowest()})
    x.push_back(v);
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  Shape s{int64_t(x.size())};
  std::vector<float> y(x.size());
  ASSERT_TRUE(unary(OpId::Tanh, cin(x, s), mout(y, s)));
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(y[i]));
      continue;
    }
    double want = std::tanh(double(x[i]));
    ASSERT_LE(ulps(y[i], want), 2.0) << "tanh(" << x[i] << ") = " << y[i];
    ASSERT_EQ(std::signbit(y[i]), std::signbit(x[i])) << x[i];
  }
  // Exact where tanh is: 0 and -0 keep their sign, +-1 from 9 on.
  std::vector<float> e{-0.0f, 9.0f, -inf, 1e-30f}, ey(4);
  ASSERT_TRUE(unary(OpId::Tanh, cin(e, {4}), mout(ey, {4})));
  EXPECT_TRUE(ey[0] == 0 && std::signbit(ey[0]));
  EXPECT_EQ(ey[1], 1.0f);
  EXPECT_EQ(ey[2], -1.0f);
  EXPECT_EQ(ey[3], 1e-30f);
}

TEST(KernelsFastPaths, SigmoidErfGeluOnLargeTensors) {
  std::vector<float> x = randomFloats(100003, 7, -12, 12);
  x.insert(x.end(), {0.0f, -0.0f, 1e-20f, -1e-20f, 30.0f, -30.0f, -95.0f});
  Shape s{int64_t(x.size())};
  struct Case {
    OpId op;
    bool tanh; // Gelu's tanh approximation
    double (*ref)(double);
    double tol; // times max(1, |ref|)
  } cases[] = {
      {OpId::Sigmoid, false, [](double v) { return 1 / (1 + std::exp(-v)); },
       2e-7},
      {OpId::Erf, false, [](double v) { return std::erf(v); }, 2e-7},
      {OpId::Gelu, false,
       [](double v) { return 0.5 * v * std::erfc(-v / std::sqrt(2.0)); }, 2e-7},
      {OpId::Gelu, true,
       [](double v) {
         return 0.5 * v *
                (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
       },
       2e-7},
  };
  for (const Case &c : cases) {
    std::vector<float> y(x.size(), NAN);
    ASSERT_TRUE(unary(c.op, cin(x, s), mout(y, s), c.tanh));
    for (size_t i = 0; i < x.size(); ++i) {
      double r = c.ref(x[i]);
      ASSERT_NEAR(y[i], r, c.tol * std::max(1.0, std::fabs(r)))
          << opName(c.op) << (c.tanh ? " (tanh)" : "") << " at " << x[i];
    }
  }
  // Sigmoid keeps tiny results (its e^x / (1 + e^x) branch).
  std::vector<float> t{-95.0f}, ty(1);
  ASSERT_TRUE(unary(OpId::Sigmoid, cin(t, {1}), mout(ty, {1})));
  EXPECT_GT(ty[0], 0.0f);
  EXPECT_LE(ulps(ty[0], std::exp(-95.0)), 2.0);
  // Erf is relatively exact for tiny x; NaN stays NaN.
  std::vector<float> e{1e-30f, std::numeric_limits<float>::quiet_NaN()}, ey(2);
  ASSERT_TRUE(unary(OpId::Erf, cin(e, {2}), mout(ey, {2})));
  EXPECT_LE(ulps(ey[0], 2 / std::sqrt(M_PI) * 1e-30), 2.0);
  EXPECT_TRUE(std::isnan(ey[1]));
}

TEST(KernelsFastPaths, ExpOfNonPositiveArgumentsEqualsFastExpBitForBit) {
  // fastExpNonPositive (sigmoid's and tanh's exp) against fastExp over
  // floats <= 0: every 4099th bit pattern of the negative floats, then
  // every 7th in [-105, -80] (the subnormal results), and the ends.
  // (Checked over every float <= 0 when written.)
  std::vector<float> x;
  for (uint64_t u = 0x80000000u; u <= 0xFF800000u; u += 4099)
    x.push_back(__builtin_bit_cast(float, uint32_t(u)));
  for (float v = -105.0f; v < -80.0f;
       v = __builtin_bit_cast(float, __builtin_bit_cast(uint32_t, v) - 7))
    x.push_back(v);
  x.insert(x.end(),
           {0.0f, -0.0f, -1e-45f, -std::numeric_limits<float>::min(), -104.9f,
            -105.0f, -106.0f, -1e30f, -std::numeric_limits<float>::infinity()});
  for (float v : x) {
    float want = mc::rt::vec::fastExp(v);
    float got = mc::rt::vec::fastExpNonPositive(v);
    ASSERT_EQ(__builtin_bit_cast(uint32_t, got),
              __builtin_bit_cast(uint32_t, want))
        << "x = " << v;
  }
}

TEST(KernelsFastPaths, MaskAndNegLoopsEqualTheKernelsTheyStandFor) {
  // compareMaskF32Loop(direction) against compare then cast (through an
  // i1 buffer), and negF32 against the scalar -x, bit patterns compared:
  // equal pairs, +0 against -0, infinities, NaNs of both signs.
  const float inf = std::numeric_limits<float>::infinity(),
              nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a = randomFloats(5000, 13, -2, 2);
  std::vector<float> b = randomFloats(5000, 14, -2, 2);
  for (size_t i = 0; i < a.size(); i += 3)
    b[i] = a[i]; // every third pair equal
  const float specials[] = {0.0f, -0.0f, inf, -inf, nan, -nan, 1e-40f, -1.0f};
  for (float x : specials)
    for (float y : specials) {
      a.push_back(x);
      b.push_back(y);
    }
  int64_t n = int64_t(a.size());
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  for (CompareOp dir : {CompareOp::Eq, CompareOp::Ne, CompareOp::Lt,
                        CompareOp::Le, CompareOp::Gt, CompareOp::Ge}) {
    SCOPED_TRACE("direction " + std::to_string(int(dir)));
    std::vector<uint8_t> m(a.size());
    std::vector<float> want(a.size()), got(a.size(), -7.0f);
    ASSERT_TRUE(
        compare(dir, cin(a, {n}), cin(b, {n}), {DType::I1, {n}, m.data()}));
    ASSERT_TRUE(cast({DType::I1, {n}, m.data()}, mout(want, {n})));
    vec::BinaryF32 loop = detail::compareMaskF32Loop(int64_t(dir));
    ASSERT_NE(loop, nullptr);
    loop(a.data(), b.data(), got.data(), n);
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_EQ(bits(got[i]), bits(want[i])) << a[i] << " vs " << b[i];
  }
  EXPECT_EQ(detail::compareMaskF32Loop(6), nullptr);
  std::vector<float> neg(a.size());
  vec::negF32(a.data(), neg.data(), n);
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(bits(neg[i]), bits(a[i]) ^ 0x80000000u) << a[i];
}

TEST(KernelsFastPaths, SiluLoopsEqualSigmoidThenMulBitForBit) {
  // The fused kernel's one-pass SiLU loop against the two loops it
  // replaces, mul(x, s) and mul(s, x), bit patterns compared (a NaN's sign
  // too: sigmoid returns a NaN as it came, so either order keeps x's),
  // over random values, both tails, subnormals, infinities and NaNs.
  std::vector<float> x = randomFloats(40000, 11, -100, 100);
  std::vector<float> more = randomFloats(20000, 12, -4, 4);
  x.insert(x.end(), more.begin(), more.end());
  const float inf = std::numeric_limits<float>::infinity();
  x.insert(x.end(), {0.0f, -0.0f, 1e-40f, -1e-40f, 1e-30f, -1e-30f, 88.0f,
                     -88.0f, -95.0f, -104.0f, -110.0f, 200.0f, inf, -inf,
                     std::numeric_limits<float>::quiet_NaN(),
                     -std::numeric_limits<float>::quiet_NaN(),
                     std::numeric_limits<float>::max(),
                     -std::numeric_limits<float>::max()});
  int64_t n = int64_t(x.size());
  std::vector<float> s(x.size()), xs(x.size()), sx(x.size()), silu(x.size()),
      siluSigFirst(x.size());
  mc::rt::vec::sigmoidF32(x.data(), s.data(), n);
  mc::rt::vec::mulF32(x.data(), s.data(), xs.data(), n);
  mc::rt::vec::mulF32(s.data(), x.data(), sx.data(), n);
  mc::rt::vec::siluF32(x.data(), silu.data(), n);
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(bits(silu[i]), bits(xs[i])) << "x = " << x[i];
    ASSERT_EQ(bits(silu[i]), bits(sx[i])) << "x = " << x[i];
  }
  // In place, as the fused tiles run it on the output.
  std::vector<float> inPlace = x;
  mc::rt::vec::siluF32(inPlace.data(), inPlace.data(), n);
  EXPECT_EQ(std::memcmp(inPlace.data(), silu.data(), x.size() * 4), 0);
}

TEST(KernelsFastPaths, SoftmaxAndLogSoftmaxRows) {
  for (int64_t len : {1, 7, 16, 33, 1000}) {
    int64_t rows = 97;
    std::vector<float> x = randomFloats(size_t(rows * len), 20 + unsigned(len),
                                        -30, 30);
    x[0] += 500; // a large common offset in row 0
    if (len > 3) {
      x[size_t(len + 1)] = -std::numeric_limits<float>::infinity();
    }
    Shape s{rows, len};
    // x - max rounds in float (as in PyTorch): exp's argument is off by up to
    // |x - max| * 2^-24, so the tolerance grows with it.
    std::vector<double> sm(x.size()), lsm(x.size()), tol(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = x.data() + r * len;
      double m = -INFINITY, sum = 0;
      for (int64_t j = 0; j < len; ++j)
        m = std::max(m, double(xr[j]));
      for (int64_t j = 0; j < len; ++j)
        sum += std::exp(double(xr[j]) - m);
      for (int64_t j = 0; j < len; ++j) {
        sm[size_t(r * len + j)] = std::exp(double(xr[j]) - m) / sum;
        lsm[size_t(r * len + j)] = double(xr[j]) - m - std::log(sum);
        tol[size_t(r * len + j)] =
            1e-6 + 1.2e-7 * std::fabs(double(xr[j]) - m);
      }
    }
    std::vector<float> y(x.size(), NAN), ly(x.size(), NAN);
    ASSERT_TRUE(softmax(cin(x, s), -1, mout(y, s)));
    ASSERT_TRUE(logSoftmax(cin(x, s), 1, mout(ly, s)));
    for (size_t i = 0; i < x.size(); ++i) {
      if (sm[i] == 0) // exp(-inf)
        ASSERT_EQ(y[i], 0.0f);
      else
        ASSERT_NEAR(y[i], sm[i], tol[i] * sm[i] + 1e-37) << len << " " << i;
      if (std::isinf(lsm[i]))
        ASSERT_EQ(ly[i], lsm[i]);
      else
        ASSERT_NEAR(ly[i], lsm[i], 2e-6 * std::max(1.0, std::fabs(lsm[i])))
            << len << " " << i;
    }
  }
  // A NaN makes its row NaN, and only its row: one in the vector lanes
  // (row 1), one in the tail past the last 16 (row 3).
  std::vector<float> x = randomFloats(4 * 40, 5), y(x.size()), ly(x.size());
  x[41] = NAN;
  x[3 * 40 + 37] = NAN;
  ASSERT_TRUE(softmax(cin(x, {4, 40}), 1, mout(y, {4, 40})));
  ASSERT_TRUE(logSoftmax(cin(x, {4, 40}), 1, mout(ly, {4, 40})));
  for (int j = 0; j < 160; ++j) {
    bool nanRow = j / 40 == 1 || j / 40 == 3;
    EXPECT_EQ(std::isnan(y[size_t(j)]), nanRow) << j;
    EXPECT_EQ(std::isnan(ly[size_t(j)]), nanRow) << j;
  }
  // Softmax along a non-last axis (the strided path), split among threads.
  std::vector<float> z = randomFloats(64 * 50 * 40, 6, -5, 5), zy(z.size());
  ASSERT_TRUE(softmax(cin(z, {64, 50, 40}), 1, mout(zy, {64, 50, 40})));
  for (int64_t o = 0; o < 64; ++o)
    for (int64_t i = 0; i < 40; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < 50; ++j)
        sum += zy[size_t((o * 50 + j) * 40 + i)];
      ASSERT_NEAR(sum, 1.0, 1e-5);
    }
}

TEST(KernelsFastPaths, LayerNormManyRows) {
  int64_t rows = 300, len = 77;
  std::vector<float> x = randomFloats(size_t(rows * len), 31, -3, 3);
  for (int64_t j = 0; j < len; ++j)
    x[size_t(j)] += 1000; // row 0: large offset, small spread
  std::vector<float> g = randomFloats(size_t(len), 32),
                     b = randomFloats(size_t(len), 33);
  std::vector<double> ref(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < len; ++j)
      m += x[size_t(r * len + j)];
    m /= double(len);
    for (int64_t j = 0; j < len; ++j)
      v += (x[size_t(r * len + j)] - m) * (x[size_t(r * len + j)] - m);
    v /= double(len);
    for (int64_t j = 0; j < len; ++j)
      ref[size_t(r * len + j)] =
          (x[size_t(r * len + j)] - m) / std::sqrt(v + 1e-5) * g[size_t(j)] +
          b[size_t(j)];
  }
  std::vector<float> y(x.size(), NAN);
  ASSERT_TRUE(layerNorm(cin(x, {rows, len}), cin(g, {len}), cin(b, {len}), 1,
                        1e-5, mout(y, {rows, len})));
  EXPECT_LT(relErr(y, ref), 1e-6);
}

TEST(KernelsFastPaths, ConvBatchedPlanMatchesPerImage) {
  // Small maps with several images: the batched im2col plan (one sgemm for
  // the batch) when the workspace allows, per image when it does not.
  struct Case {
    int64_t n, c, h, w, o, k, stride, pad;
  } cases[] = {{3, 5, 6, 7, 4, 3, 1, 1}, {4, 16, 14, 14, 24, 3, 2, 1},
               {2, 8, 9, 9, 6, 1, 2, 0}, {5, 3, 7, 7, 8, 7, 2, 3}};
  unsigned seed = 40;
  for (const Case &k : cases) {
    Conv2dParams p;
    p.strideH = p.strideW = k.stride;
    p.padTop = p.padLeft = p.padBottom = p.padRight = k.pad;
    int64_t oh = (k.h + 2 * k.pad - k.k) / k.stride + 1,
            ow = (k.w + 2 * k.pad - k.k) / k.stride + 1;
    Shape xs{k.n, k.c, k.h, k.w}, ws{k.o, k.c, k.k, k.k}, ys{k.n, k.o, oh, ow};
    std::vector<float> x = randomFloats(size_t(numElements(xs)), ++seed),
                       w = randomFloats(size_t(numElements(ws)), ++seed);
    std::vector<double> ref(size_t(numElements(ys)));
    for (int64_t n = 0; n < k.n; ++n)
      for (int64_t o = 0; o < k.o; ++o)
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j) {
            double s = 0;
            for (int64_t c = 0; c < k.c; ++c)
              for (int64_t a = 0; a < k.k; ++a)
                for (int64_t bb = 0; bb < k.k; ++bb) {
                  int64_t ih = i * k.stride - k.pad + a,
                          iw = j * k.stride - k.pad + bb;
                  if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w)
                    continue;
                  s += double(x[size_t(((n * k.c + c) * k.h + ih) * k.w + iw)]) *
                       w[size_t(((o * k.c + c) * k.k + a) * k.k + bb)];
                }
            ref[size_t(((n * k.o + o) * oh + i) * ow + j)] = s;
          }
    size_t full = conv2dWorkspaceSize(xs, ws, ys, p);
    size_t perImage = size_t(k.c * k.k * k.k * oh * ow);
    EXPECT_GT(full, perImage) << "batched plan expected";
    std::vector<float> scratch(full), y1(ref.size(), NAN), y2(ref.size(), NAN);
    ASSERT_TRUE(conv2d(cin(x, xs), cin(w, ws), p, mout(y1, ys), scratch.data(),
                       full));
    ASSERT_TRUE(conv2d(cin(x, xs), cin(w, ws), p, mout(y2, ys), scratch.data(),
                       perImage));
    EXPECT_LT(relErr(y1, ref), 1e-6);
    EXPECT_LT(relErr(y2, ref), 1e-6);
    Status st = conv2d(cin(x, xs), cin(w, ws), p, mout(y2, ys), scratch.data(),
                       perImage - 1);
    EXPECT_FALSE(st);
  }
}

TEST(KernelsFastPaths, MatmulSplitsAndBatches) {
  struct Case {
    int64_t batch, m, n, k;
    bool ta, tb;
  } cases[] = {{1, 40, 3000, 50, false, false}, // split along n
               {1, 3000, 40, 50, true, false},  // split along m
               {1, 700, 600, 30, false, true},
               {6, 20, 40, 30, true, true}, // batch split among threads
               {12, 64, 64, 32, false, true}};
  unsigned seed = 60;
  for (const Case &c : cases) {
    Shape as = c.ta ? Shape{c.batch, c.k, c.m} : Shape{c.batch, c.m, c.k};
    Shape bs = c.tb ? Shape{c.batch, c.n, c.k} : Shape{c.batch, c.k, c.n};
    std::vector<float> a = randomFloats(size_t(numElements(as)), ++seed),
                       b = randomFloats(size_t(numElements(bs)), ++seed);
    std::vector<double> ref(size_t(c.batch * c.m * c.n));
    for (int64_t t = 0; t < c.batch; ++t)
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
          double s = 0;
          for (int64_t l = 0; l < c.k; ++l) {
            float av = c.ta ? a[size_t((t * c.k + l) * c.m + i)]
                            : a[size_t((t * c.m + i) * c.k + l)];
            float bv = c.tb ? b[size_t((t * c.n + j) * c.k + l)]
                            : b[size_t((t * c.k + l) * c.n + j)];
            s += double(av) * bv;
          }
          ref[size_t((t * c.m + i) * c.n + j)] = s;
        }
    std::vector<float> y(ref.size(), NAN), y2(ref.size(), NAN);
    Shape ys{c.batch, c.m, c.n};
    ASSERT_TRUE(matmul(cin(a, as), cin(b, bs), c.ta, c.tb, mout(y, ys)));
    EXPECT_LT(relErr(y, ref), 1e-6) << c.m << "x" << c.n << "x" << c.k;
    ASSERT_TRUE(matmul(cin(a, as), cin(b, bs), c.ta, c.tb, mout(y2, ys)));
    EXPECT_TRUE(sameBits(y, y2));
  }
}

TEST(KernelsFastPaths, StridedCopiesMergeDims) {
  // Broadcast of a bias over NCHW (runs of stride-0 dims become fills).
  std::vector<float> bias = randomFloats(64, 70), y(size_t(3 * 64 * 9 * 11));
  ASSERT_TRUE(broadcastInDim(cin(bias, {64}), {1}, mout(y, {3, 64, 9, 11})));
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_EQ(y[i], bias[(i / 99) % 64]) << i;
  // [5, 1] -> [5, 7] and [1, 7] -> [5, 7].
  std::vector<float> col = randomFloats(5, 71), row = randomFloats(7, 72),
                     z(35);
  ASSERT_TRUE(broadcastInDim(cin(col, {5, 1}), {0, 1}, mout(z, {5, 7})));
  for (int i = 0; i < 35; ++i)
    ASSERT_EQ(z[size_t(i)], col[size_t(i / 7)]);
  ASSERT_TRUE(broadcastInDim(cin(row, {1, 7}), {0, 1}, mout(z, {5, 7})));
  for (int i = 0; i < 35; ++i)
    ASSERT_EQ(z[size_t(i)], row[size_t(i % 7)]);
  // A large transpose (rows split among threads) and a scalar.
  std::vector<float> t = randomFloats(size_t(64 * 33 * 40), 73),
                     ty(t.size());
  ASSERT_TRUE(transpose(cin(t, {64, 33, 40}), {2, 0, 1},
                        mout(ty, {40, 64, 33})));
  for (int64_t i = 0; i < 40; ++i)
    for (int64_t j = 0; j < 64; ++j)
      for (int64_t k = 0; k < 33; ++k)
        ASSERT_EQ(ty[size_t((i * 64 + j) * 33 + k)],
                  t[size_t((j * 33 + k) * 40 + i)]);
  std::vector<float> one{4.5f}, many(100000);
  ASSERT_TRUE(broadcastInDim(cin(one, {}), {}, mout(many, {100, 1000})));
  EXPECT_TRUE(std::all_of(many.begin(), many.end(),
                          [](float v) { return v == 4.5f; }));
}

TEST(KernelsFastPaths, TransposesOfShortRunsGoInBlocksAndTiles) {
  // NCHW -> NHWC of images (3 and 16 channels: the last dim short, the
  // source contiguous along H*W, an outer batch dim): blocks of 512
  // pixels, the last one short, and a plain 2-D transpose to a short last
  // dim ([5, 600, 2] -> [600, 2, 5]). Then two dims swapped over short
  // contiguous runs (at most 64 bytes: not 9 i64s), in tiles of 16 x 16
  // runs with short edge tiles: a weight's [O, I, 3, 3] -> [I, O, 3, 3], one
  // with an outer dim, and one of 152 tiles that the threads split.
  // Every element size.
  struct Case {
    Shape s;
    std::vector<int64_t> perm;
  } cases[] = {{{3, 3, 37, 41}, {0, 2, 3, 1}},
               {{2, 16, 9, 130}, {0, 2, 3, 1}},
               {{5, 600, 2}, {1, 2, 0}},
               {{40, 37, 3, 3}, {1, 0, 2, 3}},
               {{2, 20, 18, 5}, {0, 2, 1, 3}},
               {{64, 600, 3, 3}, {1, 0, 2, 3}}};
  for (const Case &c : cases)
    for (DType t : {DType::F32, DType::BF16, DType::I64, DType::I1}) {
      SCOPED_TRACE(shapeString(c.s) + " " + dtypeName(t));
      Shape os;
      for (int64_t p : c.perm)
        os.push_back(c.s[size_t(p)]);
      size_t es = dtypeSize(t), n = size_t(numElements(c.s));
      std::vector<uint8_t> a(n * es), y(n * es, 0xEE);
      for (size_t i = 0; i < a.size(); ++i)
        a[i] = uint8_t(i * 131 + i / 251);
      ASSERT_TRUE(transpose({t, c.s, a.data()}, c.perm, {t, os, y.data()}));
      for (int64_t i = 0; i < int64_t(n); ++i) {
        std::vector<int64_t> o = unravel(i, os), ai(c.s.size());
        for (size_t d = 0; d < c.s.size(); ++d)
          ai[size_t(c.perm[d])] = o[d];
        ASSERT_EQ(0, std::memcmp(&y[size_t(i) * es],
                                 &a[size_t(ravel(ai, c.s)) * es], es))
            << "element " << i;
      }
    }
}

TEST(KernelsFastPaths, PadsScatterTheOperandAndGathersCopyShortRuns) {
  // Pad: a stride-2 zero insertion as the convolution gradient pads
  // ([N, 1, C, 1, H, 1, W, 1] -> [.., H, 2, W, 2]: size-1 dims, a strided
  // inner run) and a border pad, large enough to be split among threads;
  // every element size, against the index formula.
  struct PadCase {
    Shape s;
    std::vector<int64_t> low, high;
    bool f32Only = false; // large: rows and fill split among threads
  } pads[] = {{{2, 1, 16, 1, 30, 1, 30, 1},
               {0, 0, 0, 0, 0, 0, 0, 0},
               {0, 0, 0, 0, 0, 1, 0, 1}},
              {{3, 8, 41, 37}, {0, 0, 1, 2}, {0, 1, 3, 1}},
              {{4, 1, 64, 1, 40, 1, 40, 1},
               {0, 0, 0, 0, 0, 0, 1, 0},
               {0, 0, 0, 0, 0, 1, 0, 1},
               true}};
  for (const PadCase &c : pads)
    for (DType t : {DType::F32, DType::BF16, DType::I64, DType::I1}) {
      if (c.f32Only && t != DType::F32)
        continue;
      SCOPED_TRACE(shapeString(c.s) + " " + dtypeName(t));
      Shape os;
      for (size_t d = 0; d < c.s.size(); ++d)
        os.push_back(c.s[d] + c.low[d] + c.high[d]);
      size_t es = dtypeSize(t), n = size_t(numElements(c.s)),
             no = size_t(numElements(os));
      std::vector<uint8_t> a(n * es, 0), y(no * es, 0xEE);
      for (size_t i = 0; i < n; ++i) // I1 holds 0 or 1
        a[i * es] = t == DType::I1 ? uint8_t(i % 3 == 0) : uint8_t(i * 7 + 1);
      ASSERT_TRUE(
          pad({t, c.s, a.data()}, c.low, c.high, 0.0, {t, os, y.data()}));
      std::vector<uint8_t> zero(es, 0);
      for (int64_t i = 0; i < int64_t(no); ++i) {
        std::vector<int64_t> o = unravel(i, os), ai(c.s.size());
        bool inside = true;
        for (size_t d = 0; d < c.s.size(); ++d) {
          ai[d] = o[d] - c.low[d];
          inside = inside && ai[d] >= 0 && ai[d] < c.s[d];
        }
        const uint8_t *want =
            inside ? &a[size_t(ravel(ai, c.s)) * es] : zero.data();
        ASSERT_EQ(0, std::memcmp(&y[size_t(i) * es], want, es))
            << "element " << i;
      }
    }
  // Gather: a 3x3 window flipped along either axis (runs of 3 and of 1),
  // and rows of 800 (memcpy), negative indices; outer large enough for
  // threads.
  struct GatherCase {
    Shape ws;
    int64_t axis;
  } gathers[] = {{{96, 64, 3, 3}, 2}, {{96, 64, 3, 3}, 3}, {{8, 5, 40, 20}, 1}};
  for (const GatherCase &c : gathers) {
    const Shape &ws = c.ws;
    int64_t axis = c.axis;
    SCOPED_TRACE(shapeString(ws) + " axis " + std::to_string(axis));
    std::vector<float> w = randomFloats(size_t(numElements(ws)), 90);
    int64_t len = ws[size_t(axis)];
    std::vector<int64_t> idx{len - 1, -2, 0, len - 1};
    Shape os = ws;
    os[size_t(axis)] = int64_t(idx.size());
    std::vector<float> y(size_t(numElements(os)), NAN);
    ASSERT_TRUE(
        gather(cin(w, ws), {DType::I64, {4}, idx.data()}, axis, mout(y, os)));
    for (int64_t i = 0; i < int64_t(y.size()); ++i) {
      std::vector<int64_t> o = unravel(i, os);
      int64_t k = idx[size_t(o[size_t(axis)])];
      o[size_t(axis)] = k < 0 ? k + len : k;
      ASSERT_EQ(y[size_t(i)], w[size_t(ravel(o, ws))]) << "element " << i;
    }
  }
}

TEST(KernelsFastPaths, EmbeddingLookupsSplitTheirRowsAmongThreads) {
  // One outer row and 3000 indices (some negative) into a [700, 24] table:
  // the output rows, not the outer ones, are split among the threads.
  std::vector<float> table = randomFloats(700 * 24, 91);
  std::vector<int64_t> idx(3000);
  for (size_t k = 0; k < idx.size(); ++k)
    idx[k] = int64_t((k * 7919 + k * k * 13) % 1400) - 700; // [-700, 700)
  std::vector<float> y(idx.size() * 24, NAN);
  ASSERT_TRUE(gather(cin(table, {700, 24}),
                     {DType::I64, {int64_t(idx.size())}, idx.data()}, 0,
                     mout(y, {int64_t(idx.size()), 24})));
  for (size_t k = 0; k < idx.size(); ++k) {
    int64_t row = idx[k] < 0 ? idx[k] + 700 : idx[k];
    for (size_t j = 0; j < 24; ++j)
      ASSERT_EQ(y[k * 24 + j], table[size_t(row) * 24 + j])
          << "index " << k << ", element " << j;
  }
}

TEST(KernelsFastPaths, ReduceSplitAmongThreads) {
  std::vector<float> x = randomFloats(size_t(40 * 30 * 20 * 16), 80);
  std::vector<float> y(size_t(40 * 20));
  ASSERT_TRUE(reduce(OpId::ReduceSum, cin(x, {40, 30, 20, 16}), {1, 3}, false,
                     mout(y, {40, 20})));
  std::vector<double> ref(y.size());
  for (int a = 0; a < 40; ++a)
    for (int b = 0; b < 30; ++b)
      for (int c = 0; c < 20; ++c)
        for (int d = 0; d < 16; ++d)
          ref[size_t(a * 20 + c)] += x[size_t(((a * 30 + b) * 20 + c) * 16 + d)];
  EXPECT_LT(relErr(y, ref), 1e-7);
  std::vector<float> m(size_t(40 * 30 * 20));
  ASSERT_TRUE(reduce(OpId::ReduceMax, cin(x, {40, 30, 20, 16}), {3}, true,
                     mout(m, {40, 30, 20, 1})));
  for (size_t i = 0; i < m.size(); ++i)
    ASSERT_EQ(m[i], *std::max_element(x.begin() + long(i * 16),
                                      x.begin() + long(i * 16 + 16)));
}

namespace {

/// Restores the runtime's sgemm library when a test ends.
struct GemmLibraryScope {
  detail::GemmLibrary saved = detail::gemmLibrary();
  ~GemmLibraryScope() { detail::setGemmLibrary(saved); }
};

} // namespace

TEST(KernelsFastPaths, SgemmOfEachLibraryMatchesDouble) {
  GemmLibraryScope scope;
  struct Case {
    int64_t m, n, k;
    bool ta, tb;
  } cases[] = {{1, 1000, 512, false, false}, // one row
               {37, 1, 20, false, true},     // one column
               {5, 7, 1, true, false},       // k = 1
               {128, 128, 32, false, true},  // attention's q k^T
               {300, 200, 1024, true, true},
               {70, 3000, 40, false, false}};
  std::vector<detail::GemmLibrary> libraries = {detail::GemmLibrary::OpenBlas};
  if (detail::setGemmLibrary(detail::GemmLibrary::OneDnn))
    libraries.push_back(detail::GemmLibrary::OneDnn);
  else
    std::printf("[ SKIPPED  ] oneDNN's sgemm: this runtime has no oneDNN\n");
  unsigned seed = 400;
  for (const Case &c : cases) {
    // Leading dims wider than the matrices: the products read and write
    // inside larger buffers.
    int64_t ar = c.ta ? c.k : c.m, ac = c.ta ? c.m : c.k;
    int64_t br = c.tb ? c.n : c.k, bc = c.tb ? c.k : c.n;
    int64_t lda = ac + 3, ldb = bc + 5, ldc = c.n + 2;
    std::vector<float> a = randomFloats(size_t(ar * lda), ++seed),
                       b = randomFloats(size_t(br * ldb), ++seed);
    std::vector<double> ref(size_t(c.m * c.n));
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double s = 0;
        for (int64_t l = 0; l < c.k; ++l)
          s += double(c.ta ? a[size_t(l * lda + i)] : a[size_t(i * lda + l)]) *
               (c.tb ? b[size_t(j * ldb + l)] : b[size_t(l * ldb + j)]);
        ref[size_t(i * c.n + j)] = s;
      }
    for (detail::GemmLibrary lib : libraries) {
      ASSERT_TRUE(detail::setGemmLibrary(lib));
      // NaN everywhere: beta is 0, so C must not be read, and the padding
      // between rows must stay as it was.
      std::vector<float> y(size_t(c.m * ldc), NAN);
      detail::sgemm(c.ta, c.tb, c.m, c.n, c.k, a.data(), lda, b.data(), ldb,
                    y.data(), ldc);
      std::vector<float> got(ref.size());
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < c.n; ++j)
          got[size_t(i * c.n + j)] = y[size_t(i * ldc + j)];
        for (int64_t j = c.n; j < ldc; ++j)
          EXPECT_TRUE(std::isnan(y[size_t(i * ldc + j)]))
              << "padding written at row " << i;
      }
      EXPECT_LT(relErr(got, ref), 1e-6)
          << c.m << "x" << c.n << "x" << c.k << " library " << int(lib);
    }
  }
  EXPECT_EQ(detail::gemmLibraryFor(detail::GemmLibrary::Auto, 64, 8192, 256),
            detail::GemmLibrary::OneDnn); // 2^27
  // Where oneDNN runs AVX-512 kernels it takes every product; elsewhere
  // the large ones and those of a long k go to OpenBLAS.
  detail::GemmLibrary large = detail::oneDnnHasAvx512()
                                  ? detail::GemmLibrary::OneDnn
                                  : detail::GemmLibrary::OpenBlas;
  std::printf("[ INFO     ] oneDNN %s AVX-512 kernels here\n",
              detail::oneDnnHasAvx512() ? "runs" : "does not run");
  EXPECT_EQ(detail::gemmLibraryFor(detail::GemmLibrary::Auto, 1024, 1024, 256),
            large); // 2^28 multiply-adds
  EXPECT_EQ(detail::gemmLibraryFor(detail::GemmLibrary::Auto, 64, 1024, 1024),
            large); // k = 1024
  EXPECT_EQ(detail::gemmLibraryFor(detail::GemmLibrary::OpenBlas, 1, 1, 8),
            detail::GemmLibrary::OpenBlas);
}

TEST(KernelsFastPaths, SameBitsOnEveryRun) {
  std::vector<float> x = randomFloats(size_t(8 * 64 * 28 * 28), 90, -4, 4);
  std::vector<float> w = randomFloats(size_t(64 * 64 * 9), 91);
  Shape xs{8, 64, 28, 28};
  Conv2dParams p;
  p.padTop = p.padLeft = p.padBottom = p.padRight = 1;
  std::vector<float> first[4];
  for (int run = 0; run < 3; ++run) {
    std::vector<float> outs[4];
    for (auto &o : outs)
      o.assign(x.size(), NAN);
    ASSERT_TRUE(conv2d(cin(x, xs), cin(w, {64, 64, 3, 3}), p,
                       mout(outs[0], xs)));
    ASSERT_TRUE(softmax(cin(x, {8 * 64 * 28, 28}), 1,
                        mout(outs[1], {8 * 64 * 28, 28})));
    ASSERT_TRUE(unary(OpId::Gelu, cin(x, xs), mout(outs[2], xs)));
    ASSERT_TRUE(binary(OpId::Add, cin(x, xs), cin(outs[2], xs),
                       mout(outs[3], xs)));
    for (int k = 0; k < 4; ++k) {
      if (run == 0)
        first[k] = outs[k];
      else
        EXPECT_TRUE(sameBits(first[k], outs[k])) << "output " << k;
    }
  }
}
