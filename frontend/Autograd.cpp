// Eager autodiff: the graph and backward(). The derivative of each op is
// its rule in ir/DerivativeRules.h (shared with mc-autodiff), applied here
// to Tensors through eager ops.
#include "frontend/Autograd.h"
#include "frontend/Ops.h"
#include "ir/DerivativeRules.h"

#include <atomic>
#include <map>
#include <set>
#include <unordered_map>

namespace mc {
namespace autograd {
namespace {

thread_local bool gradEnabled = true;
std::atomic<uint64_t> nextSequence{0};

/// The builder of ir/DerivativeRules.h over eager ops: a rule's backward
/// runs on the runtime's kernels (and is traced like any eager code).
struct EagerBuilder {
  using Value = Tensor;
  using Dims = derivatives::Dims;

  Dims shape(const Tensor& t) { return t.shape(); }
  bool isFloat(const Tensor& t) { return rt::isFloat(t.dtype()); }

  Tensor add(const Tensor& x, const Tensor& y) { return mc::add(x, y); }
  Tensor sub(const Tensor& x, const Tensor& y) { return mc::sub(x, y); }
  Tensor mul(const Tensor& x, const Tensor& y) { return mc::mul(x, y); }
  Tensor div(const Tensor& x, const Tensor& y) { return mc::div(x, y); }
  Tensor pow(const Tensor& x, const Tensor& y) { return mc::pow(x, y); }
  Tensor neg(const Tensor& x) { return mc::neg(x); }
  Tensor exp(const Tensor& x) { return mc::exp(x); }
  Tensor log(const Tensor& x) { return mc::log(x); }
  Tensor sqrt(const Tensor& x) { return mc::sqrt(x); }
  Tensor tanh(const Tensor& x) { return mc::tanh(x); }
  Tensor erf(const Tensor& x) { return mc::erf(x); }
  Tensor sin(const Tensor& x) { return mc::sin(x); }
  Tensor cos(const Tensor& x) { return mc::cos(x); }
  Tensor sinh(const Tensor& x) { return mc::sinh(x); }
  Tensor cosh(const Tensor& x) { return mc::cosh(x); }

  /// A rank-0 scalar: eager binary ops broadcast it.
  Tensor splatLike(const Tensor& like, double v) {
    return Tensor::scalar(v, like.dtype());
  }
  /// Eager shapes are concrete: no rule asks for a symbolic batch here.
  Tensor batchCount(const Tensor& like) {
    throw Error("autograd: eager tensors have no symbolic batch");
  }
  Tensor constant(const Tensor& like, const Dims& shape,
                  const std::vector<double>& values) {
    std::vector<float> f(values.begin(), values.end());
    Tensor t = Tensor::fromVector(f, shape);
    return like.dtype() == DType::F32 ? t : mc::cast(t, like.dtype());
  }
  /// Integers of `like`'s dtype (i64 without one).
  Tensor intConstant(const Tensor& like, const Dims& shape,
                     const Dims& values) {
    DType dt = like.defined() ? like.dtype() : DType::I64;
    Tensor t = Tensor::empty(shape, dt);
    for (size_t i = 0; i < values.size(); ++i) {
      if (dt == DType::I64)
        t.data<int64_t>()[i] = values[i];
      else
        t.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
    }
    return t;
  }

  Tensor compare(derivatives::Cmp dir, const Tensor& x, const Tensor& y) {
    switch (dir) {
    case derivatives::Cmp::Eq:
      return eq(x, y);
    case derivatives::Cmp::Ne:
      return ne(x, y);
    case derivatives::Cmp::Lt:
      return lt(x, y);
    case derivatives::Cmp::Le:
      return le(x, y);
    case derivatives::Cmp::Gt:
      return gt(x, y);
    case derivatives::Cmp::Ge:
      return ge(x, y);
    }
    throw Error("autograd: unknown comparison");
  }
  Tensor select(const Tensor& pred, const Tensor& x, const Tensor& y) {
    return where(pred, x, y);
  }
  Tensor castLike(const Tensor& x, const Tensor& like) {
    return x.dtype() == like.dtype() ? x : mc::cast(x, like.dtype());
  }

  Tensor reshape(const Tensor& x, const Dims& shape) {
    return x.shape() == shape ? x : mc::reshape(x, shape);
  }
  Tensor broadcastInDim(const Tensor& x, const Dims& shape, const Dims& dims) {
    return mc::broadcastInDim(x, shape, dims);
  }
  Tensor transpose(const Tensor& x, const Dims& perm) {
    return mc::transpose(x, perm);
  }
  Tensor reduceSum(const Tensor& x, const Dims& dims, bool keepdim) {
    return sum(x, dims, keepdim);
  }
  Tensor reduceMean(const Tensor& x, const Dims& dims, bool keepdim) {
    return mean(x, dims, keepdim);
  }
  Tensor matmul(const Tensor& x, const Tensor& y, bool ta, bool tb) {
    return mc::matmul(x, y, ta, tb);
  }
  Tensor slice(const Tensor& x, const Dims& start, const Dims& limit,
               const Dims& strides) {
    Dims count;
    for (size_t d = 0; d < start.size(); ++d)
      count.push_back((limit[d] - start[d] + strides[d] - 1) / strides[d]);
    return mc::slice(x, start, count, strides);
  }
  Tensor pad(const Tensor& x, const Dims& low, const Dims& high, double v) {
    return mc::pad(x, low, high, v);
  }
  Tensor conv2d(const Tensor& x, const Tensor& w, const Dims& strides,
                const Dims& padding, const Dims& dilation, int64_t groups) {
    return mc::conv2d(x, w, Tensor(), strides, padding, dilation, groups);
  }
  Tensor gather(const Tensor& x, const Tensor& indices, int64_t axis) {
    return mc::gather(x, indices, axis);
  }
  Tensor scatterAdd(const Tensor& g, const Tensor& indices, int64_t axis,
                    int64_t size) {
    // mc::scatterAdd sums in f32: a low-precision gradient goes through it.
    Tensor f32 = g.dtype() == DType::F32 ? g : mc::cast(g, DType::F32);
    return castLike(mc::scatterAdd(f32, indices, axis, size), g);
  }
  Tensor dropout(const Tensor& x, const Tensor& seed, const Tensor& offset,
                 double p) {
    return mc::dropout(x, seed, offset, p);
  }
};

} // namespace

bool isGradEnabled() { return gradEnabled; }
void setGradEnabled(bool enabled) { gradEnabled = enabled; }

void recordOp(const OpRecord& op) {
  if (!gradEnabled || !op.output.defined() || !rt::isFloat(op.output.dtype()))
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

std::vector<Tensor> derivative(const OpRecord& op, const Tensor& y,
                               const Tensor& g) {
  namespace rules = derivatives;
  const std::vector<Tensor>& in = op.inputs;
  EagerBuilder e;
  // The one dispatch of rules, which mc-autodiff shares.
  if (auto grads = rules::byOpId(e, op.kind, g, in, y, op.attrs))
    return *grads;
  throw Error(std::string("autograd: mc.") + rt::opName(op.kind) +
              " has no derivative rule (add one to derivatives::byOpId in "
              "ir/DerivativeRules.h)");
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
    std::vector<Tensor> inGrads = derivative(node.op, Tensor(t), g);
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
  if (requires && !rt::isFloat(dtype()))
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
