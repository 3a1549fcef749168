// Every CPU kernel against plain reference loops written here, plus the
// f16/bf16 rounding edge cases (ties to even, subnormals, overflow, NaN).
#include "modelc/kernels.h"
#include "TestUtil.h"
#include "VecMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <gtest/gtest.h>
#include <limits>
#include <numeric>

using namespace mc::rt;
using mc::test::cin;
using mc::test::mout;
using mc::test::randomFloats;
using mc::test::ravel;
using mc::test::unravel;

namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

} // namespace

// --- f16 / bf16 conversions ---

TEST(Half, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = halfToFloat(uint16_t(h));
    bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    if (nan) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(f))));
      EXPECT_EQ(floatToHalf(f) & 0x8000, h & 0x8000); // sign kept
    } else {
      EXPECT_EQ(floatToHalf(f), h) << std::hex << h;
    }
  }
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24)); // smallest subnormal
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);
}

TEST(Half, MidpointsRoundToEven) {
  // Between two adjacent finite halves h and h+1 (positive), the midpoint is
  // exactly a float: it must round to the even one, and one float ulp either
  // side of it to the nearer one. This covers subnormals (h < 0x400), the
  // subnormal/normal boundary, and overflow (0x7bff -> inf at 65520).
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    double lo = halfToFloat(uint16_t(h));
    double hi = h + 1 == 0x7c00 ? 65536.0 : halfToFloat(uint16_t(h + 1));
    float mid = float((lo + hi) / 2);
    ASSERT_EQ(double(mid), (lo + hi) / 2);
    uint16_t even = (h & 1) ? uint16_t(h + 1) : uint16_t(h);
    EXPECT_EQ(floatToHalf(mid), even) << std::hex << h;
    EXPECT_EQ(floatToHalf(-mid), even | 0x8000) << std::hex << h;
    EXPECT_EQ(floatToHalf(std::nextafter(mid, 0.0f)), h) << std::hex << h;
    EXPECT_EQ(floatToHalf(std::nextafter(mid, INFINITY)), h + 1)
        << std::hex << h;
  }
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0); // tie with 0 -> 0
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -26)), 0);
  EXPECT_EQ(floatToHalf(1e-30f), 0);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(floatToHalf(-INFINITY), 0xfc00);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(floatToHalf(65519.996f), 0x7bff);
}

#if defined(__FLT16_MAX__)
TEST(Half, MatchesCompilerFloat16OnManyFloats) {
  // _Float16 conversion is correctly rounded (libgcc); sample all exponents.
  for (uint64_t u = 0; u < (1ull << 32); u += 65537) {
    float f = fromBits(uint32_t(u));
    if (std::isnan(f))
      continue;
    _Float16 r = _Float16(f);
    uint16_t expect;
    std::memcpy(&expect, &r, 2);
    ASSERT_EQ(floatToHalf(f), expect) << std::hex << u;
  }
}
#endif

TEST(BF16, MidpointsRoundToEvenAndSpecials) {
  for (uint32_t b = 0; b < 0x7f80; b += 3) {
    uint32_t mid = (b << 16) + 0x8000;
    uint16_t even = (b & 1) ? uint16_t(b + 1) : uint16_t(b);
    EXPECT_EQ(floatToBf16(fromBits(mid)), even) << std::hex << b;
    EXPECT_EQ(floatToBf16(fromBits(mid - 1)), b);
    EXPECT_EQ(floatToBf16(fromBits(mid + 1)), b + 1);
    EXPECT_EQ(floatToBf16(fromBits(mid | 0x80000000u)), even | 0x8000);
    EXPECT_EQ(bits(bf16ToFloat(uint16_t(b))), b << 16);
  }
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7f80); // inf
  EXPECT_EQ(floatToBf16(INFINITY), 0x7f80);
  EXPECT_EQ(floatToBf16(-INFINITY), 0xff80);
  EXPECT_EQ(floatToBf16(fromBits(0x00000001)), 0);      // tiny subnormal
  EXPECT_EQ(floatToBf16(fromBits(0x00018000)), 0x0002); // subnormal tie, odd
  uint16_t n = floatToBf16(fromBits(0x7f800001)); // NaN with low payload only
  EXPECT_TRUE(std::isnan(bf16ToFloat(n)));
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(-NAN))));
  EXPECT_EQ(floatToBf16(-NAN) & 0x8000, 0x8000);
}

// --- elementwise ---

// The inverse trigonometric and hyperbolic functions (libm's, as PyTorch's
// CPU kernels) against libm in double over their domains, and NaN (or
// +-inf at atanh's poles) outside.
TEST(Kernels, TrigAndHyperbolicMatchLibmInDouble) {
  struct Case {
    OpId op;
    double (*ref)(double);
    float lo, hi;
  } cases[] = {
      {OpId::Tan, [](double x) { return std::tan(x); }, -1.5f, 1.5f},
      {OpId::Asin, [](double x) { return std::asin(x); }, -1, 1},
      {OpId::Acos, [](double x) { return std::acos(x); }, -1, 1},
      {OpId::Atan, [](double x) { return std::atan(x); }, -50, 50},
      {OpId::Sinh, [](double x) { return std::sinh(x); }, -20, 20},
      {OpId::Cosh, [](double x) { return std::cosh(x); }, -20, 20},
      {OpId::Asinh, [](double x) { return std::asinh(x); }, -50, 50},
      {OpId::Acosh, [](double x) { return std::acosh(x); }, 1, 50},
      {OpId::Atanh, [](double x) { return std::atanh(x); }, -0.999f, 0.999f},
  };
  for (const Case &c : cases) {
    std::vector<float> x = randomFloats(257, 3, c.lo, c.hi), y(x.size());
    x[0] = c.lo;
    if (c.lo < 0)
      x[1] = 1e-20f; // tiny: sinh, tan, asin, atanh are x there
    ASSERT_TRUE(unary(c.op, cin(x, {257}), mout(y, {257})));
    for (size_t i = 0; i < x.size(); ++i) {
      double ref = c.ref(x[i]);
      EXPECT_NEAR(y[i], ref, 4e-7 * std::max(std::fabs(ref), 1e-30))
          << opName(c.op) << " at " << x[i];
    }
  }
  std::vector<float> out(1);
  auto at = [&](OpId op, float v) {
    std::vector<float> in{v};
    EXPECT_TRUE(unary(op, cin(in, {1}), mout(out, {1})));
    return out[0];
  };
  for (OpId op : {OpId::Asin, OpId::Acos, OpId::Atanh})
    EXPECT_TRUE(std::isnan(at(op, 1.5f))) << opName(op);
  EXPECT_TRUE(std::isnan(at(OpId::Acosh, 0.5f)));
  EXPECT_EQ(at(OpId::Atanh, 1.0f), INFINITY);
  EXPECT_EQ(at(OpId::Atanh, -1.0f), -INFINITY);
  EXPECT_EQ(at(OpId::Cosh, 100.0f), INFINITY);
  EXPECT_EQ(at(OpId::Atan, INFINITY), static_cast<float>(M_PI / 2));
}

TEST(Kernels, UnaryF32MatchesReference) {
  std::vector<float> a = randomFloats(257, 1, -5, 5),
                     pos = randomFloats(257, 2, 0.01f, 9);
  struct Case {
    OpId op;
    double (*ref)(double);
    bool positive;
  } cases[] = {
      {OpId::Neg, [](double x) { return -x; }, false},
      {OpId::Exp, [](double x) { return std::exp(x); }, false},
      {OpId::Log, [](double x) { return std::log(x); }, true},
      {OpId::Tanh, [](double x) { return std::tanh(x); }, false},
      {OpId::Sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); },
       false},
      {OpId::Relu, [](double x) { return x < 0 ? 0.0 : x; }, false},
      {OpId::Sqrt, [](double x) { return std::sqrt(x); }, true},
      {OpId::Sin, [](double x) { return std::sin(x); }, false},
      {OpId::Cos, [](double x) { return std::cos(x); }, false},
  };
  for (const Case &c : cases) {
    const std::vector<float> &x = c.positive ? pos : a;
    std::vector<float> y(x.size());
    ASSERT_TRUE(unary(c.op, cin(x, {257}), mout(y, {257})));
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_NEAR(y[i], c.ref(x[i]),
                  1e-6 * std::max(1.0, std::fabs(c.ref(x[i]))))
          << int(c.op) << " at " << x[i];
  }
  // Sigmoid does not overflow for large |x|; relu keeps NaN.
  std::vector<float> big{-1000.f, 1000.f, NAN}, out(3);
  ASSERT_TRUE(unary(OpId::Sigmoid, cin(big, {3}), mout(out, {3})));
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 1.0f);
  ASSERT_TRUE(unary(OpId::Relu, cin(big, {3}), mout(out, {3})));
  EXPECT_TRUE(std::isnan(out[2]));
  // Sqrt (vectorized) is std::sqrt's correctly rounded result, special
  // values included, past the vector width (the tail too).
  std::vector<float> sq = randomFloats(1001, 7, 0, 1e6);
  sq[0] = -1.0f;
  sq[1] = -0.0f;
  sq[2] = INFINITY;
  sq[3] = NAN;
  sq[4] = 1e-45f; // subnormal
  sq[1000] = -4.0f;
  std::vector<float> root(sq.size());
  ASSERT_TRUE(unary(OpId::Sqrt, cin(sq, {1001}), mout(root, {1001})));
  for (size_t i = 0; i < sq.size(); ++i) {
    float want = std::sqrt(sq[i]);
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(root[i])) << i;
    else
      EXPECT_EQ(std::memcmp(&root[i], &want, 4), 0) << i << ": " << sq[i];
  }
}

TEST(Kernels, UnaryIntAndUnsupportedDTypes) {
  std::vector<int32_t> a{-3, 0, 5, std::numeric_limits<int32_t>::min()}, y(4);
  ConstTensor ta{DType::I32, {4}, a.data()};
  MutTensor ty{DType::I32, {4}, y.data()};
  ASSERT_TRUE(unary(OpId::Neg, ta, ty));
  EXPECT_EQ(
      y, (std::vector<int32_t>{3, 0, -5, std::numeric_limits<int32_t>::min()}));
  ASSERT_TRUE(unary(OpId::Relu, ta, ty));
  EXPECT_EQ(y, (std::vector<int32_t>{0, 0, 5, 0}));
  Status s = unary(OpId::Exp, ta, ty);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("exp"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("i32"), std::string::npos) << s.message();
  // f16/bf16 run through f32 (KernelsLowPrecisionTest.cpp); mixing them
  // with f32 in one op is refused.
  std::vector<uint16_t> h(4);
  std::vector<float> hf(4);
  s = unary(OpId::Tanh, {DType::F16, {4}, h.data()},
            {DType::F32, {4}, hf.data()});
  EXPECT_NE(s.message().find("tanh: operands mix f16 and f32"),
            std::string::npos)
      << s.message();
  std::vector<float> f(4), g(5);
  s = unary(OpId::Neg, cin(f, {4}), mout(g, {5}));
  EXPECT_NE(s.message().find("does not match"), std::string::npos);
  // An OpId a kernel does not implement is an error naming the op.
  std::vector<float> f2(4);
  s = unary(OpId::Add, cin(f, {4}), mout(f2, {4}));
  EXPECT_NE(s.message().find("unary: op 'add' is not implemented"),
            std::string::npos)
      << s.message();
  s = binary(OpId::Neg, cin(f, {4}), cin(f, {4}), mout(f2, {4}));
  EXPECT_NE(s.message().find("binary: op 'neg' is not implemented"),
            std::string::npos)
      << s.message();
  s = reduce(OpId::Add, cin(f, {4}), {0}, true, mout(f2, {1}));
  EXPECT_NE(s.message().find("reduce: op 'add' is not implemented"),
            std::string::npos)
      << s.message();
}

TEST(Kernels, BinaryMatchesReference) {
  std::vector<float> a = randomFloats(100, 3, -4, 4),
                     b = randomFloats(100, 4, 0.5f, 4), y(100);
  using F = std::function<double(double, double)>;
  std::pair<OpId, F> cases[] = {
      {OpId::Add, [](double x, double z) { return x + z; }},
      {OpId::Sub, [](double x, double z) { return x - z; }},
      {OpId::Mul, [](double x, double z) { return x * z; }},
      {OpId::Div, [](double x, double z) { return x / z; }},
      {OpId::Maximum, [](double x, double z) { return std::max(x, z); }},
  };
  for (auto &[op, ref] : cases) {
    ASSERT_TRUE(
        binary(op, cin(a, {10, 10}), cin(b, {10, 10}), mout(y, {10, 10})));
    for (int i = 0; i < 100; ++i)
      EXPECT_FLOAT_EQ(y[i], float(ref(a[i], b[i])));
  }
  std::vector<float> n{NAN, 1}, m{1, NAN}, o(2);
  ASSERT_TRUE(
      binary(OpId::Maximum, cin(n, {2}), cin(m, {2}), mout(o, {2})));
  EXPECT_TRUE(std::isnan(o[0]) && std::isnan(o[1]));

  std::vector<int64_t> ia{7, -7, 9, std::numeric_limits<int64_t>::max()},
      ib{2, 2, -3, 1}, iy(4);
  ConstTensor ta{DType::I64, {4}, ia.data()}, tb{DType::I64, {4}, ib.data()};
  MutTensor ty{DType::I64, {4}, iy.data()};
  ASSERT_TRUE(binary(OpId::Div, ta, tb, ty));
  EXPECT_EQ(iy, (std::vector<int64_t>{3, -3, -3,
                                      std::numeric_limits<int64_t>::max()}));
  ASSERT_TRUE(binary(OpId::Add, ta, tb, ty)); // wraps, no UB
  EXPECT_EQ(iy[3], std::numeric_limits<int64_t>::min());
  ib[1] = 0;
  Status s = binary(OpId::Div, ta, tb, ty);
  EXPECT_NE(s.message().find("division by zero"), std::string::npos);
  std::vector<uint8_t> bo(4);
  s = binary(OpId::Add, {DType::I1, {4}, bo.data()},
             {DType::I1, {4}, bo.data()}, {DType::I1, {4}, bo.data()});
  EXPECT_NE(s.message().find("add: unsupported dtype i1"), std::string::npos);
  s = binary(OpId::Add, cin(a, {10, 10}), cin(b, {100}), mout(y, {10, 10}));
  EXPECT_FALSE(s);
}

// --- cast ---

TEST(Kernels, CastBetweenAllDTypes) {
  // Values representable in every dtype survive any round trip through it.
  const double values[] = {0, 1, -2, 3, 100, -7};
  const DType all[] = {DType::F32, DType::F16, DType::BF16,
                       DType::I32, DType::I64, DType::I1};
  auto fill = [](DType t, double v, void *p) {
    switch (t) {
    case DType::F32:
      *static_cast<float *>(p) = float(v);
      break;
    case DType::F16:
      *static_cast<uint16_t *>(p) = floatToHalf(float(v));
      break;
    case DType::BF16:
      *static_cast<uint16_t *>(p) = floatToBf16(float(v));
      break;
    case DType::I32:
      *static_cast<int32_t *>(p) = int32_t(v);
      break;
    case DType::I64:
      *static_cast<int64_t *>(p) = int64_t(v);
      break;
    case DType::I1:
      *static_cast<uint8_t *>(p) = v != 0;
      break;
    }
  };
  for (DType from : all)
    for (DType to : all) {
      std::vector<uint8_t> src(6 * 8), dst(6 * 8), expect(6 * 8);
      for (int i = 0; i < 6; ++i) {
        fill(from, values[i], src.data() + i * dtypeSize(from));
        double v = from == DType::I1 ? (values[i] != 0) : values[i];
        fill(to, v, expect.data() + i * dtypeSize(to));
      }
      ASSERT_TRUE(cast({from, {2, 3}, src.data()}, {to, {2, 3}, dst.data()}));
      EXPECT_EQ(0, std::memcmp(dst.data(), expect.data(), 6 * dtypeSize(to)))
          << dtypeName(from) << " -> " << dtypeName(to);
    }
}

TEST(Kernels, CastEdgeCases) {
  std::vector<float> f{2.7f, -2.7f, NAN, 1e20f, -1e20f, 0.5f, -0.0f};
  std::vector<int32_t> i(7);
  ASSERT_TRUE(cast(cin(f, {7}), {DType::I32, {7}, i.data()}));
  EXPECT_EQ(i,
            (std::vector<int32_t>{2, -2, 0, std::numeric_limits<int32_t>::max(),
                                  std::numeric_limits<int32_t>::min(), 0, 0}));
  std::vector<uint8_t> b(7);
  ASSERT_TRUE(cast(cin(f, {7}), {DType::I1, {7}, b.data()}));
  EXPECT_EQ(b, (std::vector<uint8_t>{1, 1, 1, 1, 1, 1, 0}));
  // f32 -> f16 -> f32 rounds to nearest even: 1 + 2^-11 is a tie -> 1.
  std::vector<float> t{1.0f + std::ldexp(1.0f, -11), 70000.f,
                       std::ldexp(1.0f, -24)};
  std::vector<uint16_t> h(3);
  ASSERT_TRUE(cast(cin(t, {3}), {DType::F16, {3}, h.data()}));
  EXPECT_EQ(h, (std::vector<uint16_t>{0x3c00, 0x7c00, 0x0001}));
  // i64 -> bf16 is correctly rounded: 2^24 + 2^16 + 1 rounds up (above the
  // tie at 2^24 + 2^16), not down as two naive roundings would.
  std::vector<int64_t> big{(1 << 24) + (1 << 16) + 1};
  std::vector<uint16_t> bf(1);
  ASSERT_TRUE(
      cast({DType::I64, {1}, big.data()}, {DType::BF16, {1}, bf.data()}));
  EXPECT_EQ(bf16ToFloat(bf[0]), float((1 << 24) + (1 << 17)));
  Status s = cast(cin(f, {7}), {DType::I32, {6}, i.data()});
  EXPECT_NE(s.message().find("cast: result shape"), std::string::npos);
}

// --- data movement ---

TEST(Kernels, BroadcastInDimMatchesReference) {
  struct Case {
    Shape in, out;
    std::vector<int64_t> dims;
  } cases[] = {
      {{3}, {2, 3}, {1}},       {{3, 1}, {3, 4}, {0, 1}},
      {{1}, {2, 3, 4}, {1}},    {{}, {2, 2}, {}},
      {{3, 2}, {2, 3}, {1, 0}}, {{2, 1, 4}, {5, 2, 3, 4}, {1, 2, 3}},
  };
  for (const Case &c : cases) {
    std::vector<float> a = randomFloats(numElements(c.in), 5);
    std::vector<float> y(numElements(c.out));
    ASSERT_TRUE(broadcastInDim(cin(a, c.in), c.dims, mout(y, c.out)))
        << shapeString(c.in) << " -> " << shapeString(c.out);
    for (int64_t i = 0; i < int64_t(y.size()); ++i) {
      std::vector<int64_t> o = unravel(i, c.out), ai(c.in.size());
      for (size_t k = 0; k < c.in.size(); ++k)
        ai[k] = c.in[k] == 1 ? 0 : o[c.dims[k]];
      EXPECT_EQ(y[i], a[ravel(ai, c.in)]);
    }
  }
  std::vector<float> a(3), y(8);
  EXPECT_FALSE(broadcastInDim(cin(a, {3}), {1}, mout(y, {2, 4})));
  EXPECT_FALSE(broadcastInDim(cin(a, {3}), {2}, mout(y, {2, 3})));
}

TEST(Kernels, TransposeAllPermutationsAndElementSizes) {
  for (Shape s : {Shape{5}, Shape{2, 3}, Shape{2, 3, 4}, Shape{2, 1, 3, 2}}) {
    std::vector<int64_t> perm(s.size());
    std::iota(perm.begin(), perm.end(), 0);
    do {
      Shape os;
      for (int64_t p : perm)
        os.push_back(s[p]);
      for (DType t : {DType::F32, DType::F16, DType::I64, DType::I1}) {
        size_t es = dtypeSize(t), n = size_t(numElements(s));
        std::vector<uint8_t> a(n * es), y(n * es);
        for (size_t i = 0; i < a.size(); ++i)
          a[i] = uint8_t(i * 7 + 1);
        ASSERT_TRUE(transpose({t, s, a.data()}, perm, {t, os, y.data()}));
        for (int64_t i = 0; i < int64_t(n); ++i) {
          std::vector<int64_t> o = unravel(i, os), ai(s.size());
          for (size_t d = 0; d < s.size(); ++d)
            ai[perm[d]] = o[d];
          EXPECT_EQ(0, std::memcmp(&y[i * es], &a[ravel(ai, s) * es], es));
        }
      }
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
  std::vector<float> a(6), y(6);
  Status st = transpose(cin(a, {2, 3}), {0, 0}, mout(y, {2, 3}));
  EXPECT_NE(st.message().find("not a permutation"), std::string::npos);
}

// --- reductions and softmax ---

TEST(Kernels, ReduceOverEveryDimSetWithAndWithoutKeepdim) {
  Shape s{3, 4, 5};
  std::vector<float> a = randomFloats(60, 6, -3, 3);
  for (int mask = 0; mask < 8; ++mask)
    for (bool keep : {false, true})
      for (OpId op : {OpId::ReduceSum, OpId::ReduceMean, OpId::ReduceMax}) {
        std::vector<int64_t> dims;
        Shape os;
        for (int d = 0; d < 3; ++d) {
          if (mask & (1 << d)) {
            dims.push_back(d);
            if (keep)
              os.push_back(1);
          } else {
            os.push_back(s[d]);
          }
        }
        std::vector<float> y(numElements(os));
        ASSERT_TRUE(reduce(op, cin(a, s), dims, keep, mout(y, os)));
        // Reference: accumulate each input element into its output slot.
        std::vector<double> ref(y.size(), op == OpId::ReduceMax ? -INFINITY : 0);
        std::vector<int> count(y.size(), 0);
        for (int64_t i = 0; i < 60; ++i) {
          std::vector<int64_t> idx = unravel(i, s), oi;
          for (int d = 0; d < 3; ++d)
            if (!(mask & (1 << d)))
              oi.push_back(idx[d]);
            else if (keep)
              oi.push_back(0);
          int64_t o = ravel(oi, os);
          ref[o] = op == OpId::ReduceMax ? std::max(ref[o], double(a[i]))
                                       : ref[o] + a[i];
          ++count[o];
        }
        for (size_t o = 0; o < y.size(); ++o) {
          double r = op == OpId::ReduceMean ? ref[o] / count[o] : ref[o];
          EXPECT_NEAR(y[o], r, 1e-5) << "mask " << mask << " keep " << keep;
        }
      }
  std::vector<int32_t> ia{1, 9, -4, 3, 8, 2}, iy(2);
  ASSERT_TRUE(reduce(OpId::ReduceMax, {DType::I32, {2, 3}, ia.data()}, {1}, false,
                     {DType::I32, {2}, iy.data()}));
  EXPECT_EQ(iy, (std::vector<int32_t>{9, 8}));
  Status st = reduce(OpId::ReduceSum, {DType::I32, {2, 3}, ia.data()}, {1}, false,
                     {DType::I32, {2}, iy.data()});
  EXPECT_NE(st.message().find("reduce_sum: unsupported dtype i32"),
            std::string::npos);
  std::vector<float> y(5);
  EXPECT_FALSE(reduce(OpId::ReduceSum, cin(a, s), {1, 0}, false, mout(y, {5})));
  EXPECT_FALSE(reduce(OpId::ReduceSum, cin(a, s), {0, 1}, false, mout(y, {4})));
}

TEST(Kernels, ReduceOverMiddleDimsMatchesTheSequentialSumBitForBit) {
  // A global pool over NHWC's H and W: the reduced dims lie between kept
  // ones. Each output's values are summed in order, in double, so the
  // result is the sequential sum's bits; inner
  // sizes beyond one task's 1024 accumulators (chunks of 1024 and 76), a
  // batch of one cut into column chunks of 64 with a short last one, an
  // empty batch, and NaN for max/min.
  struct Case {
    Shape s;
    std::vector<int64_t> dims;
    int64_t outer, nRed, inner;
  } cases[] = {{{2, 7, 9, 33}, {1, 2}, 2, 63, 33},
               {{3, 5, 600}, {1}, 3, 5, 600},
               {{1, 4, 3, 2, 300}, {1, 2, 3}, 1, 24, 300},
               {{2, 3, 1500}, {1}, 2, 3, 1500},
               {{16, 2, 1100}, {1}, 16, 2, 1100},
               {{1, 2, 2, 130}, {1, 2}, 1, 4, 130},
               {{0, 3, 5}, {1}, 0, 3, 5}};
  unsigned seed = 70;
  for (const Case &c : cases) {
    SCOPED_TRACE(shapeString(c.s));
    std::vector<float> a =
        randomFloats(size_t(numElements(c.s)), ++seed, -3, 3);
    if (a.size() > 5)
      a[5] = NAN;
    Shape os;
    for (size_t d = 0; d < c.s.size(); ++d)
      os.push_back(
          std::count(c.dims.begin(), c.dims.end(), int64_t(d)) ? 1 : c.s[d]);
    for (OpId op : {OpId::ReduceSum, OpId::ReduceMean, OpId::ReduceMax,
                    OpId::ReduceMin}) {
      std::vector<float> y(size_t(c.outer * c.inner));
      ASSERT_TRUE(reduce(op, cin(a, c.s), c.dims, true, mout(y, os)));
      for (int64_t o = 0; o < c.outer; ++o)
        for (int64_t i = 0; i < c.inner; ++i) {
          double sum = 0;
          float ext = op == OpId::ReduceMax ? -INFINITY : INFINITY;
          for (int64_t j = 0; j < c.nRed; ++j) {
            float v = a[size_t((o * c.nRed + j) * c.inner + i)];
            sum += double(v);
            if (!std::isnan(ext))
              ext = std::isnan(v)           ? v
                    : op == OpId::ReduceMax ? std::max(ext, v)
                                            : std::min(ext, v);
          }
          float want = op == OpId::ReduceSum    ? float(sum)
                       : op == OpId::ReduceMean ? float(sum * (1.0 / c.nRed))
                                                : ext;
          float got = y[size_t(o * c.inner + i)];
          ASSERT_TRUE(got == want || (std::isnan(got) && std::isnan(want)))
              << opName(op) << " output " << o << "," << i << ": " << got
              << " vs " << want;
        }
    }
  }
}

TEST(Kernels, ReduceSumsOfContiguousRunsUseFixedDoubleLanes) {
  // A sum whose reduced values lie in contiguous runs (batch norm's
  // statistics over N, H and W of NCHW: H and W merge into runs of H * W
  // per batch) adds each run's k-th value to double lane k % kSumLanes,
  // every run from lane 0, the lanes kept across the runs of one output
  // and summed pairwise at the end; runs shorter than 64 are summed in
  // order. The result equals this emulation's, and the exact sum's to
  // 1e-6 (a lost or doubled value, a run's tail, would be far off; the
  // orders of double sums differ by less than a float's ulp, so float
  // results do not tell them apart).
  const int L = mc::rt::vec::kSumLanes;
  struct Case {
    int64_t A, B, H, W; // reduce dims {0, 2, 3} of [A, B, H, W]
  } cases[] = {{3, 4, 1, 5001}, {2, 3, 8, 16}, {3, 4, 7, 9}};
  for (const Case &c : cases) {
    SCOPED_TRACE(std::to_string(c.H * c.W) + "-value runs");
    Shape s{c.A, c.B, c.H, c.W};
    int64_t run = c.H * c.W;
    std::vector<float> a = randomFloats(size_t(numElements(s)), 75, -3, 3);
    for (OpId op : {OpId::ReduceSum, OpId::ReduceMean}) {
      std::vector<float> y(static_cast<size_t>(c.B));
      ASSERT_TRUE(reduce(op, cin(a, s), {0, 2, 3}, false, mout(y, {c.B})));
      for (int64_t j = 0; j < c.B; ++j) {
        double lanes[mc::rt::vec::kSumLanes] = {0}, inOrder = 0, exact = 0;
        for (int64_t i = 0; i < c.A; ++i)
          for (int64_t k = 0; k < run; ++k) {
            double v = a[size_t((i * c.B + j) * run + k)];
            lanes[k % L] += v;
            inOrder += v;
            exact += v;
          }
        for (int w = L / 2; w >= 1; w /= 2)
          for (int l = 0; l < w; ++l)
            lanes[l] += lanes[l + w];
        double sum = run >= 64 ? lanes[0] : inOrder;
        double scale = op == OpId::ReduceMean ? 1.0 / double(c.A * run) : 1.0;
        EXPECT_EQ(y[size_t(j)], float(sum * scale))
            << opName(op) << " output " << j;
        EXPECT_NEAR(y[size_t(j)], exact * scale,
                    1e-6 * std::fabs(exact * scale))
            << opName(op) << " output " << j;
      }
    }
  }
}

TEST(Kernels, SoftmaxEveryAxisIsStable) {
  Shape s{3, 4, 5};
  std::vector<float> a = randomFloats(60, 7, -3, 3);
  a[0] = 1000.f; // would overflow exp without the max subtraction
  a[1] = 999.f;
  for (int64_t axis = -3; axis < 3; ++axis) {
    int64_t ax = axis < 0 ? axis + 3 : axis;
    std::vector<float> y(60);
    ASSERT_TRUE(softmax(cin(a, s), axis, mout(y, s)));
    for (int64_t i = 0; i < 60; ++i) {
      std::vector<int64_t> idx = unravel(i, s);
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < s[ax]; ++j) {
        idx[ax] = j;
        mx = std::max(mx, double(a[ravel(idx, s)]));
      }
      for (int64_t j = 0; j < s[ax]; ++j) {
        idx[ax] = j;
        sum += std::exp(a[ravel(idx, s)] - mx);
      }
      double ref = std::exp(a[i] - mx) / sum;
      ASSERT_FALSE(std::isnan(y[i]));
      EXPECT_NEAR(y[i], ref, 1e-6 * std::max(1.0, ref));
    }
  }
  std::vector<float> y(60);
  EXPECT_FALSE(softmax(cin(a, s), 3, mout(y, s)));
}

TEST(Kernels, SoftmaxOfARowLongerThanTheCacheIsOnlineAndExact) {
  // 100000 floats, over the 64 Ki the three-pass row kernel takes: the
  // online kernel (one pass for max and sum, one for the output) against a
  // double reference; the max in the middle, so the running sums rescale.
  const int64_t n = 100000;
  std::vector<float> a = randomFloats(size_t(n), 11, -20, 20);
  a[n / 2] = 80.f;
  std::vector<float> y(static_cast<size_t>(n));
  ASSERT_TRUE(softmax(cin(a, {1, n}), 1, mout(y, {1, n})));
  double mx = *std::max_element(a.begin(), a.end()), sum = 0, err2 = 0,
         ref2 = 0;
  for (float v : a)
    sum += std::exp(double(v) - mx);
  for (int64_t i = 0; i < n; ++i) {
    double ref = std::exp(double(a[size_t(i)]) - mx) / sum;
    err2 += (y[size_t(i)] - ref) * (y[size_t(i)] - ref);
    ref2 += ref * ref;
  }
  EXPECT_LT(std::sqrt(err2 / ref2), 1e-6);
  // -inf entries contribute nothing; a NaN makes the row NaN.
  std::vector<float> b(size_t(n), -INFINITY);
  b[7] = 1.f;
  b[n - 1] = 1.f;
  ASSERT_TRUE(softmax(cin(b, {n}), 0, mout(y, {n})));
  EXPECT_FLOAT_EQ(y[7], 0.5f);
  EXPECT_FLOAT_EQ(y[size_t(n - 1)], 0.5f);
  EXPECT_EQ(y[8], 0.f);
  b[100] = NAN;
  ASSERT_TRUE(softmax(cin(b, {n}), 0, mout(y, {n})));
  EXPECT_TRUE(std::isnan(y[7]));
}

// --- matmul ---

TEST(Kernels, BatchedMatmulAllTransposeCombos) {
  const int64_t B0 = 2, B1 = 3, M = 5, K = 7, N = 4;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Shape as = ta ? Shape{B0, B1, K, M} : Shape{B0, B1, M, K};
      Shape bs = tb ? Shape{B0, B1, N, K} : Shape{B0, B1, K, N};
      std::vector<float> a = randomFloats(numElements(as), 8);
      std::vector<float> b = randomFloats(numElements(bs), 9);
      std::vector<float> y(B0 * B1 * M * N);
      ASSERT_TRUE(
          matmul(cin(a, as), cin(b, bs), ta, tb, mout(y, {B0, B1, M, N})));
      for (int64_t bt = 0; bt < B0 * B1; ++bt)
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double s = 0;
            for (int64_t k = 0; k < K; ++k) {
              float av =
                  ta ? a[bt * K * M + k * M + i] : a[bt * M * K + i * K + k];
              float bv =
                  tb ? b[bt * N * K + j * K + k] : b[bt * K * N + k * N + j];
              s += double(av) * bv;
            }
            EXPECT_NEAR(y[bt * M * N + i * N + j], s, 1e-5)
                << "ta " << ta << " tb " << tb;
          }
    }
  std::vector<float> a(6), b(6), y(4, 7.f);
  Status st =
      matmul(cin(a, {2, 3}), cin(b, {2, 3}), false, false, mout(y, {2, 2}));
  EXPECT_NE(st.message().find("do not agree"), std::string::npos);
  // K == 0: an empty sum is 0.
  ASSERT_TRUE(
      matmul(cin(a, {2, 0}), cin(b, {0, 2}), false, false, mout(y, {2, 2})));
  EXPECT_EQ(y, (std::vector<float>{0, 0, 0, 0}));
  std::vector<int32_t> ia(4);
  st = matmul({DType::I32, {2, 2}, ia.data()}, {DType::I32, {2, 2}, ia.data()},
              false, false, {DType::I32, {2, 2}, ia.data()});
  EXPECT_NE(st.message().find("matmul: unsupported dtype i32"),
            std::string::npos);
}

TEST(Kernels, CopyKeepsBytesAcrossShapes) {
  std::vector<float> a = randomFloats(12, 10), y(12);
  ASSERT_TRUE(copy(cin(a, {3, 4}), mout(y, {12})));
  EXPECT_EQ(a, y);
  EXPECT_FALSE(copy(cin(a, {3, 4}), mout(y, {11})));
}
