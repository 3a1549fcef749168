// f16 and bf16 kernels: by definition (kernels.h) each equals the f32
// kernel on the widened inputs, rounded once to nearest even. Every float
// kernel is checked bit for bit against that, for both dtypes, plus known
// ties that show the rounding is to nearest even, and the refusal of mixed
// float dtypes.
#include "TestUtil.h"
#include "modelc/kernels.h"

#include <cstring>
#include <functional>
#include <initializer_list>
#include <gtest/gtest.h>

using namespace mc;
using namespace mc::rt;
using mc::test::narrowBits;
using mc::test::randomFloats;
using mc::test::widen;

namespace {

struct In {
  Shape shape;
  std::vector<float> values; // rounded to the narrow dtype before use
};

using Kernel = std::function<Status(const std::vector<ConstTensor> &,
                                    const MutTensor &)>;

/// Runs `kernel` on narrow-dtype inputs and on their exact f32 widening;
/// the narrow result must be the f32 result rounded once (bit for bit).
/// `boolOut`: the result is i1 (compare), compared as is.
void expectRoundedF32(DType t, const std::vector<In> &ins, const Shape &out,
                      const Kernel &kernel, bool boolOut = false,
                      const std::string &what = "") {
  SCOPED_TRACE(std::string(dtypeName(t)) + " " + what);
  std::vector<std::vector<uint16_t>> bits;
  std::vector<std::vector<float>> wide;
  std::vector<ConstTensor> narrowIns, wideIns;
  for (const In &in : ins) {
    ASSERT_EQ(size_t(numElements(in.shape)), in.values.size());
    bits.push_back(narrowBits(t, in.values));
    std::vector<float> w;
    for (uint16_t b : bits.back())
      w.push_back(widen(t, b));
    wide.push_back(std::move(w));
  }
  for (size_t i = 0; i < ins.size(); ++i) {
    narrowIns.push_back({t, ins[i].shape, bits[i].data()});
    wideIns.push_back({DType::F32, ins[i].shape, wide[i].data()});
  }
  size_t n = size_t(numElements(out));
  std::vector<float> ref(n);
  std::vector<uint8_t> refBool(n), gotBool(n);
  std::vector<uint16_t> got(n, 0xdead);
  Status st = kernel(wideIns, boolOut ? MutTensor{DType::I1, out, refBool.data()}
                                      : MutTensor{DType::F32, out, ref.data()});
  ASSERT_TRUE(st) << st.message();
  st = kernel(narrowIns, boolOut ? MutTensor{DType::I1, out, gotBool.data()}
                                 : MutTensor{t, out, got.data()});
  ASSERT_TRUE(st) << st.message();
  if (boolOut) {
    EXPECT_EQ(gotBool, refBool);
    return;
  }
  std::vector<uint16_t> expect = narrowBits(t, ref);
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(got[i], expect[i])
        << "element " << i << ": f32 kernel gives " << ref[i];
}

class LowPrecision : public ::testing::TestWithParam<DType> {};

} // namespace

TEST_P(LowPrecision, UnaryOps) {
  DType t = GetParam();
  std::vector<float> v = randomFloats(257, 1, -4, 4);
  std::vector<float> pos = randomFloats(257, 2, 0.01f, 8);
  std::vector<float> unitRange = randomFloats(257, 5, -0.99f, 0.99f);
  std::vector<float> aboveOne = randomFloats(257, 6, 1.0f, 9.0f);
  // {op, tanh approximation} (only Gelu has a tanh form).
  for (std::pair<OpId, bool> c : std::initializer_list<std::pair<OpId, bool>>{
           {OpId::Neg, false},  {OpId::Exp, false},     {OpId::Log, false},
           {OpId::Tanh, false}, {OpId::Sigmoid, false}, {OpId::Relu, false},
           {OpId::Sqrt, false}, {OpId::Abs, false},     {OpId::Erf, false},
           {OpId::Gelu, false}, {OpId::Gelu, true},     {OpId::Sin, false},
           {OpId::Cos, false},  {OpId::Tan, false},     {OpId::Asin, false},
           {OpId::Acos, false}, {OpId::Atan, false},    {OpId::Sinh, false},
           {OpId::Cosh, false}, {OpId::Asinh, false},   {OpId::Acosh, false},
           {OpId::Atanh, false}}) {
    OpId op = c.first;
    bool tanh = c.second;
    bool positive = op == OpId::Log || op == OpId::Sqrt;
    // Domains: (-1, 1) for asin, acos, atanh; [1, 9) for acosh.
    bool unit = op == OpId::Asin || op == OpId::Acos || op == OpId::Atanh;
    const std::vector<float> &in = positive            ? pos
                                   : unit              ? unitRange
                                   : op == OpId::Acosh ? aboveOne
                                                       : v;
    expectRoundedF32(
        t, {{{257}, in}}, {257},
        [&](const std::vector<ConstTensor> &in, const MutTensor &o) {
          return unary(op, in[0], o, tanh);
        },
        false, "unary " + std::string(opName(op)) + (tanh ? " (tanh)" : ""));
  }
}

TEST_P(LowPrecision, BinaryOpsInPlaceToo) {
  DType t = GetParam();
  std::vector<float> a = randomFloats(100, 3, -4, 4),
                     b = randomFloats(100, 4, 0.5f, 4);
  for (OpId op : {OpId::Add, OpId::Sub, OpId::Mul,
                      OpId::Div, OpId::Maximum, OpId::Pow,
                      OpId::Minimum})
    expectRoundedF32(
        t, {{{10, 10}, op == OpId::Pow ? b : a}, {{10, 10}, b}}, {10, 10},
        [&](const std::vector<ConstTensor> &in, const MutTensor &o) {
          return binary(op, in[0], in[1], o);
        },
        false, "binary " + std::to_string(int(op)));
  // In place (out is input 0), as the executor allows for elementwise ops.
  std::vector<uint16_t> x = narrowBits(t, a), y = narrowBits(t, b);
  std::vector<uint16_t> expect(100);
  std::vector<float> sum(100);
  for (int i = 0; i < 100; ++i)
    sum[i] = widen(t, x[i]) + widen(t, y[i]);
  expect = narrowBits(t, sum);
  ASSERT_TRUE(binary(OpId::Add, {t, {100}, x.data()}, {t, {100}, y.data()},
                     {t, {100}, x.data()}));
  EXPECT_EQ(x, expect);
}

TEST_P(LowPrecision, RoundsOnceToNearestEven) {
  DType t = GetParam();
  // f16 has 10 fraction bits, bf16 7: adding half an ulp of 1 is a tie.
  float ulp = t == DType::F16 ? 0x1p-10f : 0x1p-7f;
  std::vector<float> a{1.0f, 1.0f + ulp}, b{ulp / 2, ulp / 2};
  std::vector<uint16_t> x = narrowBits(t, a), y = narrowBits(t, b), z(2);
  ASSERT_TRUE(binary(OpId::Add, {t, {2}, x.data()}, {t, {2}, y.data()},
                     {t, {2}, z.data()}));
  // 1 + ulp/2 ties to 1 (even); 1 + ulp + ulp/2 ties to 1 + 2 ulp (even).
  uint16_t one = t == DType::F16 ? 0x3c00 : 0x3f80;
  EXPECT_EQ(z[0], one);
  EXPECT_EQ(z[1], one + 2);
  // Overflow rounds to infinity; NaN stays NaN.
  std::vector<float> big{t == DType::F16 ? 60000.0f : 3e38f}, nan{NAN};
  x = narrowBits(t, big);
  ASSERT_TRUE(binary(OpId::Add, {t, {1}, x.data()}, {t, {1}, x.data()},
                     {t, {1}, z.data()}));
  EXPECT_TRUE(std::isinf(widen(t, z[0])));
  x = narrowBits(t, nan);
  ASSERT_TRUE(unary(OpId::Exp, {t, {1}, x.data()}, {t, {1}, z.data()}));
  EXPECT_TRUE(std::isnan(widen(t, z[0])));
}

TEST_P(LowPrecision, ReductionsAndSoftmax) {
  DType t = GetParam();
  std::vector<float> v = randomFloats(2 * 3 * 40, 5, -3, 3);
  for (OpId op :
       {OpId::ReduceSum, OpId::ReduceMean, OpId::ReduceMax, OpId::ReduceMin})
    expectRoundedF32(
        t, {{{2, 3, 40}, v}}, {2, 1, 40},
        [&](const std::vector<ConstTensor> &in, const MutTensor &o) {
          return reduce(op, in[0], {1}, true, o);
        },
        false, "reduce " + std::to_string(int(op)));
  expectRoundedF32(t, {{{2, 3, 40}, v}}, {},
                   [&](const std::vector<ConstTensor> &in, const MutTensor &o) {
                     return reduce(OpId::ReduceSum, in[0], {0, 1, 2}, false, o);
                   });
  for (int64_t axis : {0, 2, -2}) {
    expectRoundedF32(t, {{{2, 3, 40}, v}}, {2, 3, 40},
                     [&](const std::vector<ConstTensor> &in,
                         const MutTensor &o) { return softmax(in[0], axis, o); });
    expectRoundedF32(t, {{{2, 3, 40}, v}}, {2, 3, 40},
                     [&](const std::vector<ConstTensor> &in,
                         const MutTensor &o) {
                       return logSoftmax(in[0], axis, o);
                     });
  }
}

TEST_P(LowPrecision, MatMulAccumulatesInF32) {
  DType t = GetParam();
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Shape a = ta ? Shape{2, 33, 5} : Shape{2, 5, 33};
      Shape b = tb ? Shape{2, 7, 33} : Shape{2, 33, 7};
      expectRoundedF32(
          t,
          {{a, randomFloats(2 * 5 * 33, 6, -2, 2)},
           {b, randomFloats(2 * 33 * 7, 7, -2, 2)}},
          {2, 5, 7},
          [&](const std::vector<ConstTensor> &in, const MutTensor &o) {
            return matmul(in[0], in[1], ta, tb, o);
          },
          false, "matmul " + std::to_string(ta) + std::to_string(tb));
    }
}

TEST_P(LowPrecision, ConvolutionPoolingAndNorms) {
  DType t = GetParam();
  std::vector<float> x = randomFloats(2 * 4 * 9 * 9, 8, -2, 2);
  Conv2dParams cp;
  cp.strideH = 2;
  cp.padTop = cp.padLeft = cp.padBottom = cp.padRight = 1;
  cp.groups = 2;
  expectRoundedF32(t,
                   {{{2, 4, 9, 9}, x}, {{6, 2, 3, 3}, randomFloats(108, 9)}},
                   {2, 6, 5, 9},
                   [&](const std::vector<ConstTensor> &in, const MutTensor &o) {
                     return conv2d(in[0], in[1], cp, o);
                   });
  Conv2dParams dw; // depthwise
  dw.groups = 4;
  expectRoundedF32(t, {{{2, 4, 9, 9}, x}, {{4, 1, 3, 3}, randomFloats(36, 10)}},
                   {2, 4, 7, 7},
                   [&](const std::vector<ConstTensor> &in, const MutTensor &o) {
                     return conv2d(in[0], in[1], dw, o);
                   });
  Pool2dParams pp;
  pp.kernelH = pp.kernelW = 3;
  pp.strideH = pp.strideW = 2;
  pp.padTop = pp.padLeft = pp.padBottom = pp.padRight = 1;
  expectRoundedF32(t, {{{2, 4, 9, 9}, x}}, {2, 4, 5, 5},
                   [&](const std::vector<ConstTensor> &in, const MutTensor &o) {
                     return maxPool2d(in[0], pp, o);
                   });
  expectRoundedF32(t, {{{2, 4, 9, 9}, x}}, {2, 4, 5, 5},
                   [&](const std::vector<ConstTensor> &in, const MutTensor &o) {
                     return avgPool2d(in[0], pp, false, o);
                   });
  std::vector<float> scale = randomFloats(4, 11, 0.5f, 2),
                     offset = randomFloats(4, 12),
                     mean = randomFloats(4, 13),
                     var = randomFloats(4, 14, 0.5f, 2);
  expectRoundedF32(t,
                   {{{2, 4, 9, 9}, x},
                    {{4}, scale},
                    {{4}, offset},
                    {{4}, mean},
                    {{4}, var}},
                   {2, 4, 9, 9},
                   [&](const std::vector<ConstTensor> &in, const MutTensor &o) {
                     return batchNorm(in[0], in[1], in[2], in[3], in[4], 1e-5,
                                      1, o);
                   });
  expectRoundedF32(t,
                   {{{2, 4, 9, 9}, x},
                    {{9, 9}, randomFloats(81, 15, 0.5f, 2)},
                    {{9, 9}, randomFloats(81, 16)}},
                   {2, 4, 9, 9},
                   [&](const std::vector<ConstTensor> &in, const MutTensor &o) {
                     return layerNorm(in[0], in[1], in[2], 2, 1e-5, o);
                   });
}

TEST_P(LowPrecision, ClampCompareAndByteMovers) {
  DType t = GetParam();
  std::vector<float> a = randomFloats(64, 17, -3, 3),
                     b = randomFloats(64, 18, -3, 3);
  b[3] = a[3]; // an equal pair
  expectRoundedF32(t, {{{64}, a}}, {64},
                   [&](const std::vector<ConstTensor> &in, const MutTensor &o) {
                     return clamp(in[0], -1.25, 0.7, o);
                   });
  for (CompareOp op : {CompareOp::Eq, CompareOp::Ne, CompareOp::Lt,
                       CompareOp::Le, CompareOp::Gt, CompareOp::Ge})
    expectRoundedF32(
        t, {{{64}, a}, {{64}, b}}, {64},
        [&](const std::vector<ConstTensor> &in, const MutTensor &o) {
          return compare(op, in[0], in[1], o);
        },
        true, "compare " + std::to_string(int(op)));
  // Select, concat, transpose move f16/bf16 bits as they are.
  std::vector<uint16_t> x = narrowBits(t, a), y = narrowBits(t, b), z(64);
  std::vector<uint8_t> pred(64);
  for (int i = 0; i < 64; ++i)
    pred[i] = i % 3 == 0;
  ASSERT_TRUE(select({DType::I1, {64}, pred.data()}, {t, {64}, x.data()},
                     {t, {64}, y.data()}, {t, {64}, z.data()}));
  for (int i = 0; i < 64; ++i)
    ASSERT_EQ(z[i], pred[i] ? x[i] : y[i]);
  std::vector<uint16_t> cat(128);
  ASSERT_TRUE(concat({{t, {64}, x.data()}, {t, {64}, y.data()}}, 0,
                     {t, {128}, cat.data()}));
  EXPECT_TRUE(std::equal(x.begin(), x.end(), cat.begin()));
  EXPECT_TRUE(std::equal(y.begin(), y.end(), cat.begin() + 64));
}

TEST_P(LowPrecision, MixedFloatDTypesAreRefused) {
  DType t = GetParam();
  DType other = t == DType::F16 ? DType::BF16 : DType::F16;
  std::vector<uint16_t> x(4), y(4);
  std::vector<float> f(4);
  Status st = binary(OpId::Add, {t, {4}, x.data()}, {DType::F32, {4}, f.data()},
                     {t, {4}, y.data()});
  EXPECT_NE(st.message().find(std::string("add: operands mix ") +
                              dtypeName(t) + " and f32"),
            std::string::npos)
      << st.message();
  st = matmul({t, {2, 2}, x.data()}, {other, {2, 2}, y.data()}, false, false,
              {t, {2, 2}, x.data()});
  EXPECT_NE(st.message().find(std::string("matmul: operands mix ") +
                              dtypeName(t) + " and " + dtypeName(other)),
            std::string::npos)
      << st.message();
  // Shape errors still name the problem.
  st = unary(OpId::Exp, {t, {4}, x.data()}, {t, {3}, y.data()});
  EXPECT_NE(st.message().find("does not match"), std::string::npos)
      << st.message();
}

INSTANTIATE_TEST_SUITE_P(Kernels, LowPrecision,
                         ::testing::Values(DType::F16, DType::BF16),
                         [](const ::testing::TestParamInfo<DType> &info) {
                           return std::string(dtypeName(info.param));
                         });

// The vectorized bf16 and f16 conversions (VecMath: the cast kernel's and
// the widening and narrowing around every bf16 / f16 kernel) give the
// bits of the scalar floatToBf16 / bf16ToFloat (and the f16 pair): every bf16 value widened; and
// narrowed, every bf16 value's float and the floats around each rounding
// boundary (halfway, either side, ties to even both ways), NaNs with
// payloads, infinities, zeros and subnormals.
namespace {

/// Every 16-bit value of `t` widened by the cast kernel: `scalar`'s bits.
void expectWidening(DType t, float (*scalar)(uint16_t)) {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h)
    all[h] = uint16_t(h);
  std::vector<float> wide(all.size());
  ASSERT_TRUE(cast(ConstTensor{t, {65536}, all.data()},
                   MutTensor{DType::F32, {65536}, wide.data()}));
  for (uint32_t h = 0; h < 65536; ++h) {
    float want = scalar(uint16_t(h));
    ASSERT_EQ(std::memcmp(&wide[h], &want, 4), 0)
        << dtypeName(t) << " 0x" << std::hex << h;
  }
}

/// `floats` narrowed to `t` by the cast kernel: `scalar`'s bits.
void expectNarrowing(DType t, const std::vector<float> &floats,
                     uint16_t (*scalar)(float)) {
  std::vector<uint16_t> narrow(floats.size());
  Shape s{int64_t(floats.size())};
  ASSERT_TRUE(cast(ConstTensor{DType::F32, s, floats.data()},
                   MutTensor{t, s, narrow.data()}));
  for (size_t i = 0; i < floats.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &floats[i], 4);
    ASSERT_EQ(narrow[i], scalar(floats[i]))
        << dtypeName(t) << " from float 0x" << std::hex << bits;
  }
}

float fromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

} // namespace

TEST(LowPrecisionCasts, Bf16AndF16ConversionsAreTheScalarOnesBitForBit) {
  ASSERT_NO_FATAL_FAILURE(expectWidening(DType::BF16, bf16ToFloat));
  // Every bf16 value's float and the floats around its rounding
  // boundaries.
  std::vector<float> floats;
  for (uint32_t h = 0; h < 65536; ++h)
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      floats.push_back(fromBits((h << 16) | low));
  ASSERT_NO_FATAL_FAILURE(expectNarrowing(DType::BF16, floats, floatToBf16));
  // f16 the same way, against halfToFloat / floatToHalf (all 2^32 floats
  // matched when this was written; here the boundaries of every f16 value,
  // the subnormal range's, and the specials).
  ASSERT_NO_FATAL_FAILURE(expectWidening(DType::F16, halfToFloat));
  std::vector<float> near;
  for (uint32_t h = 0; h < 65536; ++h) {
    uint32_t bits;
    float wide = halfToFloat(uint16_t(h));
    std::memcpy(&bits, &wide, 4);
    for (int32_t d : {-4097, -4096, -4095, -1, 0, 1, 4095, 4096, 4097})
      near.push_back(fromBits(bits + uint32_t(d)));
  }
  for (uint32_t b : {0x33000000u, 0x33000001u, 0x32ffffffu, 0x387fffffu,
                     0x38800000u, 0x477fefffu, 0x477ff000u, 0x7f800001u,
                     0xffc00123u, 0x00000001u, 0x80000000u})
    near.push_back(fromBits(b));
  ASSERT_NO_FATAL_FAILURE(expectNarrowing(DType::F16, near, floatToHalf));
  // A bf16 kernel's result is the f32 kernel's, narrowed the same way.
  std::vector<float> x = randomFloats(1000, 3, -50, 50);
  std::vector<uint16_t> xb(x.size()), yb(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    xb[i] = floatToBf16(x[i]);
  ASSERT_TRUE(unary(OpId::Exp, ConstTensor{DType::BF16, {1000}, xb.data()},
                    MutTensor{DType::BF16, {1000}, yb.data()}));
  std::vector<float> xw(x.size()), yw(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    xw[i] = bf16ToFloat(xb[i]);
  ASSERT_TRUE(unary(OpId::Exp, ConstTensor{DType::F32, {1000}, xw.data()},
                    MutTensor{DType::F32, {1000}, yw.data()}));
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(yb[i], floatToBf16(yw[i])) << i;
}
