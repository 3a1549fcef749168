// Optimizers with PyTorch's update formulas (torch.optim.SGD, AdamW; the
// single-tensor code path of torch 1.13). Updates write into the
// parameters' storage, so modules keep seeing their parameters.
#ifndef MODELC_FRONTEND_OPTIM_H
#define MODELC_FRONTEND_OPTIM_H

#include "frontend/Tensor.h"

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
  const std::vector<Tensor>& params() const { return params_; }
  int64_t stepCount() const { return steps_; }

protected:
  /// Writes `value` into `param`'s storage.
  static void assign(Tensor& param, const Tensor& value);
  std::vector<Tensor> params_;
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
  AdamW(std::vector<Tensor> params, AdamWOptions options);
  void step() override;
  const AdamWOptions& options() const { return options_; }

private:
  AdamWOptions options_;
  std::vector<Tensor> expAvg_, expAvgSq_;
};

} // namespace mc::optim

#endif // MODELC_FRONTEND_OPTIM_H
