// Eager frontend: ops against plain loops, broadcasting, nn naming, errors.
#include "frontend/nn.h"

#include "ErrorOf.h"

#include <functional>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mc;
using mc::test::errorOf;

namespace {

TEST(Frontend, BroadcastingAddMatchesLoops) {
  Tensor a = Tensor::randn({4, 3});
  Tensor b = Tensor::randn({3});
  Tensor c = Tensor::randn({4, 1});
  Tensor y = a + b + c;
  ASSERT_EQ(y.shape(), (Shape{4, 3}));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) {
      float ref = a.data<float>()[i * 3 + j] + b.data<float>()[j] +
                  c.data<float>()[i];
      EXPECT_FLOAT_EQ(y.data<float>()[i * 3 + j], ref);
    }
}

TEST(Frontend, LinearMatchesDoubleLoops) {
  manualSeed(1);
  nn::Linear fc(5, 3);
  Tensor x = Tensor::randn({2, 5});
  Tensor y = fc(x);
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  for (int n = 0; n < 2; ++n)
    for (int o = 0; o < 3; ++o) {
      double ref = fc.bias.data<float>()[o];
      for (int i = 0; i < 5; ++i)
        ref += double(x.data<float>()[n * 5 + i]) *
               fc.weight.data<float>()[o * 5 + i];
      EXPECT_NEAR(y.data<float>()[n * 3 + o], ref, 1e-5);
    }
}

TEST(Frontend, LinearInitMatchesPyTorchBounds) {
  nn::Linear fc(100, 10);
  float bound = 1.0f / std::sqrt(100.0f);
  for (float w : fc.weight.toVector()) {
    EXPECT_GE(w, -bound);
    EXPECT_LT(w, bound);
  }
}

TEST(Frontend, ReductionsSoftmaxAndShapes) {
  Tensor x = Tensor::fromVector({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(sum(x, {1}).toVector(), (std::vector<float>{6, 15}));
  EXPECT_EQ(mean(x, {0}).toVector(), (std::vector<float>{2.5, 3.5, 4.5}));
  EXPECT_EQ(amax(x, {-1}, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(transpose(x, {1, 0}).toVector(),
            (std::vector<float>{1, 4, 2, 5, 3, 6}));
  Tensor s = softmax(x, -1);
  for (int i = 0; i < 2; ++i) {
    float total = 0;
    for (int j = 0; j < 3; ++j)
      total += s.data<float>()[i * 3 + j];
    EXPECT_NEAR(total, 1.0f, 1e-6);
  }
  // Large inputs do not overflow: the max is subtracted.
  Tensor big = Tensor::fromVector({1000, 1001}, {1, 2});
  std::vector<float> p = softmax(big, 1).toVector();
  EXPECT_NEAR(p[1], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
}

TEST(Frontend, ReshapeIsAViewAndInfersMinusOne) {
  Tensor x = Tensor::zeros({2, 6});
  Tensor r = reshape(x, {3, -1});
  EXPECT_EQ(r.shape(), (Shape{3, 4}));
  x.data<float>()[5] = 7.0f;
  EXPECT_EQ(r.data<float>()[5], 7.0f);
}

TEST(Frontend, CastRoundTripsThroughBf16) {
  Tensor x = Tensor::fromVector({1.0f, 1.00390625f, -2.5f}, {3});
  Tensor y = cast(cast(x, DType::BF16), DType::F32);
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7 in bf16: even -> 1.
  EXPECT_EQ(y.toVector(), (std::vector<float>{1.0f, 1.0f, -2.5f}));
}

TEST(Frontend, ParameterNamesAreDotted) {
  nn::Sequential seq({std::make_shared<nn::Linear>(4, 8),
                      std::make_shared<nn::ReLU>(),
                      std::make_shared<nn::Linear>(8, 2)});
  std::vector<std::string> names;
  for (auto& [n, p] : seq.namedParameters())
    names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias",
                                             "2.weight", "2.bias"}));
}

TEST(Frontend, ErrorsNameWhatWasWrong) {
  Tensor a = Tensor::zeros({2, 3});
  try {
    (void)(a + Tensor::zeros({4}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shapes [2, 3] and [4] do not "
                                         "broadcast"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(matmul(a, Tensor::zeros({2, 3})), Error);
  EXPECT_THROW(reshape(a, {4, 2}), Error);
  EXPECT_THROW(sum(a, {2}), Error);
  EXPECT_THROW((void)(a + Tensor::zeros({2, 3}, DType::I32)), Error);
  EXPECT_THROW(nn::Linear(0, 3), Error);
  EXPECT_THROW(Tensor().shape(), Error);
}

// The eager ops take their shape rules, and messages, from the shape
// library (modelc/shapes.h) that the dialect and the verifier use.
TEST(Frontend, ShapeErrorsComeFromTheShapeLibrary) {
  auto message = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  Tensor x = Tensor::zeros({1, 1, 8, 8});
  EXPECT_EQ(message([&] { maxPool2d(x, {2, 2}, {1, 1}, {2, 2, 2, 2}); }),
            "max_pool2d: padding [2, 2, 2, 2] must be at most half the "
            "kernel [2, 2]");
  EXPECT_EQ(message([&] {
              matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 3}));
            }),
            "matmul: contracting dimensions differ: lhs [2, 3] has K = 3, "
            "rhs [4, 3] has K = 4");
  // Negative dims are Python-style here, normalized before the rule.
  EXPECT_EQ(concat({Tensor::zeros({2, 3}), Tensor::zeros({2, 5})}, -1).shape(),
            (Shape{2, 8}));
  EXPECT_EQ(maxPool2d(x, {3, 3}, {2, 2}, {0}, {1, 1}, /*ceilMode=*/true)
                .shape(),
            (Shape{1, 1, 4, 4}));
}

// Issue 12 item 2: a stride of 0 divided by zero (SIGFPE) while computing the
// output size, before anything was validated.
TEST(Frontend, WindowOpsRefuseZeroStridesAndDilations) {
  Tensor x = Tensor::zeros({1, 2, 8, 8});
  Tensor w = Tensor::zeros({3, 2, 3, 3});
  EXPECT_EQ(errorOf([&] { conv2d(x, w, Tensor(), {0, 0}, {0}, {1}, 1); }),
            "conv2d: strides must be >= 1, got [0, 0]");
  EXPECT_EQ(errorOf([&] { conv2d(x, w, Tensor(), {1}, {0}, {1, 0}, 1); }),
            "conv2d: dilation must be >= 1, got [1, 0]");
  EXPECT_EQ(errorOf([&] { conv2d(x, w, Tensor(), {1}, {-1}, {1}, 1); }),
            "conv2d: padding must be >= 0, got [-1, -1, -1, -1]");
  EXPECT_EQ(errorOf([&] { maxPool2d(x, {2, 2}, {0, 0}, {0}, {1}, false); }),
            "max_pool2d: strides must be >= 1, got [0, 0]");
  EXPECT_EQ(errorOf([&] { avgPool2d(x, {2, 2}, {0}, {0}, false, false); }),
            "avg_pool2d: strides must be >= 1, got [0, 0]");
  EXPECT_EQ(errorOf([&] { maxPool2d(x, {0, 2}, {}, {0}, {1}, false); }),
            "max_pool2d: kernel must be >= 1, got [0, 2]");
}

// Shape-only tensors (what ONNX import traces on): ops check shapes and
// compute output shapes but run no kernel, so an integer division by
// "zeros" is no error; ops whose inputs all have values still compute them;
// reading a shape-only tensor's values is a clear error.
TEST(Frontend, ShapeOnlyTensorsRunNoKernels) {
  Tensor x = Tensor::shapeOnly({2, 3});
  EXPECT_FALSE(x.hasValues());
  Tensor w = Tensor::fromVector({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor y = relu(matmul(x, w) + 1.0);
  EXPECT_FALSE(y.hasValues());
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  Tensor ww = add(w, w); // all inputs have values: computed
  ASSERT_TRUE(ww.hasValues());
  EXPECT_EQ(ww.toVector()[5], 12.0f);
  Tensor n = Tensor::shapeOnly({4}, DType::I64);
  Tensor q = div(n, Tensor::zeros({4}, DType::I64));
  EXPECT_FALSE(q.hasValues());
  EXPECT_EQ(concat({x, x}, 0).shape(), (Shape{4, 3}));
  EXPECT_FALSE(conv2d(Tensor::shapeOnly({1, 2, 8, 8}), Tensor::randn({3, 2, 3, 3}),
                      Tensor::randn({3}), {1}, {1}, {1}, 1)
                   .hasValues());
  // Shapes are still checked.
  EXPECT_THROW(matmul(x, Tensor::shapeOnly({4, 2})), Error);
  try {
    (void)y.toVector();
    FAIL() << "read the values of a shape-only tensor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the values of f32[2, 2] are not "
                                         "known: it is a shape-only tensor"),
              std::string::npos)
        << e.what();
  }
  // The element limit holds for both kinds of tensor.
  EXPECT_THROW(Tensor::shapeOnly({int64_t(1) << 40}), Error);
  EXPECT_THROW(Tensor::empty({int64_t(1) << 40}), Error);
}

//===--- topk ---===//

/// ONNX TopK's order for one row: NaN above +inf (PyTorch), ties to the
/// lower index; the k first (largest) or last (smallest) positions.
std::vector<int64_t> topkReference(const std::vector<float>& row, int64_t k,
                                   bool largest) {
  std::vector<int64_t> order(row.size());
  for (size_t i = 0; i < row.size(); ++i)
    order[i] = static_cast<int64_t>(i);
  // rank: NaN highest; compare values otherwise.
  auto above = [&](int64_t a, int64_t b) { // a strictly ranks above b
    float x = row[a], y = row[b];
    if (std::isnan(x) || std::isnan(y))
      return std::isnan(x) && !std::isnan(y);
    return x > y;
  };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return largest ? above(a, b) : above(b, a);
  });
  order.resize(static_cast<size_t>(k));
  return order;
}

/// Checks topk(x, k, dim, largest) row by row against the reference:
/// indices exactly, values bit for bit (NaN as NaN).
void expectTopkMatches(const Tensor& x, int64_t k, int64_t dim, bool largest) {
  auto [values, indices] = topk(x, k, dim, largest);
  int64_t axis = dim < 0 ? dim + x.rank() : dim;
  Shape outShape = x.shape();
  outShape[axis] = k;
  ASSERT_EQ(values.shape(), outShape);
  ASSERT_EQ(indices.shape(), outShape);
  ASSERT_EQ(indices.dtype(), DType::I64);
  std::vector<float> xv = cast(x, DType::F32).toVector();
  std::vector<float> vv = cast(values, DType::F32).toVector();
  const int64_t* iv = indices.data<int64_t>();
  int64_t n = x.size(axis), inner = 1, outer = 1;
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    inner *= x.size(d);
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.size(d);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      std::vector<float> row(n);
      for (int64_t i = 0; i < n; ++i)
        row[i] = xv[(o * n + i) * inner + in];
      std::vector<int64_t> want = topkReference(row, k, largest);
      for (int64_t j = 0; j < k; ++j) {
        int64_t at = (o * k + j) * inner + in;
        std::string where =
            "dim " + std::to_string(dim) + " k " + std::to_string(k) +
            (largest ? " largest" : " smallest") + " row " + std::to_string(o) +
            "/" + std::to_string(in) + " rank " + std::to_string(j);
        EXPECT_EQ(iv[at], want[j]) << where;
        float w = row[want[j]];
        if (std::isnan(w)) {
          EXPECT_TRUE(std::isnan(vv[at])) << where;
        } else {
          EXPECT_EQ(vv[at], w) << where;
          EXPECT_EQ(std::signbit(vv[at]), std::signbit(w)) << where; // -0.0
        }
      }
    }
}

TEST(Frontend, TopkFollowsOnnxOrderWithTiesNanAndInf) {
  manualSeed(31);
  Tensor x = Tensor::randn({3, 7, 9});
  float* p = x.data<float>();
  // Ties (within rows of every dim), NaN (one and two in a row), +-inf.
  for (int64_t i : {4, 8, 13, 40, 41, 42, 100, 101})
    p[i] = 0.5f;
  for (int64_t i : {5, 30, 120, 125, 180})
    p[i] = NAN;
  for (int64_t i : {6, 7, 31, 126, 181})
    p[i] = INFINITY;
  for (int64_t i : {2, 60, 61, 150})
    p[i] = -INFINITY;
  for (int64_t i : {9, 10, 11, 12}) // a row's -0.0 and 0.0 tie
    p[i] = i % 2 ? -0.0f : 0.0f;
  for (int64_t dim : {0, 1, 2, -1})
    for (bool largest : {true, false})
      for (int64_t k : {int64_t(1), int64_t(3), x.size(dim)})
        expectTopkMatches(x, k, dim, largest);
  // Low precision: the same order of the rounded values.
  expectTopkMatches(cast(x, DType::BF16), 4, -1, true);
  expectTopkMatches(cast(x, DType::F16), 4, 1, false);
}

// Integers, with their types' limits and ties: the order of a stable sort.
TEST(Frontend, TopkOfIntegersFollowsOnnxOrder) {
  const int64_t lo = std::numeric_limits<int64_t>::min();
  const int64_t hi = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> v{5, lo, hi, 5, -3, hi, 0, lo, 7, -3};
  Tensor x = Tensor::empty({2, 5}, DType::I64);
  std::copy(v.begin(), v.end(), x.data<int64_t>());
  for (bool largest : {true, false})
    for (int64_t k : {1, 3, 5}) {
      auto [values, indices] = topk(x, k, 1, largest);
      ASSERT_EQ(values.dtype(), DType::I64);
      for (int64_t row = 0; row < 2; ++row) {
        std::vector<int64_t> order{0, 1, 2, 3, 4};
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          int64_t x1 = v[row * 5 + a], x2 = v[row * 5 + b];
          return largest ? x1 > x2 : x1 < x2;
        });
        for (int64_t j = 0; j < k; ++j) {
          EXPECT_EQ(indices.data<int64_t>()[row * k + j], order[j])
              << "row " << row << " k " << k << " largest " << largest;
          EXPECT_EQ(values.data<int64_t>()[row * k + j], v[row * 5 + order[j]]);
        }
      }
    }
  Tensor small = Tensor::empty({4}, DType::I32);
  std::vector<int32_t> w{3, std::numeric_limits<int32_t>::min(), 3, 9};
  std::copy(w.begin(), w.end(), small.data<int32_t>());
  auto [values, indices] = topk(small, 3, 0, false);
  EXPECT_EQ(
      std::vector<int32_t>(values.data<int32_t>(), values.data<int32_t>() + 3),
      (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), 3, 3}));
  EXPECT_EQ(std::vector<int64_t>(indices.data<int64_t>(),
                                 indices.data<int64_t>() + 3),
            (std::vector<int64_t>{1, 0, 2}));
}

TEST(Frontend, TopkGradientReachesTheSelectedElementsOnly) {
  Tensor x = Tensor::fromVector({3, 1, 4, 1, 5, 9, 2, 6}, {2, 4});
  x.setRequiresGrad();
  auto [values, indices] = topk(x, 2, 1);
  Tensor w = Tensor::fromVector({10, 20, 30, 40}, {2, 2});
  Tensor loss = sum(values * w, {0, 1});
  loss.backward();
  // Row 0: 4 (index 2), 3 (index 0); row 1: 9 (5 -> index 1), 6 (index 3).
  EXPECT_EQ(std::vector<int64_t>(indices.data<int64_t>(),
                                 indices.data<int64_t>() + 4),
            (std::vector<int64_t>{2, 0, 1, 3}));
  EXPECT_EQ(x.grad().toVector(),
            (std::vector<float>{20, 0, 10, 0, 0, 30, 0, 40}));
}

TEST(Frontend, TopkRefusesWhatItCannotSelect) {
  Tensor x = Tensor::randn({2, 5});
  EXPECT_EQ(errorOf([&] { topk(x, 0); }),
            "topk: k = 0 must be in [1, 5], the size of dim 1 of f32[2, 5]");
  EXPECT_EQ(errorOf([&] { topk(x, 3, 0); }),
            "topk: k = 3 must be in [1, 2], the size of dim 0 of f32[2, 5]");
  EXPECT_EQ(errorOf([&] { topk(Tensor::zeros({4}, DType::I1), 1); }),
            "topk: needs a float, i32 or i64 tensor of rank >= 1, got i1[4]");
  EXPECT_EQ(errorOf([&] {
              topk(Tensor::randn({2, 300}), 257);
            }),
            "topk: k = 257 is above 256, the most modelc unrolls (k "
            "selection rounds over the dim)");
  EXPECT_NE(errorOf([&] { topk(x, 1, 2); }), "");
}

} // namespace
