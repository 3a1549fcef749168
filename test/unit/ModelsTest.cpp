// nn modules of CNNs and transformers against plain loops in double, and the
// example models (ResNet-18, a GPT-2-style decoder) end to end: eager ==
// trace -> compile -> .mcpk -> runtime within the f32 bar (1e-5 relative
// error, ARCHITECTURE.md). The PyTorch cross-check is torch_crosscheck.py.
#include "codegen/Compile.h"
#include "examples/gpt2/gpt2_block.h"
#include "examples/resnet/resnet18.h"
#include "frontend/Loss.h"
#include "frontend/jit/Trace.h"
#include "modelc/runtime.h"

#include "mlir/IR/BuiltinOps.h"

#include "ErrorOf.h"
#include "RuntimeHarness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>

using namespace mc;
using mc::test::errorOf;

namespace {

//===--- Reference helpers (double precision, row-major) ---===//

using Vec = std::vector<double>;

Vec toDouble(const Tensor& t) {
  std::vector<float> f = t.toVector();
  return Vec(f.begin(), f.end());
}

/// ||out - ref|| / ||ref|| in double; NaN anywhere fails.
double relErr(const Tensor& out, const Vec& ref) {
  std::vector<float> o = out.toVector();
  EXPECT_EQ(o.size(), ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < std::min(o.size(), ref.size()); ++i) {
    if (std::isnan(o[i]) || std::isnan(ref[i]))
      return std::nan("");
    num += (o[i] - ref[i]) * (o[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

/// Expects `out` (f32) to match the double reference: f32 rounding of a
/// few hundred terms stays well under 1e-5.
void expectMatches(const char* what, const Tensor& out, const Shape& shape,
                   const Vec& ref, double tol = 1e-5) {
  ASSERT_EQ(out.shape(), shape) << what;
  double err = relErr(out, ref);
  std::printf("[ rel_err  ] %-40s %.3e\n", what, err);
  EXPECT_FALSE(std::isnan(err)) << what;
  EXPECT_LE(err, tol) << what;
}

/// torch.nn.functional.conv2d, NCHW, symmetric padding.
Vec refConv2d(const Vec& x, const Shape& xs, const Vec& w, const Shape& ws,
              const Vec* bias, int64_t s, int64_t p, int64_t d, int64_t g,
              Shape* outShape) {
  int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3];
  int64_t o = ws[0], cg = ws[1], kh = ws[2], kw = ws[3];
  int64_t oh = (h + 2 * p - d * (kh - 1) - 1) / s + 1;
  int64_t ow = (wd + 2 * p - d * (kw - 1) - 1) / s + 1;
  *outShape = {n, o, oh, ow};
  Vec out(n * o * oh * ow);
  int64_t og = o / g;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x0 = 0; x0 < ow; ++x0) {
          double acc = bias ? (*bias)[oc] : 0.0;
          int64_t group = oc / og;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                int64_t yy = y * s - p + i * d, xx = x0 * s - p + j * d;
                if (yy < 0 || yy >= h || xx < 0 || xx >= wd)
                  continue;
                int64_t cin = group * cg + ic;
                acc += x[((b * c + cin) * h + yy) * wd + xx] *
                       w[((oc * cg + ic) * kh + i) * kw + j];
              }
          out[((b * o + oc) * oh + y) * ow + x0] = acc;
        }
  return out;
}

int64_t pooledSize(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil) {
  int64_t span = in + 2 * p - k;
  int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (out - 1) * s >= in + p)
    --out;
  return out;
}

/// PyTorch's max_pool2d / avg_pool2d loops (aten's pooling kernels),
/// including the avg divisor: the window clipped to the padded input when
/// count_include_pad, else to the input.
Vec refPool2d(bool isMax, const Vec& x, const Shape& xs, int64_t k, int64_t s,
              int64_t p, bool ceil, bool countIncludePad, Shape* outShape) {
  int64_t nc = xs[0] * xs[1], h = xs[2], w = xs[3];
  int64_t oh = pooledSize(h, k, s, p, ceil), ow = pooledSize(w, k, s, p, ceil);
  *outShape = {xs[0], xs[1], oh, ow};
  Vec out(nc * oh * ow);
  for (int64_t c = 0; c < nc; ++c)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x0 = 0; x0 < ow; ++x0) {
        int64_t hs = y * s - p, ws = x0 * s - p;
        int64_t he = std::min(hs + k, h + p), we = std::min(ws + k, w + p);
        int64_t poolSize = (he - hs) * (we - ws);
        hs = std::max<int64_t>(hs, 0);
        ws = std::max<int64_t>(ws, 0);
        he = std::min(he, h);
        we = std::min(we, w);
        double acc = isMax ? -std::numeric_limits<double>::infinity() : 0.0;
        for (int64_t i = hs; i < he; ++i)
          for (int64_t j = ws; j < we; ++j) {
            double v = x[(c * h + i) * w + j];
            acc = isMax ? std::max(acc, v) : acc + v;
          }
        if (!isMax)
          acc /= countIncludePad ? poolSize : (he - hs) * (we - ws);
        out[(c * oh + y) * ow + x0] = acc;
      }
  return out;
}

/// Layer norm over the last `d` values of each row (biased variance).
Vec refLayerNorm(const Vec& x, int64_t d, const Vec& g, const Vec& b,
                 double eps) {
  Vec out(x.size());
  for (size_t r = 0; r < x.size() / d; ++r) {
    double mu = 0, var = 0;
    for (int64_t i = 0; i < d; ++i)
      mu += x[r * d + i];
    mu /= d;
    for (int64_t i = 0; i < d; ++i)
      var += (x[r * d + i] - mu) * (x[r * d + i] - mu);
    var /= d;
    for (int64_t i = 0; i < d; ++i)
      out[r * d + i] = (x[r * d + i] - mu) / std::sqrt(var + eps) * g[i] + b[i];
  }
  return out;
}

/// y = x W^T + b over rows of x; W [out, in] (row offset `w0` rows in).
Vec refLinear(const Vec& x, int64_t in, const Vec& w, int64_t out,
              const Vec* b, int64_t w0 = 0) {
  size_t rows = x.size() / in;
  Vec y(rows * out);
  for (size_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b ? (*b)[w0 + o] : 0.0;
      for (int64_t i = 0; i < in; ++i)
        acc += x[r * in + i] * w[(w0 + o) * in + i];
      y[r * out + o] = acc;
    }
  return y;
}

double refGelu(double v, bool tanhForm) {
  if (tanhForm)
    return 0.5 * v *
           (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
}

/// torch.nn.MultiheadAttention on batch-first [B, L, E] inputs with an
/// optional additive mask [L, S].
Vec refMha(const nn::MultiheadAttention& m, const Vec& q, const Vec& k,
           const Vec& v, int64_t b, int64_t l, int64_t s, const Vec* mask) {
  int64_t e = m.embedDim, h = m.numHeads, dh = e / h;
  Vec w = toDouble(m.inProjWeight), bias = toDouble(m.inProjBias);
  Vec qp = refLinear(q, e, w, e, &bias, 0);
  Vec kp = refLinear(k, e, w, e, &bias, e);
  Vec vp = refLinear(v, e, w, e, &bias, 2 * e);
  Vec ctx(b * l * e);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t i = 0; i < l; ++i) {
        Vec scores(s);
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < s; ++j) {
          double acc = 0;
          for (int64_t t = 0; t < dh; ++t)
            acc += qp[(bi * l + i) * e + hi * dh + t] *
                   kp[(bi * s + j) * e + hi * dh + t];
          scores[j] = acc / std::sqrt(double(dh)) +
                      (mask ? (*mask)[i * s + j] : 0.0);
          mx = std::max(mx, scores[j]);
        }
        double total = 0;
        for (double& sc : scores)
          total += (sc = std::exp(sc - mx));
        for (int64_t t = 0; t < dh; ++t) {
          double acc = 0;
          for (int64_t j = 0; j < s; ++j)
            acc += scores[j] / total * vp[(bi * s + j) * e + hi * dh + t];
          ctx[(bi * l + i) * e + hi * dh + t] = acc;
        }
      }
  Vec ow = toDouble(m.outProj->weight), ob = toDouble(m.outProj->bias);
  return refLinear(ctx, e, ow, e, &ob);
}

Vec add(const Vec& a, const Vec& b) {
  Vec c(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    c[i] = a[i] + b[i];
  return c;
}

Vec refEncoderLayer(const nn::TransformerEncoderLayer& m, const Vec& x,
                    int64_t b, int64_t l, const Vec* mask) {
  int64_t e = m.selfAttn->embedDim, f = m.linear1->weight.size(0);
  auto ln = [&](const nn::LayerNorm& n, const Vec& v) {
    return refLayerNorm(v, e, toDouble(n.weight), toDouble(n.bias), n.eps);
  };
  auto sa = [&](const Vec& v) {
    return refMha(*m.selfAttn, v, v, v, b, l, l, mask);
  };
  auto ff = [&](const Vec& v) {
    Vec w1 = toDouble(m.linear1->weight), b1 = toDouble(m.linear1->bias);
    Vec w2 = toDouble(m.linear2->weight), b2 = toDouble(m.linear2->bias);
    Vec hdn = refLinear(v, e, w1, f, &b1);
    for (double& t : hdn)
      t = m.geluActivation ? refGelu(t, false) : std::max(t, 0.0);
    return refLinear(hdn, f, w2, e, &b2);
  };
  if (m.normFirst) {
    Vec y = add(x, sa(ln(*m.norm1, x)));
    return add(y, ff(ln(*m.norm2, y)));
  }
  Vec y = ln(*m.norm1, add(x, sa(x)));
  return ln(*m.norm2, add(y, ff(y)));
}

/// Overwrites a parameter in place (modules share its storage).
void fillRandom(Tensor t, float scale = 1.0f) {
  Tensor r = Tensor::randn(t.shape());
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = r.data<float>()[i] * scale;
}

//===--- Compile and run through the C API (as EndToEndTest does) ---===//

using test::runArtifact;
using test::take;

/// Traces `model` with its stateDict() (buffers become globals too),
/// compiles in-process, runs the artifact, and returns its single output.
Tensor compileAndRun(nn::Module& model, const std::vector<Tensor>& inputs,
                     const std::function<Tensor(const std::vector<Tensor>&)>&
                         fn = nullptr) {
  auto call = fn ? fn : [&](const std::vector<Tensor>& in) {
    return model(in[0]);
  };
  jit::TracedModule tm = jit::traceFunction(
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{call(in)};
      },
      inputs, model.stateDict(), model.namedModules());
  auto bytes = codegen::compileToArtifact(tm.module(), {});
  EXPECT_TRUE(mlir::succeeded(bytes));
  if (mlir::failed(bytes))
    return Tensor();
  std::vector<Tensor> out = runArtifact(*bytes, inputs);
  EXPECT_EQ(out.size(), 1u);
  return out.empty() ? Tensor() : out[0];
}

void expectCompiledEqualsEager(const char* what, const Tensor& compiled,
                               const Tensor& eager) {
  ASSERT_TRUE(compiled.defined()) << what;
  ASSERT_EQ(compiled.shape(), eager.shape()) << what;
  double err = relativeError(compiled, eager);
  std::printf("[ rel_err  ] %-40s %.3e\n", what, err);
  EXPECT_FALSE(std::isnan(err)) << what;
  EXPECT_LE(err, 1e-5) << what;
}

//===--- Modules against reference loops ---===//

TEST(Modules, Conv2dMatchesLoopsAndTorchInit) {
  manualSeed(1);
  // Stride, padding, dilation and groups all at once.
  nn::Conv2d conv(4, 6, 3, /*stride=*/2, /*padding=*/2, /*dilation=*/2,
                  /*groups=*/2);
  EXPECT_EQ(conv.weight.shape(), (Shape{6, 2, 3, 3}));
  EXPECT_EQ(conv.bias.shape(), (Shape{6}));
  auto names = conv.namedParameters();
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0].first, "weight");
  EXPECT_EQ(names[1].first, "bias");
  float bound = 1.0f / std::sqrt(2.0f * 9.0f); // fan_in = in/groups * k * k
  for (const Tensor* t : {&conv.weight, &conv.bias})
    for (float v : t->toVector()) {
      EXPECT_GE(v, -bound);
      EXPECT_LT(v, bound);
    }
  Tensor x = Tensor::randn({2, 4, 9, 8});
  Shape refShape;
  Vec bias = toDouble(conv.bias);
  Vec ref = refConv2d(toDouble(x), x.shape(), toDouble(conv.weight),
                      conv.weight.shape(), &bias, 2, 2, 2, 2, &refShape);
  expectMatches("Conv2d(4, 6, 3, s2, p2, d2, g2)", conv(x), refShape, ref);

  nn::Conv2d noBias(3, 5, {1, 1}, 1, 0, 1, 1, /*bias=*/false);
  EXPECT_FALSE(noBias.bias.defined());
  EXPECT_EQ(noBias.namedParameters().size(), 1u);
  EXPECT_THROW(nn::Conv2d(3, 4, 3, 1, 0, 1, /*groups=*/2), Error);
}

TEST(Modules, BatchNorm2dIsInferenceFormWithBuffers) {
  manualSeed(2);
  nn::BatchNorm2d bn(3, 1e-3);
  // PyTorch's state_dict names, parameters before buffers.
  std::vector<std::string> names;
  for (auto& [n, t] : bn.stateDict())
    names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"weight", "bias", "running_mean",
                                             "running_var"}));
  EXPECT_EQ(bn.namedParameters().size(), 2u);
  EXPECT_EQ(bn.namedBuffers().size(), 2u);
  EXPECT_EQ(bn.weight.toVector(), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(bn.runningVar.toVector(), (std::vector<float>{1, 1, 1}));
  fillRandom(bn.weight);
  fillRandom(bn.bias);
  fillRandom(bn.runningMean);
  Tensor var = bn.runningVar;
  for (int i = 0; i < 3; ++i)
    var.data<float>()[i] = 0.5f + i;
  Tensor x = Tensor::randn({2, 3, 4, 5});
  Vec xv = toDouble(x), ref(xv.size());
  Vec g = toDouble(bn.weight), b = toDouble(bn.bias),
      mu = toDouble(bn.runningMean), v = toDouble(bn.runningVar);
  for (size_t i = 0; i < xv.size(); ++i) {
    size_t c = (i / 20) % 3;
    ref[i] = (xv[i] - mu[c]) / std::sqrt(v[c] + 1e-3) * g[c] + b[c];
  }
  expectMatches("BatchNorm2d(3, eps=1e-3)", bn(x), x.shape(), ref);
  EXPECT_THROW(bn(Tensor::randn({2, 3})), Error);
}

TEST(Modules, MaxPool2dMatchesLoops) {
  manualSeed(3);
  Tensor x = Tensor::randn({2, 3, 7, 6});
  Shape s;
  nn::MaxPool2d pool(3, 2, 1);
  Vec ref = refPool2d(true, toDouble(x), x.shape(), 3, 2, 1, false, false, &s);
  EXPECT_EQ(s, (Shape{2, 3, 4, 3}));
  expectMatches("MaxPool2d(3, 2, 1)", pool(x), s, ref, 0);
  nn::MaxPool2d ceil(2, std::nullopt, 0, 1, /*ceilMode=*/true);
  ref = refPool2d(true, toDouble(x), x.shape(), 2, 2, 0, true, false, &s);
  EXPECT_EQ(s, (Shape{2, 3, 4, 3}));
  expectMatches("MaxPool2d(2, ceil_mode)", ceil(x), s, ref, 0);
}

TEST(Modules, AvgPool2dMatchesLoops) {
  manualSeed(4);
  Tensor x = Tensor::randn({1, 2, 7, 6});
  for (bool ceilMode : {false, true})
    for (bool includePad : {true, false}) {
      nn::AvgPool2d pool(3, 2, 1, ceilMode, includePad);
      Shape s;
      Vec ref = refPool2d(false, toDouble(x), x.shape(), 3, 2, 1, ceilMode,
                          includePad, &s);
      std::string what = std::string("AvgPool2d(3, 2, 1") +
                         (ceilMode ? ", ceil" : "") +
                         (includePad ? ", include_pad)" : ", exclude_pad)");
      expectMatches(what.c_str(), pool(x), s, ref);
    }
}

TEST(Modules, AdaptiveAvgPoolFlattenDropout) {
  manualSeed(5);
  Tensor x = Tensor::randn({2, 3, 5, 4});
  nn::AdaptiveAvgPool2d pool(1);
  Vec xv = toDouble(x), ref(6, 0.0);
  for (size_t i = 0; i < xv.size(); ++i)
    ref[i / 20] += xv[i] / 20;
  expectMatches("AdaptiveAvgPool2d(1)", pool(x), {2, 3, 1, 1}, ref);
  EXPECT_THROW(nn::AdaptiveAvgPool2d(2), Error);

  nn::Flatten flat;
  EXPECT_EQ(flat(x).shape(), (Shape{2, 60}));
  EXPECT_EQ(nn::Flatten(0, 1)(x).shape(), (Shape{6, 5, 4}));

  nn::Dropout drop(0.3);
  EXPECT_EQ(drop(x).toVector(), x.toVector()); // inference: identity
  EXPECT_THROW(nn::Dropout(1.5), Error);
}

TEST(Modules, LayerNormMatchesFormula) {
  manualSeed(6);
  nn::LayerNorm ln({4, 5}, 1e-6);
  EXPECT_EQ(ln.weight.shape(), (Shape{4, 5}));
  EXPECT_EQ(ln.weight.toVector(), std::vector<float>(20, 1.0f));
  EXPECT_EQ(ln.bias.toVector(), std::vector<float>(20, 0.0f));
  fillRandom(ln.weight);
  fillRandom(ln.bias);
  Tensor x = Tensor::randn({3, 4, 5}) * 3.0 + 1.0;
  Vec ref = refLayerNorm(toDouble(x), 20, toDouble(ln.weight),
                         toDouble(ln.bias), 1e-6);
  expectMatches("LayerNorm([4, 5], eps=1e-6)", ln(x), x.shape(), ref);
  EXPECT_THROW(ln(Tensor::randn({3, 5, 4})), Error);
}

TEST(Modules, EmbeddingCopiesRows) {
  manualSeed(7);
  nn::Embedding emb(10, 3);
  EXPECT_EQ(emb.weight.shape(), (Shape{10, 3}));
  for (DType dt : {DType::I64, DType::I32}) {
    Tensor ids = Tensor::empty({2, 2}, dt);
    std::vector<int64_t> values = {9, 0, 3, 9};
    for (int i = 0; i < 4; ++i) {
      if (dt == DType::I64)
        ids.data<int64_t>()[i] = values[i];
      else
        ids.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
    }
    Vec w = toDouble(emb.weight), ref;
    for (int64_t id : values)
      for (int j = 0; j < 3; ++j)
        ref.push_back(w[id * 3 + j]);
    expectMatches(dt == DType::I64 ? "Embedding(10, 3), i64 ids"
                                   : "Embedding(10, 3), i32 ids",
                  emb(ids), {2, 2, 3}, ref, 0);
  }
}

TEST(Modules, GeluBothForms) {
  Tensor x = Tensor::randn({64}) * 3.0;
  for (bool tanhForm : {false, true}) {
    nn::GELU g(tanhForm ? "tanh" : "none");
    Vec ref;
    for (double v : toDouble(x))
      ref.push_back(refGelu(v, tanhForm));
    expectMatches(tanhForm ? "GELU(tanh)" : "GELU(none)", g(x), {64}, ref);
  }
  EXPECT_THROW(nn::GELU("fast"), Error);
}

TEST(Modules, MultiheadAttentionMatchesLoops) {
  manualSeed(8);
  const int64_t b = 2, l = 5, s = 7, e = 12, h = 3;
  nn::MultiheadAttention mha(e, h);
  std::vector<std::string> names;
  for (auto& [n, t] : mha.namedParameters())
    names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"in_proj_weight", "in_proj_bias",
                                             "out_proj.weight",
                                             "out_proj.bias"}));
  EXPECT_EQ(mha.inProjWeight.shape(), (Shape{3 * e, e}));
  // torch: in_proj_bias and out_proj.bias start at zero.
  EXPECT_EQ(mha.inProjBias.toVector(), std::vector<float>(3 * e, 0.0f));
  EXPECT_EQ(mha.outProj->bias.toVector(), std::vector<float>(e, 0.0f));
  fillRandom(mha.inProjBias, 0.1f);
  fillRandom(mha.outProj->bias, 0.1f);
  Tensor q = Tensor::randn({b, l, e}), k = Tensor::randn({b, s, e}),
         v = Tensor::randn({b, s, e});
  Vec ref = refMha(mha, toDouble(q), toDouble(k), toDouble(v), b, l, s,
                   nullptr);
  expectMatches("MultiheadAttention(12, 3), cross", mha(q, k, v), {b, l, e},
                ref);

  // A float additive mask and the equivalent bool mask (true = hidden).
  Tensor floatMask = Tensor::zeros({l, s});
  Tensor boolMask = Tensor::zeros({l, s}, DType::I1);
  for (int64_t i = 0; i < l; ++i)
    for (int64_t j = 0; j < s; ++j)
      if ((i + j) % 3 == 0) {
        floatMask.data<float>()[i * s + j] = -INFINITY;
        boolMask.data<uint8_t>()[i * s + j] = 1;
      }
  Vec maskRef = toDouble(floatMask);
  ref = refMha(mha, toDouble(q), toDouble(k), toDouble(v), b, l, s, &maskRef);
  expectMatches("MultiheadAttention, float mask", mha(q, k, v, floatMask),
                {b, l, e}, ref);
  expectMatches("MultiheadAttention, bool mask", mha(q, k, v, boolMask),
                {b, l, e}, ref);

  // Sequence-first inputs give the transposed result.
  nn::MultiheadAttention seqFirst(e, h, /*batchFirst=*/false);
  auto src = mha.namedParameters(), dst = seqFirst.namedParameters();
  ASSERT_EQ(src.size(), dst.size());
  for (size_t i = 0; i < src.size(); ++i)
    std::memcpy(dst[i].second.rawData(), src[i].second.rawData(),
                src[i].second.byteSize());
  Tensor outT = seqFirst(transpose(q, {1, 0, 2}), transpose(k, {1, 0, 2}),
                         transpose(v, {1, 0, 2}), floatMask);
  expectMatches("MultiheadAttention, batch_first=false",
                transpose(outT, {1, 0, 2}), {b, l, e}, ref);
  EXPECT_THROW(nn::MultiheadAttention(10, 3), Error);
}

TEST(Modules, TransformerEncoderLayerMatchesLoops) {
  const int64_t b = 2, l = 6, e = 16, h = 4, f = 32;
  Tensor mask = models::causalMask(l);
  Vec maskRef = toDouble(mask);
  for (bool normFirst : {false, true})
    for (const char* act : {"relu", "gelu"}) {
      manualSeed(9);
      nn::TransformerEncoderLayer layer(e, h, f, 0.1, act, 1e-5, true,
                                        normFirst);
      for (auto& [n, t] : layer.namedParameters())
        if (n.find("norm") != std::string::npos ||
            n.find("bias") != std::string::npos)
          fillRandom(t, 0.2f);
      Tensor x = Tensor::randn({b, l, e});
      Vec ref = refEncoderLayer(layer, toDouble(x), b, l, &maskRef);
      std::string what = std::string("TransformerEncoderLayer(") + act +
                         (normFirst ? ", norm_first)" : ")");
      expectMatches(what.c_str(), layer(x, mask), {b, l, e}, ref);
    }
  nn::TransformerEncoderLayer layer(e, h, f);
  std::vector<std::string> names;
  for (auto& [n, t] : layer.namedParameters())
    names.push_back(n);
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "self_attn.in_proj_weight", "self_attn.in_proj_bias",
                "self_attn.out_proj.weight", "self_attn.out_proj.bias",
                "linear1.weight", "linear1.bias", "linear2.weight",
                "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight",
                "norm2.bias"}));
  EXPECT_THROW(nn::TransformerEncoderLayer(e, h, f, 0.1, "swish"), Error);
}

//===--- The example models, eager against compiled ---===//

/// torchvision.models.resnet18().state_dict() without num_batches_tracked:
/// 62 parameters + 20 BatchNorms x 2 running statistics.
TEST(Models, ResNet18HasTorchvisionStateDict) {
  manualSeed(10);
  auto model = models::resnet18();
  auto sd = model->stateDict();
  EXPECT_EQ(model->namedParameters().size(), 62u);
  EXPECT_EQ(sd.size(), 102u);
  int64_t params = 0;
  for (auto& [n, p] : model->namedParameters())
    params += p.numel();
  EXPECT_EQ(params, 11689512); // torchvision's resnet18 parameter count
  EXPECT_EQ(sd.front().first, "conv1.weight");
  EXPECT_EQ(sd[1].first, "bn1.weight");
  EXPECT_EQ(sd[3].first, "bn1.running_mean");
  EXPECT_EQ(sd.back().first, "fc.bias");
  bool found = false;
  for (auto& [n, t] : sd)
    if (n == "layer2.0.downsample.1.running_var") {
      found = true;
      EXPECT_EQ(t.shape(), (Shape{128}));
    }
  EXPECT_TRUE(found);
}

TEST(Models, ResNet18CompiledEqualsEager64) {
  manualSeed(11);
  auto model = models::resnet18();
  models::randomizeBatchNorms(*model);
  Tensor x = Tensor::randn({1, 3, 64, 64});
  Tensor eager = (*model)(x);
  EXPECT_EQ(eager.shape(), (Shape{1, 1000}));
  expectCompiledEqualsEager("ResNet-18 1x3x64x64", compileAndRun(*model, {x}),
                            eager);
}

TEST(Models, ResNet18CompiledEqualsEager224) {
  manualSeed(12);
  auto model = models::resnet18();
  models::randomizeBatchNorms(*model);
  Tensor x = Tensor::randn({1, 3, 224, 224});
  auto start = std::chrono::steady_clock::now();
  Tensor eager = (*model)(x);
  expectCompiledEqualsEager("ResNet-18 1x3x224x224",
                            compileAndRun(*model, {x}), eager);
  std::printf("[ time     ] ResNet-18 224: eager + trace + compile + run "
              "%.2f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                            start)
                  .count());
}

TEST(Models, CausalMaskIsZeroOnAndBelowTheDiagonal) {
  Tensor m = models::causalMask(4);
  ASSERT_EQ(m.shape(), (Shape{4, 4}));
  std::vector<float> v = m.toVector();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      if (j <= i)
        EXPECT_EQ(v[i * 4 + j], 0.0f);
      else
        EXPECT_TRUE(std::isinf(v[i * 4 + j]) && v[i * 4 + j] < 0);
    }
}

TEST(Models, GPT2BlockCompiledEqualsEagerAndIsCausal) {
  manualSeed(13);
  const int64_t b = 2, t = 16, d = 64, heads = 4;
  models::GPT2Block block(d, heads);
  for (auto& [n, p] : block.namedParameters())
    if (n.find("ln_") == 0 || n.find("bias") != std::string::npos)
      fillRandom(p, 0.2f);
  Tensor x = Tensor::randn({b, t, d});
  Tensor eager = block(x);
  EXPECT_EQ(eager.shape(), (Shape{b, t, d}));

  // The block against loops: ln_1 -> masked attention -> residual, ln_2 ->
  // c_fc -> GELU(tanh) -> c_proj -> residual.
  Vec xv = toDouble(x), mask = toDouble(models::causalMask(t));
  Vec h = refLayerNorm(xv, d, toDouble(block.ln1->weight),
                       toDouble(block.ln1->bias), 1e-5);
  Vec y = add(xv, refMha(*block.attn, h, h, h, b, t, t, &mask));
  h = refLayerNorm(y, d, toDouble(block.ln2->weight), toDouble(block.ln2->bias),
                   1e-5);
  Vec w1 = toDouble(block.mlp->cFc->weight),
      b1 = toDouble(block.mlp->cFc->bias);
  Vec w2 = toDouble(block.mlp->cProj->weight),
      b2 = toDouble(block.mlp->cProj->bias);
  Vec m = refLinear(h, d, w1, 4 * d, &b1);
  for (double& v : m)
    v = refGelu(v, true);
  Vec ref = add(y, refLinear(m, 4 * d, w2, d, &b2));
  expectMatches("GPT2Block vs loops", eager, {b, t, d}, ref);

  expectCompiledEqualsEager("GPT2Block 2x16x64, 4 heads",
                            compileAndRun(block, {x}), eager);

  // Causality: changing the last position changes no earlier output.
  Tensor x2 = x.clone();
  for (int64_t i = 0; i < d; ++i)
    x2.data<float>()[(t - 1) * d + i] += 1.0f;
  Tensor eager2 = block(x2);
  for (int64_t i = 0; i < (t - 1) * d; ++i)
    ASSERT_EQ(eager2.data<float>()[i], eager.data<float>()[i]) << i;
}

TEST(Models, TinyGPT2CompiledEqualsEager) {
  manualSeed(14);
  models::GPT2Config config;
  config.vocabSize = 97;
  config.maxPositions = 32;
  config.dModel = 32;
  config.numHeads = 4;
  config.numLayers = 2;
  models::GPT2 model(config);
  Tensor ids = Tensor::empty({2, 16}, DType::I64);
  for (int64_t i = 0; i < ids.numel(); ++i)
    ids.data<int64_t>()[i] = (i * 37 + 11) % config.vocabSize;
  Tensor eager = model(ids);
  EXPECT_EQ(eager.shape(), (Shape{2, 16, 97}));
  expectCompiledEqualsEager("GPT2 (2 blocks, d 32), ids 2x16",
                            compileAndRun(model, {ids}), eager);
}

TEST(Models, TransformerEncoderLayerWithMaskCompiledEqualsEager) {
  manualSeed(15);
  nn::TransformerEncoderLayer layer(32, 4, 64, 0.1, "gelu", 1e-5, true,
                                    /*normFirst=*/true);
  Tensor x = Tensor::randn({2, 8, 32});
  Tensor mask = models::causalMask(8);
  Tensor eager = layer(x, mask);
  auto fn = [&](const std::vector<Tensor>& in) { return layer(in[0], mask); };
  expectCompiledEqualsEager("TransformerEncoderLayer + mask",
                            compileAndRun(layer, {x}, fn), eager);
}

//===--- Recurrent layers (their numerics and gradients against PyTorch are
//        in torch_crosscheck.py) ---===//

std::vector<std::string> parameterNames(const nn::Module& m) {
  std::vector<std::string> names;
  for (auto& [n, p] : m.namedParameters())
    names.push_back(n);
  return names;
}

TEST(Modules, RecurrentLayersHaveTorchNamesShapesAndInit) {
  manualSeed(17);
  nn::LSTM lstm(5, 8, /*numLayers=*/2, /*bias=*/true, /*batchFirst=*/false, 0.0,
                /*bidirectional=*/true);
  std::vector<std::string> expected;
  for (const char* layer : {"_l0", "_l1"})
    for (const char* dir : {"", "_reverse"})
      for (const char* what : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"})
        expected.push_back(std::string(what) + layer + dir);
  EXPECT_EQ(parameterNames(lstm), expected);
  EXPECT_EQ(lstm.weights(0, 1).wIh.shape(), (Shape{32, 5}));
  EXPECT_EQ(lstm.weights(1, 0).wIh.shape(), (Shape{32, 16})); // 2 directions in
  EXPECT_EQ(lstm.weights(1, 1).wHh.shape(), (Shape{32, 8}));
  EXPECT_EQ(lstm.weights(1, 1).bHh.shape(), (Shape{32}));
  float bound = 1.0f / std::sqrt(8.0f);
  for (auto& [n, p] : lstm.namedParameters())
    for (float v : p.toVector()) {
      ASSERT_GE(v, -bound) << n;
      ASSERT_LT(v, bound) << n;
    }
  nn::GRU gru(3, 4);
  EXPECT_EQ(gru.weights(0, 0).wIh.shape(), (Shape{12, 3}));
  nn::RNN rnn(3, 4, 1, "relu", /*bias=*/false);
  EXPECT_EQ(parameterNames(rnn),
            (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0"}));
  EXPECT_FALSE(rnn.weights(0, 0).bIh.defined());

  // Shapes of the output and the last states, batched and not.
  nn::RecurrentOutput r = lstm.run(Tensor::randn({7, 2, 5}));
  EXPECT_EQ(r.output.shape(), (Shape{7, 2, 16}));
  EXPECT_EQ(r.h.shape(), (Shape{4, 2, 8}));
  EXPECT_EQ(r.c.shape(), (Shape{4, 2, 8}));
  r = lstm.run(Tensor::randn({7, 5}));
  EXPECT_EQ(r.output.shape(), (Shape{7, 16}));
  EXPECT_EQ(r.h.shape(), (Shape{4, 8}));
  nn::GRU batchFirst(3, 4, 1, true, /*batchFirst=*/true);
  r = batchFirst.run(Tensor::randn({2, 6, 3}));
  EXPECT_EQ(r.output.shape(), (Shape{2, 6, 4}));
  EXPECT_EQ(r.h.shape(), (Shape{1, 2, 4}));
  EXPECT_FALSE(r.c.defined());
  // The last step's output is the last state (forward direction).
  std::vector<float> out = r.output.toVector(), h = r.h.toVector();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 4; ++i)
      EXPECT_EQ(out[(b * 6 + 5) * 4 + i], h[b * 4 + i]);
}

TEST(Modules, RecurrentLayersRefuseBadArgumentsByName) {
  auto has = [](const std::string& message, const char* part) {
    return message.find(part) != std::string::npos;
  };
  EXPECT_TRUE(has(errorOf([] { nn::LSTM(0, 4); }),
                  "LSTM: input_size must be positive, got 0"));
  EXPECT_TRUE(has(errorOf([] { nn::GRU(3, -1); }),
                  "GRU: hidden_size must be positive, got -1"));
  EXPECT_TRUE(has(errorOf([] { nn::RNN(3, 4, 0); }),
                  "RNN: num_layers must be positive, got 0"));
  EXPECT_TRUE(has(errorOf([] { nn::RNN(3, 4, 1, "gelu"); }),
                  "RNN: nonlinearity must be 'tanh' or 'relu', got 'gelu'"));
  EXPECT_TRUE(has(errorOf([] { nn::LSTM(3, 4, 2, true, false, 1.5); }),
                  "LSTM: dropout must be in [0, 1]"));
  nn::LSTM lstm(3, 4, 2, true, /*batchFirst=*/true);
  EXPECT_TRUE(has(errorOf([&] {
                    lstm.run(Tensor::randn({2, 5, 6}));
                  }),
                  "LSTM: input must be [B, T, 3] (or [T, 3] unbatched), got "
                  "f32[2, 5, 6]"));
  EXPECT_TRUE(has(errorOf([&] {
                    lstm.run(Tensor::randn({2, 0, 3}));
                  }),
                  "has an empty sequence"));
  Tensor x = Tensor::randn({2, 5, 3});
  EXPECT_TRUE(
      has(errorOf([&] {
            lstm.run(x, Tensor::randn({1, 2, 4}), Tensor::randn({1, 2, 4}));
          }),
          "LSTM: h0 must be [2, 2, 4] for the input f32[2, 5, 3], got "
          "f32[1, 2, 4]"));
  EXPECT_TRUE(has(errorOf([&] {
                    lstm.run(x, Tensor::randn({2, 2, 4}));
                  }),
                  "LSTM: give both h0 and c0, or neither"));
  // dtypes, up front and naming the layer (not a matmul's inner shapes).
  EXPECT_EQ(errorOf([&] { lstm.run(cast(x, DType::BF16)); }),
            "LSTM: the input is bf16[2, 5, 3], the weights are f32; cast one "
            "to the other");
  EXPECT_EQ(errorOf([&] {
              lstm.run(x, Tensor::randn({2, 2, 4}),
                       cast(Tensor::randn({2, 2, 4}), DType::F16));
            }),
            "LSTM: c0 is f16[2, 2, 4], the input and weights are f32");
  nn::GRU gru(3, 4);
  EXPECT_TRUE(has(errorOf([&] {
                    gru.run(Tensor::randn({5, 2, 3}), Tensor::randn({1, 2, 4}),
                            Tensor::randn({1, 2, 4}));
                  }),
                  "GRU: has no cell state; c0 is for LSTM only"));
  EXPECT_TRUE(has(errorOf([&] { gru.weights(1, 0); }),
                  "GRU: no layer 1 direction 0 (it has 1 layers"));
}

TEST(Modules, RecurrentCellsHaveTorchNamesAndRefuseBadInput) {
  manualSeed(21);
  nn::LSTMCell lstm(3, 4);
  EXPECT_EQ(parameterNames(lstm),
            (std::vector<std::string>{"weight_ih", "weight_hh", "bias_ih",
                                      "bias_hh"}));
  EXPECT_EQ(lstm.weights().wIh.shape(), (Shape{16, 3}));
  nn::RecurrentOutput r = lstm.run(Tensor::randn({2, 3}));
  EXPECT_EQ(r.h.shape(), (Shape{2, 4}));
  EXPECT_EQ(r.c.shape(), (Shape{2, 4}));
  EXPECT_EQ(lstm.run(Tensor::randn({3})).h.shape(), (Shape{4}));
  nn::GRUCell gru(3, 4, /*bias=*/false);
  EXPECT_EQ(parameterNames(gru),
            (std::vector<std::string>{"weight_ih", "weight_hh"}));
  EXPECT_EQ(gru(Tensor::randn({5, 3})).shape(), (Shape{5, 4}));
  EXPECT_EQ(errorOf([] { nn::RNNCell(3, 4, true, "sigmoid"); }),
            "RNNCell: nonlinearity must be 'tanh' or 'relu', got 'sigmoid'");
  EXPECT_EQ(errorOf([] { nn::GRUCell(0, 4); }),
            "GRUCell: input_size must be positive, got 0");
  EXPECT_EQ(errorOf([&] {
              gru.run(Tensor::randn({2, 5}));
            }),
            "GRUCell: input must be [B, 3] (or [3] unbatched), got f32[2, 5]");
  EXPECT_EQ(errorOf([&] {
              gru.run(Tensor::randn({2, 3}), Tensor::randn({3, 4}));
            }),
            "GRUCell: h must be [2, 4] for the input f32[2, 3], got f32[3, 4]");
  EXPECT_EQ(errorOf([&] {
              gru.run(Tensor::randn({2, 3}), Tensor::randn({2, 4}),
                      Tensor::randn({2, 4}));
            }),
            "GRUCell: has no cell state; c is for LSTMCell only");
  EXPECT_EQ(errorOf([&] {
              lstm.run(Tensor::randn({2, 3}), Tensor::randn({2, 4}));
            }),
            "LSTMCell: give both h and c, or neither (zeros)");
  EXPECT_EQ(errorOf([&] {
              lstm.run(cast(Tensor::randn({2, 3}), DType::BF16));
            }),
            "LSTMCell: the input is bf16[2, 3], the weights are f32; cast one "
            "to the other");
}

/// Traces `fn` on `examples` (a dynamic batch in `bounds` when given),
/// compiles, and checks every output against eager at each batch in
/// `batches` (the inputs made by `makeInputs(batch)`).
void expectTracedCompiledEqualsEager(
    const char* what, nn::Module& model,
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
    const std::function<std::vector<Tensor>(int64_t)>& makeInputs,
    std::optional<jit::DynamicBatch> bounds, std::vector<int64_t> batches) {
  jit::TraceOptions options;
  options.dynamicBatch = bounds;
  jit::TracedModule tm =
      jit::traceFunction(fn, makeInputs(batches[0]), model.stateDict(),
                         model.namedModules(), options);
  auto bytes = codegen::compileToArtifact(tm.module(), {});
  ASSERT_TRUE(mlir::succeeded(bytes)) << what;
  for (int64_t batch : batches) {
    std::vector<Tensor> inputs = makeInputs(batch);
    std::vector<Tensor> eager = fn(inputs);
    std::vector<Tensor> compiled = runArtifact(*bytes, inputs);
    ASSERT_EQ(compiled.size(), eager.size()) << what;
    for (size_t i = 0; i < eager.size(); ++i) {
      std::string label = std::string(what) + ", batch " +
                          std::to_string(batch) + ", output " +
                          std::to_string(i);
      expectCompiledEqualsEager(label.c_str(), compiled[i], eager[i]);
    }
  }
}

TEST(Models, RecurrentLayersCompiledEqualEager) {
  manualSeed(18);
  // Output and both last states of a 2-layer bidirectional LSTM from given
  // states, then a GRU and an RNN from zero states.
  nn::LSTM lstm(5, 8, 2, true, /*batchFirst=*/false, 0.0,
                /*bidirectional=*/true);
  expectTracedCompiledEqualsEager(
      "LSTM(5, 8, 2 layers, bidirectional)", lstm,
      [&](const std::vector<Tensor>& in) {
        nn::RecurrentOutput r = lstm.run(in[0], in[1], in[2]);
        return std::vector<Tensor>{r.output, r.h, r.c};
      },
      [](int64_t b) {
        return std::vector<Tensor>{Tensor::randn({6, b, 5}),
                                   Tensor::randn({4, b, 8}),
                                   Tensor::randn({4, b, 8})};
      },
      std::nullopt, {3});
  nn::GRU gru(4, 6, 2, true, /*batchFirst=*/true, 0.0, true);
  nn::RNN rnn(4, 5, 1, "relu", true, /*batchFirst=*/true);
  for (nn::RecurrentBase* layer : {static_cast<nn::RecurrentBase*>(&gru),
                                   static_cast<nn::RecurrentBase*>(&rnn)})
    expectTracedCompiledEqualsEager(
        layer->typeName().c_str(), *layer,
        [&](const std::vector<Tensor>& in) {
          nn::RecurrentOutput r = layer->run(in[0]);
          return std::vector<Tensor>{r.output, r.h};
        },
        [](int64_t b) {
          return std::vector<Tensor>{Tensor::randn({b, 5, 4})};
        },
        std::nullopt, {2});
}

/// Batch-first layers traced with a dynamic batch run every batch size in
/// their bounds: zero initial states need no constant of the batch's size,
/// and given ones are inputs [B, D*L, H] transposed inside.
TEST(Models, RecurrentLayersWithDynamicBatchCompiledEqualEager) {
  manualSeed(19);
  nn::LSTM lstm(5, 8, 2, true, /*batchFirst=*/true, 0.0,
                /*bidirectional=*/true);
  expectTracedCompiledEqualsEager(
      "LSTM, batch 1..8", lstm,
      [&](const std::vector<Tensor>& in) {
        nn::RecurrentOutput r = lstm.run(in[0]);
        // The output, and h_n batch-first ([B, D*L, H]).
        return std::vector<Tensor>{r.output, transpose(r.h, {1, 0, 2})};
      },
      [](int64_t b) {
        return std::vector<Tensor>{Tensor::randn({b, 6, 5})};
      },
      jit::DynamicBatch{1, 8, 0}, {3, 1, 8, 5});
  nn::GRU gru(5, 6, 2, /*bias=*/false, /*batchFirst=*/true, 0.0,
              /*bidirectional=*/true);
  expectTracedCompiledEqualsEager(
      "GRU without bias, h0 as an input, batch 1..8", gru,
      [&](const std::vector<Tensor>& in) {
        nn::RecurrentOutput r = gru.run(in[0], transpose(in[1], {1, 0, 2}));
        return std::vector<Tensor>{r.output, transpose(r.h, {1, 0, 2})};
      },
      [](int64_t b) {
        return std::vector<Tensor>{Tensor::randn({b, 6, 5}),
                                   Tensor::randn({b, 4, 6})};
      },
      jit::DynamicBatch{1, 8, 0}, {2, 7});
  nn::RNN rnn(5, 4, 1, "tanh", true, /*batchFirst=*/true);
  expectTracedCompiledEqualsEager(
      "RNN, batch 1..8", rnn,
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{rnn(in[0])};
      },
      [](int64_t b) {
        return std::vector<Tensor>{Tensor::randn({b, 6, 5})};
      },
      jit::DynamicBatch{1, 8, 0}, {4, 1});
}

/// A greedy decoder's loop: an LSTMCell fed its own projected output for
/// four steps, traced (with a dynamic batch) and compiled.
TEST(Models, RecurrentCellDecoderCompiledEqualsEager) {
  manualSeed(22);
  struct Decoder : nn::Module {
    Decoder() {
      cell = registerModule("cell", std::make_shared<nn::LSTMCell>(6, 8));
      out = registerModule("out", std::make_shared<nn::Linear>(8, 6));
    }
    Tensor forward(const Tensor& x) override {
      Tensor input = x, h, c;
      std::vector<Tensor> steps;
      for (int i = 0; i < 4; ++i) {
        nn::RecurrentOutput r = cell->run(input, h, c);
        h = r.h;
        c = r.c;
        input = tanh((*out)(h));
        steps.push_back(unsqueeze(input, 1));
      }
      return concat(steps, 1); // [B, 4, 6]
    }
    std::string typeName() const override { return "Decoder"; }
    std::shared_ptr<nn::LSTMCell> cell;
    std::shared_ptr<nn::Linear> out;
  } decoder;
  expectTracedCompiledEqualsEager(
      "LSTMCell decoder, 4 steps, batch 1..8", decoder,
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{decoder(in[0])};
      },
      [](int64_t b) {
        return std::vector<Tensor>{Tensor::randn({b, 6})};
      },
      jit::DynamicBatch{1, 8, 0}, {3, 8});
}

/// An example of one row traces a dynamic batch: at batch 1 cross-entropy's
/// one-hot compare meets its [1, C] classes without a broadcast, so the
/// tracer runs at 2 and 3 instead (it used to refuse: "mc.compare is not
/// the op the run at the other batch size ran").
TEST(Models, OneRowExampleTracesADynamicBatch) {
  manualSeed(20);
  nn::Linear head(5, 3);
  auto labels = [](int64_t b) {
    Tensor y = Tensor::empty({b}, DType::I64);
    for (int64_t i = 0; i < b; ++i)
      y.data<int64_t>()[i] = (i * 2 + 1) % 3;
    return y;
  };
  expectTracedCompiledEqualsEager(
      "Linear + cross-entropy traced at batch 1", head,
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{crossEntropy(head(in[0]), in[1])};
      },
      [&](int64_t b) {
        return std::vector<Tensor>{Tensor::randn({b, 5}), labels(b)};
      },
      jit::DynamicBatch{1, 8, 0}, {1, 6});
}

/// BatchNorm's running statistics trace as named globals, not constants.
TEST(Models, BuffersTraceAsNamedGlobals) {
  manualSeed(16);
  nn::Sequential model{std::make_shared<nn::Conv2d>(3, 4, 3),
                       std::make_shared<nn::BatchNorm2d>(4)};
  Tensor x = Tensor::randn({1, 3, 6, 6});
  jit::TracedModule tm = jit::traceFunction(
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{model(in[0])};
      },
      {x}, model.stateDict(), model.namedModules());
  std::string text = tm.str();
  for (const char* name : {"@\"0.weight\"", "@\"0.bias\"", "@\"1.weight\"",
                           "@\"1.running_mean\"", "@\"1.running_var\""})
    EXPECT_NE(text.find(name), std::string::npos) << name << "\n" << text;
}

} // namespace
