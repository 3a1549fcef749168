// channels_last (NHWC) convolution and pooling against the NCHW kernels:
// the same values transposed in, the NCHW result transposed out. The
// reference conv2d and the pools must give the NCHW kernels' bits (they
// run the same arithmetic in the same order); oneDNN's NHWC convolution,
// with and without its bias and relu epilogue, the reference's values
// within rounding; the registered step kernels read the attribute.
#include "TestUtil.h"
#include "modelc/device.h"
#include "modelc/kernels.h"
#include "modelc/shapes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

using namespace mc::rt;
using mc::test::cin;
using mc::test::mout;
using mc::test::randomFloats;

namespace {

Shape toLast(const Shape &s) { return {s[0], s[2], s[3], s[1]}; }

/// `x` ([N, C, H, W]) as [N, H, W, C].
std::vector<float> nhwc(const std::vector<float> &x, const Shape &s) {
  std::vector<float> y(x.size());
  EXPECT_TRUE(transpose(cin(x, s), {0, 2, 3, 1}, mout(y, toLast(s))));
  return y;
}

Conv2dParams convParams(int64_t stride, int64_t pad, int64_t groups = 1) {
  Conv2dParams p;
  p.strideH = p.strideW = stride;
  p.padTop = p.padLeft = p.padBottom = p.padRight = pad;
  p.groups = groups;
  return p;
}

double relErr(const std::vector<float> &a, const std::vector<float> &ref) {
  std::vector<double> r(ref.begin(), ref.end());
  return mc::test::relErr(a, r);
}

struct ConvCase {
  Shape x, w;
  Conv2dParams p;
};

TEST(ChannelsLast, ConvolutionsMatchNchw) {
  const ConvCase cases[] = {
      {{2, 8, 9, 11}, {16, 8, 3, 3}, convParams(1, 1)},     // odd map
      {{1, 3, 20, 20}, {8, 3, 7, 7}, convParams(2, 3)},     // a stem
      {{3, 16, 7, 7}, {32, 16, 1, 1}, convParams(1, 0)},    // 1x1
      {{1, 16, 14, 14}, {8, 16, 1, 1}, convParams(2, 0)},   // 1x1 stride 2
      {{2, 8, 10, 10}, {12, 4, 3, 3}, convParams(1, 1, 2)}, // groups 2
      {{2, 8, 10, 10}, {8, 1, 3, 3}, convParams(2, 1, 8)},  // depthwise
  };
  unsigned seed = 300;
  for (const ConvCase &k : cases) {
    SCOPED_TRACE("x " + shapeString(k.x) + " w " + shapeString(k.w));
    Shape ys;
    ASSERT_TRUE(
        shapes::conv2d(k.x, k.w, {k.p.strideH, k.p.strideW},
                       {k.p.padTop, k.p.padLeft, k.p.padBottom, k.p.padRight},
                       {1, 1}, k.p.groups, &ys));
    std::vector<float> x = randomFloats(size_t(numElements(k.x)), ++seed),
                       w = randomFloats(size_t(numElements(k.w)), ++seed),
                       b = randomFloats(size_t(k.w[0]), ++seed, -2, 2),
                       y(size_t(numElements(ys)));
    ASSERT_TRUE(conv2d(cin(x, k.x), cin(w, k.w), k.p, mout(y, ys)));
    std::vector<float> xl = nhwc(x, k.x), want = nhwc(y, ys);
    Conv2dParams last = k.p;
    last.channelsLast = true;

    // The reference: NCHW's arithmetic, so NCHW's bits.
    std::vector<float> got(want.size(), NAN);
    ASSERT_TRUE(
        conv2d(cin(xl, toLast(k.x)), cin(w, k.w), last, mout(got, toLast(ys))));
    EXPECT_EQ(got, want);

    // The step kernel (oneDNN's NHWC convolution where it is built in).
    std::vector<float> step(want.size(), NAN);
    OpAttrs attrs{OpAttr::list("strides", {k.p.strideH, k.p.strideW}),
                  OpAttr::list("padding", {k.p.padTop, k.p.padLeft,
                                           k.p.padBottom, k.p.padRight}),
                  OpAttr::list("dilation", {1, 1}),
                  OpAttr::integer("groups", k.p.groups),
                  OpAttr::boolean("channels_last", true)};
    Status st = mc::test::cpuKernel(OpId::Conv2d, attrs,
                                    {cin(xl, toLast(k.x)), cin(w, k.w)},
                                    mout(step, toLast(ys)), {false, true});
    ASSERT_TRUE(st) << st.message();
    EXPECT_LT(relErr(step, want), 1e-5);

    // With its bias and relu inside the convolution, against the
    // reference's conv, add, relu.
    std::vector<float> bb(want.size()), ref(want.size());
    ASSERT_TRUE(broadcastInDim(cin(b, {k.w[0]}), {3}, mout(bb, toLast(ys))));
    for (size_t i = 0; i < ref.size(); ++i)
      ref[i] = std::max(0.0f, want[i] + bb[i]);
    ConstTensor bias = cin(b, {k.w[0]});
    Epilogue e;
    e.bias = &bias;
    e.activation = OpId::Relu;
    std::vector<float> fused(want.size(), NAN);
    BoundKernel bound;
    size_t bytes = 0;
    st = bindConv2d(cin(xl, toLast(k.x)), cin(w, k.w), last, e,
                    mout(fused, toLast(ys)), true, &bound, &bytes);
    if (!st) { // a runtime without oneDNN: the fused kernel's generic path
      EXPECT_NE(st.message().find("without oneDNN"), std::string::npos)
          << st.message();
      continue;
    }
    std::vector<uint8_t> ws(bytes);
    ASSERT_TRUE(bound(ws.data()));
    EXPECT_LT(relErr(fused, ref), 1e-5);
  }
}

TEST(ChannelsLast, Bf16ConvolutionsMatchTheReferenceWithinBf16Rounding) {
  // oneDNN's bf16 convolution (f32 accumulation, one rounding) against the
  // reference (the f32 convolution of the bf16 values, then rounded), NCHW
  // and NHWC; a host without bf16 kernels refuses, and the reference runs.
  Shape xs{2, 16, 14, 14}, ws{32, 16, 3, 3}, ys{2, 32, 14, 14};
  auto bf16 = [](const std::vector<float> &v) {
    std::vector<uint16_t> out;
    for (float f : v)
      out.push_back(floatToBf16(f));
    return out;
  };
  std::vector<uint16_t> x = bf16(randomFloats(size_t(numElements(xs)), 501)),
                        w = bf16(randomFloats(size_t(numElements(ws)), 502));
  Conv2dParams p = convParams(1, 1);
  for (bool last : {false, true}) {
    SCOPED_TRACE(last ? "NHWC" : "NCHW");
    Conv2dParams q = p;
    q.channelsLast = last;
    Shape xq = last ? toLast(xs) : xs, yq = last ? toLast(ys) : ys;
    std::vector<uint16_t> xin = x;
    if (last) { // the same values, NHWC
      ASSERT_TRUE(transpose(ConstTensor{DType::BF16, xs, x.data()},
                            {0, 2, 3, 1},
                            MutTensor{DType::BF16, xq, xin.data()}));
    }
    ConstTensor in{DType::BF16, xq, xin.data()}, wt{DType::BF16, ws, w.data()};
    std::vector<uint16_t> ref(size_t(numElements(ys))), got(ref.size());
    ASSERT_TRUE(conv2d(in, wt, q, MutTensor{DType::BF16, yq, ref.data()}));
    BoundKernel bound;
    size_t bytes = 0;
    Status st = bindConv2d(in, wt, q, Epilogue{},
                           MutTensor{DType::BF16, yq, got.data()}, true, &bound,
                           &bytes);
    if (!st) {
      std::printf("oneDNN refused (the reference runs): %s\n",
                  st.message().c_str());
      continue;
    }
    std::vector<uint8_t> scratch(bytes);
    ASSERT_TRUE(bound(scratch.data()));
    std::vector<float> a, b;
    for (size_t i = 0; i < got.size(); ++i) {
      a.push_back(bf16ToFloat(got[i]));
      b.push_back(bf16ToFloat(ref[i]));
    }
    EXPECT_LT(relErr(a, b), 1e-2);
    // A fused epilogue would round once where the ops round twice.
    std::vector<float> bias(32, 0.5f);
    ConstTensor bt = cin(bias, {32});
    Epilogue e;
    e.bias = &bt;
    EXPECT_FALSE(bindConv2d(in, wt, q, e,
                            MutTensor{DType::BF16, yq, got.data()}, true,
                            &bound, &bytes));
  }
}

TEST(ChannelsLast, ConvolutionRefusesAWrongLayout) {
  // An NCHW-shaped input read as NHWC: 224 "channels" against a weight of 3.
  std::vector<float> x(1 * 3 * 8 * 8), w(4 * 3 * 3 * 3), y(4 * 8 * 8);
  Conv2dParams last = convParams(1, 1);
  last.channelsLast = true;
  Status st = conv2d(cin(x, {1, 3, 8, 8}), cin(w, {4, 3, 3, 3}), last,
                     mout(y, {1, 8, 8, 4}));
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("channels_last"), std::string::npos)
      << st.message();
}

TEST(ChannelsLast, PoolingMatchesNchwBitForBit) {
  struct PoolCase {
    Shape x;
    int64_t k, stride, pad;
    bool ceil;
  } cases[] = {{{2, 8, 11, 9}, 3, 2, 1, false},
               {{1, 5, 8, 8}, 2, 2, 0, false},
               {{1, 16, 7, 10}, 3, 2, 1, true}, // ceil mode: clipped windows
               {{3, 4, 6, 6}, 3, 1, 1, false}};
  unsigned seed = 400;
  for (const PoolCase &c : cases) {
    SCOPED_TRACE("x " + shapeString(c.x) + " k" + std::to_string(c.k));
    Pool2dParams p;
    p.kernelH = p.kernelW = c.k;
    p.strideH = p.strideW = c.stride;
    p.padTop = p.padLeft = p.padBottom = p.padRight = c.pad;
    Shape ys;
    ASSERT_TRUE(shapes::pool2d(c.x, {c.k, c.k}, {c.stride, c.stride},
                               {c.pad, c.pad, c.pad, c.pad}, {1, 1}, c.ceil,
                               &ys));
    std::vector<float> x = randomFloats(size_t(numElements(c.x)), ++seed);
    x[3] = std::numeric_limits<float>::quiet_NaN(); // propagates, as NCHW's
    std::vector<float> xl = nhwc(x, c.x);
    Pool2dParams last = p;
    last.channelsLast = true;
    for (int kind = 0; kind < 3; ++kind) {
      SCOPED_TRACE(kind == 0 ? "max" : kind == 1 ? "avg" : "avg excl. pad");
      std::vector<float> y(size_t(numElements(ys))), got(y.size(), -7.f);
      if (kind == 0) {
        ASSERT_TRUE(maxPool2d(cin(x, c.x), p, mout(y, ys)));
        ASSERT_TRUE(
            maxPool2d(cin(xl, toLast(c.x)), last, mout(got, toLast(ys))));
      } else {
        ASSERT_TRUE(avgPool2d(cin(x, c.x), p, kind == 1, mout(y, ys)));
        ASSERT_TRUE(avgPool2d(cin(xl, toLast(c.x)), last, kind == 1,
                              mout(got, toLast(ys))));
      }
      std::vector<float> want = nhwc(y, ys);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_TRUE(got[i] == want[i] ||
                    (std::isnan(got[i]) && std::isnan(want[i])))
            << "element " << i << ": " << got[i] << " vs " << want[i];
    }
    // The step kernel reads the attribute.
    std::vector<float> y(size_t(numElements(ys))), got(y.size());
    ASSERT_TRUE(maxPool2d(cin(x, c.x), p, mout(y, ys)));
    OpAttrs attrs{OpAttr::list("kernel", {c.k, c.k}),
                  OpAttr::list("strides", {c.stride, c.stride}),
                  OpAttr::list("padding", {c.pad, c.pad, c.pad, c.pad}),
                  OpAttr::list("dilation", {1, 1}),
                  OpAttr::boolean("ceil_mode", c.ceil),
                  OpAttr::boolean("channels_last", true)};
    ASSERT_TRUE(mc::test::cpuKernel(
        OpId::MaxPool2d, attrs, {cin(xl, toLast(c.x))}, mout(got, toLast(ys))));
    std::vector<float> want = nhwc(y, ys);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_TRUE(got[i] == want[i] ||
                  (std::isnan(got[i]) && std::isnan(want[i])));
  }
}

TEST(ChannelsLast, PoolingRefusesAnNchwResultShape) {
  std::vector<float> x(1 * 6 * 6 * 4), y(1 * 4 * 3 * 3);
  Pool2dParams p;
  p.kernelH = p.kernelW = p.strideH = p.strideW = 2;
  p.channelsLast = true;
  Status st = maxPool2d(cin(x, {1, 6, 6, 4}), p, mout(y, {1, 4, 3, 3}));
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("max_pool2d"), std::string::npos) << st.message();
}

} // namespace
