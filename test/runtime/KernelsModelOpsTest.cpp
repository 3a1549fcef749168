// The kernels of schema 1.1 (ops of real models) against plain reference
// loops written here, in double: conv2d (strides, asymmetric padding,
// dilation, groups, depthwise, 1x1), pooling (padding, ceil-mode sizes,
// count_include_pad, dilation), norms, gather/slice/pad/concat, compare,
// select, clamp, log_softmax, pow, erf/gelu, and the new unary/binary/reduce
// ops.
#include "TestUtil.h"
#include "modelc/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <limits>
#include <numeric>

using namespace mc::rt;
using mc::test::randomFloats;
using mc::test::cin;
using mc::test::mout;
using mc::test::relErr;

namespace {

int64_t poolOut(int64_t in, int64_t k, int64_t s, int64_t padL, int64_t padR,
                int64_t dil, bool ceil) {
  // PyTorch's pooling_output_shape, with asymmetric padding.
  int64_t num = in + padL + padR - dil * (k - 1) - 1;
  int64_t out = (ceil ? (num + s - 1) / s : num / s) + 1;
  if (ceil && (out - 1) * s >= in + padL)
    --out;
  return out;
}

} // namespace

// --- conv2d ---

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw;
  Conv2dParams p;
  const char *what;
};

std::vector<double> convReference(const std::vector<float> &x,
                                  const std::vector<float> &wt,
                                  const ConvCase &k, int64_t oh, int64_t ow) {
  const Conv2dParams &p = k.p;
  int64_t cg = k.c / p.groups, og = k.o / p.groups;
  std::vector<double> y(size_t(k.n * k.o * oh * ow));
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t o = 0; o < k.o; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double s = 0;
          int64_t g = o / og;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t a = 0; a < k.kh; ++a)
              for (int64_t b = 0; b < k.kw; ++b) {
                int64_t ih = i * p.strideH - p.padTop + a * p.dilationH;
                int64_t iw = j * p.strideW - p.padLeft + b * p.dilationW;
                if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w)
                  continue;
                s += double(x[((n * k.c + g * cg + c) * k.h + ih) * k.w + iw]) *
                     wt[((o * cg + c) * k.kh + a) * k.kw + b];
              }
          y[((n * k.o + o) * oh + i) * ow + j] = s;
        }
  return y;
}

TEST(KernelsNN, Conv2dMatchesReference) {
  auto P = [](int64_t sh, int64_t sw, int64_t pt, int64_t pl, int64_t pb,
              int64_t pr, int64_t dh, int64_t dw, int64_t g) {
    Conv2dParams p;
    p.strideH = sh;
    p.strideW = sw;
    p.padTop = pt;
    p.padLeft = pl;
    p.padBottom = pb;
    p.padRight = pr;
    p.dilationH = dh;
    p.dilationW = dw;
    p.groups = g;
    return p;
  };
  ConvCase cases[] = {
      {1, 3, 9, 9, 4, 3, 3, P(1, 1, 1, 1, 1, 1, 1, 1, 1), "3x3 pad 1"},
      {2, 3, 10, 11, 5, 3, 2, P(2, 3, 0, 1, 2, 1, 1, 1, 1),
       "strides 2x3, asymmetric padding, 3x2 kernel"},
      {1, 4, 12, 12, 6, 3, 3, P(1, 2, 2, 1, 2, 3, 2, 3, 1), "dilation 2x3"},
      {2, 6, 7, 7, 4, 3, 3, P(1, 1, 1, 1, 1, 1, 1, 1, 2), "groups 2"},
      {2, 8, 9, 9, 8, 3, 3, P(1, 1, 1, 1, 1, 1, 1, 1, 8), "depthwise"},
      {1, 8, 10, 9, 8, 5, 3, P(2, 2, 2, 0, 1, 1, 2, 1, 8),
       "depthwise, stride 2, asymmetric padding, dilation"},
      {1, 4, 6, 6, 8, 3, 3, P(1, 1, 1, 1, 1, 1, 1, 1, 4),
       "groups == C, channel multiplier 2"},
      {2, 16, 7, 5, 12, 1, 1, P(1, 1, 0, 0, 0, 0, 1, 1, 1),
       "1x1 stride 1 (no im2col)"},
      {1, 16, 7, 7, 12, 1, 1, P(1, 1, 0, 0, 0, 0, 1, 1, 4),
       "1x1 stride 1, groups 4"},
      {1, 8, 8, 8, 16, 1, 1, P(2, 2, 0, 0, 0, 0, 1, 1, 1), "1x1 stride 2"},
      {1, 3, 32, 32, 8, 7, 7, P(2, 2, 3, 3, 3, 3, 1, 1, 1),
       "7x7 stride 2 pad 3 (ResNet stem)"},
      {1, 2, 3, 3, 3, 3, 3, P(1, 1, 0, 0, 0, 0, 1, 1, 1), "kernel == input"},
      // Padding and dilation larger than the input: whole taps fall outside
      // it for every output (the DeepLabv3 ASPP branch; issue 12 item 1
      // crashed im2col with a negative zero-fill length here).
      {1, 2, 8, 8, 3, 3, 3, P(1, 1, 9, 9, 9, 9, 9, 9, 1),
       "pad 9 dilation 9 on 8x8 (taps outside the input)"},
      {2, 2, 8, 8, 3, 3, 3, P(1, 1, 9, 9, 9, 9, 9, 9, 1),
       "pad 9 dilation 9, batch 2"},
      {1, 4, 5, 6, 4, 3, 3, P(2, 1, 12, 3, 12, 3, 12, 4, 2),
       "pad 12 dilation 12, stride 2, groups 2"},
      {1, 4, 5, 5, 4, 3, 3, P(1, 1, 7, 7, 7, 7, 7, 7, 4),
       "pad 7 dilation 7, depthwise"},
  };
  unsigned seed = 100;
  for (const ConvCase &k : cases) {
    const Conv2dParams &p = k.p;
    int64_t oh = (k.h + p.padTop + p.padBottom - p.dilationH * (k.kh - 1) - 1) /
                     p.strideH + 1;
    int64_t ow = (k.w + p.padLeft + p.padRight - p.dilationW * (k.kw - 1) - 1) /
                     p.strideW + 1;
    std::vector<float> x = randomFloats(size_t(k.n * k.c * k.h * k.w), ++seed);
    std::vector<float> wt =
        randomFloats(size_t(k.o * k.c / p.groups * k.kh * k.kw), ++seed);
    std::vector<float> y(size_t(k.n * k.o * oh * ow), NAN);
    Status st = conv2d(cin(x, {k.n, k.c, k.h, k.w}),
                       cin(wt, {k.o, k.c / p.groups, k.kh, k.kw}), p,
                       mout(y, {k.n, k.o, oh, ow}));
    ASSERT_TRUE(st) << k.what << ": " << st.message();
    EXPECT_LT(relErr(y, convReference(x, wt, k, oh, ow)), 1e-6) << k.what;
    // The workspace overload with exactly the advertised scratch.
    size_t ws = conv2dWorkspaceSize({k.n, k.c, k.h, k.w},
                                    {k.o, k.c / p.groups, k.kh, k.kw},
                                    {k.n, k.o, oh, ow}, p);
    bool noScratch = p.groups == k.c && k.o == k.c;
    noScratch |= k.kh == 1 && k.kw == 1 && p.strideH == 1 && p.strideW == 1 &&
                 p.padTop + p.padLeft + p.padBottom + p.padRight == 0;
    EXPECT_EQ(ws == 0, noScratch) << k.what;
    std::vector<float> scratch(ws), y2(y.size(), NAN);
    ASSERT_TRUE(conv2d(cin(x, {k.n, k.c, k.h, k.w}),
                       cin(wt, {k.o, k.c / p.groups, k.kh, k.kw}), p,
                       mout(y2, {k.n, k.o, oh, ow}), scratch.data(), ws));
    EXPECT_EQ(y, y2) << k.what;
  }
}

TEST(KernelsNN, Conv2dRejectsBadShapesAndScratch) {
  std::vector<float> x(2 * 4 * 5 * 5), w(6 * 2 * 3 * 3), y(2 * 6 * 3 * 3);
  Conv2dParams p;
  p.groups = 2;
  ASSERT_TRUE(conv2d(cin(x, {2, 4, 5, 5}), cin(w, {6, 2, 3, 3}), p,
                     mout(y, {2, 6, 3, 3})));
  Status st = conv2d(cin(x, {2, 4, 5, 5}), cin(w, {6, 2, 3, 3}), p,
                     mout(y, {2, 6, 4, 3}));
  EXPECT_NE(st.message().find("result shape [2, 6, 4, 3], expected "
                              "[2, 6, 3, 3]"),
            std::string::npos)
      << st.message();
  p.groups = 3;
  st = conv2d(cin(x, {2, 4, 5, 5}), cin(w, {6, 2, 3, 3}), p,
              mout(y, {2, 6, 3, 3}));
  EXPECT_NE(st.message().find("groups 3 must divide the input channels 4"),
            std::string::npos)
      << st.message();
  p.groups = 2;
  std::vector<float> tiny(3);
  st = conv2d(cin(x, {2, 4, 5, 5}), cin(w, {6, 2, 3, 3}), p,
              mout(y, {2, 6, 3, 3}), tiny.data(), tiny.size());
  EXPECT_NE(st.message().find("workspace of 3 floats"), std::string::npos)
      << st.message();
}

// --- pooling ---

struct PoolCase {
  int64_t n, c, h, w;
  Pool2dParams p;
  bool ceil;
  const char *what;
};

Pool2dParams poolParams(int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                        int64_t pt, int64_t pl, int64_t pb, int64_t pr,
                        int64_t dh = 1, int64_t dw = 1) {
  Pool2dParams p;
  p.kernelH = kh;
  p.kernelW = kw;
  p.strideH = sh;
  p.strideW = sw;
  p.padTop = pt;
  p.padLeft = pl;
  p.padBottom = pb;
  p.padRight = pr;
  p.dilationH = dh;
  p.dilationW = dw;
  return p;
}

TEST(KernelsNN, PoolOutputSizesFollowCeilModeRule) {
  // PyTorch: 7 -> kernel 3, stride 2: floor 3, ceil 3; 8 -> floor 3, ceil 4;
  // padding 1 with ceil: the last window may not start in the padding.
  EXPECT_EQ(poolOut(7, 3, 2, 0, 0, 1, false), 3);
  EXPECT_EQ(poolOut(8, 3, 2, 0, 0, 1, false), 3);
  EXPECT_EQ(poolOut(8, 3, 2, 0, 0, 1, true), 4);
  EXPECT_EQ(poolOut(6, 2, 2, 1, 1, 1, true), 4);
  EXPECT_EQ(poolOut(5, 2, 2, 1, 1, 1, true), 3); // 4th would start in padding
}

TEST(KernelsNN, MaxPoolMatchesReference) {
  PoolCase cases[] = {
      {1, 2, 8, 8, poolParams(2, 2, 2, 2, 0, 0, 0, 0), false, "2x2 s2"},
      {2, 3, 13, 13, poolParams(3, 3, 2, 2, 1, 1, 1, 1), false,
       "3x3 s2 p1 (ResNet)"},
      {1, 2, 8, 9, poolParams(3, 3, 2, 2, 0, 0, 0, 0), true,
       "ceil mode, partial windows"},
      {1, 2, 9, 10, poolParams(3, 2, 2, 3, 1, 0, 2, 1), true,
       "asymmetric padding, ceil"},
      {1, 3, 11, 12, poolParams(3, 3, 1, 2, 2, 1, 2, 1, 2, 3), false,
       "dilation 2x3"},
      {1, 1, 5, 5, poolParams(2, 2, 2, 2, 1, 1, 1, 1), true,
       "ceil mode drops the window starting in the padding"},
  };
  unsigned seed = 300;
  for (const PoolCase &k : cases) {
    const Pool2dParams &p = k.p;
    int64_t oh = poolOut(k.h, p.kernelH, p.strideH, p.padTop, p.padBottom,
                         p.dilationH, k.ceil);
    int64_t ow = poolOut(k.w, p.kernelW, p.strideW, p.padLeft, p.padRight,
                         p.dilationW, k.ceil);
    std::vector<float> x = randomFloats(size_t(k.n * k.c * k.h * k.w), ++seed);
    std::vector<float> y(size_t(k.n * k.c * oh * ow), NAN);
    ASSERT_TRUE(maxPool2d(cin(x, {k.n, k.c, k.h, k.w}), p,
                          mout(y, {k.n, k.c, oh, ow})))
        << k.what;
    for (int64_t nc = 0; nc < k.n * k.c; ++nc)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double m = -INFINITY;
          for (int64_t a = 0; a < p.kernelH; ++a)
            for (int64_t b = 0; b < p.kernelW; ++b) {
              int64_t ih = i * p.strideH - p.padTop + a * p.dilationH;
              int64_t iw = j * p.strideW - p.padLeft + b * p.dilationW;
              if (ih >= 0 && ih < k.h && iw >= 0 && iw < k.w)
                m = std::max(m, double(x[(nc * k.h + ih) * k.w + iw]));
            }
          ASSERT_EQ(y[(nc * oh + i) * ow + j], float(m))
              << k.what << " at " << nc << "," << i << "," << j;
        }
  }
  // NaN propagates, as in PyTorch.
  std::vector<float> x{1, NAN, 3, 4}, y(1);
  ASSERT_TRUE(maxPool2d(cin(x, {1, 1, 2, 2}), poolParams(2, 2, 1, 1, 0, 0, 0, 0),
                        mout(y, {1, 1, 1, 1})));
  EXPECT_TRUE(std::isnan(y[0]));
}

TEST(KernelsNN, AvgPoolMatchesPyTorchFormulaBothPadModes) {
  PoolCase cases[] = {
      {1, 2, 8, 8, poolParams(2, 2, 2, 2, 0, 0, 0, 0), false, "2x2 s2"},
      {2, 3, 9, 9, poolParams(3, 3, 2, 2, 1, 1, 1, 1), false, "3x3 s2 p1"},
      {1, 2, 8, 9, poolParams(3, 3, 2, 2, 1, 1, 1, 1), true, "ceil, p1"},
      {1, 2, 10, 7, poolParams(3, 2, 3, 2, 1, 0, 1, 1), true,
       "asymmetric padding, ceil"},
      {1, 4, 7, 7, poolParams(7, 7, 1, 1, 0, 0, 0, 0), false,
       "global 7x7 (ResNet head)"},
  };
  unsigned seed = 400;
  for (const PoolCase &k : cases)
    for (bool include : {false, true}) {
      const Pool2dParams &p = k.p;
      int64_t oh = poolOut(k.h, p.kernelH, p.strideH, p.padTop, p.padBottom, 1,
                           k.ceil);
      int64_t ow = poolOut(k.w, p.kernelW, p.strideW, p.padLeft, p.padRight, 1,
                           k.ceil);
      std::vector<float> x =
          randomFloats(size_t(k.n * k.c * k.h * k.w), ++seed);
      std::vector<float> y(size_t(k.n * k.c * oh * ow), NAN);
      ASSERT_TRUE(avgPool2d(cin(x, {k.n, k.c, k.h, k.w}), p, include,
                            mout(y, {k.n, k.c, oh, ow})))
          << k.what;
      std::vector<double> ref;
      for (int64_t nc = 0; nc < k.n * k.c; ++nc)
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j) {
            // PyTorch's AvgPool2d: clip to input + padding, count, clip to
            // the input.
            int64_t hs = i * p.strideH - p.padTop, ws = j * p.strideW - p.padLeft;
            int64_t he = std::min(hs + p.kernelH, k.h + p.padBottom);
            int64_t we = std::min(ws + p.kernelW, k.w + p.padRight);
            int64_t poolSize = (he - hs) * (we - ws);
            hs = std::max<int64_t>(hs, 0);
            ws = std::max<int64_t>(ws, 0);
            he = std::min(he, k.h);
            we = std::min(we, k.w);
            double s = 0;
            for (int64_t a = hs; a < he; ++a)
              for (int64_t b = ws; b < we; ++b)
                s += x[(nc * k.h + a) * k.w + b];
            ref.push_back(s / double(include ? poolSize : (he - hs) * (we - ws)));
          }
      EXPECT_LT(relErr(y, ref), 1e-6) << k.what << " include " << include;
    }
}

// --- norms ---

TEST(KernelsNN, BatchNormEveryAxis) {
  Shape s{2, 3, 4, 5};
  std::vector<float> x = randomFloats(120, 500, -3, 3);
  for (int64_t axis : {0, 1, 2, 3, -3}) {
    int64_t ax = axis < 0 ? axis + 4 : axis, c = s[ax];
    std::vector<float> sc = randomFloats(c, 501), of = randomFloats(c, 502),
                       mu = randomFloats(c, 503),
                       var = randomFloats(c, 504, 0.1f, 2), y(120, NAN);
    ASSERT_TRUE(batchNorm(cin(x, s), cin(sc, {c}), cin(of, {c}), cin(mu, {c}),
                          cin(var, {c}), 1e-5, axis, mout(y, s)));
    std::vector<double> ref(120);
    int64_t inner = 1;
    for (int64_t d = ax + 1; d < 4; ++d)
      inner *= s[d];
    for (int64_t i = 0; i < 120; ++i) {
      int64_t k = (i / inner) % c;
      ref[i] = (x[i] - double(mu[k])) / std::sqrt(double(var[k]) + 1e-5) *
                   sc[k] + of[k];
    }
    EXPECT_LT(relErr(y, ref), 1e-6) << axis;
  }
  std::vector<float> bad(4), y(120);
  Status st = batchNorm(cin(x, s), cin(bad, {4}), cin(bad, {4}), cin(bad, {4}),
                        cin(bad, {4}), 1e-5, 1, mout(y, s));
  EXPECT_NE(st.message().find("scale f32[4] is not f32[3]"), std::string::npos)
      << st.message();
}

TEST(KernelsNN, LayerNormOverTrailingDims) {
  Shape s{3, 4, 16};
  // A large offset: the two-pass variance stays accurate.
  std::vector<float> x = randomFloats(192, 600, 1000, 1001);
  for (int64_t axis : {2, 1, -1}) {
    int64_t ax = axis < 0 ? axis + 3 : axis;
    Shape ns(s.begin() + ax, s.end());
    int64_t len = numElements(ns);
    std::vector<float> g = randomFloats(len, 601), b = randomFloats(len, 602),
                       y(192, NAN);
    ASSERT_TRUE(
        layerNorm(cin(x, s), cin(g, ns), cin(b, ns), axis, 1e-5, mout(y, s)));
    std::vector<double> ref(192);
    for (int64_t r = 0; r < 192 / len; ++r) {
      double m = 0, v = 0;
      for (int64_t i = 0; i < len; ++i)
        m += x[r * len + i];
      m /= len;
      for (int64_t i = 0; i < len; ++i)
        v += (x[r * len + i] - m) * (x[r * len + i] - m);
      v /= len;
      for (int64_t i = 0; i < len; ++i)
        ref[r * len + i] =
            (x[r * len + i] - m) / std::sqrt(v + 1e-5) * g[i] + b[i];
    }
    EXPECT_LT(relErr(y, ref), 1e-5) << axis;
  }
}

TEST(KernelsNN, LogSoftmaxIsStableOnEveryAxis) {
  Shape s{3, 4, 5};
  std::vector<float> x = randomFloats(60, 700, -3, 3);
  // Large inputs: a naive log(sum(exp(x))) overflows to inf.
  for (size_t i = 0; i < 20; ++i)
    x[i] += 1000;
  for (int64_t axis : {0, 1, 2, -1}) {
    int64_t ax = axis < 0 ? axis + 3 : axis;
    std::vector<float> y(60, NAN);
    ASSERT_TRUE(logSoftmax(cin(x, s), axis, mout(y, s)));
    int64_t inner = 1, len = s[ax];
    for (int64_t d = ax + 1; d < 3; ++d)
      inner *= s[d];
    std::vector<double> ref(60);
    for (int64_t i = 0; i < 60; ++i) {
      int64_t base = i - ((i / inner) % len) * inner;
      double m = -INFINITY, sum = 0;
      for (int64_t j = 0; j < len; ++j)
        m = std::max(m, double(x[base + j * inner]));
      for (int64_t j = 0; j < len; ++j)
        sum += std::exp(x[base + j * inner] - m);
      ref[i] = x[i] - m - std::log(sum);
    }
    for (float v : y)
      ASSERT_TRUE(std::isfinite(v));
    EXPECT_LT(relErr(y, ref), 1e-6) << axis;
  }
  std::vector<float> big{1e30f, -1e30f, 0}, y(3);
  ASSERT_TRUE(logSoftmax(cin(big, {3}), 0, mout(y, {3})));
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[2], -1e30f);
}

// --- data movement ---

TEST(KernelsShape, GatherEveryAxisWithNegativeIndices) {
  Shape ds{4, 5, 6};
  std::vector<float> data = randomFloats(120, 800);
  std::vector<int64_t> idx64{0, -1, 2, 3, -4, 1};
  std::vector<int32_t> idx32(idx64.begin(), idx64.end());
  for (int64_t axis : {0, 1, 2, -1}) {
    int64_t ax = axis < 0 ? axis + 3 : axis, len = ds[ax];
    Shape is{2, 3};
    Shape os(ds.begin(), ds.begin() + ax);
    os.insert(os.end(), is.begin(), is.end());
    os.insert(os.end(), ds.begin() + ax + 1, ds.end());
    for (DType it : {DType::I32, DType::I64}) {
      std::vector<float> y(size_t(numElements(os)), NAN);
      const void *ip = it == DType::I32 ? (const void *)idx32.data()
                                        : (const void *)idx64.data();
      ASSERT_TRUE(gather(cin(data, ds), {it, is, ip}, axis, mout(y, os)));
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < ax; ++d)
        outer *= ds[d];
      for (int64_t d = ax + 1; d < 3; ++d)
        inner *= ds[d];
      std::vector<double> ref;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t k = 0; k < 6; ++k) {
          int64_t i = idx64[k] < 0 ? idx64[k] + len : idx64[k];
          for (int64_t j = 0; j < inner; ++j)
            ref.push_back(data[(o * len + i) * inner + j]);
        }
      EXPECT_EQ(relErr(y, ref), 0) << axis;
    }
  }
  // Embedding-style: i64 ids into a table; one id out of range.
  std::vector<int64_t> bad{1, 4};
  std::vector<float> y(2 * 5 * 6);
  Status st =
      gather(cin(data, ds), {DType::I64, {2}, bad.data()}, 0, mout(y, {2, 5, 6}));
  EXPECT_NE(st.message().find("gather: index 4 (at position 1 of the indices) "
                              "is out of range for an axis of size 4"),
            std::string::npos)
      << st.message();
  bad = {-5, 0};
  st = gather(cin(data, ds), {DType::I64, {2}, bad.data()}, 0,
              mout(y, {2, 5, 6}));
  EXPECT_NE(st.message().find("index -5"), std::string::npos) << st.message();
  st = gather(cin(data, ds), {DType::F32, {2}, data.data()}, 0,
              mout(y, {2, 5, 6}));
  EXPECT_NE(st.message().find("unsupported dtype f32"), std::string::npos);
}

/// scatter_add against sums in index order (so exactly equal): repeated
/// and negative indices, every axis, i32 and i64, a width over one
/// thread's column run (130), and the adjoint identity <gather(x), u> =
/// <x, scatter_add(u)>.
TEST(KernelsShape, ScatterAddSumsInIndexOrderAndIsGathersAdjoint) {
  std::vector<int64_t> idx64{2, -1, 2, 0, 3, 2};
  std::vector<int32_t> idx32(idx64.begin(), idx64.end());
  for (Shape rs : {Shape{4, 5, 6}, Shape{3, 4, 130}})
    for (int64_t axis : {0, 1, 2}) {
      int64_t len = rs[size_t(axis)];
      if (len < 4)
        continue; // the indices reach 3
      Shape is{2, 3};
      Shape us(rs.begin(), rs.begin() + axis);
      us.insert(us.end(), is.begin(), is.end());
      us.insert(us.end(), rs.begin() + axis + 1, rs.end());
      std::vector<float> upd = randomFloats(size_t(numElements(us)), 900);
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < axis; ++d)
        outer *= rs[size_t(d)];
      for (size_t d = size_t(axis) + 1; d < rs.size(); ++d)
        inner *= rs[d];
      std::vector<float> ref(size_t(numElements(rs)), 0.0f);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t k = 0; k < 6; ++k) {
          int64_t r =
              idx64[size_t(k)] < 0 ? idx64[size_t(k)] + len : idx64[size_t(k)];
          for (int64_t j = 0; j < inner; ++j)
            ref[size_t((o * len + r) * inner + j)] +=
                upd[size_t((o * 6 + k) * inner + j)];
        }
      for (DType it : {DType::I32, DType::I64}) {
        SCOPED_TRACE("axis " + std::to_string(axis) + ", width " +
                     std::to_string(inner));
        std::vector<float> y(ref.size(), NAN);
        const void *ip = it == DType::I32 ? (const void *)idx32.data()
                                          : (const void *)idx64.data();
        ASSERT_TRUE(scatterAdd(cin(upd, us), {it, is, ip}, axis, mout(y, rs)));
        EXPECT_EQ(y, ref);
        // <gather(x), u> = <x, scatter_add(u)>, in double (but for the f32
        // rounding of the sums).
        std::vector<float> x = randomFloats(ref.size(), 901);
        std::vector<float> gx(upd.size());
        ASSERT_TRUE(gather(cin(x, rs), {it, is, ip}, axis, mout(gx, us)));
        double lhs = 0, rhs = 0;
        for (size_t e = 0; e < upd.size(); ++e)
          lhs += double(gx[e]) * upd[e];
        for (size_t e = 0; e < x.size(); ++e)
          rhs += double(x[e]) * y[e];
        EXPECT_NEAR(lhs, rhs, 1e-6 * std::max(1.0, std::fabs(lhs)));
      }
    }
  // Errors: an index out of range (named, with its position), a dtype, a
  // result shape that does not follow the rule.
  Shape us{2, 6}, rs{4, 6};
  std::vector<float> upd = randomFloats(12, 902), y(24);
  std::vector<int64_t> bad{1, 4};
  Status st =
      scatterAdd(cin(upd, us), {DType::I64, {2}, bad.data()}, 0, mout(y, rs));
  EXPECT_NE(st.message().find("scatter_add: index 4 (at position 1 of the "
                              "indices) is out of range for an axis of size 4"),
            std::string::npos)
      << st.message();
  bad = {-5, 0};
  st = scatterAdd(cin(upd, us), {DType::I64, {2}, bad.data()}, 0, mout(y, rs));
  EXPECT_NE(st.message().find("index -5"), std::string::npos) << st.message();
  std::vector<int64_t> ok{0, 1};
  std::vector<float> y5(30);
  st = scatterAdd(cin(upd, us), {DType::I64, {2}, ok.data()}, 0,
                  mout(y5, {5, 6}));
  EXPECT_TRUE(st.isOk()) << st.message();
  st = scatterAdd(cin(upd, us), {DType::I64, {3}, ok.data()}, 0, mout(y, rs));
  EXPECT_NE(st.message().find("not the indices' shape [3]"), std::string::npos)
      << st.message();
  st = scatterAdd(cin(upd, us), {DType::F32, {2}, upd.data()}, 0, mout(y, rs));
  EXPECT_NE(st.message().find("unsupported dtype f32"), std::string::npos)
      << st.message();
  // Empty rows (a width of 0) and no leading elements: nothing to sum, no
  // division by the empty width.
  std::vector<float> none;
  std::vector<int64_t> three{0, 1, 2};
  EXPECT_TRUE(scatterAdd(cin(none, {3, 0}), {DType::I64, {3}, three.data()}, 0,
                         mout(none, {4, 0})));
  EXPECT_TRUE(scatterAdd(cin(none, {0, 3, 2}), {DType::I64, {3}, three.data()},
                         1, mout(none, {0, 4, 2})));
}

TEST(KernelsShape, SliceWithStartsAndSteps) {
  Shape as{5, 7, 6};
  std::vector<int32_t> a(210);
  std::iota(a.begin(), a.end(), 0);
  struct Case {
    std::vector<int64_t> start, strides;
    Shape out;
  } cases[] = {
      {{0, 0, 0}, {1, 1, 1}, {5, 7, 6}},
      {{1, 2, 3}, {1, 1, 1}, {3, 4, 2}},
      {{0, 1, 0}, {2, 3, 5}, {3, 2, 2}},
      {{4, 6, 5}, {1, 1, 1}, {1, 1, 1}},
      {{2, 0, 1}, {3, 2, 2}, {1, 4, 3}},
      {{5, 0, 0}, {1, 1, 1}, {0, 7, 6}},
  };
  for (const Case &c : cases) {
    std::vector<int32_t> y(size_t(numElements(c.out)), -1);
    ASSERT_TRUE(slice({DType::I32, as, a.data()}, c.start, c.strides,
                      {DType::I32, c.out, y.data()}));
    int64_t k = 0;
    for (int64_t i = 0; i < c.out[0]; ++i)
      for (int64_t j = 0; j < c.out[1]; ++j)
        for (int64_t l = 0; l < c.out[2]; ++l, ++k) {
          int64_t src = ((c.start[0] + i * c.strides[0]) * 7 +
                         c.start[1] + j * c.strides[1]) * 6 +
                        c.start[2] + l * c.strides[2];
          ASSERT_EQ(y[k], a[src]);
        }
  }
  std::vector<int32_t> y(3);
  Status st = slice({DType::I32, as, a.data()}, {0, 0, 1}, {1, 1, 3},
                    {DType::I32, {1, 1, 3}, y.data()});
  EXPECT_NE(st.message().find("dim 2: start 1, stride 3 and count 3 do not fit"),
            std::string::npos)
      << st.message();
}

TEST(KernelsShape, PadConvertsTheValue) {
  Shape as{2, 3};
  std::vector<float> a{1, 2, 3, 4, 5, 6};
  std::vector<float> y(5 * 5, 0);
  ASSERT_TRUE(pad(cin(a, as), {1, 0}, {2, 2}, -1.5, mout(y, {5, 5})));
  std::vector<float> expect{-1.5, -1.5, -1.5, -1.5, -1.5, //
                            1,    2,    3,    -1.5, -1.5, //
                            4,    5,    6,    -1.5, -1.5, //
                            -1.5, -1.5, -1.5, -1.5, -1.5, //
                            -1.5, -1.5, -1.5, -1.5, -1.5};
  EXPECT_EQ(y, expect);
  // Rank 3 against a reference, i64 (value truncated), i1 (value != 0).
  Shape bs{2, 3, 4};
  std::vector<int64_t> b(24);
  std::iota(b.begin(), b.end(), 1);
  Shape os{3, 5, 5};
  std::vector<int64_t> yb(75);
  ASSERT_TRUE(pad({DType::I64, bs, b.data()}, {1, 0, 1}, {0, 2, 0}, 7.9,
                  {DType::I64, os, yb.data()}));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j)
      for (int64_t k = 0; k < 5; ++k) {
        int64_t si = i - 1, sj = j, sk = k - 1;
        bool in = si >= 0 && si < 2 && sj < 3 && sk >= 0 && sk < 4;
        EXPECT_EQ(yb[(i * 5 + j) * 5 + k], in ? b[(si * 3 + sj) * 4 + sk] : 7);
      }
  std::vector<uint8_t> c{0, 1}, yc(4, 9);
  ASSERT_TRUE(
      pad({DType::I1, {2}, c.data()}, {1}, {1}, 0.5, {DType::I1, {4}, yc.data()}));
  EXPECT_EQ(yc, (std::vector<uint8_t>{1, 0, 1, 1}));
  Status st = pad(cin(a, as), {1, -1}, {0, 1}, 0, mout(y, {3, 3}));
  EXPECT_NE(st.message().find("dim 1"), std::string::npos) << st.message();
}

TEST(KernelsShape, ConcatOnEveryAxis) {
  Shape sa{2, 3, 4};
  for (int64_t axis : {0, 1, 2, -2}) {
    int64_t ax = axis < 0 ? axis + 3 : axis;
    std::vector<std::vector<float>> ins;
    std::vector<ConstTensor> ts;
    std::vector<Shape> shapes;
    Shape os = sa;
    os[ax] = 0;
    for (int k = 0; k < 3; ++k) {
      Shape s = sa;
      s[ax] = k + 1;
      os[ax] += k + 1;
      shapes.push_back(s);
      ins.push_back(randomFloats(size_t(numElements(s)), 900 + k));
    }
    for (int k = 0; k < 3; ++k)
      ts.push_back(cin(ins[k], shapes[k]));
    std::vector<float> y(size_t(numElements(os)), NAN);
    ASSERT_TRUE(concat(ts, axis, mout(y, os)));
    for (int64_t i = 0; i < numElements(os); ++i) {
      int64_t idx[3] = {i / (os[1] * os[2]), (i / os[2]) % os[1], i % os[2]};
      int64_t k = 0, at = idx[ax];
      while (at >= shapes[k][ax])
        at -= shapes[k][ax], ++k;
      idx[ax] = at;
      const Shape &s = shapes[k];
      ASSERT_EQ(y[i], ins[k][(idx[0] * s[1] + idx[1]) * s[2] + idx[2]])
          << axis << " " << i;
    }
  }
  std::vector<float> a(6), y(12);
  Status st = concat({cin(a, {2, 3}), cin(a, {3, 2})}, 0, mout(y, {4, 3}));
  EXPECT_NE(st.message().find("operand 1 f32[3, 2] does not match"),
            std::string::npos)
      << st.message();
}

// --- elementwise ---

TEST(KernelsElementwise, CompareIncludingNaN) {
  std::vector<float> a{1, 2, 3, NAN, NAN, -0.0f, INFINITY};
  std::vector<float> b{2, 2, 1, 1, NAN, 0.0f, INFINITY};
  Shape s{7};
  struct Case {
    CompareOp op;
    std::vector<uint8_t> expect;
  } cases[] = {
      {CompareOp::Eq, {0, 1, 0, 0, 0, 1, 1}},
      {CompareOp::Ne, {1, 0, 1, 1, 1, 0, 0}},
      {CompareOp::Lt, {1, 0, 0, 0, 0, 0, 0}},
      {CompareOp::Le, {1, 1, 0, 0, 0, 1, 1}},
      {CompareOp::Gt, {0, 0, 1, 0, 0, 0, 0}},
      {CompareOp::Ge, {0, 1, 1, 0, 0, 1, 1}},
  };
  for (const Case &c : cases) {
    std::vector<uint8_t> y(7, 7);
    ASSERT_TRUE(compare(c.op, cin(a, s), cin(b, s), {DType::I1, s, y.data()}));
    EXPECT_EQ(y, c.expect) << int(c.op);
  }
  std::vector<int64_t> ia{-5, 3, 9}, ib{3, 3, -9};
  std::vector<uint8_t> y(3);
  ASSERT_TRUE(compare(CompareOp::Lt, {DType::I64, {3}, ia.data()},
                      {DType::I64, {3}, ib.data()}, {DType::I1, {3}, y.data()}));
  EXPECT_EQ(y, (std::vector<uint8_t>{1, 0, 0}));
  std::vector<uint8_t> pa{0, 1, 2}, pb{0, 0, 1};
  ASSERT_TRUE(compare(CompareOp::Eq, {DType::I1, {3}, pa.data()},
                      {DType::I1, {3}, pb.data()}, {DType::I1, {3}, y.data()}));
  EXPECT_EQ(y, (std::vector<uint8_t>{1, 0, 1})); // nonzero bytes are true
  Status st = compare(CompareOp::Lt, {DType::I1, {3}, pa.data()},
                      {DType::I1, {3}, pb.data()}, {DType::I1, {3}, y.data()});
  EXPECT_NE(st.message().find("unsupported dtype i1"), std::string::npos)
      << st.message();
  st = compare(CompareOp::Eq, cin(a, s), cin(b, s), mout(a, s));
  EXPECT_NE(st.message().find("is not i1[7]"), std::string::npos)
      << st.message();
}

TEST(KernelsElementwise, SelectAnyDType) {
  std::vector<uint8_t> p{1, 0, 1, 0};
  std::vector<float> a{1, 2, 3, 4}, b{-1, -2, -3, -4}, y(4);
  ASSERT_TRUE(select({DType::I1, {2, 2}, p.data()}, cin(a, {2, 2}),
                     cin(b, {2, 2}), mout(y, {2, 2})));
  EXPECT_EQ(y, (std::vector<float>{1, -2, 3, -4}));
  std::vector<int64_t> ia{1, 2, 3, 4}, ib{5, 6, 7, 8}, iy(4);
  ASSERT_TRUE(select({DType::I1, {4}, p.data()}, {DType::I64, {4}, ia.data()},
                     {DType::I64, {4}, ib.data()},
                     {DType::I64, {4}, iy.data()}));
  EXPECT_EQ(iy, (std::vector<int64_t>{1, 6, 3, 8}));
  std::vector<uint16_t> ha{1, 2, 3, 4}, hb{5, 6, 7, 8}, hy(4);
  ASSERT_TRUE(select({DType::I1, {4}, p.data()}, {DType::F16, {4}, ha.data()},
                     {DType::F16, {4}, hb.data()},
                     {DType::F16, {4}, hy.data()}));
  EXPECT_EQ(hy, (std::vector<uint16_t>{1, 6, 3, 8}));
  Status st = select(cin(a, {4}), cin(a, {4}), cin(b, {4}), mout(y, {4}));
  EXPECT_NE(st.message().find("predicate f32[4] is not i1"), std::string::npos);
  st = select({DType::I1, {4}, p.data()}, cin(a, {4}), {DType::I64, {4}, ib.data()},
              mout(y, {4}));
  EXPECT_NE(st.message().find("on_false"), std::string::npos) << st.message();
}

TEST(KernelsElementwise, ClampAllDTypesAndNaN) {
  std::vector<float> a{-3, -1, 0, 1, 3, NAN}, y(6);
  ASSERT_TRUE(clamp(cin(a, {6}), -1.5, 2, mout(y, {6})));
  EXPECT_EQ(y[0], -1.5f);
  EXPECT_EQ(y[1], -1.0f);
  EXPECT_EQ(y[4], 2.0f);
  EXPECT_TRUE(std::isnan(y[5]));
  // Infinite bounds are no bound; lo > hi gives hi (min(max(x, lo), hi)).
  ASSERT_TRUE(clamp(cin(a, {6}), -INFINITY, 0, mout(y, {6})));
  EXPECT_EQ(y[0], -3.0f);
  EXPECT_EQ(y[4], 0.0f);
  ASSERT_TRUE(clamp(cin(a, {6}), 5, 1, mout(y, {6})));
  EXPECT_EQ(y[0], 1.0f);
  std::vector<int32_t> ia{std::numeric_limits<int32_t>::min(), -7, 0, 9,
                          std::numeric_limits<int32_t>::max()},
      iy(5);
  ASSERT_TRUE(clamp({DType::I32, {5}, ia.data()}, -1e20, 8.7,
                    {DType::I32, {5}, iy.data()}));
  EXPECT_EQ(iy, (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -7,
                                      0, 8, 8}));
  std::vector<int64_t> la{-9, 0, 9}, ly(3);
  ASSERT_TRUE(clamp({DType::I64, {3}, la.data()}, -2, 2,
                    {DType::I64, {3}, ly.data()}));
  EXPECT_EQ(ly, (std::vector<int64_t>{-2, 0, 2}));
  Status st = clamp({DType::I1, {3}, la.data()}, 0, 1,
                    {DType::I1, {3}, ly.data()});
  EXPECT_NE(st.message().find("clamp: unsupported dtype i1"), std::string::npos);
}

TEST(KernelsElementwise, NewUnaryOpsMatchFormulas) {
  std::vector<float> x = randomFloats(513, 1000, -6, 6);
  x.insert(x.end(), {0.0f, -0.0f, 1e-8f, 10.0f, -10.0f});
  Shape s{int64_t(x.size())};
  struct Case {
    OpId op;
    bool tanh; // Gelu's tanh approximation
    double (*ref)(double);
  } cases[] = {
      {OpId::Abs, false, [](double v) { return std::fabs(v); }},
      {OpId::Erf, false, [](double v) { return std::erf(v); }},
      {OpId::Gelu, false,
       [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
      {OpId::Gelu, true,
       [](double v) {
         return 0.5 * v *
                (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
       }},
  };
  for (const Case &c : cases) {
    std::vector<float> y(x.size(), NAN);
    ASSERT_TRUE(unary(c.op, cin(x, s), mout(y, s), c.tanh));
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_NEAR(y[i], c.ref(x[i]), 2e-7 * std::max(1.0, std::fabs(c.ref(x[i]))))
          << opName(c.op) << (c.tanh ? " (tanh)" : "") << " at " << x[i];
  }
  std::vector<int32_t> ia{-3, 0, 4, std::numeric_limits<int32_t>::min()}, iy(4);
  ASSERT_TRUE(unary(OpId::Abs, {DType::I32, {4}, ia.data()},
                    {DType::I32, {4}, iy.data()}));
  EXPECT_EQ(iy, (std::vector<int32_t>{3, 0, 4,
                                      std::numeric_limits<int32_t>::min()}));
  std::vector<uint8_t> b{0, 1, 2}, by(3);
  ASSERT_TRUE(
      unary(OpId::Not, {DType::I1, {3}, b.data()}, {DType::I1, {3}, by.data()}));
  EXPECT_EQ(by, (std::vector<uint8_t>{1, 0, 0}));
  Status st = unary(OpId::Not, cin(x, s), mout(x, s));
  EXPECT_NE(st.message().find("not: unsupported dtype f32 (supported: i1)"),
            std::string::npos)
      << st.message();
  st = unary(OpId::Gelu, {DType::I32, {4}, ia.data()},
             {DType::I32, {4}, iy.data()});
  EXPECT_NE(st.message().find("gelu: unsupported dtype i32"), std::string::npos)
      << st.message();
}

// A power of 2 is computed as x * x (torch.pow's square, ~10x cheaper than
// powf): bit for bit the correctly rounded square, and pow's result for
// the special values; other exponents still go through pow.
TEST(KernelsElementwise, PowOfTwoIsTheExactSquare) {
  std::vector<float> a{1.1f, -3.3f, 1e-20f, -1e20f, 0.0f, -0.0f, INFINITY,
                       -INFINITY, NAN, 16777217.0f, 1.0000001f, 2.5f};
  std::vector<float> b(a.size(), 2.0f), y(a.size());
  b.back() = 2.0000002f; // not 2: pow
  ASSERT_TRUE(binary(OpId::Pow, cin(a, {12}), cin(b, {12}), mout(y, {12})));
  for (size_t i = 0; i + 1 < a.size(); ++i) {
    float square = a[i] * a[i];
    if (std::isnan(square)) {
      EXPECT_TRUE(std::isnan(y[i])) << i;
      continue;
    }
    EXPECT_EQ(std::memcmp(&y[i], &square, sizeof(float)), 0)
        << i << ": " << y[i] << " vs " << square;
    EXPECT_EQ(y[i], std::pow(a[i], 2.0f)) << i; // what pow gives
  }
  EXPECT_EQ(y[3], INFINITY); // overflow, as pow
  EXPECT_FALSE(std::signbit(y[5])); // (-0)^2 = +0
  EXPECT_EQ(y[11], std::pow(2.5f, 2.0000002f));
}

TEST(KernelsElementwise, PowAndMinimum) {
  std::vector<float> a{2, -2, -2, 0, 0, 4, NAN, 1, 9},
      b{3, 3, 0.5f, 0, -1, 0.5f, 0, NAN, -0.5f}, y(9);
  ASSERT_TRUE(binary(OpId::Pow, cin(a, {9}), cin(b, {9}), mout(y, {9})));
  for (size_t i = 0; i < a.size(); ++i) {
    float r = std::pow(a[i], b[i]);
    if (std::isnan(r))
      EXPECT_TRUE(std::isnan(y[i])) << i;
    else
      EXPECT_EQ(y[i], r) << i;
  }
  EXPECT_EQ(y[1], -8.0f);
  EXPECT_EQ(y[3], 1.0f);     // 0^0
  EXPECT_EQ(y[4], INFINITY); // 0^-1
  EXPECT_EQ(y[6], 1.0f);     // NaN^0
  EXPECT_EQ(y[7], 1.0f);     // 1^NaN
  std::vector<int32_t> ia{1, 2}, iy(2);
  Status st = binary(OpId::Pow, {DType::I32, {2}, ia.data()},
                     {DType::I32, {2}, ia.data()}, {DType::I32, {2}, iy.data()});
  EXPECT_NE(st.message().find("pow: unsupported dtype i32 (supported: f32)"),
            std::string::npos)
      << st.message();
  std::vector<float> m1{1, 5, NAN, 2}, m2{3, -5, 1, NAN}, my(4);
  ASSERT_TRUE(
      binary(OpId::Minimum, cin(m1, {4}), cin(m2, {4}), mout(my, {4})));
  EXPECT_EQ(my[0], 1.0f);
  EXPECT_EQ(my[1], -5.0f);
  EXPECT_TRUE(std::isnan(my[2]));
  EXPECT_TRUE(std::isnan(my[3]));
  std::vector<int64_t> la{4, -9}, lb{-3, 2}, ly(2);
  ASSERT_TRUE(binary(OpId::Minimum, {DType::I64, {2}, la.data()},
                     {DType::I64, {2}, lb.data()},
                     {DType::I64, {2}, ly.data()}));
  EXPECT_EQ(ly, (std::vector<int64_t>{-3, -9}));
}

TEST(KernelsElementwise, ReduceMinAllDTypes) {
  Shape s{3, 4};
  std::vector<float> a = randomFloats(12, 1100), y(3);
  ASSERT_TRUE(reduce(OpId::ReduceMin, cin(a, s), {1}, false, mout(y, {3})));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(y[i], *std::min_element(a.begin() + 4 * i, a.begin() + 4 * i + 4));
  a[5] = NAN;
  ASSERT_TRUE(reduce(OpId::ReduceMin, cin(a, s), {1}, false, mout(y, {3})));
  EXPECT_TRUE(std::isnan(y[1]));
  std::vector<int32_t> ia{5, -2, 7, 3, 9, 1}, iy(1);
  ASSERT_TRUE(reduce(OpId::ReduceMin, {DType::I32, {2, 3}, ia.data()}, {0, 1},
                     false, {DType::I32, {}, iy.data()}));
  EXPECT_EQ(iy[0], -2);
}

// --- dropout (Philox4x32-10) ---

TEST(Philox, MatchesRandom123KnownAnswers) {
  // Random123's kat_vectors for philox4x32_10: counter, key -> words.
  struct Kat {
    PhiloxWords ctr;
    uint32_t k0, k1;
    PhiloxWords expect;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}},
       0,
       0,
       {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
       0xffffffffu,
       0xffffffffu,
       {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
       0xa4093822u,
       0x299f31d0u,
       {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
  };
  for (const Kat &k : kats) {
    PhiloxWords w = philox4x32(k.ctr, k.k0, k.k1);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(w.w[i], k.expect.w[i]) << "word " << i;
  }
}

TEST(Dropout, KeepsOneMinusPScaledAndZeroesTheRest) {
  const int64_t n = 100000;
  std::vector<float> x = randomFloats(n, 41, -3, 3), y(n);
  for (double p : {0.1, 0.3, 0.5, 0.9}) {
    ASSERT_TRUE(dropout(cin(x, {n}), 0x5eedULL, 11, p, mout(y, {n})));
    float scale = float(1.0 / (1.0 - p));
    int64_t kept = 0;
    uint32_t below = dropoutKeepBelow(p);
    for (int64_t i = 0; i < n; ++i) {
      bool keep = (dropoutWord(0x5eedULL, 11, uint64_t(i)) >> 8) < below;
      kept += keep;
      ASSERT_EQ(y[i], keep ? x[i] * scale : x[i] * 0.f)
          << "p " << p << " i " << i;
    }
    // The kept count is Binomial(n, 1 - p): within 5 standard deviations.
    double sd = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(double(kept), n * (1 - p), 5 * sd) << "p " << p;
  }
}

TEST(Dropout, WordsAreUniformAndIndependentAcrossOffsets) {
  // 16 bins of the 24 bits compared: chi-square with 15 degrees of
  // freedom stays under 37.7 (p = 0.001) for a uniform source.
  const int64_t n = 1 << 18;
  std::vector<int64_t> bins(16, 0);
  int64_t same = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t a = dropoutWord(3, 0, uint64_t(i)) >> 8;
    uint32_t b = dropoutWord(3, 1, uint64_t(i)) >> 8;
    ++bins[a >> 20];
    same += (a < (1u << 23)) == (b < (1u << 23));
  }
  double chi2 = 0, expect = double(n) / 16;
  for (int64_t c : bins)
    chi2 += (c - expect) * (c - expect) / expect;
  EXPECT_LT(chi2, 37.7);
  // Masks of p = 0.5 at two offsets agree on half the elements.
  EXPECT_NEAR(double(same) / n, 0.5, 5 * 0.5 / std::sqrt(double(n)));
  // Another seed gives other words.
  EXPECT_NE(dropoutWord(3, 0, 5), dropoutWord(4, 0, 5));
}

TEST(Dropout, EdgeProbabilitiesAndLowPrecision) {
  const int64_t n = 1000;
  std::vector<float> x = randomFloats(n, 42), y(n);
  ASSERT_TRUE(dropout(cin(x, {n}), 1, 2, 0.0, mout(y, {n})));
  EXPECT_EQ(y, x); // p = 0 keeps everything, unscaled
  x[3] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(dropout(cin(x, {n}), 1, 2, 1.0, mout(y, {n})));
  for (int64_t i = 0; i < n; ++i)
    if (i == 3)
      EXPECT_TRUE(std::isnan(y[i])); // x * 0, as PyTorch's product
    else
      EXPECT_EQ(y[i], 0.f) << i;
  // f16 and bf16: the f32 result of the widened input, rounded once.
  x[3] = 0.5f;
  ASSERT_TRUE(dropout(cin(x, {n}), 9, 4, 0.2, mout(y, {n})));
  for (DType t : {DType::F16, DType::BF16}) {
    bool half = t == DType::F16;
    std::vector<uint16_t> in(n), out(n);
    for (int64_t i = 0; i < n; ++i)
      in[i] = half ? floatToHalf(x[i]) : floatToBf16(x[i]);
    std::vector<float> wide(n), ref(n);
    for (int64_t i = 0; i < n; ++i)
      wide[i] = half ? halfToFloat(in[i]) : bf16ToFloat(in[i]);
    ASSERT_TRUE(dropout(cin(wide, {n}), 9, 4, 0.2, mout(ref, {n})));
    ASSERT_TRUE(dropout(ConstTensor{t, {n}, in.data()}, 9, 4, 0.2,
                        MutTensor{t, {n}, out.data()}));
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(out[i], half ? floatToHalf(ref[i]) : floatToBf16(ref[i]))
          << dtypeName(t) << " " << i;
  }
  Status bad = dropout(cin(x, {n}), 0, 0, 1.5, mout(y, {n}));
  EXPECT_NE(bad.message().find("p must be in [0, 1], got 1.5"),
            std::string::npos)
      << bad.message();
  std::vector<int32_t> ints(4);
  bad = dropout(ConstTensor{DType::I32, {4}, ints.data()}, 0, 0, 0.5,
                MutTensor{DType::I32, {4}, ints.data()});
  EXPECT_NE(bad.message().find("f32, f16, bf16"), std::string::npos)
      << bad.message();
}
