// Optimizers (see Optim.h).
#include "frontend/Optim.h"
#include "frontend/Autograd.h"
#include "frontend/Ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace mc::optim {

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  for (const Tensor& p : params_)
    if (!p.defined() || !p.impl()->requiresGrad)
      throw Error("optimizer: every parameter must be a leaf that requires "
                  "grad (call setRequiresGrad())");
}

Optimizer::~Optimizer() = default;

void Optimizer::zeroGrad() {
  for (Tensor& p : params_)
    p.zeroGrad();
}

void Optimizer::excludeFromWeightDecay(const Tensor& p) {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].impl() == p.impl()) {
      noDecay_.resize(params_.size(), false);
      noDecay_[i] = true;
      return;
    }
  throw Error("excludeFromWeightDecay: " + p.describe() +
              " is not a parameter of this optimizer");
}

void Optimizer::assign(Tensor& param, const Tensor& value) {
  if (value.shape() != param.shape() || value.dtype() != param.dtype())
    throw Error("optimizer: update of " + param.describe() + " has type " +
                value.describe());
  std::memcpy(param.rawData(), value.rawData(), param.byteSize());
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params)), options_(options),
      momentum_(params_.size()) {
  if (options_.lr < 0 || options_.momentum < 0 || options_.weightDecay < 0)
    throw Error("SGD: lr, momentum and weight decay must be >= 0");
  if (options_.nesterov && (options_.momentum <= 0 || options_.dampening != 0))
    throw Error("SGD: nesterov needs momentum > 0 and dampening 0");
}

void SGD::step() {
  NoGradGuard noGrad;
  ++steps_;
  const SGDOptions& o = options_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor d = p.grad();
    if (!d.defined())
      continue;
    double decay = decayOf(i, o.weightDecay);
    if (decay != 0)
      d = add(d, mul(p, Tensor::scalar(decay, p.dtype())));
    if (o.momentum != 0) {
      Tensor& buf = momentum_[i];
      if (!buf.defined()) {
        buf = d.clone();
      } else {
        // One traced op per statement: C++ leaves the order of a call's
        // arguments open, and a trace must not depend on the compiler.
        Tensor kept = mul(buf, Tensor::scalar(o.momentum, p.dtype()));
        Tensor added = mul(d, Tensor::scalar(1 - o.dampening, p.dtype()));
        buf = add(kept, added);
      }
      d = o.nesterov ? add(d, mul(buf, Tensor::scalar(o.momentum, p.dtype())))
                     : buf;
    }
    assign(p, sub(p, mul(d, Tensor::scalar(o.lr, p.dtype()))));
  }
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : AdamW(std::move(params), options, /*decoupled=*/true) {}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options, bool decoupled)
    : Optimizer(std::move(params)), options_(options), decoupled_(decoupled),
      expAvg_(params_.size()), expAvgSq_(params_.size()) {
  if (options_.lr < 0 || options_.eps < 0 || options_.weightDecay < 0 ||
      options_.beta1 < 0 || options_.beta1 >= 1 || options_.beta2 < 0 ||
      options_.beta2 >= 1)
    throw Error(std::string(decoupled ? "AdamW" : "Adam") +
                ": needs lr, eps, weight decay >= 0 and betas in [0, 1)");
}

Adam::Adam(std::vector<Tensor> params, AdamOptions o)
    : AdamW(std::move(params), {o.lr, o.beta1, o.beta2, o.eps, o.weightDecay},
            /*decoupled=*/false) {}

void AdamW::step() {
  NoGradGuard noGrad;
  ++steps_;
  const AdamWOptions& o = options_;
  double bc1 = 1 - std::pow(o.beta1, static_cast<double>(steps_));
  double bc2 = 1 - std::pow(o.beta2, static_cast<double>(steps_));
  double stepSize = o.lr / bc1;
  double bc2Sqrt = std::sqrt(bc2);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined())
      continue;
    auto s = [&](double v) { return Tensor::scalar(v, p.dtype()); };
    double decay = decayOf(i, o.weightDecay);
    Tensor decayed = p;
    if (decoupled_)
      decayed = mul(p, s(1 - o.lr * decay));
    else if (decay != 0)
      g = add(g, mul(p, s(decay)));
    Tensor& m = expAvg_[i];
    Tensor& v = expAvgSq_[i];
    if (!m.defined()) {
      m = Tensor::zeros(p.shape(), p.dtype());
      v = Tensor::zeros(p.shape(), p.dtype());
    }
    Tensor mKept = mul(m, s(o.beta1)); // (one traced op per statement)
    Tensor mAdded = mul(g, s(1 - o.beta1));
    m = add(mKept, mAdded);
    Tensor vKept = mul(v, s(o.beta2));
    Tensor vAdded = mul(mul(g, g), s(1 - o.beta2));
    v = add(vKept, vAdded);
    Tensor denom = add(div(sqrt(v), s(bc2Sqrt)), s(o.eps));
    assign(p, sub(decayed, mul(div(m, denom), s(stepSize))));
  }
}

double scheduleFactor(const ScheduleOptions& o, int64_t t) {
  if (o.kind != "constant" && o.kind != "linear" && o.kind != "cosine")
    throw Error("lr schedule: unknown kind '" + o.kind +
                "' (expected constant, linear or cosine)");
  // The compiled step's checks (mc-optimizer), so a schedule that trains
  // eagerly compiles too.
  const int64_t maxSteps = int64_t(1) << 24;
  if (o.warmupSteps < 0 || o.warmupSteps > maxSteps || o.totalSteps < 0 ||
      o.totalSteps > maxSteps)
    throw Error("lr schedule: warmup steps " + std::to_string(o.warmupSteps) +
                " and total steps " + std::to_string(o.totalSteps) +
                " must be in [0, 2^24]");
  if (o.kind != "constant" && o.totalSteps <= o.warmupSteps)
    throw Error("lr schedule: " + o.kind + " needs total steps (" +
                std::to_string(o.totalSteps) + ") greater than warmup steps (" +
                std::to_string(o.warmupSteps) + ")");
  if (o.kind == "constant" && o.totalSteps != 0)
    throw Error("lr schedule: total steps have no effect with a constant "
                "rate (use linear or cosine)");
  double w = double(o.warmupSteps), total = double(o.totalSteps), s = double(t);
  if (s < w)
    return s / std::max(1.0, w);
  if (o.kind == "constant")
    return 1.0;
  double span = std::max(1.0, total - w);
  if (o.kind == "linear")
    return std::max(0.0, (total - s) / span);
  return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * (s - w) / span)));
}

LRScheduler::LRScheduler(Optimizer& optimizer, ScheduleOptions options)
    : optimizer_(optimizer), options_(std::move(options)),
      baseLr_(optimizer.lr()) {
  optimizer_.setLr(baseLr_ * scheduleFactor(options_, 0));
}

void LRScheduler::step() {
  ++steps_;
  optimizer_.setLr(baseLr_ * scheduleFactor(options_, steps_));
}

Tensor clipGradNorm(const std::vector<Tensor>& params, double maxNorm) {
  if (!(maxNorm > 0) || !std::isfinite(maxNorm))
    throw Error("clipGradNorm: maxNorm must be finite and > 0, got " +
                std::to_string(maxNorm));
  NoGradGuard noGrad;
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (Tensor g = p.grad(); g.defined())
      grads.push_back(g);
  Tensor total;
  for (const Tensor& g : grads) {
    if (g.dtype() != DType::F32)
      throw Error("clipGradNorm: gradients must be f32, got " + g.describe());
    std::vector<int64_t> all;
    for (int64_t d = 0; d < g.rank(); ++d)
      all.push_back(d);
    Tensor squares = mul(g, g);
    Tensor s = all.empty() ? squares : sum(squares, all);
    total = total.defined() ? add(total, s) : s;
  }
  if (!total.defined())
    return Tensor::scalar(0.0);
  Tensor norm = sqrt(total);
  Tensor padded = add(norm, Tensor::scalar(1e-6));
  Tensor coef = div(Tensor::scalar(maxNorm), padded);
  Tensor clamped = minimum(coef, Tensor::scalar(1.0));
  for (Tensor& g : grads) {
    Tensor scaled = mul(g, clamped);
    std::memcpy(g.rawData(), scaled.rawData(), g.byteSize());
  }
  return norm;
}

} // namespace mc::optim
