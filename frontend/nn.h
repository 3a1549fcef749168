// nn modules: named parameters and submodules, as in torch.nn.
#ifndef MODELC_FRONTEND_NN_H
#define MODELC_FRONTEND_NN_H

#include "frontend/Ops.h"

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mc::nn {

class Module {
public:
  virtual ~Module();
  /// Runs forward with the module entered in the active trace (so traced
  /// ops are located by module path).
  Tensor operator()(const Tensor& x);
  virtual Tensor forward(const Tensor& x) = 0;
  /// "Linear", "Sequential", ...
  virtual std::string typeName() const = 0;

  /// Parameters of this module and all submodules, with dotted names
  /// ("0.weight", "fc1.bias"): the module's own first, then each child's
  /// (recursively), each in registration order, as torch.nn.Module does.
  std::vector<std::pair<std::string, Tensor>> namedParameters() const;
  std::vector<std::pair<std::string, const Module*>> namedModules() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>&
  children() const {
    return children_;
  }

protected:
  Tensor& registerParameter(const std::string& name, Tensor t);
  template <typename M>
  std::shared_ptr<M> registerModule(const std::string& name,
                                    std::shared_ptr<M> m) {
    addChild(name, m);
    return m;
  }

private:
  void addChild(const std::string& name, std::shared_ptr<Module> m);
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

/// y = x W^T + b, W [out, in]; initialized like PyTorch (uniform in
/// +-1/sqrt(in) for both W and b) from the default generator.
class Linear : public Module {
public:
  Linear(int64_t inFeatures, int64_t outFeatures, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string typeName() const override { return "Linear"; }
  Tensor weight, bias;
};

class ReLU : public Module {
public:
  Tensor forward(const Tensor& x) override { return relu(x); }
  std::string typeName() const override { return "ReLU"; }
};

class Tanh : public Module {
public:
  Tensor forward(const Tensor& x) override { return tanh(x); }
  std::string typeName() const override { return "Tanh"; }
};

class Sigmoid : public Module {
public:
  Tensor forward(const Tensor& x) override { return sigmoid(x); }
  std::string typeName() const override { return "Sigmoid"; }
};

class Softmax : public Module {
public:
  explicit Softmax(int64_t axis) : axis_(axis) {}
  Tensor forward(const Tensor& x) override { return softmax(x, axis_); }
  std::string typeName() const override { return "Softmax"; }

private:
  int64_t axis_;
};

/// Runs its children in order; they are named "0", "1", ...
class Sequential : public Module {
public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;
  std::string typeName() const override { return "Sequential"; }
  size_t size() const { return children().size(); }
};

} // namespace mc::nn

#endif // MODELC_FRONTEND_NN_H
