// The run-time bounds steps publish on their results (ValueBound,
// modelc/kernels.h) beyond the convolution's own (DnnlConvTest.cpp): a
// fused region's, by interval arithmetic over its ops; max pooling's,
// passed through; and the convolution's guard, which scans an input whose
// published bound is too loose to clear its sums before it takes the exact
// path. A bound is checked against the largest |v| of the result it
// covers: never below it, infinite wherever a NaN or inf could be.
#include "TestUtil.h"
#include "modelc/device.h"
#include "modelc/kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mc::rt;
using mc::test::cin;
using mc::test::mout;
using mc::test::randomFloats;

namespace {

double largestAbs(const std::vector<float> &v) {
  double m = 0;
  for (float e : v)
    m = std::max(m, double(std::fabs(e)));
  return m;
}

ValueBound truth(const std::vector<float> &v) {
  ValueBound b;
  b.written = true;
  b.maxAbs = largestAbs(v);
  return b;
}

RegionOp regionOp(OpId op, std::vector<uint32_t> operands, Shape shape,
                  OpAttrs attrs = {}) {
  return RegionOp{op, std::move(attrs), std::move(operands), DType::F32,
                  std::move(shape)};
}

/// Binds and runs the CPU's fused-region kernel once.
void runRegion(const std::vector<RegionOp> &body,
               std::vector<ConstTensor> inputs, std::vector<bool> constant,
               std::vector<const ValueBound *> inputBounds,
               const MutTensor &out, ValueBound *published) {
  std::unique_ptr<Device> cpu;
  ASSERT_TRUE(createDevice("cpu", &cpu));
  OpAttrs none;
  KernelRequest r{OpId::Fused, none,  std::move(inputs),  out,
                  *cpu,        &body, std::move(constant)};
  r.inputBounds = std::move(inputBounds);
  r.outputBound = published;
  BoundKernel k;
  size_t bytes = 0;
  Status st = findKernel("cpu", OpId::Fused)(r, &k, &bytes);
  ASSERT_TRUE(st) << st.message();
  std::vector<uint8_t> ws(bytes + 1);
  st = k(ws.data());
  ASSERT_TRUE(st) << st.message();
}

TEST(ValueBound, ElementwiseRegionPublishesABoundItsResultStaysWithin) {
  // y = clamp(-max(a * b - c, a), -2, 50) + tanh(a) over 3000 elements
  // (more than one tile), c a constant: every rule but the views, from the
  // inputs' true bounds.
  Shape s{3, 1000};
  std::vector<float> a = randomFloats(3000, 31, -4.f, 4.f),
                     b = randomFloats(3000, 32, -3.f, 3.f),
                     c = randomFloats(3000, 33, -1.f, 1.f), y(3000);
  OpAttrs clamp{OpAttr::real("min", -2.0), OpAttr::real("max", 50.0)};
  std::vector<RegionOp> body{regionOp(OpId::Mul, {0, 1}, s),     // 3
                             regionOp(OpId::Sub, {3, 2}, s),     // 4
                             regionOp(OpId::Maximum, {4, 0}, s), // 5
                             regionOp(OpId::Neg, {5}, s),        // 6
                             regionOp(OpId::Clamp, {6}, s, clamp),
                             regionOp(OpId::Tanh, {0}, s), // 8
                             regionOp(OpId::Add, {7, 8}, s)};
  ValueBound ba = truth(a), bb = truth(b), out;
  runRegion(body, {cin(a, s), cin(b, s), cin(c, s)}, {false, false, true},
            {&ba, &bb, nullptr}, mout(y, s), &out);
  ASSERT_TRUE(out.written);
  EXPECT_GE(out.maxAbs, largestAbs(y));
  // max(a*b - c, a) <= 12 + 1 in magnitude, negated and clamped to
  // [-2, 50]: within 13; tanh adds 1 (and the roundings a little).
  EXPECT_LE(out.maxAbs, 14.01);

  // Where every value is its bound, the result reaches the bound: (a + b)
  // * a for a = 2.5, b = 1.5 is 10, and so is the bound (but for the
  // roundings' margin).
  std::vector<float> a0(3000, 2.5f), b0(3000, 1.5f);
  std::vector<RegionOp> tight{regionOp(OpId::Add, {0, 1}, s),
                              regionOp(OpId::Mul, {2, 0}, s)};
  ValueBound ba0 = truth(a0), bb0 = truth(b0), tightOut;
  runRegion(tight, {cin(a0, s), cin(b0, s)}, {false, false}, {&ba0, &bb0},
            mout(y, s), &tightOut);
  EXPECT_EQ(largestAbs(y), 10.0);
  EXPECT_GE(tightOut.maxAbs, 10.0);
  EXPECT_LE(tightOut.maxAbs, 10.0 * (1 + 1e-5));

  // Below f32's normal range rounding is absolute: 1.5 * 2^-75 * 2^-75
  // rounds up to 2^-149, a third above the relative bound.
  std::vector<float> tinyA(3000, 1.5f * 0x1p-75f), tinyB(3000, 0x1p-75f);
  std::vector<RegionOp> tinyProduct{regionOp(OpId::Mul, {0, 1}, s),
                                    regionOp(OpId::Relu, {2}, s)};
  ValueBound bta = truth(tinyA), btb = truth(tinyB), tinyOut;
  runRegion(tinyProduct, {cin(tinyA, s), cin(tinyB, s)}, {false, false},
            {&bta, &btb}, mout(y, s), &tinyOut);
  EXPECT_GE(tinyOut.maxAbs, largestAbs(y));

  // An input nobody bounds: nothing is known of the result.
  ValueBound unknownResult;
  runRegion(body, {cin(a, s), cin(b, s), cin(c, s)}, {false, false, true},
            {&ba, nullptr, nullptr}, mout(y, s), &unknownResult);
  EXPECT_TRUE(unknownResult.written);
  EXPECT_FALSE(std::isfinite(unknownResult.maxAbs));

  // Products that could overflow f32: infinite, as they do here.
  std::vector<float> big = randomFloats(3000, 34, 1e30f, 3e30f);
  std::vector<RegionOp> product{regionOp(OpId::Mul, {0, 1}, s),
                                regionOp(OpId::Add, {2, 0}, s)};
  ValueBound bBig = truth(big), overflow;
  runRegion(product, {cin(big, s), cin(big, s)}, {false, false}, {&bBig, &bBig},
            mout(y, s), &overflow);
  EXPECT_TRUE(overflow.written);
  EXPECT_FALSE(std::isfinite(overflow.maxAbs));
  EXPECT_TRUE(std::isinf(y[0]));

  // An op without a rule (exp): the slot is left alone, so readers see no
  // writer.
  std::vector<RegionOp> withExp{regionOp(OpId::Exp, {0}, s),
                                regionOp(OpId::Add, {1, 0}, s)};
  ValueBound untouched;
  runRegion(withExp, {cin(a, s)}, {false}, {&ba}, mout(y, s), &untouched);
  EXPECT_FALSE(untouched.written);
}

TEST(ValueBound, ResidualRegionCarriesTheConvolutionsBound) {
  // ResNet's block tail: relu(conv(x, w) + bias + residual), the bias
  // folded into the convolution and the rest over tiles. Its bound comes
  // from x's and the residual's published bounds through the convolution's
  // own: finite, never below the result, and unknown without the
  // residual's.
  Shape xs{2, 8, 10, 10}, ws{8, 8, 3, 3}, bs{8};
  std::vector<float> x = randomFloats(1600, 41, 0.f, 2.f),
                     w = randomFloats(576, 42, -0.2f, 0.2f),
                     bias = randomFloats(8, 43, -1.f, 1.f),
                     res = randomFloats(1600, 44, -3.f, 3.f), y(1600);
  OpAttrs conv{OpAttr::list("strides", {1, 1}),
               OpAttr::list("padding", {1, 1, 1, 1}),
               OpAttr::list("dilation", {1, 1}), OpAttr::integer("groups", 1)};
  OpAttrs dims{OpAttr::list("dims", {1})};
  std::vector<RegionOp> body{regionOp(OpId::Conv2d, {0, 1}, xs, conv),      // 4
                             regionOp(OpId::BroadcastInDim, {2}, xs, dims), // 5
                             regionOp(OpId::Add, {4, 5}, xs),               // 6
                             regionOp(OpId::Add, {6, 3}, xs),               // 7
                             regionOp(OpId::Relu, {7}, xs)};
  std::vector<ConstTensor> ins{cin(x, xs), cin(w, ws), cin(bias, bs),
                               cin(res, xs)};
  ValueBound bx = truth(x), bres = truth(res), out;
  runRegion(body, ins, {false, true, true, false},
            {&bx, nullptr, nullptr, &bres}, mout(y, xs), &out);
  ASSERT_TRUE(out.written);
  EXPECT_TRUE(std::isfinite(out.maxAbs));
  EXPECT_GE(out.maxAbs, largestAbs(y));
  // The convolution's bound: the largest channel's sum of |w| (at most
  // 72 * 0.2) times 2, the bias's 1, then the residual's 3.
  EXPECT_LE(out.maxAbs, 72 * 0.2 * 2 + 1 + 3 + 0.01);

  ValueBound unknown;
  runRegion(body, ins, {false, true, true, false},
            {&bx, nullptr, nullptr, nullptr}, mout(y, xs), &unknown);
  EXPECT_TRUE(unknown.written);
  EXPECT_FALSE(std::isfinite(unknown.maxAbs));
}

Status bindMaxPool(const ConstTensor &x, const MutTensor &y,
                   const ValueBound *in, ValueBound *published,
                   std::vector<int64_t> padding, BoundKernel *k) {
  std::unique_ptr<Device> cpu;
  MC_RETURN_IF_ERROR(createDevice("cpu", &cpu));
  OpAttrs attrs{OpAttr::list("kernel", {3, 3}), OpAttr::list("strides", {2, 2}),
                OpAttr::list("padding", std::move(padding))};
  KernelRequest r{OpId::MaxPool2d, attrs, {x}, y, *cpu};
  r.inputBounds = {in};
  r.outputBound = published;
  size_t bytes = 0;
  return findKernel("cpu", OpId::MaxPool2d)(r, k, &bytes);
}

TEST(ValueBound, MaxPoolPassesItsInputsBoundOn) {
  // ResNet's stem pool (3x3, stride 2, padding 1): every window holds
  // input values, so the result is within the input's bound.
  Shape xs{1, 2, 8, 8}, ys{1, 2, 4, 4};
  std::vector<float> x = randomFloats(128, 51, -5.f, 5.f), y(32);
  ValueBound in = truth(x), out;
  BoundKernel k;
  ASSERT_TRUE(
      bindMaxPool(cin(x, xs), mout(y, ys), &in, &out, {1, 1, 1, 1}, &k));
  EXPECT_TRUE(out.written);
  ASSERT_TRUE(k(nullptr));
  EXPECT_EQ(out.maxAbs, in.maxAbs);
  EXPECT_GE(out.maxAbs, largestAbs(y));
  // Unknown input: unknown result.
  in.maxAbs = INFINITY;
  ASSERT_TRUE(k(nullptr));
  EXPECT_FALSE(std::isfinite(out.maxAbs));

  // Padding of 3 on a 3-wide window: the first window lies wholly in it
  // and gives -inf, so no bound is published.
  Shape ys2{1, 2, 6, 6};
  std::vector<float> y2(72);
  ValueBound in2 = truth(x), out2;
  BoundKernel k2;
  ASSERT_TRUE(
      bindMaxPool(cin(x, xs), mout(y2, ys2), &in2, &out2, {3, 3, 3, 3}, &k2));
  EXPECT_FALSE(out2.written);
  ASSERT_TRUE(k2(nullptr));
  EXPECT_TRUE(std::isinf(y2[0]));
}

TEST(ValueBound, ConvolutionScansAnInputWhoseBoundIsTooLoose) {
  // A bound grown layer by layer (1e37) is finite but too loose to clear
  // the sums; the guard scans the input (small values) and takes the
  // fused path, publishing the bound of what it saw. Without the scan it
  // would take the exact path and publish infinity.
  Shape xs{1, 8, 6, 6}, ws{8, 8, 3, 3};
  std::vector<float> x = randomFloats(288, 61), w = randomFloats(576, 62),
                     y(288);
  Epilogue e;
  e.activation = OpId::Relu;
  ValueBound loose, out;
  loose.written = true;
  loose.maxAbs = 1e37;
  e.inputBound = &loose;
  e.resultBound = &out;
  Conv2dParams p;
  p.padTop = p.padLeft = p.padBottom = p.padRight = 1;
  BoundKernel k;
  size_t bytes = 0;
  if (!bindConv2d(cin(x, xs), cin(w, ws), p, e, mout(y, xs), true, &k, &bytes))
    GTEST_SKIP() << "no oneDNN convolution in this runtime";
  std::vector<uint8_t> ws_(bytes + 1);
  ASSERT_TRUE(k(ws_.data()));
  EXPECT_TRUE(std::isfinite(out.maxAbs));
  EXPECT_LT(out.maxAbs, 1e3);
  EXPECT_GE(out.maxAbs, largestAbs(y));
}

} // namespace
