// Eager autodiff: the graph, backward(), and the derivative of every
// differentiable primitive (the mc ops), following PyTorch's formulas
// (derivatives.yaml) so gradients match torch.autograd.
#include "frontend/Autograd.h"
#include "frontend/Ops.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

namespace mc {
namespace autograd {
namespace {

thread_local bool gradEnabled = true;
std::atomic<uint64_t> nextSequence{0};

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

Tensor zerosLike(const Tensor& t) { return Tensor::zeros(t.shape(), t.dtype()); }

Tensor scalarOf(const Tensor& like, double v) {
  return Tensor::scalar(v, like.dtype());
}

/// Broadcasts `g` (reduced over `dims` without keepdim, of `reducedShape`)
/// back to `shape`.
Tensor expandReduced(const Tensor& g, const Shape& shape,
                     const std::vector<int64_t>& dims, bool keepdim) {
  Shape kept = shape;
  for (int64_t d : dims)
    kept[d] = 1;
  Tensor gk = keepdim ? g : reshape(g, kept);
  return broadcastTo(gk, shape);
}

/// d/dx of broadcast_in_dim: sum the broadcast result dims back.
Tensor unbroadcastInDim(const Tensor& g, const Shape& inputShape,
                        const std::vector<int64_t>& dims) {
  const Shape& out = g.shape();
  std::vector<bool> mapped(out.size(), false);
  std::vector<int64_t> reduce;
  for (size_t i = 0; i < dims.size(); ++i) {
    mapped[dims[i]] = true;
    if (inputShape[i] == 1 && out[dims[i]] != 1)
      reduce.push_back(dims[i]);
  }
  for (size_t d = 0; d < out.size(); ++d)
    if (!mapped[d])
      reduce.push_back(static_cast<int64_t>(d));
  std::sort(reduce.begin(), reduce.end());
  Tensor r = reduce.empty() ? g : sum(g, reduce, /*keepdim=*/true);
  // Remaining result dims in result order are dims[] sorted; the input
  // orders them by operand index, which is the same when dims increase.
  std::vector<std::pair<int64_t, int64_t>> order; // (result dim, operand dim)
  for (size_t i = 0; i < dims.size(); ++i)
    order.emplace_back(dims[i], static_cast<int64_t>(i));
  std::sort(order.begin(), order.end());
  Shape compact;
  for (auto& [rd, od] : order)
    compact.push_back(inputShape[od]);
  r = reshape(r, compact);
  bool sorted = std::is_sorted(dims.begin(), dims.end());
  if (!sorted) {
    std::vector<int64_t> perm(dims.size());
    for (size_t k = 0; k < order.size(); ++k)
      perm[order[k].second] = static_cast<int64_t>(k);
    r = transpose(r, perm);
  }
  return reshape(r, inputShape);
}

std::vector<int64_t> inversePermutation(const std::vector<int64_t>& p) {
  std::vector<int64_t> inv(p.size());
  for (size_t i = 0; i < p.size(); ++i)
    inv[p[i]] = static_cast<int64_t>(i);
  return inv;
}

Tensor maskOf(const Tensor& pred, const Tensor& like) {
  return cast(pred, like.dtype());
}

[[noreturn]] void notDifferentiable(const char* op, const char* why) {
  throw Error(std::string("autograd: ") + op + " has no derivative yet (" +
              why + ")");
}

} // namespace

bool isGradEnabled() { return gradEnabled; }
void setGradEnabled(bool enabled) { gradEnabled = enabled; }

void recordOp(const OpRecord& op) {
  if (!gradEnabled || !op.output.defined() || !isFloat(op.output.dtype()))
    return;
  bool needed = false;
  for (const Tensor& in : op.inputs)
    if (in.defined() && (in.impl()->requiresGrad || in.impl()->gradFn))
      needed = true;
  if (!needed)
    return;
  auto node = std::make_shared<GradNode>();
  node->op = op;
  node->output = op.output.implPtr();
  node->sequence = nextSequence++;
  // The node keeps its inputs alive (their values are needed), but not its
  // output (which owns the node): drop the strong reference.
  node->op.output = Tensor();
  op.output.impl()->gradFn = std::move(node);
}

std::vector<Tensor> derivative(const OpRecord& op, const Tensor& g) {
  const std::vector<Tensor>& in = op.inputs;
  auto y = [&]() -> Tensor {
    // The output's value, recomputed lazily where a rule needs it.
    Tensor out;
    switch (op.kind) {
    case OpKind::Exp:
      return exp(in[0]);
    case OpKind::Tanh:
      return tanh(in[0]);
    case OpKind::Sigmoid:
      return sigmoid(in[0]);
    case OpKind::Sqrt:
      return sqrt(in[0]);
    case OpKind::Softmax:
      return softmax(in[0], op.axis);
    case OpKind::LogSoftmax:
      return logSoftmax(in[0], op.axis);
    case OpKind::Div:
      return div(in[0], in[1]);
    case OpKind::Pow:
      return pow(in[0], in[1]);
    case OpKind::ReduceMax:
      return amax(in[0], op.ints, true);
    case OpKind::ReduceMin:
      return amin(in[0], op.ints, true);
    default:
      throw Error("autograd: internal: no output rule");
    }
  };
  switch (op.kind) {
  case OpKind::Add:
    return {g, g};
  case OpKind::Sub:
    return {g, neg(g)};
  case OpKind::Mul:
    return {mul(g, in[1]), mul(g, in[0])};
  case OpKind::Div: {
    Tensor ga = div(g, in[1]);
    return {ga, neg(mul(ga, y()))};
  }
  case OpKind::Maximum:
  case OpKind::Minimum: {
    // PyTorch: ties share the gradient equally.
    bool isMax = op.kind == OpKind::Maximum;
    Tensor wins = maskOf(isMax ? gt(in[0], in[1]) : lt(in[0], in[1]), g);
    Tensor ties = maskOf(eq(in[0], in[1]), g);
    Tensor half = mul(ties, scalarOf(g, 0.5));
    Tensor loses = maskOf(isMax ? lt(in[0], in[1]) : gt(in[0], in[1]), g);
    return {mul(g, add(wins, half)), mul(g, add(loses, half))};
  }
  case OpKind::Neg:
    return {neg(g)};
  case OpKind::Exp:
    return {mul(g, y())};
  case OpKind::Log:
    return {div(g, in[0])};
  case OpKind::Tanh: {
    Tensor t = y();
    return {mul(g, sub(scalarOf(g, 1.0), mul(t, t)))};
  }
  case OpKind::Sigmoid: {
    Tensor s = y();
    return {mul(g, mul(s, sub(scalarOf(g, 1.0), s)))};
  }
  case OpKind::Relu:
    // threshold_backward: the gradient flows where the input is > 0.
    return {mul(g, maskOf(gt(in[0], zerosLike(in[0])), g))};
  case OpKind::Sqrt:
    return {div(g, mul(y(), scalarOf(g, 2.0)))};
  case OpKind::Abs: {
    Tensor zero = zerosLike(in[0]);
    Tensor sign = sub(maskOf(gt(in[0], zero), g), maskOf(lt(in[0], zero), g));
    return {mul(g, sign)};
  }
  case OpKind::Erf: {
    const double k = 2.0 / std::sqrt(M_PI);
    return {mul(g, mul(exp(neg(mul(in[0], in[0]))), scalarOf(g, k)))};
  }
  case OpKind::Gelu: {
    const Tensor& x = in[0];
    if (!op.tanhApproximation) {
      // d/dx x*Phi(x) = Phi(x) + x*phi(x).
      Tensor cdf = mul(add(erf(mul(x, scalarOf(x, M_SQRT1_2))),
                           scalarOf(x, 1.0)),
                       scalarOf(x, 0.5));
      Tensor pdf = mul(exp(mul(mul(x, x), scalarOf(x, -0.5))),
                       scalarOf(x, 0.5 * M_2_SQRTPI * M_SQRT1_2));
      return {mul(g, add(cdf, mul(x, pdf)))};
    }
    // PyTorch's tanh-form gelu_backward.
    const double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715;
    Tensor x3 = mul(mul(x, x), x);
    Tensor inner = mul(add(x, mul(x3, scalarOf(x, kKappa))),
                       scalarOf(x, kBeta));
    Tensor t = tanh(inner);
    Tensor left = mul(x, scalarOf(x, 0.5));
    Tensor right = add(t, scalarOf(x, 1.0));
    Tensor leftDer = mul(right, scalarOf(x, 0.5));
    Tensor tanhDer = sub(scalarOf(x, 1.0), mul(t, t));
    Tensor innerDer = mul(add(scalarOf(x, 1.0),
                              mul(mul(x, x), scalarOf(x, 3 * kKappa))),
                          scalarOf(x, kBeta));
    Tensor rightDer = mul(mul(left, tanhDer), innerDer);
    return {mul(g, add(leftDer, rightDer))};
  }
  case OpKind::Pow: {
    const Tensor& a = in[0];
    const Tensor& b = in[1];
    Tensor ga = mul(g, mul(b, pow(a, sub(b, scalarOf(b, 1.0)))));
    // d/db a^b = a^b * log(a); where a == 0 it is taken as 0 (PyTorch does
    // so for b >= 0; for b < 0 the true value is infinite anyway).
    Tensor zero = zerosLike(a);
    Tensor safeA = where(eq(a, zero), add(zero, scalarOf(a, 1.0)), a);
    Tensor gb = mul(mul(g, y()), log(safeA));
    return {ga, gb};
  }
  case OpKind::Clamp: {
    Tensor lo = Tensor::full(in[0].shape(), op.minValue, in[0].dtype());
    Tensor hi = Tensor::full(in[0].shape(), op.maxValue, in[0].dtype());
    Tensor inside = mul(maskOf(ge(in[0], lo), g), maskOf(le(in[0], hi), g));
    return {mul(g, inside)};
  }
  case OpKind::Cast:
    if (!isFloat(in[0].dtype()))
      return {Tensor()};
    return {cast(g, in[0].dtype())};
  case OpKind::BroadcastInDim:
    return {unbroadcastInDim(g, in[0].shape(), op.ints)};
  case OpKind::Reshape:
    return {reshape(g, in[0].shape())};
  case OpKind::Transpose:
    return {transpose(g, inversePermutation(op.ints))};
  case OpKind::ReduceSum:
    return {expandReduced(g, in[0].shape(), op.ints, op.keepdim)};
  case OpKind::ReduceMean: {
    int64_t n = 1;
    for (int64_t d : op.ints)
      n *= in[0].shape()[d];
    return {div(expandReduced(g, in[0].shape(), op.ints, op.keepdim),
                scalarOf(g, static_cast<double>(n)))};
  }
  case OpKind::ReduceMax:
  case OpKind::ReduceMin: {
    // amax/amin: the gradient is shared evenly among the extreme elements.
    Tensor extreme = broadcastTo(y(), in[0].shape());
    Tensor mask = maskOf(eq(in[0], extreme), g);
    Tensor count = expandReduced(sum(mask, op.ints, true), in[0].shape(),
                                 op.ints, true);
    Tensor gb = expandReduced(g, in[0].shape(), op.ints, op.keepdim);
    return {div(mul(gb, mask), count)};
  }
  case OpKind::Softmax: {
    Tensor s = y();
    Tensor dot = sum(mul(g, s), {op.axis}, true);
    return {mul(s, sub(g, dot))};
  }
  case OpKind::LogSoftmax: {
    Tensor total = sum(g, {op.axis}, true);
    return {sub(g, mul(exp(y()), total))};
  }
  case OpKind::Matmul: {
    const Tensor& a = in[0];
    const Tensor& b = in[1];
    Tensor ga = op.transposeA ? matmul(b, g, op.transposeB, true)
                              : matmul(g, b, false, !op.transposeB);
    Tensor gb = op.transposeB ? matmul(g, a, true, op.transposeA)
                              : matmul(a, g, !op.transposeA, false);
    return {ga, gb};
  }
  case OpKind::Select:
    return {Tensor(), where(in[0], g, zerosLike(g)),
            where(in[0], zerosLike(g), g)};
  case OpKind::Concat: {
    std::vector<Tensor> grads;
    int64_t offset = 0;
    for (const Tensor& t : in) {
      int64_t n = t.shape()[op.axis];
      grads.push_back(sliceDim(g, op.axis, offset, offset + n));
      offset += n;
    }
    return grads;
  }
  case OpKind::Slice: {
    std::vector<int64_t> low, high;
    for (size_t d = 0; d < op.start.size(); ++d) {
      if (op.strides[d] != 1 && g.shape()[d] > 1)
        notDifferentiable("slice", "strides other than 1");
      low.push_back(op.start[d]);
      high.push_back(in[0].shape()[d] - op.start[d] - g.shape()[d]);
    }
    return {pad(g, low, high, 0.0)};
  }
  case OpKind::Pad: {
    std::vector<int64_t> ones(in[0].rank(), 1);
    return {slice(g, op.low, in[0].shape(), ones)};
  }
  case OpKind::LayerNorm: {
    // x_hat = (x - mean) * rstd; y = x_hat * gamma + beta.
    const Tensor& x = in[0];
    std::vector<int64_t> norm, lead;
    for (int64_t d = op.axis; d < x.rank(); ++d)
      norm.push_back(d);
    for (int64_t d = 0; d < op.axis; ++d)
      lead.push_back(d);
    Tensor mu = mean(x, norm, true);
    Tensor xc = sub(x, mu);
    Tensor var = mean(mul(xc, xc), norm, true);
    Tensor rstd = div(scalarOf(x, 1.0),
                      sqrt(add(var, scalarOf(x, op.epsilon))));
    Tensor xhat = mul(xc, rstd);
    Tensor gxhat = mul(g, in[1]);
    Tensor term = sub(sub(gxhat, mean(gxhat, norm, true)),
                      mul(xhat, mean(mul(gxhat, xhat), norm, true)));
    Tensor gx = mul(term, rstd);
    Tensor ggamma = lead.empty() ? mul(g, xhat) : sum(mul(g, xhat), lead);
    Tensor gbeta = lead.empty() ? g : sum(g, lead);
    return {gx, ggamma, gbeta};
  }
  case OpKind::Compare:
  case OpKind::Not:
    return std::vector<Tensor>(in.size());
  case OpKind::Gather: {
    // A scatter-add as a matmul with the one-hot matrix of the indices
    // (the same rule as the compiler's, ir/MCGradients.cpp).
    const Tensor& data = in[0];
    const Tensor& idx = in[1];
    const Shape& d = data.shape();
    int64_t axis = op.axis, size = d[axis], k = idx.numel();
    int64_t pre = 1, post = 1;
    for (int64_t i = 0; i < axis; ++i)
      pre *= d[i];
    for (int64_t i = axis + 1; i < data.rank(); ++i)
      post *= d[i];
    Tensor column = reshape(idx, {k, 1});
    Tensor zero = Tensor::zeros({k, 1}, idx.dtype());
    Tensor sizes = Tensor::full({k, 1}, static_cast<double>(size), idx.dtype());
    column = where(lt(column, zero), add(column, sizes), column);
    Tensor classes = Tensor::empty({1, size}, idx.dtype());
    for (int64_t c = 0; c < size; ++c) {
      if (idx.dtype() == DType::I64)
        classes.data<int64_t>()[c] = c;
      else
        classes.data<int32_t>()[c] = static_cast<int32_t>(c);
    }
    Tensor oneHot = cast(eq(column, classes), g.dtype());
    Tensor g2 = reshape(transpose(reshape(g, {pre, k, post}), {0, 2, 1}),
                        {pre * post, k});
    Tensor r = matmul(g2, oneHot);
    Tensor back = transpose(reshape(r, {pre, post, size}), {0, 2, 1});
    return {reshape(back, d), Tensor()};
  }
  case OpKind::Conv2d:
    notDifferentiable("conv2d", "convolution backward kernels are needed");
  case OpKind::MaxPool2d:
  case OpKind::AvgPool2d:
    notDifferentiable("pooling", "pooling backward kernels are needed");
  case OpKind::BatchNorm:
    notDifferentiable("batch_norm", "only the inference form exists");
  }
  throw Error("autograd: unknown op kind");
}

void backward(const Tensor& root, const Tensor& seed) {
  if (!root.defined())
    throw Error("backward: undefined tensor");
  if (!root.impl()->gradFn && !root.impl()->requiresGrad)
    throw Error("backward: the tensor does not require grad and has no "
                "grad_fn (no parameter it depends on requires grad)");
  NoGradGuard noGrad; // the backward pass itself is not differentiated
  // Gradients per tensor, processed in reverse creation order (a valid
  // reverse topological order: a node is created after its inputs').
  std::unordered_map<const TensorImpl*, Tensor> grads;
  std::map<uint64_t, std::shared_ptr<TensorImpl>, std::greater<uint64_t>> queue;
  auto accumulate = [&](const std::shared_ptr<TensorImpl>& t, const Tensor& g) {
    auto [it, inserted] = grads.emplace(t.get(), g);
    if (!inserted)
      it->second = add(it->second, g);
    if (t->gradFn)
      queue.emplace(t->gradFn->sequence, t);
  };
  accumulate(root.implPtr(), seed);
  std::vector<std::pair<std::shared_ptr<TensorImpl>, Tensor>> leaves;
  std::set<const TensorImpl*> leafSeen;
  auto leafGrad = [&](const std::shared_ptr<TensorImpl>& t, const Tensor& g) {
    if (leafSeen.insert(t.get()).second)
      leaves.emplace_back(t, g);
    else
      for (auto& [lt, lg] : leaves)
        if (lt == t)
          lg = add(lg, g);
  };
  if (!root.impl()->gradFn)
    leafGrad(root.implPtr(), seed);
  while (!queue.empty()) {
    auto it = queue.begin();
    std::shared_ptr<TensorImpl> t = it->second;
    queue.erase(it);
    Tensor g = grads[t.get()];
    const GradNode& node = *t->gradFn;
    std::vector<Tensor> inGrads = derivative(node.op, g);
    for (size_t i = 0; i < node.op.inputs.size(); ++i) {
      const Tensor& input = node.op.inputs[i];
      if (i >= inGrads.size() || !inGrads[i].defined() || !input.defined())
        continue;
      const auto& impl = input.implPtr();
      if (impl->gradFn)
        accumulate(impl, inGrads[i]);
      else if (impl->requiresGrad)
        leafGrad(impl, inGrads[i]);
    }
  }
  for (auto& [leaf, g] : leaves) {
    if (!leaf->grad) {
      leaf->grad = g.clone().implPtr();
    } else {
      Tensor sumG = add(Tensor(leaf->grad), g);
      leaf->grad = sumG.implPtr();
    }
  }
}

} // namespace autograd

Tensor& Tensor::setRequiresGrad(bool requires) {
  if (!defined())
    throw Error("setRequiresGrad: undefined tensor");
  if (requires && !(dtype() == DType::F32 || dtype() == DType::F16 ||
                    dtype() == DType::BF16))
    throw Error("only floating-point tensors can require grad, got " +
                describe());
  impl_->requiresGrad = requires;
  return *this;
}

bool Tensor::requiresGrad() const {
  return defined() && (impl_->requiresGrad || impl_->gradFn);
}

Tensor Tensor::grad() const {
  if (!defined() || !impl_->grad)
    return Tensor();
  return Tensor(impl_->grad);
}

void Tensor::zeroGrad() {
  if (defined())
    impl_->grad.reset();
}

void Tensor::backward() const {
  if (!defined())
    throw Error("backward: undefined tensor");
  if (numel() != 1)
    throw Error("backward: the tensor must be a scalar (one element), got " +
                describe() + "; reduce it first (sum or mean)");
  autograd::backward(*this, Tensor::full(shape(), 1.0, dtype()));
}

Tensor Tensor::detach() const {
  if (!defined())
    return Tensor();
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = impl_->dtype;
  impl->shape = impl_->shape;
  impl->storage = impl_->storage;
  return Tensor(std::move(impl));
}

} // namespace mc
