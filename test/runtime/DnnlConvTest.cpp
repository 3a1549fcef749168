// bindConv2d (oneDNN on the CPU) against the reference: the im2col conv2d
// over a sweep of shapes, each fused epilogue against conv2d followed by
// the registered CPU kernels of add and the activation, refusals without
// side effects, and the conv2d step kernel falling back where oneDNN does
// not take the step. Skips, visibly, in a runtime built without oneDNN.
#include "TestUtil.h"
#include "cpu/DnnlConv.h"
#include "modelc/device.h"
#include "modelc/kernels.h"

#include <algorithm>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace mc::rt;
using mc::test::cin;
using mc::test::mout;
using mc::test::randomFloats;
using detail::ConvLayout;

namespace {

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw;
  Conv2dParams p;
};

Conv2dParams params(int64_t stride, int64_t pad, int64_t dilation = 1,
                    int64_t groups = 1) {
  Conv2dParams p;
  p.strideH = p.strideW = stride;
  p.padTop = p.padLeft = p.padBottom = p.padRight = pad;
  p.dilationH = p.dilationW = dilation;
  p.groups = groups;
  return p;
}

Shape outShape(const ConvCase &k) {
  const Conv2dParams &p = k.p;
  return {k.n, k.o,
          (k.h + p.padTop + p.padBottom - p.dilationH * (k.kh - 1) - 1) /
                  p.strideH + 1,
          (k.w + p.padLeft + p.padRight - p.dilationW * (k.kw - 1) - 1) /
                  p.strideW + 1};
}

/// ||a - ref|| / ||ref|| in double; NaN never passes.
double relErr(const std::vector<float> &a, const std::vector<float> &ref) {
  std::vector<double> r(ref.begin(), ref.end());
  return mc::test::relErr(a, r);
}

bool haveDnnl() {
  std::vector<float> x(9, 1.f), w(1, 1.f), y(9);
  BoundKernel k;
  size_t ws = 0;
  return bool(bindConv2d(cin(x, {1, 1, 3, 3}), cin(w, {1, 1, 1, 1}),
                         Conv2dParams{}, Epilogue{}, mout(y, {1, 1, 3, 3}),
                         true, &k, &ws));
}

/// Every activation layout the binder can pick, each tested on its own.
const ConvLayout kLayouts[] = {ConvLayout::Auto, ConvLayout::Plain,
                               ConvLayout::Blocked};
std::string layoutName(ConvLayout l) {
  return l == ConvLayout::Auto ? "auto"
         : l == ConvLayout::Plain ? "plain NCHW"
                                  : "blocked";
}

#define SKIP_WITHOUT_DNNL()                                                    \
  if (!haveDnnl())                                                             \
  GTEST_SKIP() << "this runtime was built without oneDNN"

/// Runs a bound kernel on a workspace filled with NaN (it must not read
/// what it did not write).
void runBound(const BoundKernel &k, size_t bytes) {
  std::vector<float> ws(bytes / sizeof(float) + 1, NAN);
  Status st = k(ws.data());
  ASSERT_TRUE(st) << st.message();
}

/// Runs the registered CPU kernel of `op` (the reference of every step).
void runCpuKernel(OpId op, const OpAttrs &attrs,
                  std::vector<ConstTensor> inputs, const MutTensor &out,
                  std::vector<bool> constantInputs = {}) {
  Status st = mc::test::cpuKernel(op, attrs, std::move(inputs), out,
                                  std::move(constantInputs));
  ASSERT_TRUE(st) << opName(op) << ": " << st.message();
}

TEST(DnnlConv, MatchesTheIm2colReferenceOverASweep) {
  SKIP_WITHOUT_DNNL();
  Conv2dParams asym = params(2, 0);
  asym.padTop = 1, asym.padLeft = 0, asym.padBottom = 2, asym.padRight = 3;
  Conv2dParams rect = params(1, 0);
  rect.strideH = 1, rect.strideW = 2, rect.padTop = rect.padBottom = 1;
  const ConvCase cases[] = {
      {1, 3, 17, 15, 8, 3, 3, params(1, 1)},        // odd sizes
      {3, 8, 16, 16, 16, 3, 3, params(2, 1)},       // stride 2, batch 3
      {1, 6, 13, 11, 5, 3, 3, asym},                // asymmetric padding
      {3, 4, 12, 12, 6, 3, 3, params(1, 2, 2)},     // dilation 2
      {1, 8, 10, 10, 12, 3, 3, params(1, 1, 1, 2)}, // groups 2
      {3, 12, 9, 9, 12, 3, 3, params(1, 1, 1, 12)}, // depthwise
      {1, 8, 14, 14, 24, 3, 3, params(2, 1, 1, 8)}, // depthwise x3
      {3, 16, 7, 9, 32, 1, 1, params(1, 0)},        // 1x1
      {1, 16, 14, 14, 8, 1, 1, params(2, 0)},       // 1x1 stride 2
      {1, 3, 32, 32, 16, 7, 7, params(2, 3)},       // 7x7 stem
      {3, 3, 23, 21, 8, 7, 7, params(2, 3)},        // 7x7, batch 3, odd
      {1, 5, 9, 11, 7, 3, 5, rect},                 // 3x5, stride (1, 2)
      {1, 64, 56, 56, 64, 3, 3, params(1, 1)},      // a ResNet-18 layer
  };
  unsigned seed = 100;
  for (const ConvCase &k : cases) {
    SCOPED_TRACE("case n" + std::to_string(k.n) + " c" + std::to_string(k.c) +
                 " " + std::to_string(k.h) + "x" + std::to_string(k.w) +
                 " o" + std::to_string(k.o) + " k" + std::to_string(k.kh) +
                 "x" + std::to_string(k.kw) + " g" + std::to_string(k.p.groups));
    Shape xs{k.n, k.c, k.h, k.w}, ws{k.o, k.c / k.p.groups, k.kh, k.kw},
        ys = outShape(k);
    std::vector<float> x = randomFloats(size_t(numElements(xs)), ++seed),
                       w = randomFloats(size_t(numElements(ws)), ++seed),
                       ref(size_t(numElements(ys)));
    ASSERT_TRUE(conv2d(cin(x, xs), cin(w, ws), k.p, mout(ref, ys)));
    for (ConvLayout layout : kLayouts)
    for (bool constant : {true, false}) {
      SCOPED_TRACE(layoutName(layout) + (constant ? ", constant weights" : ""));
      std::vector<float> y(ref.size(), NAN);
      BoundKernel bound;
      size_t bytes = 0;
      Status st = detail::bindConv2d(cin(x, xs), cin(w, ws), k.p, Epilogue{},
                                     mout(y, ys), constant, layout, &bound,
                                     &bytes);
      ASSERT_TRUE(st) << st.message();
      runBound(bound, bytes);
      EXPECT_LT(relErr(y, ref), 1e-5);
      // Repeatable: a second call gives the same bits.
      std::vector<float> first = y;
      runBound(bound, bytes);
      EXPECT_EQ(y, first);
    }
  }
}

TEST(DnnlConv, NonConstantWeightsAreReadAtEveryCall) {
  // Training binds State weights once and updates them between runs.
  SKIP_WITHOUT_DNNL();
  Shape xs{2, 8, 10, 10}, ws{16, 8, 3, 3}, ys{2, 16, 10, 10};
  std::vector<float> x = randomFloats(size_t(numElements(xs)), 1),
                     w = randomFloats(size_t(numElements(ws)), 2),
                     y(size_t(numElements(ys))), ref(y.size());
  Conv2dParams p = params(1, 1);
  BoundKernel bound;
  size_t bytes = 0;
  ASSERT_TRUE(bindConv2d(cin(x, xs), cin(w, ws), p, Epilogue{}, mout(y, ys),
                         false, &bound, &bytes));
  runBound(bound, bytes);
  std::vector<float> next = randomFloats(w.size(), 3);
  std::copy(next.begin(), next.end(), w.begin()); // same storage, new values
  runBound(bound, bytes);
  ASSERT_TRUE(conv2d(cin(x, xs), cin(w, ws), p, mout(ref, ys)));
  EXPECT_LT(relErr(y, ref), 1e-5);
}

struct EpilogueCase {
  const char *name;
  bool bias, residual;
  std::optional<OpId> activation;
  bool geluTanh = false;
  float clampMin = 0, clampMax = 0; // Clamp's bounds
};

TEST(DnnlConv, EpiloguesMatchConvThenTheReferenceOps) {
  SKIP_WITHOUT_DNNL();
  const EpilogueCase cases[] = {
      {"bias", true, false, std::nullopt},
      {"bias+residual", true, true, std::nullopt},
      {"bias+relu", true, false, OpId::Relu},
      {"bias+residual+relu", true, true, OpId::Relu},
      {"residual+relu", false, true, OpId::Relu},
      {"gelu", false, false, OpId::Gelu},
      {"bias+gelu_tanh", true, false, OpId::Gelu, true},
      {"hardswish", false, false, OpId::Hardswish},
      {"bias+sigmoid", true, false, OpId::Sigmoid},
      {"bias+residual+tanh", true, true, OpId::Tanh},
      {"bias+relu6", true, false, OpId::Clamp, false, 0.f, 6.f},
      {"clamp [-0.5, 0.25]", false, false, OpId::Clamp, false, -0.5f, 0.25f},
  };
  struct Shape4 {
    ConvCase conv;
  } shapes[] = {{{1, 8, 14, 14, 16, 3, 3, params(1, 1)}},
                {{3, 16, 9, 9, 8, 1, 1, params(2, 0)}},
                {{2, 8, 10, 10, 8, 3, 3, params(1, 1, 1, 8)}}};
  unsigned seed = 200;
  for (const Shape4 &s : shapes)
    for (const EpilogueCase &e : cases) {
      const ConvCase &k = s.conv;
      SCOPED_TRACE(std::string(e.name) + ", groups " +
                   std::to_string(k.p.groups));
      Shape xs{k.n, k.c, k.h, k.w}, ws{k.o, k.c / k.p.groups, k.kh, k.kw},
          ys = outShape(k);
      size_t count = size_t(numElements(ys));
      std::vector<float> x = randomFloats(size_t(numElements(xs)), ++seed),
                         w = randomFloats(size_t(numElements(ws)), ++seed),
                         b = randomFloats(size_t(k.o), ++seed, -2, 2),
                         r = randomFloats(count, ++seed, -2, 2);
      // The reference: conv2d, then each op by its registered CPU kernel.
      std::vector<float> ref(count), bb(count), tmp(count);
      ASSERT_TRUE(conv2d(cin(x, xs), cin(w, ws), k.p, mout(ref, ys)));
      if (e.bias) {
        ASSERT_TRUE(broadcastInDim(cin(b, {k.o}), {1}, mout(bb, ys)));
        runCpuKernel(OpId::Add, {}, {cin(ref, ys), cin(bb, ys)},
                     mout(tmp, ys));
        ref.swap(tmp);
      }
      if (e.residual) {
        runCpuKernel(OpId::Add, {}, {cin(ref, ys), cin(r, ys)},
                     mout(tmp, ys));
        ref.swap(tmp);
      }
      if (e.activation) {
        OpAttrs attrs{OpAttr::boolean("tanh_approximation", e.geluTanh),
                      OpAttr::real("min", e.clampMin),
                      OpAttr::real("max", e.clampMax)};
        runCpuKernel(*e.activation, attrs, {cin(ref, ys)}, mout(tmp, ys));
        ref.swap(tmp);
      }
      ConstTensor bias = cin(b, {k.o}), residual = cin(r, ys);
      Epilogue epi;
      epi.bias = e.bias ? &bias : nullptr;
      epi.residual = e.residual ? &residual : nullptr;
      epi.activation = e.activation;
      epi.geluTanh = e.geluTanh;
      epi.clampMin = e.clampMin;
      epi.clampMax = e.clampMax;
      for (ConvLayout layout : kLayouts) {
        SCOPED_TRACE(layoutName(layout));
        std::vector<float> y(count, NAN);
        BoundKernel bound;
        size_t bytes = 0;
        epi.residual = e.residual ? &residual : nullptr;
        Status st = detail::bindConv2d(cin(x, xs), cin(w, ws), k.p, epi,
                                       mout(y, ys), true, layout, &bound,
                                       &bytes);
        // A combination only oneDNN's reference implementation takes is
        // refused (the fused kernel then runs conv2d and the ops itself),
        // and nothing was written.
        if (!st) {
          EXPECT_NE(st.message().find("only the reference implementation"),
                    std::string::npos)
              << st.message();
          EXPECT_TRUE(std::isnan(y[0]));
          continue;
        }
        runBound(bound, bytes);
        EXPECT_LT(relErr(y, ref), 1e-5);
        runBound(bound, bytes); // the residual is read again, not summed twice
        EXPECT_LT(relErr(y, ref), 1e-5);
        if (e.residual) { // in place: the residual is the output buffer
          std::vector<float> inPlace = r;
          ConstTensor res = cin(inPlace, ys);
          epi.residual = &res;
          Status again = detail::bindConv2d(cin(x, xs), cin(w, ws), k.p, epi,
                                            mout(inPlace, ys), true, layout,
                                            &bound, &bytes);
          ASSERT_TRUE(again) << again.message();
          runBound(bound, bytes);
          EXPECT_LT(relErr(inPlace, ref), 1e-5) << "in place";
        }
      }
    }
}

TEST(DnnlConv, BiasRoundsAsTheUnfusedConvolutionThenAdd) {
  // A fused conv + bias (+ relu6) must give the bits of the steps it
  // replaces: the same binding without an epilogue, then the add (and
  // clamp) kernels. oneDNN may add the bias to the finished sum or seed
  // the accumulator with it; only the first rounds alike, and the binding
  // must pick its way by that. Shapes over the kernels oneDNN picks here:
  // 1x1 with few and many input channels (several K chunks), 3x3, 7x7
  // stride 2 from 3 channels, depthwise at strides 1 and 2, in NHWC, plain
  // NCHW and blocked NCHW.
  SKIP_WITHOUT_DNNL();
  const ConvCase cases[] = {
      {2, 16, 12, 12, 96, 1, 1, params(1, 0)},
      {2, 512, 5, 5, 64, 1, 1, params(1, 0)},
      {2, 64, 9, 9, 64, 3, 3, params(1, 1)},
      {2, 300, 6, 6, 40, 3, 3, params(2, 1)},
      {2, 3, 20, 20, 32, 7, 7, params(2, 3)},
      {2, 96, 10, 10, 96, 3, 3, params(1, 1, 1, 96)},
      {2, 144, 9, 9, 144, 3, 3, params(2, 1, 1, 144)},
  };
  unsigned seed = 700;
  int compared = 0;
  for (const ConvCase &k : cases)
    for (int way = 0; way < 4; ++way) // NHWC, then kLayouts on NCHW
      for (bool relu6 : {false, true}) {
        bool last = way == 0;
        ConvLayout layout = last ? ConvLayout::Auto : kLayouts[way - 1];
        SCOPED_TRACE("C " + std::to_string(k.c) + " -> " + std::to_string(k.o) +
                     ", " + std::to_string(k.kh) + "x" + std::to_string(k.kw) +
                     ", groups " + std::to_string(k.p.groups) + ", " +
                     (last ? std::string("NHWC") : layoutName(layout)) +
                     (relu6 ? ", relu6" : ""));
        Conv2dParams p = k.p;
        p.channelsLast = last;
        Shape xs{k.n, k.c, k.h, k.w}, ws{k.o, k.c / k.p.groups, k.kh, k.kw},
            ys = outShape(k);
        if (last) {
          xs = {k.n, k.h, k.w, k.c};
          ys = {ys[0], ys[2], ys[3], ys[1]};
        }
        size_t count = size_t(numElements(ys));
        std::vector<float> x = randomFloats(size_t(numElements(xs)), ++seed),
                           w = randomFloats(size_t(numElements(ws)), ++seed),
                           b = randomFloats(size_t(k.o), ++seed, -2, 2);
        auto bindAndRun = [&](const Epilogue &e, std::vector<float> *y) {
          y->assign(count, NAN);
          BoundKernel bound;
          size_t bytes = 0;
          Status st =
              detail::bindConv2d(cin(x, xs), cin(w, ws), p, e, mout(*y, ys),
                                 true, layout, &bound, &bytes);
          if (st)
            runBound(bound, bytes);
          return st;
        };
        std::vector<float> conv, fused, bb(count), ref(count), tmp(count);
        Status plain = bindAndRun(Epilogue{}, &conv);
        ASSERT_TRUE(plain) << plain.message();
        ASSERT_TRUE(
            broadcastInDim(cin(b, {k.o}), {last ? 3 : 1}, mout(bb, ys)));
        runCpuKernel(OpId::Add, {}, {cin(conv, ys), cin(bb, ys)},
                     mout(ref, ys));
        if (relu6) {
          runCpuKernel(OpId::Clamp,
                       {OpAttr::real("min", 0.0), OpAttr::real("max", 6.0)},
                       {cin(ref, ys)}, mout(tmp, ys));
          ref.swap(tmp);
        }
        ConstTensor bias = cin(b, {k.o});
        Epilogue e;
        e.bias = &bias;
        if (relu6) {
          e.activation = OpId::Clamp;
          e.clampMin = 0.f;
          e.clampMax = 6.f;
        }
        Status st = bindAndRun(e, &fused);
        if (!st) { // refused: the fused region then runs the steps' kernels
          EXPECT_NE(st.message().find("fused would not equal unfused"),
                    std::string::npos)
              << st.message();
          continue;
        }
        size_t differ = 0;
        for (size_t i = 0; i < count; ++i)
          differ += std::memcmp(&fused[i], &ref[i], sizeof(float)) != 0;
        EXPECT_EQ(differ, 0u) << "of " << count;
        ++compared;
      }
  // Refusing everything would pass the loop: most of the 56 must bind.
  EXPECT_GE(compared, 40);
}

TEST(DnnlConv, FusedActivationsKeepNaNAsTheReferenceOps) {
  // A NaN input poisons the outputs it reaches. oneDNN's relu and clip
  // turn NaN into a bound; the binding's guard sees the NaN (and values
  // that could overflow) and runs the activation itself, so the outputs
  // stay NaN, as the reference ops leave them.
  SKIP_WITHOUT_DNNL();
  Shape xs{1, 8, 6, 6}, ws{8, 8, 3, 3}, ys{1, 8, 6, 6};
  std::vector<float> x = randomFloats(288, 601), w = randomFloats(576, 602),
                     b = randomFloats(8, 603);
  x[7] = NAN; // channel 0, position 7: every output channel at position 7
  for (OpId act : {OpId::Relu, OpId::Clamp})
    for (bool last : {false, true}) {
      SCOPED_TRACE(std::string(opName(act)) + (last ? ", NHWC" : ", NCHW"));
      Conv2dParams p = params(1, 1);
      p.channelsLast = last;
      std::vector<float> in = x;
      Shape xq = xs, yq = ys;
      if (last) {
        xq = {1, 6, 6, 8};
        yq = {1, 6, 6, 8};
        ASSERT_TRUE(transpose(cin(x, xs), {0, 2, 3, 1}, mout(in, xq)));
      }
      ConstTensor bias = cin(b, {8});
      Epilogue e;
      e.bias = &bias;
      e.activation = act;
      e.clampMin = 0.f;
      e.clampMax = 6.f;
      // The fused binding on `input` against the reference (conv2d, bias,
      // the activation kernel), element by element, NaN where it is NaN;
      // returns how many outputs the reference has NaN.
      auto nansMatching = [&](const std::vector<float> &input) -> int {
        std::vector<float> y(288, 0.f), ref(288), bb(288), tmp(288);
        BoundKernel bound;
        size_t bytes = 0;
        Status st = bindConv2d(cin(input, xq), cin(w, ws), p, e, mout(y, yq),
                               true, &bound, &bytes);
        EXPECT_TRUE(st) << st.message();
        if (!st)
          return -1;
        runBound(bound, bytes);
        EXPECT_TRUE(conv2d(cin(input, xq), cin(w, ws), p, mout(ref, yq)));
        EXPECT_TRUE(broadcastInDim(cin(b, {8}), {last ? 3 : 1}, mout(bb, yq)));
        runCpuKernel(OpId::Add, {}, {cin(ref, yq), cin(bb, yq)}, mout(tmp, yq));
        runCpuKernel(act, {OpAttr::real("min", 0.0), OpAttr::real("max", 6.0)},
                     {cin(tmp, yq)}, mout(ref, yq));
        int nans = 0;
        for (size_t i = 0; i < y.size(); ++i) {
          nans += std::isnan(ref[i]);
          EXPECT_TRUE(std::isnan(y[i]) == std::isnan(ref[i]) &&
                      (std::isnan(y[i]) || y[i] == ref[i] ||
                       std::fabs(y[i] - ref[i]) <= 1e-4f))
              << "element " << i << ": " << y[i] << " vs " << ref[i];
        }
        return nans;
      };
      EXPECT_GT(nansMatching(in), 8) << "the NaN reaches its 3x3 neighbourhood";
      // +inf and -inf in two channels of one pixel: where an output
      // channel's two weights have one sign its sum is inf - inf, NaN,
      // which the library's activation would clip.
      std::vector<float> big = in;
      big[last ? 56 : 7] = INFINITY;   // pixel (1, 1), channel 0 (the NaN)
      big[last ? 57 : 43] = -INFINITY; // pixel (1, 1), channel 1
      EXPECT_GT(nansMatching(big), 0) << "the inf makes NaN in the reference";
    }
}

TEST(DnnlConv, GuardsMaximumIsTheLargestMagnitudeAndInfForNaNOrInf) {
  // maxAbsOrInf splits its input into 64 chunks of 16 lanes and a tail;
  // every size below crosses one of those edges (and 70000 is split over
  // the threads).
  for (int64_t n : {0, 1, 15, 16, 17, 63, 64, 65, 1000, 1023, 70000}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    std::vector<float> v = randomFloats(size_t(n), unsigned(n) + 7, -3.f, 3.f);
    float most = 0;
    for (float x : v)
      most = std::max(most, std::fabs(x));
    EXPECT_EQ(detail::maxAbsOrInf(v.data(), n), most);
    if (n == 0)
      continue;
    for (int64_t at : {int64_t(0), n / 2, n - 1})
      for (float bad : {NAN, INFINITY, -INFINITY}) {
        std::vector<float> w = v;
        w[size_t(at)] = bad;
        EXPECT_EQ(detail::maxAbsOrInf(w.data(), n), INFINITY)
            << bad << " at " << at;
      }
  }
}

TEST(DnnlConv, GuardSendsSumsThatCouldOverflowToTheExactPath) {
  // oneDNN's fused relu and clip turn NaN into a bound. With finite values
  // a NaN needs +inf and -inf partial sums, which depends on the library's
  // order of the sum (its FMA chains give inf, not NaN), so no input makes
  // it on every machine; the guard's bound is checked here instead: the
  // binding takes the exact path exactly when this is false.
  float fmax = std::numeric_limits<float>::max();
  // 72 weights per output channel (8 channels of 3x3), each |w| <= 1.
  EXPECT_TRUE(detail::convSumsStayFinite(72, 1, 1, 1));
  EXPECT_TRUE(detail::convSumsStayFinite(72, 1e36, 0, 0)); // 7.2e37
  EXPECT_FALSE(detail::convSumsStayFinite(72, 3e36, 0, 0)) // 2.2e38 > max/2
      << "finite inputs whose sums could overflow";
  EXPECT_FALSE(detail::convSumsStayFinite(1, 1, fmax * 0.6, 0))
      << "a bias near overflow";
  EXPECT_FALSE(detail::convSumsStayFinite(1, 1, 0, fmax * 0.6))
      << "a residual near overflow";
  EXPECT_FALSE(detail::convSumsStayFinite(72, INFINITY, 0, 0));
  EXPECT_FALSE(detail::convSumsStayFinite(INFINITY, 1, 0, 0))
      << "a NaN or inf weight";
  EXPECT_FALSE(detail::convSumsStayFinite(72, NAN, 0, 0));
  EXPECT_FALSE(detail::convSumsStayFinite(72, 1, NAN, 0));
  // Weights of 3e38 (finite) times an input of 2: the bound, in double,
  // sees the products overflow.
  EXPECT_FALSE(detail::convSumsStayFinite(2 * 3e38, 2, 0, 0));
}

TEST(DnnlConv, PublishesABoundItsResultStaysWithin) {
  // The slot a step's kernel fills for the steps that read its result
  // (ValueBound): finite only when the result is, and never below its
  // largest |v|. Weights and input all positive make the sums as large as
  // the bound allows (l1 * max|x| + max|b|, exactly what was summed).
  SKIP_WITHOUT_DNNL();
  Shape xs{1, 8, 6, 6}, ws{8, 8, 3, 3};
  std::vector<float> w = randomFloats(576, 611, 0.f, 1.f),
                     b = randomFloats(8, 612, 0.f, 1.f);
  std::vector<float> flat(576, 0.75f);
  // act: none, relu, clamp to [-1, 3], clamp to [1, 6] (above every sum
  // of the tiny inputs: the result is 1 where the sums are near 0).
  for (int regime = 0; regime < 3; ++regime)
    for (int act = 0; act < 4; ++act)
      for (bool last : {false, true}) {
        bool worst = regime == 1;
        SCOPED_TRACE(std::string(regime == 0   ? "random"
                                 : regime == 1 ? "worst case"
                                               : "tiny") +
                     (act == 0   ? ", no activation"
                      : act == 1 ? ", relu"
                      : act == 2 ? ", clamp [-1, 3]"
                                 : ", clamp [1, 6]") +
                     (last ? ", NHWC" : ", NCHW"));
        std::vector<float> x = worst ? std::vector<float>(288, 2.5f)
                               : regime == 0
                                   ? randomFloats(288, 613, -4.f, 4.f)
                                   : randomFloats(288, 614, -1e-3f, 1e-3f);
        const std::vector<float> &wt = worst ? flat : w;
        Conv2dParams p = params(1, 1);
        p.channelsLast = last;
        Shape xq = last ? Shape{1, 6, 6, 8} : xs;
        ConstTensor bias = cin(b, {8});
        auto run = [&](const ValueBound *inputBound, ValueBound *result,
                       std::vector<float> *y) {
          Epilogue e;
          e.bias = &bias;
          if (act)
            e.activation = act == 1 ? OpId::Relu : OpId::Clamp;
          if (regime == 2) // the bias too, so the sums stay near 0
            e.bias = nullptr;
          e.clampMin = act == 3 ? 1.f : -1.f;
          e.clampMax = act == 3 ? 6.f : 3.f;
          e.inputBound = inputBound;
          e.resultBound = result;
          BoundKernel bound;
          size_t bytes = 0;
          y->assign(288, 0.f);
          Status st = bindConv2d(cin(x, xq), cin(wt, ws), p, e, mout(*y, xq),
                                 true, &bound, &bytes);
          ASSERT_TRUE(st) << st.message();
          // Without a guard a bound needs the input's: else no writer.
          EXPECT_EQ(result->written,
                    act != 0 || (inputBound && inputBound->written))
              << "bound at bind";
          runBound(bound, bytes);
        };
        std::vector<float> y;
        double largest = 0;
        // The input's writer published the truth: the result is bounded
        // with or without a guard.
        ValueBound in, out;
        in.written = true;
        in.maxAbs = detail::maxAbsOrInf(x.data(), 288);
        run(&in, &out, &y);
        for (float v : y)
          largest = std::max(largest, double(std::fabs(v)));
        EXPECT_TRUE(std::isfinite(out.maxAbs));
        EXPECT_GE(out.maxAbs, largest);
        if (act == 2) {
          EXPECT_LE(out.maxAbs, 3.0) << "clamp's bounds cap it";
        }
        if (act == 3) {
          EXPECT_LE(out.maxAbs, 6.0) << "clamp's bounds cap it";
        }
        if (worst && act == 0) {
          EXPECT_LE(out.maxAbs, largest * 1.01) << "the bound is tight here";
        }
        // No bound on the input: the guard (an activation) scans it; a
        // convolution without one reads nothing more and knows nothing.
        ValueBound none;
        run(nullptr, &none, &y);
        EXPECT_EQ(std::isfinite(none.maxAbs), act != 0);
        // A NaN in the input: nothing is known of the result.
        x[100] = NAN;
        ValueBound poisoned;
        run(nullptr, &poisoned, &y);
        EXPECT_FALSE(std::isfinite(poisoned.maxAbs));
      }
}

TEST(DnnlConv, TrustsTheBoundItsInputsWriterPublished) {
  // A finite bound on the input stands in for the guard's scan: with a NaN
  // that the bound denies, oneDNN's relu turns it into 0 (a wrong bound is
  // a wrong answer; the Session only passes bounds its steps published). An
  // unknown (inf) or unwritten bound leaves the scan, which keeps the NaN.
  SKIP_WITHOUT_DNNL();
  Shape xs{1, 8, 6, 6}, ws{8, 8, 3, 3};
  std::vector<float> x = randomFloats(288, 621), w = randomFloats(576, 622);
  x[7] = NAN;
  Conv2dParams p = params(1, 1);
  auto nans = [&](const ValueBound &inputBound) {
    Epilogue e;
    e.activation = OpId::Relu;
    e.inputBound = &inputBound;
    std::vector<float> y(288, 0.f);
    BoundKernel bound;
    size_t bytes = 0;
    Status st = bindConv2d(cin(x, xs), cin(w, ws), p, e, mout(y, xs), true,
                           &bound, &bytes);
    EXPECT_TRUE(st) << st.message();
    runBound(bound, bytes);
    return std::count_if(y.begin(), y.end(),
                         [](float v) { return std::isnan(v); });
  };
  ValueBound trusted, unknown, unwritten;
  trusted.written = unknown.written = true;
  trusted.maxAbs = unwritten.maxAbs = 10;
  EXPECT_EQ(nans(trusted), 0) << "the scan was skipped";
  EXPECT_GT(nans(unknown), 8);
  EXPECT_GT(nans(unwritten), 8);
}

TEST(DnnlConv, ResultBoundCoversTheRoundingOfTheSum) {
  // 576 terms, a bias and a residual: the exact bound widened by
  // gamma_578 (about 3.4e-5), doubled.
  double exact = 72 * 2.0 + 1 + 0.5;
  double b = detail::convResultBound(72, 2, 1, 0.5, 576);
  EXPECT_GT(b, exact * (1 + 578 * 0x1p-24));
  EXPECT_LT(b, exact * 1.001);
  EXPECT_FALSE(std::isfinite(detail::convResultBound(1, 1, 0, 0, 1 << 20)))
      << "too many terms for the rounding bound to be small";
}

TEST(DnnlConv, RefusesWithoutSideEffects) {
  SKIP_WITHOUT_DNNL();
  Shape xs{1, 4, 6, 6}, ws{4, 4, 3, 3}, ys{1, 4, 6, 6};
  std::vector<float> x = randomFloats(144, 1), w = randomFloats(144, 2),
                     y(144), b(3);
  std::vector<uint16_t> h(144);
  Conv2dParams p = params(1, 1);
  BoundKernel bound;
  size_t bytes = 12345;
  auto refused = [&](const ConstTensor &in, const Epilogue &e,
                     const char *what) {
    Status st = bindConv2d(in, cin(w, ws), p, e, mout(y, ys), true, &bound,
                           &bytes);
    EXPECT_FALSE(st) << what;
    EXPECT_FALSE(bound) << what;
    EXPECT_EQ(bytes, 12345u) << what;
  };
  refused(ConstTensor{DType::F16, xs, h.data()}, Epilogue{}, "f16 input");
  Epilogue log;
  log.activation = OpId::Log;
  refused(cin(x, xs), log, "log is no fused activation");
  ConstTensor shortBias = cin(b, {3});
  Epilogue bias;
  bias.bias = &shortBias;
  refused(cin(x, xs), bias, "bias of 3 for 4 channels");
  ConstTensor wrongResidual = cin(x, {1, 4, 3, 12});
  Epilogue residual;
  residual.residual = &wrongResidual;
  refused(cin(x, xs), residual, "residual of another shape");
}

TEST(DnnlConv, StepKernelFallsBackToTheReference) {
  // bf16 is not taken by oneDNN here: the conv2d step still runs, through
  // the im2col reference (widened to f32, rounded once).
  Shape xs{2, 4, 7, 7}, ws{6, 4, 3, 3}, ys{2, 6, 7, 7};
  std::vector<float> x = randomFloats(size_t(numElements(xs)), 5),
                     w = randomFloats(size_t(numElements(ws)), 6),
                     ref(size_t(numElements(ys)));
  std::vector<uint16_t> xb(x.size()), wb(w.size()), yb(ref.size());
  for (size_t i = 0; i < x.size(); ++i)
    xb[i] = floatToBf16(x[i]);
  for (size_t i = 0; i < w.size(); ++i)
    wb[i] = floatToBf16(w[i]);
  OpAttrs attrs{OpAttr::list("padding", {1, 1, 1, 1})};
  runCpuKernel(OpId::Conv2d, attrs,
               {ConstTensor{DType::BF16, xs, xb.data()},
                ConstTensor{DType::BF16, ws, wb.data()}},
               MutTensor{DType::BF16, ys, yb.data()});
  std::vector<uint16_t> refb(ref.size());
  ASSERT_TRUE(conv2d(ConstTensor{DType::BF16, xs, xb.data()},
                     ConstTensor{DType::BF16, ws, wb.data()}, params(1, 1),
                     MutTensor{DType::BF16, ys, refb.data()}));
  EXPECT_EQ(yb, refb);
}

TEST(DnnlConv, StepKernelMatchesTheReferenceAtEachBatch) {
  // A dynamic-batch session binds the step again for each batch size.
  for (int64_t n : {1, 3, 8}) {
    Shape xs{n, 8, 12, 12}, ws{16, 8, 3, 3}, ys{n, 16, 6, 6};
    std::vector<float> x = randomFloats(size_t(numElements(xs)), 7),
                       w = randomFloats(size_t(numElements(ws)), 8),
                       y(size_t(numElements(ys)), NAN), ref(y.size());
    OpAttrs attrs{OpAttr::list("strides", {2, 2}),
                  OpAttr::list("padding", {1, 1, 1, 1})};
    ASSERT_TRUE(conv2d(cin(x, xs), cin(w, ws), params(2, 1), mout(ref, ys)));
    for (bool constant : {false, true}) {
      std::fill(y.begin(), y.end(), NAN);
      runCpuKernel(OpId::Conv2d, attrs, {cin(x, xs), cin(w, ws)}, mout(y, ys),
                   {false, constant});
      EXPECT_LT(relErr(y, ref), 1e-5)
          << "batch " << n << ", constant weights " << constant;
    }
  }
}

TEST(DnnlMatmul, NarrowMatmulsMatchTheWideningReferenceToAnUlp) {
  // bf16 and f16 matmuls through oneDNN where the CPU has instructions for
  // them, against the reference (widen to f32, multiply, narrow once):
  // both sum exact products in f32 and round once, in other orders, so
  // each result is within one ulp of the narrow type. Where the CPU has
  // none, the binder refuses (saying why) and the registered kernel, which
  // then takes the widening path, equals the reference bit for bit.
  SKIP_WITHOUT_DNNL();
  struct Case {
    Shape a, b, y;
    bool ta, tb;
  } cases[] = {{{300, 250}, {250, 260}, {300, 260}, false, false},
               {{250, 300}, {250, 260}, {300, 260}, true, false},
               {{300, 250}, {260, 250}, {300, 260}, false, true},
               {{3, 160, 200}, {3, 200, 180}, {3, 160, 180}, false, false},
               {{2, 300, 170}, {2, 190, 300}, {2, 170, 190}, true, true},
               {{37, 29}, {29, 53}, {37, 53}, false, false}};
  int native = 0;
  for (DType t : {DType::BF16, DType::F16})
    for (const Case &c : cases)
      for (bool constant : {false, true}) {
        SCOPED_TRACE(std::string(dtypeName(t)) + " " + shapeString(c.a) +
                     (c.ta ? "^T" : "") + " x " + shapeString(c.b) +
                     (c.tb ? "^T" : "") + (constant ? ", constant" : ""));
        auto narrow = [&](const std::vector<float> &v) {
          return mc::test::narrowBits(t, v);
        };
        auto wide = [&](uint16_t h) { return mc::test::widen(t, h); };
        std::vector<uint16_t> a = narrow(randomFloats(size_t(numElements(c.a)),
                                                      31, -2, 2)),
                              b = narrow(randomFloats(size_t(numElements(c.b)),
                                                      32, -2, 2)),
                              y(size_t(numElements(c.y)), 0xFFFF),
                              ref(y.size());
        ConstTensor ta{t, c.a, a.data()}, tb{t, c.b, b.data()};
        ASSERT_TRUE(matmul(ta, tb, c.ta, c.tb, MutTensor{t, c.y, ref.data()}));
        BoundKernel k;
        size_t bytes = 0;
        Status st = detail::bindNarrowMatmul(ta, tb, c.ta, c.tb,
                                             MutTensor{t, c.y, y.data()},
                                             constant, &k, &bytes);
        if (!st) {
          EXPECT_NE(st.message().find("no native"), std::string::npos)
              << st.message();
          runCpuKernel(OpId::Matmul,
                       {OpAttr::boolean("transpose_a", c.ta),
                        OpAttr::boolean("transpose_b", c.tb)},
                       {ta, tb}, MutTensor{t, c.y, y.data()},
                       {false, constant});
          EXPECT_EQ(y, ref);
          continue;
        }
        ++native;
        // Each result against the reference: the two sum the same exact
        // products in f32 in other orders, so they may differ by the f32
        // roundings of the sums (K * 2^-24 * sum |a b|, with a margin) and
        // then by the final rounding to the narrow type (an ulp of it, its
        // smallest subnormal near 0).
        auto check = [&](const std::vector<uint16_t> &bs) {
          int bits = t == DType::BF16 ? 7 : 10; // fraction bits
          double tiny =
              t == DType::BF16 ? std::ldexp(1.0, -133) : std::ldexp(1.0, -24);
          size_t r = c.a.size();
          int64_t M = c.y[r - 2], N = c.y[r - 1],
                  K = c.ta ? c.a[r - 2] : c.a[r - 1];
          for (size_t i = 0; i < y.size(); ++i) {
            int64_t e = int64_t(i) / (M * N), mi = int64_t(i) / N % M,
                    ni = int64_t(i) % N;
            double sumAbs = 0;
            for (int64_t q = 0; q < K; ++q) {
              size_t ai = size_t(e * M * K + (c.ta ? q * M + mi : mi * K + q));
              size_t bi = size_t(e * K * N + (c.tb ? ni * K + q : q * N + ni));
              sumAbs += std::fabs(double(wide(a[ai])) * wide(bs[bi]));
            }
            double g = wide(y[i]), rf = wide(ref[i]);
            double ulp = std::fabs(rf) < std::ldexp(1.0, -14)
                             ? std::max(tiny, std::ldexp(1.0, -14 - bits))
                             : std::ldexp(1.0, std::ilogb(rf) - bits);
            ASSERT_LE(std::fabs(g - rf),
                      ulp + 2.0 * double(K) * std::ldexp(1.0, -24) * sumAbs)
                << "element " << i;
          }
        };
        runBound(k, bytes);
        ASSERT_NO_FATAL_FAILURE(check(b));
        if (!constant) { // the weights are read at each call
          for (uint16_t &v : b)
            v ^= 0x8000; // negated
          ASSERT_TRUE(
              matmul(ta, tb, c.ta, c.tb, MutTensor{t, c.y, ref.data()}));
          runBound(k, bytes);
          ASSERT_NO_FATAL_FAILURE(check(b));
        }
      }
  std::printf("[ INFO     ] %d of 24 narrow matmuls through oneDNN's "
              "native kernels here\n",
              native);
}

} // namespace
