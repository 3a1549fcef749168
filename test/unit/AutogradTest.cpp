// Eager autograd: the gradient of every differentiable op against central
// finite differences (computed in double from the f32 kernels), and the same
// cases against torch.autograd when PyTorch is installed; optimizers against
// torch.optim.
#include "frontend/Autograd.h"
#include "frontend/Loss.h"
#include "frontend/Ops.h"
#include "frontend/Optim.h"
#include "frontend/nn.h"
#include "modelc/kernels.h"
#include "modelc/npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>

using namespace mc;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Case {
  std::string name;
  std::vector<Tensor> inputs;
  Fn fn;
  /// The same function in PyTorch, on inputs named a, b, c, ...
  std::string torchExpr;
  /// For ops linear or piecewise linear in each input: a step at which
  /// central differences through the f32 kernels are exact but for
  /// rounding, so they check the gradient to 1e-5 (0: not checked so).
  double exactStep = 0;
};

Tensor randnIn(const Shape& s, float lo, float hi, uint64_t seed) {
  std::mt19937_64 gen(seed);
  return Tensor::uniform(s, lo, hi, &gen);
}

/// Distinct values 0.05 apart, shuffled: max pooling's winner does not
/// change under a step of 0.01 (no kink is crossed).
Tensor distinct(const Shape& s, uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(0.05f * static_cast<float>(i - n / 2));
  std::mt19937_64 gen(seed);
  std::shuffle(v.begin(), v.end(), gen);
  return Tensor::fromVector(v, s);
}

/// f(inputs) = sum(fn(inputs) * w) with a fixed random w, so every output
/// element weighs differently.
double objective(const Case& c, const std::vector<Tensor>& inputs,
                 const Tensor& w) {
  NoGradGuard guard;
  Tensor y = c.fn(inputs);
  std::vector<float> yv = y.toVector(), wv = w.toVector();
  double total = 0;
  for (size_t i = 0; i < yv.size(); ++i)
    total += double(yv[i]) * wv[i];
  return total;
}

std::vector<Case> cases() {
  auto in = [](const Shape& s, uint64_t seed, float lo = -2, float hi = 2) {
    return randnIn(s, lo, hi, seed);
  };
  std::vector<Case> c;
  c.push_back({"add_broadcast", {in({3, 4}, 1), in({4}, 2)},
               [](auto& x) { return x[0] + x[1]; }, "a + b"});
  c.push_back({"sub", {in({3, 4}, 3), in({3, 1}, 4)},
               [](auto& x) { return x[0] - x[1]; }, "a - b"});
  c.push_back({"mul", {in({3, 4}, 5), in({3, 4}, 6)},
               [](auto& x) { return x[0] * x[1]; }, "a * b"});
  c.push_back({"div", {in({3, 4}, 7), in({3, 4}, 8, 0.5, 2)},
               [](auto& x) { return x[0] / x[1]; }, "a / b"});
  c.push_back({"maximum", {in({3, 4}, 9), in({3, 4}, 10)},
               [](auto& x) { return maximum(x[0], x[1]); },
               "torch.maximum(a, b)"});
  c.push_back({"minimum", {in({3, 4}, 11), in({3, 4}, 12)},
               [](auto& x) { return minimum(x[0], x[1]); },
               "torch.minimum(a, b)"});
  c.push_back({"neg", {in({5}, 13)}, [](auto& x) { return neg(x[0]); }, "-a"});
  c.push_back({"exp", {in({5}, 14)}, [](auto& x) { return exp(x[0]); },
               "torch.exp(a)"});
  c.push_back({"log", {in({5}, 15, 0.5, 3)},
               [](auto& x) { return log(x[0]); }, "torch.log(a)"});
  c.push_back({"tanh", {in({5}, 16)}, [](auto& x) { return tanh(x[0]); },
               "torch.tanh(a)"});
  c.push_back({"sigmoid", {in({5}, 17)},
               [](auto& x) { return sigmoid(x[0]); }, "torch.sigmoid(a)"});
  c.push_back({"relu", {in({6}, 18)}, [](auto& x) { return relu(x[0]); },
               "torch.relu(a)"});
  c.push_back({"sqrt", {in({5}, 19, 0.5, 3)},
               [](auto& x) { return sqrt(x[0]); }, "torch.sqrt(a)"});
  c.push_back({"abs", {in({6}, 20)}, [](auto& x) { return abs(x[0]); },
               "torch.abs(a)"});
  c.push_back({"erf", {in({5}, 21)}, [](auto& x) { return erf(x[0]); },
               "torch.erf(a)"});
  c.push_back({"sin", {in({6}, 24, -7, 7)},
               [](auto& x) { return sin(x[0]); }, "torch.sin(a)"});
  c.push_back({"cos", {in({6}, 25, -7, 7)},
               [](auto& x) { return cos(x[0]); }, "torch.cos(a)"});
  c.push_back({"tan",
               {in({6}, 26, -1.4, 1.4)},
               [](auto& x) { return tan(x[0]); },
               "torch.tan(a)"});
  c.push_back({"asin",
               {in({6}, 27, -0.95, 0.95)},
               [](auto& x) { return asin(x[0]); },
               "torch.asin(a)"});
  c.push_back({"acos",
               {in({6}, 28, -0.95, 0.95)},
               [](auto& x) { return acos(x[0]); },
               "torch.acos(a)"});
  c.push_back({"atan",
               {in({6}, 29, -5, 5)},
               [](auto& x) { return atan(x[0]); },
               "torch.atan(a)"});
  c.push_back({"sinh",
               {in({6}, 30, -4, 4)},
               [](auto& x) { return sinh(x[0]); },
               "torch.sinh(a)"});
  c.push_back({"cosh",
               {in({6}, 31, -4, 4)},
               [](auto& x) { return cosh(x[0]); },
               "torch.cosh(a)"});
  c.push_back({"asinh",
               {in({6}, 32, -5, 5)},
               [](auto& x) { return asinh(x[0]); },
               "torch.asinh(a)"});
  c.push_back({"acosh",
               {in({6}, 33, 1.1, 6)},
               [](auto& x) { return acosh(x[0]); },
               "torch.acosh(a)"});
  c.push_back({"atanh",
               {in({6}, 34, -0.95, 0.95)},
               [](auto& x) { return atanh(x[0]); },
               "torch.atanh(a)"});
  c.push_back({"gelu", {in({6}, 22)}, [](auto& x) { return gelu(x[0]); },
               "torch.nn.functional.gelu(a)"});
  c.push_back({"gelu_tanh", {in({6}, 23)},
               [](auto& x) { return gelu(x[0], true); },
               "torch.nn.functional.gelu(a, approximate='tanh')"});
  // Across all three pieces of hardswish (below -3, the ramp, above 3).
  c.push_back({"hardswish", {in({16}, 90, -5, 5)},
               [](auto& x) { return hardswish(x[0]); },
               "torch.nn.functional.hardswish(a)"});
  c.push_back({"pow", {in({4}, 24, 0.5, 2), in({4}, 25, -1, 2)},
               [](auto& x) { return pow(x[0], x[1]); }, "torch.pow(a, b)"});
  c.push_back({"clamp", {in({8}, 26)},
               [](auto& x) { return clamp(x[0], -1.0, 1.0); },
               "torch.clamp(a, -1.0, 1.0)"});
  {
    // dropout(x, seed 5, offset 2): PyTorch multiplies by the same factors
    // (each element's, from rt::dropoutWord); linear in x.
    const double p = 0.25;
    std::string factors;
    for (uint64_t i = 0; i < 64; ++i) {
      bool keep = (rt::dropoutWord(5, 2, i) >> 8) < rt::dropoutKeepBelow(p);
      char f[32];
      std::snprintf(f, sizeof f, "%s%.9g", i ? ", " : "",
                    keep ? rt::dropoutScale(p) : 0.0);
      factors += f;
    }
    c.push_back({"dropout",
                 {in({4, 16}, 33)},
                 [p](auto& x) {
                   return dropout(x[0], Tensor::scalar(5, DType::I64),
                                  Tensor::scalar(2, DType::I64), p);
                 },
                 "a * torch.tensor([" + factors + "]).reshape(4, 16)",
                 0.25});
  }
  c.push_back({"matmul", {in({3, 4}, 27), in({4, 5}, 28)},
               [](auto& x) { return matmul(x[0], x[1]); }, "a @ b"});
  c.push_back({"matmul_ta_tb", {in({2, 4, 3}, 29), in({2, 5, 4}, 30)},
               [](auto& x) { return matmul(x[0], x[1], true, true); },
               "a.transpose(-1, -2) @ b.transpose(-1, -2)"});
  c.push_back({"matmul_tb", {in({3, 4}, 31), in({5, 4}, 32)},
               [](auto& x) { return matmul(x[0], x[1], false, true); },
               "a @ b.t()"});
  c.push_back({"transpose", {in({2, 3, 4}, 33)},
               [](auto& x) { return transpose(x[0], {2, 0, 1}); },
               "a.permute(2, 0, 1)"});
  c.push_back({"reshape", {in({2, 6}, 34)},
               [](auto& x) { return reshape(x[0], {3, 4}); },
               "a.reshape(3, 4)"});
  c.push_back({"sum_keepdim", {in({3, 4}, 35)},
               [](auto& x) { return sum(x[0], {1}, true); },
               "a.sum(1, keepdim=True)"});
  c.push_back({"mean", {in({3, 4, 2}, 36)},
               [](auto& x) { return mean(x[0], {0, 2}); }, "a.mean((0, 2))"});
  c.push_back({"amax", {in({3, 5}, 37)},
               [](auto& x) { return amax(x[0], {1}); }, "a.amax(1)"});
  c.push_back({"amin", {in({3, 5}, 38)},
               [](auto& x) { return amin(x[0], {0}, true); },
               "a.amin(0, keepdim=True)"});
  c.push_back({"softmax", {in({3, 5}, 39)},
               [](auto& x) { return softmax(x[0], 1); },
               "torch.softmax(a, 1)"});
  c.push_back({"log_softmax", {in({3, 5}, 40)},
               [](auto& x) { return logSoftmax(x[0], 1); },
               "torch.log_softmax(a, 1)"});
  c.push_back({"where", {in({3, 4}, 41), in({3, 4}, 42)},
               [](auto& x) { return where(gt(x[0], x[1]), x[0], x[1] * 2.0); },
               "torch.where(a > b, a, b * 2.0)"});
  c.push_back({"concat", {in({2, 3}, 43), in({2, 2}, 44)},
               [](auto& x) { return concat({x[0], x[1]}, 1); },
               "torch.cat([a, b], 1)"});
  c.push_back({"slice", {in({4, 5}, 45)},
               [](auto& x) { return sliceDim(x[0], 1, 1, 4); }, "a[:, 1:4]"});
  c.push_back({"pad", {in({2, 3}, 46)},
               [](auto& x) { return pad(x[0], {1, 0}, {0, 2}, 0.5); },
               "torch.nn.functional.pad(a, (0, 2, 1, 0), value=0.5)"});
  c.push_back({"cast_roundtrip", {in({4}, 47)},
               [](auto& x) { return cast(cast(x[0], DType::F32), DType::F32); },
               "a"});
  c.push_back({"gather_rows", {in({5, 3}, 57)},
               [](auto& x) {
                 // Repeated and negative ids accumulate into their rows.
                 Tensor ids = Tensor::empty({2, 3}, DType::I64);
                 int64_t v[] = {0, 4, 4, -1, 2, 0};
                 std::copy(v, v + 6, ids.data<int64_t>());
                 return embedding(x[0], ids);
               },
               "a[torch.tensor([[0, 4, 4], [-1, 2, 0]])]"});
  c.push_back({"gather_axis1", {in({2, 4, 3}, 58)},
               [](auto& x) {
                 Tensor ids = Tensor::empty({2}, DType::I32);
                 ids.data<int32_t>()[0] = 3;
                 ids.data<int32_t>()[1] = -1;
                 return gather(x[0], ids, 1);
               },
               "a[:, torch.tensor([3, -1]), :]"});
  c.push_back({"scatter_add",
               {in({2, 3, 3}, 59)},
               [](auto& x) {
                 // gather's adjoint: repeated ids sum, -1 is the last row.
                 Tensor ids = Tensor::empty({2, 3}, DType::I64);
                 int64_t v[] = {0, 4, 4, -1, 2, 0};
                 std::copy(v, v + 6, ids.data<int64_t>());
                 return scatterAdd(x[0], ids, 0, 7);
               },
               "torch.zeros(7, 3).index_add(0, torch.tensor([0, 4, 4, 6, 2, "
               "0]), a.reshape(6, 3))"});
  c.push_back({"layer_norm", {in({2, 3, 6}, 48), in({6}, 49), in({6}, 50)},
               [](auto& x) { return layerNorm(x[0], x[1], x[2], 2, 1e-5); },
               "torch.nn.functional.layer_norm(a, (6,), b, c, 1e-5)"});
  c.push_back({"cross_entropy", {in({4, 5}, 51)},
               [](auto& x) {
                 Tensor labels = Tensor::empty({4}, DType::I64);
                 int64_t ls[] = {0, 3, 4, 1};
                 std::copy(ls, ls + 4, labels.data<int64_t>());
                 return crossEntropy(x[0], labels);
               },
               "torch.nn.functional.cross_entropy(a, torch.tensor([0, 3, 4, "
               "1]))"});
  c.push_back({"mse", {in({3, 4}, 52), in({3, 4}, 53)},
               [](auto& x) { return mseLoss(x[0], x[1]); },
               "torch.nn.functional.mse_loss(a, b)"});
  // Convolution, pooling, training batch norm and strided slices: their
  // rules are compositions of forward ops (ir/DerivativeRules.h).
  c.push_back({"conv2d_stride2_pad1",
               {in({2, 3, 7, 7}, 60), in({4, 3, 3, 3}, 61)},
               [](auto& x) {
                 return conv2d(x[0], x[1], Tensor(), {2, 2}, {1, 1, 1, 1});
               },
               "torch.nn.functional.conv2d(a, b, stride=2, padding=1)",
               1.0});
  c.push_back(
      {"conv2d_dilation2",
       {in({1, 2, 9, 8}, 62), in({3, 2, 3, 2}, 63)},
       [](auto& x) {
         return conv2d(x[0], x[1], Tensor(), {1, 1}, {2, 1, 2, 1}, {2, 2});
       },
       "torch.nn.functional.conv2d(a, b, padding=(2, 1), "
       "dilation=2)",
       1.0});
  c.push_back(
      {"conv2d_groups2_bias",
       {in({2, 4, 6, 6}, 64), in({6, 2, 3, 3}, 65), in({6}, 66)},
       [](auto& x) {
         return conv2d(x[0], x[1], x[2], {1, 2}, {1, 1, 1, 1}, {1, 1}, 2);
       },
       "torch.nn.functional.conv2d(a, b, c, stride=(1, 2), "
       "padding=1, groups=2)",
       1.0});
  c.push_back(
      {"conv2d_stride2_pad2_dilation2_groups2",
       {in({2, 4, 9, 10}, 67), in({4, 2, 3, 3}, 68)},
       [](auto& x) {
         return conv2d(x[0], x[1], Tensor(), {2, 2}, {2, 2, 2, 2}, {2, 2}, 2);
       },
       "torch.nn.functional.conv2d(a, b, stride=2, padding=2, "
       "dilation=2, groups=2)",
       1.0});
  c.push_back({"max_pool_3x3_stride2_pad1",
               {distinct({2, 3, 7, 7}, 69)},
               [](auto& x) {
                 return maxPool2d(x[0], {3, 3}, {2, 2}, {1});
               },
               "torch.nn.functional.max_pool2d(a, 3, 2, 1)",
               0.01});
  c.push_back({"max_pool_2x2_ceil_dilation2",
               {distinct({1, 2, 8, 7}, 70)},
               [](auto& x) {
                 return maxPool2d(x[0], {2, 2}, {2, 2}, {0}, {2, 2}, true);
               },
               "torch.nn.functional.max_pool2d(a, 2, 2, 0, 2, "
               "ceil_mode=True)",
               0.01});
  c.push_back({"avg_pool_3x3_stride2_pad1",
               {in({2, 2, 7, 7}, 71)},
               [](auto& x) {
                 return avgPool2d(x[0], {3, 3}, {2, 2}, {1});
               },
               "torch.nn.functional.avg_pool2d(a, 3, 2, 1)",
               1.0});
  c.push_back({"avg_pool_exclude_pad_ceil",
               {in({1, 2, 8, 8}, 72)},
               [](auto& x) {
                 return avgPool2d(x[0], {3, 3}, {2, 2}, {1}, true, false);
               },
               "torch.nn.functional.avg_pool2d(a, 3, 2, 1, ceil_mode=True, "
               "count_include_pad=False)",
               1.0});
  c.push_back({"avg_pool_include_pad_ceil",
               {in({1, 2, 8, 8}, 73)},
               [](auto& x) {
                 return avgPool2d(x[0], {3, 3}, {2, 2}, {1}, true, true);
               },
               "torch.nn.functional.avg_pool2d(a, 3, 2, 1, ceil_mode=True, "
               "count_include_pad=True)",
               1.0});
  c.push_back(
      {"batch_norm_training",
       {in({4, 3, 3, 2}, 74), in({3}, 75, 0.5, 2), in({3}, 76)},
       [](auto& x) { return batchNormTraining(x[0], x[1], x[2], 1e-5, 1); },
       "torch.nn.functional.batch_norm(a, None, None, b, c, "
       "training=True, eps=1e-5)"});
  c.push_back({"strided_slice_dim",
               {in({3, 9}, 77)},
               [](auto& x) { return sliceDim(x[0], 1, 1, 8, 3); },
               "a[:, 1:8:3]",
               1.0});
  c.push_back({"strided_slice_2d",
               {in({6, 5}, 78)},
               [](auto& x) {
                 return slice(x[0], {1, 0}, {3, 2}, {2, 3});
               },
               "a[1::2, ::3]",
               1.0});
  c.push_back({"mlp_chain", {in({4, 3}, 54), in({5, 3}, 55), in({5}, 56)},
               [](auto& x) {
                 return softmax(tanh(linear(x[0], x[1], x[2])), 1);
               },
               "torch.softmax(torch.tanh(torch.nn.functional.linear(a, b, "
               "c)), 1)"});
  return c;
}

/// Autograd's gradients of objective(c) with respect to every input.
std::vector<Tensor> autogradGrads(const Case& c, const Tensor& w) {
  std::vector<Tensor> inputs;
  for (const Tensor& t : c.inputs)
    inputs.push_back(t.clone().setRequiresGrad());
  Tensor y = c.fn(inputs);
  Tensor total = y.rank() == 0 ? y * w : sum(reshape(y * w, {-1}), {0});
  total.backward();
  std::vector<Tensor> grads;
  for (const Tensor& t : inputs)
    grads.push_back(t.grad());
  return grads;
}

TEST(Autograd, EveryOpMatchesFiniteDifferences) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    Tensor probe;
    {
      NoGradGuard g;
      probe = c.fn(c.inputs);
    }
    Tensor w = randnIn(probe.shape(), -1, 1, 99);
    std::vector<Tensor> grads = autogradGrads(c, w);
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      ASSERT_TRUE(grads[i].defined()) << "no gradient for input " << i;
      ASSERT_EQ(grads[i].shape(), c.inputs[i].shape());
      std::vector<float> g = grads[i].toVector();
      double num = 0, den = 0;
      for (int64_t k = 0; k < c.inputs[i].numel(); ++k) {
        const double eps = 1e-2;
        std::vector<Tensor> plus, minus;
        for (const Tensor& t : c.inputs) {
          plus.push_back(t.clone());
          minus.push_back(t.clone());
        }
        plus[i].data<float>()[k] += eps;
        minus[i].data<float>()[k] -= eps;
        double fd = (objective(c, plus, w) - objective(c, minus, w)) /
                    (2 * eps);
        num += (fd - g[k]) * (fd - g[k]);
        den += fd * fd;
      }
      double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
      // Central differences in f32 with eps 1e-2 are good to about 1e-3
      // here (kinks of relu/abs/clamp/max are avoided by the random inputs).
      EXPECT_LT(rel, 1e-2) << "input " << i << ": rel err " << rel;
    }
  }
}

/// The ops with an exact step (linear or piecewise linear in each input):
/// central differences through the f32 kernels, divided by the step as the
/// f32 inputs really took it, are exact but for the rounding of the outputs
/// an input touches, so the gradients must agree to the f32 bar of 1e-5.
TEST(Autograd, LinearOpsMatchExactFiniteDifferencesTo1e5) {
  for (const Case& c : cases()) {
    if (c.exactStep == 0)
      continue;
    SCOPED_TRACE(c.name);
    Tensor probe;
    {
      NoGradGuard g;
      probe = c.fn(c.inputs);
    }
    Tensor w = randnIn(probe.shape(), -1, 1, 99);
    std::vector<Tensor> grads = autogradGrads(c, w);
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      std::vector<float> g = grads[i].toVector();
      double num = 0, den = 0;
      for (int64_t k = 0; k < c.inputs[i].numel(); ++k) {
        std::vector<Tensor> plus, minus;
        for (const Tensor& t : c.inputs) {
          plus.push_back(t.clone());
          minus.push_back(t.clone());
        }
        float& up = plus[i].data<float>()[k];
        float& down = minus[i].data<float>()[k];
        up += static_cast<float>(c.exactStep);
        down -= static_cast<float>(c.exactStep);
        double step = double(up) - double(down);
        double fd = (objective(c, plus, w) - objective(c, minus, w)) / step;
        num += (fd - g[k]) * (fd - g[k]);
        den += fd * fd;
      }
      double rel = std::sqrt(num / den);
      EXPECT_LT(rel, 1e-5) << "input " << i << ": rel err " << rel;
      std::printf("%-40s input %zu: rel err vs exact differences %.1e\n",
                  c.name.c_str(), i, rel);
    }
  }
}

/// Training batch norm is not linear: its gradients (the op's rule fed with
/// batch statistics, through their reductions) against central differences
/// of the same function computed in double, to the f32 bar of 1e-5.
TEST(Autograd, TrainingBatchNormMatchesDoubleFiniteDifferencesTo1e5) {
  const int64_t n = 4, ch = 3, hw = 6;
  const double eps = 1e-5;
  Tensor x = randnIn({n, ch, 2, 3}, -2, 2, 81);
  Tensor scale = randnIn({ch}, 0.5, 2, 82), offset = randnIn({ch}, -1, 1, 83);
  Tensor w = randnIn({n, ch, 2, 3}, -1, 1, 84);
  auto toDouble = [](const Tensor& t) {
    std::vector<float> f = t.toVector();
    return std::vector<double>(f.begin(), f.end());
  };
  std::vector<double> xd = toDouble(x), sd = toDouble(scale),
                      od = toDouble(offset), wd = toDouble(w);
  // sum(w * batch_norm(x)) in double, PyTorch's training-mode formula.
  auto objective = [&](const std::vector<double>& xv,
                       const std::vector<double>& sv,
                       const std::vector<double>& ov) {
    double total = 0;
    for (int64_t c = 0; c < ch; ++c) {
      double mean = 0, var = 0;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < hw; ++i)
          mean += xv[(b * ch + c) * hw + i];
      mean /= n * hw;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < hw; ++i) {
          double d = xv[(b * ch + c) * hw + i] - mean;
          var += d * d;
        }
      var /= n * hw;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < hw; ++i) {
          int64_t k = (b * ch + c) * hw + i;
          total +=
              wd[k] * ((xv[k] - mean) / std::sqrt(var + eps) * sv[c] + ov[c]);
        }
    }
    return total;
  };
  std::vector<Tensor> leaves = {x.clone().setRequiresGrad(),
                                scale.clone().setRequiresGrad(),
                                offset.clone().setRequiresGrad()};
  Tensor y = batchNormTraining(leaves[0], leaves[1], leaves[2], eps, 1);
  sum(reshape(y * w, {-1}), {0}).backward();
  std::vector<std::vector<double>*> args = {&xd, &sd, &od};
  for (size_t i = 0; i < 3; ++i) {
    std::vector<float> g = leaves[i].grad().toVector();
    double num = 0, den = 0;
    for (size_t k = 0; k < args[i]->size(); ++k) {
      const double h = 1e-5;
      double saved = (*args[i])[k];
      (*args[i])[k] = saved + h;
      double up = objective(xd, sd, od);
      (*args[i])[k] = saved - h;
      double down = objective(xd, sd, od);
      (*args[i])[k] = saved;
      double fd = (up - down) / (2 * h);
      num += (fd - g[k]) * (fd - g[k]);
      den += fd * fd;
    }
    double rel = std::sqrt(num / den);
    EXPECT_LT(rel, 1e-5) << "input " << i << ": rel err " << rel;
    std::printf("batch_norm_training input %zu: rel err vs double "
                "differences %.1e\n",
                i, rel);
  }
}

/// max_pool2d's gradient goes to the first maximum of a window (row-major),
/// as PyTorch's: with every value equal, each output's gradient lands on
/// its window's top-left element.
TEST(Autograd, MaxPoolTiesGoToTheFirstMaximum) {
  Tensor x = Tensor::full({1, 1, 4, 4}, 1.0).setRequiresGrad();
  sum(reshape(maxPool2d(x, {2, 2}, {2, 2}), {-1}), {0}).backward();
  EXPECT_EQ(x.grad().toVector(), (std::vector<float>{1, 0, 1, 0, 0, 0, 0, 0, 1,
                                                     0, 1, 0, 0, 0, 0, 0}));
  // Overlapping windows (stride 1): an element wins every window it is
  // first in.
  Tensor y = Tensor::full({1, 1, 3, 3}, 2.0).setRequiresGrad();
  sum(reshape(maxPool2d(y, {2, 2}, {1, 1}), {-1}), {0}).backward();
  EXPECT_EQ(y.grad().toVector(),
            (std::vector<float>{1, 1, 0, 1, 1, 0, 0, 0, 0}));
}

TEST(Autograd, AccumulatesAndRespectsNoGrad) {
  Tensor x = Tensor::fromVector({1, 2, 3}, {3}).setRequiresGrad();
  sum(x * x, {0}).backward();
  sum(x * 3.0, {0}).backward();
  // d/dx (x^2) + d/dx (3x) = 2x + 3.
  EXPECT_EQ(x.grad().toVector(), (std::vector<float>{5, 7, 9}));
  x.zeroGrad();
  EXPECT_FALSE(x.grad().defined());
  {
    NoGradGuard g;
    Tensor y = x * 2.0;
    EXPECT_FALSE(y.requiresGrad());
  }
  Tensor y = x * 2.0;
  EXPECT_TRUE(y.requiresGrad());
  EXPECT_FALSE(y.detach().requiresGrad());
  // A value used twice gets both contributions: d/dx (x * x) = 2x.
  Tensor z = Tensor::fromVector({4}, {1}).setRequiresGrad();
  sum(z * z, {0}).backward();
  EXPECT_EQ(z.grad().toVector(), (std::vector<float>{8}));
}

TEST(Autograd, ClearErrors) {
  Tensor x = Tensor::zeros({2});
  EXPECT_THROW(sum(x, {0}).backward(), Error); // nothing requires grad
  Tensor p = Tensor::zeros({2}).setRequiresGrad();
  EXPECT_THROW((p * 2.0).backward(), Error);   // not a scalar
  EXPECT_THROW(Tensor::zeros({2}, DType::I32).setRequiresGrad(), Error);
  Tensor logits = Tensor::zeros({2, 3});
  Tensor bad = Tensor::empty({2}, DType::I64);
  bad.data<int64_t>()[0] = 1;
  bad.data<int64_t>()[1] = 3;
  EXPECT_THROW(crossEntropy(logits, bad), Error);
}

// A logit of -inf away from the label (a masked class) leaves the loss
// and its gradient finite, as in PyTorch: the label's log-probability is
// selected, not multiplied by a one-hot (0 * -inf is NaN).
TEST(Autograd, CrossEntropyWithMaskedLogitsIsFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor logits =
      Tensor::fromVector({0, -inf, 1, 2, 0, -inf}, {2, 3}).setRequiresGrad();
  Tensor labels = Tensor::empty({2}, DType::I64);
  labels.data<int64_t>()[0] = 2;
  labels.data<int64_t>()[1] = 0;
  Tensor loss = crossEntropy(logits, labels);
  double expected = 0.5 * (-(1 - std::log(1 + std::exp(1.0))) -
                           (2 - std::log(std::exp(2.0) + 1)));
  EXPECT_NEAR(loss.toVector()[0], expected, 1e-6);
  loss.backward();
  for (float g : logits.grad().toVector())
    EXPECT_TRUE(std::isfinite(g)) << g;
}

std::string python() {
  return std::getenv("MODELC_PYTHON") ? std::getenv("MODELC_PYTHON")
                                      : "/usr/bin/python3";
}

bool haveTorch() {
  return std::system((python() + " -c 'import torch' >/dev/null 2>&1").c_str()) ==
         0;
}

void save(const std::string& path, const Tensor& t) {
  rt::Status s = rt::writeNpy(path, t.dtype(), t.shape(), t.rawData());
  ASSERT_TRUE(s.isOk()) << s.message();
}

/// Writes every case (inputs, w, modelc's gradients) and a script that
/// recomputes the gradients with torch.autograd and compares.
TEST(Autograd, EveryOpMatchesPyTorch) {
  if (!haveTorch())
    GTEST_SKIP() << "python3-torch is not installed";
  std::string dir = ::testing::TempDir() + "/autograd_vs_torch." + std::to_string(::getpid());
  ASSERT_EQ(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  std::ofstream script(dir + "/check.py");
  script << "import numpy as np, torch, sys\n"
            "torch.set_default_dtype(torch.float32)\n"
            "worst = 0.0\nfailed = []\n"
            "def check(name, n, expr):\n"
            "    global worst\n"
            "    names = 'abcdefgh'\n"
            "    xs = [torch.tensor(np.load(f'" << dir
         << "/{name}_in{i}.npy'), requires_grad=True) for i in range(n)]\n"
            "    env = dict(zip(names, xs)); env['torch'] = torch\n"
            "    y = eval(expr, env)\n"
            "    w = torch.tensor(np.load(f'" << dir << "/{name}_w.npy'))\n"
            "    (y * w).sum().backward()\n"
            "    for i, x in enumerate(xs):\n"
            "        mine = np.load(f'" << dir << "/{name}_grad{i}.npy')\n"
            "        ref = x.grad.numpy()\n"
            "        rel = float(np.linalg.norm(mine - ref) / max(np.linalg.norm(ref), 1e-30))\n"
            "        worst = max(worst, rel)\n"
            "        if not rel < 1e-5: failed.append(f'{name} input {i}: rel err {rel:.2e}')\n";
  for (const Case& c : cases()) {
    Tensor probe;
    {
      NoGradGuard g;
      probe = c.fn(c.inputs);
    }
    Tensor w = randnIn(probe.shape(), -1, 1, 99);
    std::vector<Tensor> grads = autogradGrads(c, w);
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      save(dir + "/" + c.name + "_in" + std::to_string(i) + ".npy",
           c.inputs[i]);
      save(dir + "/" + c.name + "_grad" + std::to_string(i) + ".npy",
           grads[i]);
    }
    save(dir + "/" + c.name + "_w.npy", w);
    script << "check('" << c.name << "', " << c.inputs.size() << ", \""
           << c.torchExpr << "\")\n";
  }
  script << "print(f'worst rel err vs torch.autograd: {worst:.2e}')\n"
            "if failed: print('\\n'.join(failed)); sys.exit(1)\n";
  script.close();
  int rc = std::system((python() + " " + dir + "/check.py").c_str());
  EXPECT_EQ(rc, 0) << "gradients differ from torch.autograd (see above)";
}

/// nn::BatchNorm2d in training mode against torch.nn.BatchNorm2d: three
/// forward passes on different batches (outputs, and the running statistics
/// after each: momentum 0.1, unbiased running variance), then eval mode.
TEST(Modules, BatchNorm2dTrainingMatchesTorch) {
  if (!haveTorch())
    GTEST_SKIP() << "python3-torch is not installed";
  std::string dir = ::testing::TempDir() + "/batchnorm_vs_torch." + std::to_string(::getpid());
  ASSERT_EQ(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  nn::BatchNorm2d bn(3, 1e-5, 0.1);
  bn.weight = randnIn({3}, 0.5, 2, 131);
  bn.bias = randnIn({3}, -1, 1, 132);
  save(dir + "/weight.npy", bn.weight);
  save(dir + "/bias.npy", bn.bias);
  bn.train();
  for (int i = 0; i < 3; ++i) {
    Tensor x = randnIn({4, 3, 5, 5}, -2 + i, 3, 140 + i);
    save(dir + "/x" + std::to_string(i) + ".npy", x);
    save(dir + "/y" + std::to_string(i) + ".npy", bn(x));
    save(dir + "/mean" + std::to_string(i) + ".npy", bn.runningMean);
    save(dir + "/var" + std::to_string(i) + ".npy", bn.runningVar);
  }
  bn.eval();
  Tensor xe = randnIn({2, 3, 5, 5}, -1, 1, 150);
  save(dir + "/xe.npy", xe);
  save(dir + "/ye.npy", bn(xe));
  std::ofstream script(dir + "/check.py");
  script << "import numpy as np, torch, sys\n"
            "d = '"
         << dir
         << "'\n"
            "L = lambda n: torch.tensor(np.load(f'{d}/{n}.npy'))\n"
            "bn = torch.nn.BatchNorm2d(3, eps=1e-5, momentum=0.1)\n"
            "with torch.no_grad():\n"
            "    bn.weight.copy_(L('weight')); bn.bias.copy_(L('bias'))\n"
            "worst = 0.0\n"
            "def rel(mine, ref):\n"
            "    global worst\n"
            "    r = float((mine - ref).norm() / ref.norm()); worst = "
            "max(worst, r); return r\n"
            "bn.train()\n"
            "with torch.no_grad():\n"
            "    for i in range(3):\n"
            "        rel(L(f'y{i}'), bn(L(f'x{i}')))\n"
            "        rel(L(f'mean{i}'), bn.running_mean)\n"
            "        rel(L(f'var{i}'), bn.running_var)\n"
            "    bn.eval()\n"
            "    rel(L('ye'), bn(L('xe')))\n"
            "print(f'BatchNorm2d train/eval vs torch: worst rel err "
            "{worst:.2e}')\n"
            "sys.exit(0 if worst < 1e-5 else 1)\n";
  script.close();
  int rc = std::system((python() + " " + dir + "/check.py").c_str());
  EXPECT_EQ(rc, 0) << "BatchNorm2d differs from torch.nn.BatchNorm2d";
}

/// 10 steps of SGD (momentum, weight decay, nesterov), of Adam (L2 weight
/// decay) and of AdamW on a fixed quadratic problem, against torch.optim
/// from the same start.
TEST(Optim, TenStepsMatchTorchOptim) {
  if (!haveTorch())
    GTEST_SKIP() << "python3-torch is not installed";
  std::string dir = ::testing::TempDir() + "/optim_vs_torch." + std::to_string(::getpid());
  ASSERT_EQ(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  Tensor w0 = randnIn({4, 3}, -1, 1, 7);
  Tensor x = randnIn({5, 3}, -1, 1, 8);
  Tensor t = randnIn({5, 4}, -1, 1, 9);
  save(dir + "/w0.npy", w0);
  save(dir + "/x.npy", x);
  save(dir + "/t.npy", t);
  // clip > 0: optim::clipGradNorm before each step (as
  // torch.nn.utils.clip_grad_norm_), small enough to clip every step.
  // schedule: an optim::LRScheduler stepped after each step (PyTorch's
  // LambdaLR with Hugging Face's factor below).
  auto train = [&](optim::Optimizer& opt, Tensor& w, double clip = 0,
                   optim::ScheduleOptions schedule = {}) {
    optim::LRScheduler scheduler(opt, schedule);
    for (int i = 0; i < 10; ++i) {
      opt.zeroGrad();
      mseLoss(matmul(x, w, false, true), t).backward();
      if (clip > 0)
        optim::clipGradNorm({w}, clip);
      opt.step();
      scheduler.step();
    }
  };
  Tensor wSgd = w0.clone().setRequiresGrad();
  optim::SGD sgd({wSgd}, {0.1, 0.9, 0.0, 0.01, true});
  train(sgd, wSgd);
  save(dir + "/sgd.npy", wSgd);
  Tensor wAdam = w0.clone().setRequiresGrad();
  optim::AdamW adam({wAdam}, {0.05, 0.9, 0.999, 1e-8, 0.01});
  train(adam, wAdam);
  save(dir + "/adamw.npy", wAdam);
  // Adam's weight decay is L2 on the gradient: 0.1 makes it differ from
  // AdamW's by more than the tolerance.
  Tensor wL2 = w0.clone().setRequiresGrad();
  optim::Adam l2({wL2}, {0.05, 0.9, 0.999, 1e-8, 0.1});
  train(l2, wL2);
  save(dir + "/adam.npy", wL2);
  Tensor wClip = w0.clone().setRequiresGrad();
  optim::SGD clipped({wClip}, {0.1, 0.9, 0.0, 0.0, false});
  train(clipped, wClip, 0.05);
  save(dir + "/sgd_clip.npy", wClip);
  Tensor wLinear = w0.clone().setRequiresGrad();
  optim::AdamW linear({wLinear}, {0.05, 0.9, 0.999, 1e-8, 0.01});
  train(linear, wLinear, 0, {"linear", 3, 8});
  save(dir + "/adamw_linear.npy", wLinear);
  Tensor wCosine = w0.clone().setRequiresGrad();
  optim::SGD cosine({wCosine}, {0.1, 0.9, 0.0, 0.0, false});
  train(cosine, wCosine, 0, {"cosine", 2, 7});
  save(dir + "/sgd_cosine.npy", wCosine);
  std::ofstream script(dir + "/check.py");
  script
      << "import numpy as np, torch, sys\n"
         "d = '"
      << dir
      << "'\n"
         "x = torch.tensor(np.load(d + '/x.npy')); t = torch.tensor(np.load(d "
         "+ '/t.npy'))\n"
         "bad = 0\n"
         "import math\n"
         "# Hugging Face's get_linear_ / get_cosine_schedule_with_warmup.\n"
         "def linear(w, n):\n"
         "    return lambda s: s / max(1, w) if s < w else max(0.0, (n - s) "
         "/ max(1, n - w))\n"
         "def cosine(w, n):\n"
         "    return lambda s: s / max(1, w) if s < w else max(0.0, 0.5 * "
         "(1.0 + math.cos(math.pi * 0.5 * 2.0 * (s - w) / max(1, n - w))))\n"
         "for name, make, clip, sched in [('sgd', lambda p: torch.optim.SGD("
         "[p], lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True), 0, "
         "None),\n"
         "    ('adamw', lambda p: torch.optim.AdamW([p], lr=0.05, betas=(0.9, "
         "0.999), eps=1e-8, weight_decay=0.01), 0, None),\n"
         "    ('adam', lambda p: torch.optim.Adam([p], lr=0.05, betas=(0.9, "
         "0.999), eps=1e-8, weight_decay=0.1), 0, None),\n"
         "    ('sgd_clip', lambda p: torch.optim.SGD([p], lr=0.1, "
         "momentum=0.9), 0.05, None),\n"
         "    ('adamw_linear', lambda p: torch.optim.AdamW([p], lr=0.05, "
         "betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01), 0, linear(3, 8)),\n"
         "    ('sgd_cosine', lambda p: torch.optim.SGD([p], lr=0.1, "
         "momentum=0.9), 0, cosine(2, 7))]:\n"
         "    w = torch.tensor(np.load(d + '/w0.npy'), requires_grad=True)\n"
         "    opt = make(w)\n"
         "    lr = torch.optim.lr_scheduler.LambdaLR(opt, sched) if sched "
         "else None\n"
         "    for _ in range(10):\n"
         "        opt.zero_grad()\n"
         "        torch.nn.functional.mse_loss(x @ w.t(), t).backward()\n"
         "        if clip:\n"
         "            n = float(torch.nn.utils.clip_grad_norm_([w], clip))\n"
         "            assert n > clip, n\n"
         "        opt.step()\n"
         "        if lr: lr.step()\n"
         "    mine = np.load(d + f'/{name}.npy'); ref = w.detach().numpy()\n"
         "    rel = float(np.linalg.norm(mine - ref) / np.linalg.norm(ref))\n"
         "    print(f'{name}: 10 steps, rel err vs torch.optim {rel:.2e}')\n"
         "    bad += not rel < 1e-5\n"
         "sys.exit(bad)\n";
  script.close();
  EXPECT_EQ(std::system((python() + " " + dir + "/check.py").c_str()), 0);
}

} // namespace
