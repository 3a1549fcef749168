// nn modules (see nn.h).
#include "frontend/nn.h"
#include "frontend/Autograd.h"
#include "frontend/Random.h"
#include "frontend/TraceHook.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace mc::nn {

Module::~Module() = default;

ModuleScope::ModuleScope(const Module& module)
    : hook_(activeTraceHook()), module_(module) {
  if (hook_)
    hook_->enterModule(module_);
}

ModuleScope::~ModuleScope() {
  if (hook_)
    hook_->exitModule(module_);
}

Tensor Module::operator()(const Tensor& x) {
  ModuleScope scope(*this);
  return forward(x);
}

namespace {
void requireNewName(const std::string& name,
                    const std::vector<std::pair<std::string, Tensor>>& a,
                    const std::vector<std::pair<std::string, Tensor>>& b) {
  for (const auto* list : {&a, &b})
    for (auto& [n, t] : *list)
      if (n == name)
        throw Error("parameter or buffer '" + name + "' registered twice");
}
} // namespace

Tensor& Module::registerParameter(const std::string& name, Tensor t) {
  requireNewName(name, params_, buffers_);
  params_.emplace_back(name, std::move(t));
  return params_.back().second;
}

Tensor& Module::registerBuffer(const std::string& name, Tensor t) {
  requireNewName(name, params_, buffers_);
  buffers_.emplace_back(name, std::move(t));
  return buffers_.back().second;
}

void Module::addChild(const std::string& name, std::shared_ptr<Module> m) {
  if (!m)
    throw Error("submodule '" + name + "' is null");
  children_.emplace_back(name, std::move(m));
}

std::vector<std::pair<std::string, Tensor>> Module::namedParameters() const {
  std::vector<std::pair<std::string, Tensor>> out = params_;
  for (const auto& [name, child] : children_)
    for (auto& [pname, p] : child->namedParameters())
      out.emplace_back(name + "." + pname, p);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::namedBuffers() const {
  std::vector<std::pair<std::string, Tensor>> out = buffers_;
  for (const auto& [name, child] : children_)
    for (auto& [bname, b] : child->namedBuffers())
      out.emplace_back(name + "." + bname, b);
  return out;
}

void Module::train(bool mode) {
  training_ = mode;
  for (auto& [name, child] : children_)
    child->train(mode);
}

std::vector<std::pair<std::string, Tensor>> Module::stateDict() const {
  std::vector<std::pair<std::string, Tensor>> out = params_;
  out.insert(out.end(), buffers_.begin(), buffers_.end());
  for (const auto& [name, child] : children_)
    for (auto& [tname, t] : child->stateDict())
      out.emplace_back(name + "." + tname, t);
  return out;
}

std::vector<std::pair<std::string, const Module*>>
Module::namedModules() const {
  std::vector<std::pair<std::string, const Module*>> out;
  out.emplace_back("", this);
  for (const auto& [name, child] : children_)
    for (auto& [sub, m] : child->namedModules())
      out.emplace_back(sub.empty() ? name : name + "." + sub, m);
  return out;
}

Linear::Linear(int64_t inFeatures, int64_t outFeatures, bool withBias) {
  if (inFeatures <= 0 || outFeatures <= 0)
    throw Error("Linear: features must be positive, got in=" +
                std::to_string(inFeatures) +
                " out=" + std::to_string(outFeatures));
  float bound = 1.0f / std::sqrt(static_cast<float>(inFeatures));
  weight = registerParameter(
      "weight", Tensor::uniform({outFeatures, inFeatures}, -bound, bound));
  if (withBias)
    bias = registerParameter("bias",
                             Tensor::uniform({outFeatures}, -bound, bound));
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight, bias); }

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (auto& m : modules)
    push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> m) {
  registerModule(std::to_string(children().size()), std::move(m));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (auto& [name, child] : children())
    y = (*child)(y);
  return y;
}

//===--- Modules of CNNs and transformers ---===//

namespace {

void requirePositive(const char* module, const char* what, int64_t v) {
  if (v <= 0)
    throw Error(std::string(module) + ": " + what + " must be positive, got " +
                std::to_string(v));
}

void requireRank(const char* module, const Tensor& x, int64_t rank) {
  if (x.rank() != rank)
    throw Error(std::string(module) + ": expects a rank-" +
                std::to_string(rank) + " input, got " + x.describe());
}

} // namespace

Conv2d::Conv2d(int64_t inChannels, int64_t outChannels, Size2 kernel,
               Size2 stride, Size2 padding, Size2 dilation, int64_t groups,
               bool withBias)
    : stride(stride), padding(padding), dilation(dilation), groups(groups) {
  requirePositive("Conv2d", "in_channels", inChannels);
  requirePositive("Conv2d", "out_channels", outChannels);
  requirePositive("Conv2d", "groups", groups);
  for (int64_t v : {kernel.h, kernel.w, stride.h, stride.w, dilation.h,
                    dilation.w})
    requirePositive("Conv2d", "kernel, stride and dilation", v);
  if (padding.h < 0 || padding.w < 0)
    throw Error("Conv2d: padding must be >= 0");
  if (inChannels % groups || outChannels % groups)
    throw Error("Conv2d: in_channels " + std::to_string(inChannels) +
                " and out_channels " + std::to_string(outChannels) +
                " must be divisible by groups " + std::to_string(groups));
  // kaiming_uniform_(a=sqrt(5)): gain sqrt(1/3), bound gain*sqrt(3/fan_in).
  int64_t fanIn = inChannels / groups * kernel.h * kernel.w;
  float bound = 1.0f / std::sqrt(static_cast<float>(fanIn));
  weight = registerParameter(
      "weight", Tensor::uniform({outChannels, inChannels / groups, kernel.h,
                                 kernel.w},
                                -bound, bound));
  if (withBias)
    bias = registerParameter("bias",
                             Tensor::uniform({outChannels}, -bound, bound));
}

Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(x, weight, bias, stride.vec(), padding.vec(), dilation.vec(),
                groups);
}

BatchNorm2d::BatchNorm2d(int64_t numFeatures, double eps, double momentum)
    : eps(eps), momentum(momentum) {
  requirePositive("BatchNorm2d", "num_features", numFeatures);
  weight = registerParameter("weight", Tensor::full({numFeatures}, 1.0));
  bias = registerParameter("bias", Tensor::zeros({numFeatures}));
  runningMean = registerBuffer("running_mean", Tensor::zeros({numFeatures}));
  runningVar = registerBuffer("running_var", Tensor::full({numFeatures}, 1.0));
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  requireRank("BatchNorm2d", x, 4);
  if (!isTraining())
    return batchNorm(x, weight, bias, runningMean, runningVar, eps, 1);
  Tensor batchMean, batchVar;
  Tensor y = batchNormTraining(x, weight, bias, eps, 1, &batchMean, &batchVar);
  // The running statistics, as PyTorch: the unbiased variance, no gradient.
  NoGradGuard noGrad;
  if (x.numel() / x.size(1) < 2)
    throw Error("BatchNorm2d: training needs more than one value per "
                "channel, got input " +
                x.describe());
  auto [mean, var] = batchNormRunningUpdate(x, batchMean, batchVar, runningMean,
                                            runningVar, momentum);
  if (TraceHook* hook = activeTraceHook()) {
    // Traced: the update is part of the step (state in the compiled step);
    // the buffers keep their values.
    hook->assign(runningMean, mean);
    hook->assign(runningVar, var);
  } else {
    std::memcpy(runningMean.rawData(), mean.rawData(), mean.byteSize());
    std::memcpy(runningVar.rawData(), var.rawData(), var.byteSize());
  }
  return y;
}

MaxPool2d::MaxPool2d(Size2 kernel, std::optional<Size2> stride, Size2 padding,
                     Size2 dilation, bool ceilMode)
    : kernel(kernel), stride(stride.value_or(kernel)), padding(padding),
      dilation(dilation), ceilMode(ceilMode) {}

Tensor MaxPool2d::forward(const Tensor& x) {
  return maxPool2d(x, kernel.vec(), stride.vec(), padding.vec(),
                   dilation.vec(), ceilMode);
}

AvgPool2d::AvgPool2d(Size2 kernel, std::optional<Size2> stride, Size2 padding,
                     bool ceilMode, bool countIncludePad)
    : kernel(kernel), stride(stride.value_or(kernel)), padding(padding),
      ceilMode(ceilMode), countIncludePad(countIncludePad) {}

Tensor AvgPool2d::forward(const Tensor& x) {
  return avgPool2d(x, kernel.vec(), stride.vec(), padding.vec(), ceilMode,
                   countIncludePad);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Size2 outputSize) {
  if (outputSize.h != 1 || outputSize.w != 1)
    throw Error("AdaptiveAvgPool2d: only output size 1 is supported, got (" +
                std::to_string(outputSize.h) + ", " +
                std::to_string(outputSize.w) + ")");
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  if (x.rank() != 3 && x.rank() != 4)
    throw Error("AdaptiveAvgPool2d: expects [N, C, H, W] or [C, H, W], got " +
                x.describe());
  return mean(x, {-2, -1}, /*keepdim=*/true);
}

LayerNorm::LayerNorm(Shape normalizedShape, double eps)
    : normalizedShape(std::move(normalizedShape)), eps(eps) {
  if (this->normalizedShape.empty())
    throw Error("LayerNorm: normalized_shape is empty");
  for (int64_t d : this->normalizedShape)
    requirePositive("LayerNorm", "normalized_shape dims", d);
  weight =
      registerParameter("weight", Tensor::full(this->normalizedShape, 1.0));
  bias = registerParameter("bias", Tensor::zeros(this->normalizedShape));
}

Tensor LayerNorm::forward(const Tensor& x) {
  int64_t n = static_cast<int64_t>(normalizedShape.size());
  if (x.rank() < n ||
      !std::equal(normalizedShape.begin(), normalizedShape.end(),
                  x.shape().end() - n))
    throw Error("LayerNorm: input " + x.describe() + " does not end in " +
                rt::shapeString(normalizedShape));
  return layerNorm(x, weight, bias, x.rank() - n, eps);
}

Embedding::Embedding(int64_t numEmbeddings, int64_t embeddingDim) {
  requirePositive("Embedding", "num_embeddings", numEmbeddings);
  requirePositive("Embedding", "embedding_dim", embeddingDim);
  weight = registerParameter("weight",
                             Tensor::randn({numEmbeddings, embeddingDim}));
}

Tensor Embedding::forward(const Tensor& ids) { return embedding(weight, ids); }

GELU::GELU(const std::string& approximate) : tanh_(approximate == "tanh") {
  if (approximate != "none" && approximate != "tanh")
    throw Error("GELU: approximate must be 'none' or 'tanh', got '" +
                approximate + "'");
}

Dropout::Dropout(double p) : p(p) {
  if (!(p >= 0 && p <= 1))
    throw Error("Dropout: p must be in [0, 1], got " + std::to_string(p));
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, isTraining()); }

MultiheadAttention::MultiheadAttention(int64_t embedDim, int64_t numHeads,
                                       bool batchFirst, double dropout)
    : embedDim(embedDim), numHeads(numHeads), batchFirst(batchFirst),
      dropout(dropout) {
  if (!(dropout >= 0 && dropout <= 1))
    throw Error("MultiheadAttention: dropout must be in [0, 1], got " +
                std::to_string(dropout));
  requirePositive("MultiheadAttention", "embed_dim", embedDim);
  requirePositive("MultiheadAttention", "num_heads", numHeads);
  if (embedDim % numHeads)
    throw Error("MultiheadAttention: embed_dim " + std::to_string(embedDim) +
                " is not divisible by num_heads " + std::to_string(numHeads));
  // xavier_uniform_ over [3E, E]: bound sqrt(6 / (fan_in + fan_out)).
  float bound = std::sqrt(6.0f / static_cast<float>(4 * embedDim));
  inProjWeight = registerParameter(
      "in_proj_weight", Tensor::uniform({3 * embedDim, embedDim}, -bound,
                                        bound));
  inProjBias = registerParameter("in_proj_bias", Tensor::zeros({3 * embedDim}));
  outProj = registerModule("out_proj", std::make_shared<Linear>(embedDim,
                                                                embedDim));
  std::fill_n(outProj->bias.data<float>(), embedDim, 0.0f);
}

Tensor MultiheadAttention::operator()(const Tensor& q, const Tensor& k,
                                      const Tensor& v,
                                      const Tensor& attnMask) {
  ModuleScope scope(*this);
  return forward(q, k, v, attnMask);
}

Tensor MultiheadAttention::forward(const Tensor& qIn, const Tensor& kIn,
                                   const Tensor& vIn, const Tensor& attnMask) {
  for (const Tensor* t : {&qIn, &kIn, &vIn})
    if (!t->defined() || t->rank() != 3 || t->size(-1) != embedDim)
      throw Error("MultiheadAttention: q, k and v must be [" +
                  std::string(batchFirst ? "B, L" : "L, B") + ", " +
                  std::to_string(embedDim) + "], got " +
                  (t->defined() ? t->describe() : "undefined"));
  // Work batch-first: [B, L, E].
  auto toBatchFirst = [&](const Tensor& t) {
    return batchFirst ? t : transpose(t, {1, 0, 2});
  };
  Tensor q = toBatchFirst(qIn), k = toBatchFirst(kIn), v = toBatchFirst(vIn);
  int64_t b = q.size(0), l = q.size(1), s = k.size(1);
  int64_t e = embedDim, h = numHeads, dh = e / h;
  if (k.size(0) != b || v.size(0) != b || v.size(1) != s)
    throw Error("MultiheadAttention: q " + qIn.describe() + ", k " +
                kIn.describe() + " and v " + vIn.describe() +
                " do not match");
  // The q, k, v projections are row blocks of in_proj_weight / in_proj_bias.
  auto project = [&](const Tensor& x, int64_t i, int64_t len) {
    Tensor w = sliceDim(inProjWeight, 0, i * e, (i + 1) * e);
    Tensor bias = sliceDim(inProjBias, 0, i * e, (i + 1) * e);
    // [B, len, E] -> [B, len, H, Dh] -> [B, H, len, Dh]
    return transpose(reshape(linear(x, w, bias), {b, len, h, dh}),
                     {0, 2, 1, 3});
  };
  Tensor qh = project(q, 0, l), kh = project(k, 1, s), vh = project(v, 2, s);
  // PyTorch scales q before the product.
  qh = qh * (1.0 / std::sqrt(static_cast<double>(dh)));
  Tensor scores = matmul(qh, kh, false, true); // [B, H, L, S]
  if (attnMask.defined()) {
    Tensor mask = attnMask;
    if (mask.dtype() == DType::I1)
      mask = where(mask, Tensor::scalar(-INFINITY, scores.dtype()),
                   Tensor::scalar(0.0, scores.dtype()));
    if (mask.rank() == 3) // PyTorch's [B * H, L, S] form
      mask = reshape(mask, {b, h, l, s});
    scores = scores + mask;
  }
  Tensor weights = mc::dropout(softmax(scores, -1), dropout, isTraining());
  Tensor attn = matmul(weights, vh); // [B, H, L, Dh]
  Tensor out = reshape(transpose(attn, {0, 2, 1, 3}), {b, l, e});
  out = (*outProj)(out);
  return batchFirst ? out : transpose(out, {1, 0, 2});
}

TransformerEncoderLayer::TransformerEncoderLayer(
    int64_t dModel, int64_t nhead, int64_t dimFeedforward, double dropoutP,
    const std::string& activation, double layerNormEps, bool batchFirst,
    bool normFirst)
    : normFirst(normFirst), geluActivation(activation == "gelu") {
  if (activation != "relu" && activation != "gelu")
    throw Error("TransformerEncoderLayer: activation must be 'relu' or "
                "'gelu', got '" + activation + "'");
  // Registration order is PyTorch's, so stateDict() matches its state_dict.
  selfAttn = registerModule(
      "self_attn",
      std::make_shared<MultiheadAttention>(dModel, nhead, batchFirst,
                                           dropoutP));
  linear1 = registerModule("linear1",
                           std::make_shared<Linear>(dModel, dimFeedforward));
  dropout = registerModule("dropout", std::make_shared<Dropout>(dropoutP));
  linear2 = registerModule("linear2",
                           std::make_shared<Linear>(dimFeedforward, dModel));
  norm1 = registerModule("norm1",
                         std::make_shared<LayerNorm>(Shape{dModel},
                                                     layerNormEps));
  norm2 = registerModule("norm2",
                         std::make_shared<LayerNorm>(Shape{dModel},
                                                     layerNormEps));
  dropout1 = registerModule("dropout1", std::make_shared<Dropout>(dropoutP));
  dropout2 = registerModule("dropout2", std::make_shared<Dropout>(dropoutP));
}

Tensor TransformerEncoderLayer::operator()(const Tensor& src,
                                           const Tensor& srcMask) {
  ModuleScope scope(*this);
  return forward(src, srcMask);
}

Tensor TransformerEncoderLayer::selfAttention(const Tensor& x,
                                              const Tensor& mask) {
  return (*dropout1)((*selfAttn)(x, x, x, mask));
}

Tensor TransformerEncoderLayer::feedForward(const Tensor& x) {
  Tensor h = (*linear1)(x);
  h = geluActivation ? gelu(h) : relu(h);
  return (*dropout2)((*linear2)((*dropout)(h)));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src,
                                        const Tensor& srcMask) {
  Tensor x = src;
  if (normFirst) {
    x = x + selfAttention((*norm1)(x), srcMask);
    return x + feedForward((*norm2)(x));
  }
  x = (*norm1)(x + selfAttention(x, srcMask));
  return (*norm2)(x + feedForward(x));
}

} // namespace mc::nn
