// mc-autodiff end to end: trace a loss, differentiate it in the compiler,
// compile it and run it on the CPU runtime, and compare the loss and every
// gradient with the eager autograd (frontend/Autograd.cpp, itself checked
// against torch.autograd) within the f32 bar of 1e-5 relative error. Both
// sides apply the same rules in the same order with the same kernels, so
// in practice they are bit-identical; a wrong rule (a tie not split evenly,
// a missing gamma in layer_norm) is off by 3e-2 to 3e-1.
#include "codegen/Compile.h"
#include "frontend/Autograd.h"
#include "frontend/Loss.h"
#include "frontend/Ops.h"
#include "frontend/jit/Trace.h"
#include "modelc/runtime.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include "RuntimeHarness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>

using namespace mc;

namespace {

using Params = std::vector<std::pair<std::string, Tensor>>;
/// A scalar loss of the inputs and the parameters (in `Params` order).
using LossFn = std::function<Tensor(const std::vector<Tensor>& inputs,
                                    const std::vector<Tensor>& params)>;

using test::take;
/// Outputs by signature name.
const auto runArtifact = test::runArtifactByName;

void expectClose(const Tensor& compiled, const Tensor& eager,
                 const std::string& what) {
  ASSERT_EQ(compiled.shape(), eager.shape()) << what;
  ASSERT_EQ(compiled.dtype(), eager.dtype()) << what;
  double err = relativeError(compiled, eager);
  EXPECT_FALSE(std::isnan(err)) << what;
  EXPECT_LE(err, 1e-5) << what << ": compiled " << compiled.describe();
}

mlir::LogicalResult runAutodiff(jit::TracedModule& tm) {
  mlir::PassManager pm(&tm.context());
  pm.addPass(createAutodiffPass());
  return pm.run(tm.module());
}

/// Eager backward() vs mc-autodiff + compile + run, for every parameter.
void checkGradients(const std::vector<Tensor>& inputs, const Params& params,
                    const LossFn& loss) {
  std::vector<Tensor> leaves, plain;
  for (const auto& [name, p] : params) {
    leaves.push_back(p.clone().setRequiresGrad(true));
    plain.push_back(p);
  }
  Tensor eagerLoss = loss(inputs, leaves);
  eagerLoss.backward();

  jit::TracedModule tm = jit::traceFunction(
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{loss(in, plain)};
      },
      inputs, params);
  ASSERT_TRUE(mlir::succeeded(runAutodiff(tm))) << tm.str();
  std::string differentiated = tm.str();
  auto artifact = codegen::compileToArtifact(tm.module(), {});
  ASSERT_TRUE(mlir::succeeded(artifact)) << differentiated;
  std::map<std::string, Tensor> out = runArtifact(*artifact, inputs);
  ASSERT_TRUE(out.count("loss"));
  expectClose(out["loss"], eagerLoss, "loss");
  size_t withGrad = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& name = params[i].first;
    Tensor ref = leaves[i].grad();
    // A parameter that does not reach the loss has no gradient, eager or
    // compiled (so no optimizer touches it).
    if (!ref.defined()) {
      EXPECT_FALSE(out.count("grad." + name)) << name << "\n" << differentiated;
      continue;
    }
    ++withGrad;
    ASSERT_TRUE(out.count("grad." + name)) << name << "\n" << differentiated;
    expectClose(out["grad." + name], ref, "grad." + name);
  }
  EXPECT_EQ(out.size(), withGrad + 1) << differentiated;
}

Tensor uniform(const Shape& s, float lo, float hi, uint64_t seed) {
  std::mt19937_64 gen(seed);
  return Tensor::uniform(s, lo, hi, &gen);
}

/// sum(x * w) over every dimension, w a fixed random literal: each element
/// of x weighs differently.
Tensor weightedSum(const Tensor& x, uint64_t seed) {
  std::vector<int64_t> all;
  for (int64_t d = 0; d < x.rank(); ++d)
    all.push_back(d);
  return sum(mul(x, uniform(x.shape(), -1, 1, seed)), all);
}

TEST(Autodiff, MlpWithCrossEntropy) {
  Tensor x = uniform({8, 6}, -2, 2, 1);
  Tensor labels = Tensor::empty({8}, DType::I64);
  for (int64_t i = 0; i < 8; ++i)
    labels.data<int64_t>()[i] = (i * 3) % 4;
  Params params = {{"fc1.weight", uniform({16, 6}, -0.5, 0.5, 2)},
                   {"fc1.bias", uniform({16}, -0.5, 0.5, 3)},
                   {"fc2.weight", uniform({4, 16}, -0.5, 0.5, 4)},
                   {"fc2.bias", uniform({4}, -0.5, 0.5, 5)}};
  checkGradients({x, labels}, params, [](auto& in, auto& p) {
    Tensor h = relu(linear(in[0], p[0], p[1]));
    return crossEntropy(linear(h, p[2], p[3]), in[1]);
  });
}

TEST(Autodiff, MseRegression) {
  Params params = {{"w1", uniform({5, 3}, -1, 1, 11)},
                   {"b1", uniform({5}, -1, 1, 12)},
                   {"w2", uniform({2, 5}, -1, 1, 13)},
                   {"b2", uniform({2}, -1, 1, 14)}};
  checkGradients({uniform({10, 3}, -2, 2, 15), uniform({10, 2}, -1, 1, 16)},
                 params, [](auto& in, auto& p) {
                   Tensor h = sigmoid(linear(in[0], p[0], p[1]));
                   return mseLoss(tanh(linear(h, p[2], p[3])), in[1]);
                 });
}

TEST(Autodiff, LayerNormGeluSoftmaxChain) {
  Params params = {{"ln1.gamma", uniform({8}, 0.5, 1.5, 21)},
                   {"ln1.beta", uniform({8}, -0.5, 0.5, 22)},
                   {"proj", uniform({8, 8}, -0.5, 0.5, 23)},
                   {"ln2.gamma", uniform({6, 8}, 0.5, 1.5, 24)},
                   {"ln2.beta", uniform({6, 8}, -0.5, 0.5, 25)}};
  checkGradients({uniform({2, 3, 8}, -2, 2, 26)}, params,
                 [](auto& in, auto& p) {
                   // Normalized over the last dim (lead dims [0, 1]), then
                   // over the whole [6, 8] (no lead dims).
                   Tensor h = layerNorm(in[0], p[0], p[1], 2, 1e-5);
                   Tensor z = linear(reshape(h, {6, 8}), p[2]);
                   z = add(gelu(z), gelu(z, /*tanhApproximation=*/true));
                   z = layerNorm(z, p[3], p[4], 0, 1e-5);
                   Tensor a = weightedSum(log(softmax(z, 1)), 27);
                   Tensor b = weightedSum(logSoftmax(z, 0), 28);
                   return add(a, b);
                 });
}

TEST(Autodiff, ShapeOps) {
  Params params = {{"a", uniform({3, 4}, -1, 1, 31)},
                   {"b", uniform({3, 2}, -1, 1, 32)},
                   {"v", uniform({4}, -1, 1, 33)},
                   {"m", uniform({4, 3}, -1, 1, 34)}};
  checkGradients({uniform({2, 6}, -1, 1, 35)}, params, [](auto& in, auto& p) {
    Tensor c = concat({p[0], p[1]}, 1);     // [3, 6]
    Tensor s = sliceDim(c, 1, 1, 5);        // [3, 4]
    Tensor padded = pad(s, {1, 0}, {0, 2}); // [4, 6]
    Tensor t = transpose(padded, {1, 0});   // [6, 4]
    Tensor u = add(t, p[2]);                // broadcast [4] -> [6, 4]
    // Operand dims (4, 3) land on result dims (2, 0): not increasing.
    Tensor bm = broadcastInDim(p[3], {3, 5, 4}, {2, 0});
    Tensor q = sum(bm, {1});                         // [3, 4]
    Tensor r = matmul(u, q, false, true);            // [6, 3]
    Tensor first = slice(r, {0, 0}, {1, 3}, {1, 1}); // [1, 3]
    Tensor w = matmul(in[0], reshape(r, {6, 3}));    // [2, 3]
    return add(weightedSum(w, 36), weightedSum(mul(first, first), 37));
  });
}

TEST(Autodiff, TiesAndPiecewiseOps) {
  // a and b tie at four positions; rows of a hold repeated maxima and
  // minima; a holds exact zeros (relu and abs masks) and values on the
  // clamp bounds.
  Tensor a = Tensor::fromVector({1, -2, 0, 3, 3, 0.5, -1, -1, 2, 0, 0.25, -0.5},
                                {3, 4});
  Tensor b = Tensor::fromVector(
      {1, 2, 0, -3, 3, 1.5, -1, -2, 0.5, 1, 0.25, -0.75}, {3, 4});
  Params params = {{"a", a},
                   {"b", b},
                   {"e", uniform({3, 4}, 0.5, 2, 41)},
                   {"d", uniform({3, 4}, 0.5, 2, 42)}};
  checkGradients({uniform({3, 4}, -1, 1, 43)}, params, [](auto& in, auto& p) {
    Tensor t = weightedSum(maximum(p[0], p[1]), 44);
    t = add(t, weightedSum(minimum(p[0], p[1]), 45));
    t = add(t, weightedSum(amax(p[0], {1}), 46));
    t = add(t, weightedSum(amin(p[0], {0}, /*keepdim=*/true), 47));
    t = add(t, weightedSum(relu(p[0]), 48));
    t = add(t, weightedSum(abs(p[0]), 49));
    t = add(t, weightedSum(clamp(p[0], -1, 1), 50));
    // hardswish's three pieces: 3 * a spans [-6, 9].
    t = add(t, weightedSum(hardswish(p[0] * 3.0), 55));
    // pow: a base with zeros (guarded log), a positive exponent.
    t = add(t, weightedSum(pow(abs(p[0]), p[2]), 51));
    t = add(t, weightedSum(div(sqrt(p[3]), add(exp(p[1]), p[3])), 52));
    t = add(t, weightedSum(log(p[3]) * erf(p[1]), 53));
    t = add(t, weightedSum(sin(p[0] * 3.0) * cos(p[1]), 56));
    // The inverse trigonometric and hyperbolic functions inside their
    // domains: p[3] is in [0.5, 2).
    Tensor unit = tanh(p[0]);
    t = add(t, weightedSum(tan(unit) + asin(unit) * acos(unit * 0.5), 57));
    t = add(t, weightedSum(atan(p[1]) * atanh(unit * 0.9), 58));
    t = add(t, weightedSum(sinh(p[1]) + cosh(p[0]) * asinh(p[1]), 59));
    t = add(t, weightedSum(acosh(p[3] + 1.0), 60));
    t = add(t, weightedSum(where(gt(in[0], p[0]), p[1] * 2.0, neg(p[3])), 54));
    // dropout's gradient: the same mask, recomputed from seed and offset.
    t = add(t, weightedSum(dropout(p[0] * 2.0, Tensor::scalar(7, DType::I64),
                                   Tensor::scalar(3, DType::I64), 0.4),
                           61));
    return t;
  });
}

// topk's values (an MoE router's weights): compiled gradients equal eager,
// which reach the selected elements only (FrontendTest checks which).
TEST(Autodiff, TopkValues) {
  Tensor a = Tensor::fromVector({1, -2, 0, 3, 3, 0.5, -1, -1, 2, 0, 0.25, -0.5},
                                {3, 4});
  checkGradients(
      {uniform({3, 4}, -1, 1, 61)}, {{"a", a}}, [](auto& in, auto& p) {
        auto [top, topIndex] = topk(p[0] + in[0], 2, 1);
        auto [low, lowIndex] = topk(p[0], 2, 0, false);
        return add(weightedSum(softmax(top, 1), 62), weightedSum(low, 63));
      });
}

TEST(Autodiff, ParameterUsedTwiceAccumulates) {
  Params params = {{"w", uniform({4, 5}, -1, 1, 61)}};
  checkGradients({uniform({3, 5}, -1, 1, 62)}, params, [](auto& in, auto& p) {
    Tensor y = matmul(in[0], p[0], false, true); // [3, 4]
    Tensor z = mul(y, y);                        // y used twice
    return add(weightedSum(z, 63), weightedSum(mul(p[0], p[0]), 64));
  });
}

TEST(Autodiff, ParameterOffThePathGetsNoGradient) {
  Params params = {{"w", uniform({4}, -1, 1, 71)},
                   {"gate", uniform({4}, -1, 1, 72)}};
  checkGradients({uniform({4}, -1, 1, 73)}, params, [](auto& in, auto& p) {
    // gate only selects (through an i1 mask): no gradient reaches it.
    Tensor picked = where(gt(p[1], Tensor::zeros({4})), in[0], p[0]);
    return weightedSum(mul(picked, p[0]), 74);
  });
}

TEST(Autodiff, FrozenConvolutionOffThePathIsFine) {
  // conv2d reads only the input and a literal weight: it needs no
  // derivative, so the step compiles.
  Tensor kernel = uniform({2, 1, 3, 3}, -1, 1, 81);
  Params params = {{"head", uniform({3, 8}, -1, 1, 82)}};
  checkGradients({uniform({1, 1, 4, 4}, -1, 1, 83)}, params,
                 [&](auto& in, auto& p) {
                   Tensor f = reshape(conv2d(in[0], kernel), {1, 8});
                   return weightedSum(linear(f, p[0]), 84);
                 });
}

/// Runs mc-autodiff on a traced loss that is expected to fail; returns the
/// diagnostics.
std::string autodiffErrors(const std::vector<Tensor>& inputs,
                           const Params& params, const LossFn& loss) {
  std::vector<Tensor> plain;
  for (const auto& [name, p] : params)
    plain.push_back(p);
  jit::TracedModule tm = jit::traceFunction(
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{loss(in, plain)};
      },
      inputs, params);
  std::string messages;
  mlir::ScopedDiagnosticHandler handler(&tm.context(),
                                        [&](mlir::Diagnostic& d) {
                                          messages += d.str() + "\n";
                                          return mlir::success();
                                        });
  EXPECT_TRUE(mlir::failed(runAutodiff(tm)));
  return messages;
}

/// Convolutions train: both gradients are conv2d ops (stride, padding,
/// dilation and groups), compiled == eager.
TEST(Autodiff, ConvolutionGradients) {
  struct Conv {
    Shape x, w;
    std::vector<int64_t> strides, padding, dilation;
    int64_t groups;
  };
  std::vector<Conv> convs = {
      {{2, 3, 7, 7}, {4, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1},
      {{1, 2, 9, 8}, {3, 2, 3, 2}, {1, 1}, {2, 1, 2, 1}, {2, 2}, 1},
      {{2, 4, 6, 6}, {6, 2, 3, 3}, {1, 2}, {1, 0, 2, 1}, {1, 1}, 2},
      {{2, 4, 9, 10}, {4, 2, 3, 3}, {2, 2}, {2, 2, 2, 2}, {2, 2}, 2}};
  uint64_t seed = 100;
  for (const Conv& c : convs) {
    SCOPED_TRACE("groups " + std::to_string(c.groups));
    Params params = {{"conv.weight", uniform(c.w, -1, 1, seed++)},
                     {"conv.bias", uniform({c.w[0]}, -1, 1, seed++)}};
    checkGradients({uniform(c.x, -1, 1, seed++)}, params,
                   [&](auto& in, auto& p) {
                     return weightedSum(conv2d(in[0], p[0], p[1], c.strides,
                                               c.padding, c.dilation, c.groups),
                                        seed);
                   });
  }
}

/// Pooling, training batch norm and strided slices of a parameterized
/// input (a conv of the data, so the gradient has to go through them).
TEST(Autodiff, PoolingBatchNormAndStridedSliceGradients) {
  Params params = {{"conv.weight", uniform({3, 2, 3, 3}, -1, 1, 111)},
                   {"bn.weight", uniform({3}, 0.5, 2, 112)},
                   {"bn.bias", uniform({3}, -1, 1, 113)}};
  Tensor x = uniform({2, 2, 9, 9}, -1, 1, 114);
  checkGradients({x}, params, [](auto& in, auto& p) {
    Tensor h = conv2d(in[0], p[0], Tensor(), {1, 1}, {1, 1, 1, 1}); // 9x9
    Tensor t = weightedSum(maxPool2d(h, {3, 3}, {2, 2}, {1}), 115);
    t = add(t,
            weightedSum(maxPool2d(h, {2, 2}, {2, 2}, {0}, {1, 1}, true), 116));
    t = add(t, weightedSum(avgPool2d(h, {3, 3}, {2, 2}, {1}), 117));
    t = add(t,
            weightedSum(avgPool2d(h, {2, 2}, {2, 2}, {1}, true, false), 118));
    t = add(t, weightedSum(batchNormTraining(h, p[1], p[2], 1e-5, 1), 119));
    t = add(t, weightedSum(slice(h, {0, 1, 1, 0}, {2, 1, 4, 3}, {1, 1, 2, 3}),
                           120));
    return t;
  });
}

/// An embedding trains: repeated and negative ids accumulate into their
/// rows (the scatter-add as a one-hot matmul), on axis 0 and on an inner
/// axis.
TEST(Autodiff, EmbeddingAndGatherGradients) {
  Tensor ids = Tensor::empty({2, 3}, DType::I64);
  int64_t values[] = {0, 4, 4, -1, 2, 0};
  std::copy(values, values + 6, ids.data<int64_t>());
  checkGradients({ids}, {{"table", uniform({5, 2}, -1, 1, 94)}},
                 [](auto& in, auto& p) {
                   return weightedSum(embedding(p[0], in[0]), 95);
                 });
  Tensor cols = Tensor::empty({3}, DType::I32);
  int32_t c[] = {3, -1, 1};
  std::copy(c, c + 3, cols.data<int32_t>());
  checkGradients({cols}, {{"data", uniform({2, 4, 3}, -1, 1, 96)}},
                 [](auto& in, auto& p) {
                   return weightedSum(gather(p[0], in[0], 1), 97);
                 });
}

TEST(Autodiff, VectorLossIsRejected) {
  std::string errors = autodiffErrors(
      {uniform({4}, -1, 1, 96)}, {{"w", uniform({4}, -1, 1, 97)}},
      [](auto& in, auto& p) { return mul(in[0], p[0]); });
  EXPECT_NE(errors.find("result 0 must be a scalar float loss (rank 0 or one "
                        "element), got 'tensor<4xf32>'"),
            std::string::npos)
      << errors;
}

} // namespace
