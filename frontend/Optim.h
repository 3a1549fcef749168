// Optimizers with PyTorch's update formulas (torch.optim.SGD, Adam, AdamW; the
// single-tensor code path of torch 1.13). Updates write into the
// parameters' storage, so modules keep seeing their parameters.
#ifndef MODELC_FRONTEND_OPTIM_H
#define MODELC_FRONTEND_OPTIM_H

#include "frontend/Tensor.h"

#include <string>
#include <vector>

namespace mc::optim {

class Optimizer {
public:
  explicit Optimizer(std::vector<Tensor> params);
  virtual ~Optimizer();
  /// One update from the parameters' current grad() (those without a grad
  /// are skipped, as in PyTorch).
  virtual void step() = 0;
  void zeroGrad();
  /// Gives parameter `p` (one of params()) no weight decay, as a PyTorch
  /// parameter group with weight_decay 0 (biases and norms, in Hugging
  /// Face's recipe); --no-weight-decay in a compiled step.
  void excludeFromWeightDecay(const Tensor& p);
  /// The learning rate the next step() uses (an LRScheduler sets it).
  virtual double lr() const = 0;
  virtual void setLr(double lr) = 0;
  const std::vector<Tensor>& params() const { return params_; }
  int64_t stepCount() const { return steps_; }

protected:
  /// Writes `value` into `param`'s storage.
  static void assign(Tensor& param, const Tensor& value);
  /// Weight decay for parameter i: `decay`, or 0 if excluded.
  double decayOf(size_t i, double decay) const {
    return noDecay_.empty() || !noDecay_[i] ? decay : 0.0;
  }
  std::vector<Tensor> params_;
  std::vector<bool> noDecay_;
  int64_t steps_ = 0;
};

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0;
  double dampening = 0;
  double weightDecay = 0;
  bool nesterov = false;
};

class SGD : public Optimizer {
public:
  double lr() const override { return options_.lr; }
  void setLr(double lr) override { options_.lr = lr; }
  SGD(std::vector<Tensor> params, SGDOptions options);
  void step() override;
  const SGDOptions& options() const { return options_; }

private:
  SGDOptions options_;
  std::vector<Tensor> momentum_; // undefined until the first step
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 1e-2;
};

class AdamW : public Optimizer {
public:
  double lr() const override { return options_.lr; }
  void setLr(double lr) override { options_.lr = lr; }
  AdamW(std::vector<Tensor> params, AdamWOptions options);
  void step() override;
  const AdamWOptions& options() const { return options_; }

protected:
  /// decoupled: AdamW's decay (w * (1 - lr * wd)); else Adam's L2 term
  /// added to the gradient (g + wd * w) before the moments.
  AdamW(std::vector<Tensor> params, AdamWOptions options, bool decoupled);

private:
  AdamWOptions options_;
  bool decoupled_ = true;
  std::vector<Tensor> expAvg_, expAvgSq_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0; // torch.optim.Adam's default
};

/// torch.optim.Adam: AdamW's moments and bias corrections, with weight
/// decay as an L2 term on the gradient (`--optimizer=adam`).
class Adam : public AdamW {
public:
  Adam(std::vector<Tensor> params, AdamOptions options);
};

/// The learning rate over the steps, as Hugging Face's
/// get_{constant,linear,cosine}_schedule_with_warmup (LambdaLR): the rate
/// of step t (the steps taken before it, from 0) is the base rate times
/// t / max(1, warmup) while t < warmup, then 1 (constant),
/// max(0, (total - t) / max(1, total - warmup)) (linear), or
/// max(0, (1 + cos(pi * p)) / 2), p = (t - warmup) / max(1, total -
/// warmup) (cosine; it rises again after total, as theirs does). A
/// compiled step with --lr-schedule computes the same in f32.
struct ScheduleOptions {
  std::string kind = "constant"; // constant, linear or cosine
  int64_t warmupSteps = 0, totalSteps = 0;
};
/// The factor of step t; throws mc::Error for options the compiled step
/// refuses too (an unknown kind, linear or cosine without total > warmup).
double scheduleFactor(const ScheduleOptions& options, int64_t t);

/// torch.optim.lr_scheduler.LambdaLR with a ScheduleOptions factor: sets
/// the optimizer's rate for its next step at construction (step 0) and at
/// each step(), called after the optimizer's.
class LRScheduler {
public:
  LRScheduler(Optimizer& optimizer, ScheduleOptions options);
  void step();
  double lastLr() const { return optimizer_.lr(); }

private:
  Optimizer& optimizer_;
  ScheduleOptions options_;
  double baseLr_;
  int64_t steps_ = 0;
};

/// torch.nn.utils.clip_grad_norm_ (L2): scales the gradients of `params`
/// in place by min(1, maxNorm / (norm + 1e-6)) and returns `norm`, the L2
/// norm of all of them together (f32 scalar), computed as a compiled step
/// with --max-grad-norm computes it (the sum of each gradient's sum of
/// squares, in order), so the two agree up to the order of the sums'
/// terms; PyTorch's norm of the per-parameter norms differs by f32
/// rounding too. Parameters without a
/// gradient are skipped; maxNorm must be > 0.
Tensor clipGradNorm(const std::vector<Tensor>& params, double maxNorm);

} // namespace mc::optim

#endif // MODELC_FRONTEND_OPTIM_H
