// Eager reverse-mode autodiff, PyTorch-style: ops on tensors that require
// grad build a graph of GradNodes; Tensor::backward() walks it. Derivatives
// (ir/DerivativeRules.h) run as frontend ops, so a backward pass is itself
// traceable.
#ifndef MODELC_FRONTEND_AUTOGRAD_H
#define MODELC_FRONTEND_AUTOGRAD_H

#include "frontend/TraceHook.h"

#include <memory>
#include <vector>

namespace mc {

/// How one output was computed: the op (kind, attributes, inputs) whose
/// derivative rule backward() applies.
struct GradNode {
  OpRecord op;
  /// The output, weakly (the output owns the node).
  std::weak_ptr<TensorImpl> output;
  /// Topological order: nodes made later have larger numbers.
  uint64_t sequence = 0;
};

namespace autograd {

bool isGradEnabled();
void setGradEnabled(bool enabled);

/// Called by every eager op: links the output to a GradNode when grad mode
/// is on and an input requires grad.
void recordOp(const OpRecord& op);

/// Gradients of `op.inputs` given its output and the output's gradient
/// (undefined entries for inputs that get none, e.g. indices): the op's
/// rule in ir/DerivativeRules.h, on Tensors.
std::vector<Tensor> derivative(const OpRecord& op, const Tensor& output,
                               const Tensor& gradOutput);

/// Runs backward from `root` with `seed` as its gradient.
void backward(const Tensor& root, const Tensor& seed);

} // namespace autograd

/// Disables graph building in its scope (like torch.no_grad()).
class NoGradGuard {
public:
  NoGradGuard() : previous_(autograd::isGradEnabled()) {
    autograd::setGradEnabled(false);
  }
  ~NoGradGuard() { autograd::setGradEnabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

private:
  bool previous_;
};

} // namespace mc

#endif // MODELC_FRONTEND_AUTOGRAD_H
