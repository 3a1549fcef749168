// One derivative per op: the reverse-mode rule of every mc op, written once
// over a builder and instantiated twice, by eager autograd on Tensors
// (frontend/Autograd.cpp) and by mc-autodiff as mc ops (ir/MCGradients.cpp).
// PyTorch's formulas (derivatives.yaml), so both match torch.autograd. No
// MLIR here: the frontend includes this header without linking the compiler.
//
// Every rule is built from ops that exist in the dialect (no backward ops):
// a convolution's gradients are convolutions, a strided slice's is a zero
// insertion (reshape + pad + reshape), pooling goes back through one strided
// scatter per window offset, and training batch norm is the inference op fed
// with batch statistics (see batchNorm below).
//
// A builder `B` provides:
//   using Value = ...;               default-constructed: "no gradient"
//   Dims shape(Value); bool isFloat(Value);
//   add sub mul div pow (Value, Value); neg exp log sqrt tanh erf sin cos
//   sinh cosh (Value)
//   splatLike(Value like, double)    a scalar of like's element type that
//                                    elementwise ops accept next to `like`
//   constant(Value like, Dims shape, std::vector<double>)  like's elements
//   intConstant(Value like, Dims shape, Dims values)  like's integer type
//   compare(Cmp, Value, Value) -> i1; select(pred, onTrue, onFalse)
//   castLike(Value x, Value like)    x in like's element type
//   reshape(x, Dims); broadcastInDim(x, Dims shape, Dims dims);
//   transpose(x, Dims perm); reduceSum / reduceMean(x, Dims, bool keepdim)
//   matmul(x, y, bool transposeA, bool transposeB)
//   slice(x, Dims start, Dims limit, Dims strides)
//   pad(x, Dims low, Dims high, double value)
//   conv2d(x, w, Dims strides, Dims padding /*t, l, b, r*/, Dims dilation,
//          int64_t groups)
//   gather(x, Value indices, int64_t axis)
//   scatterAdd(g, Value indices, int64_t axis, int64_t size)  gather's
//                                    adjoint, in g's element type (summed
//                                    in f32)
//   dropout(x, Value seed, Value offset, double p)
//   batchCount(Value like)           the run-time batch size, splat like
//                                    `like` (compiled graphs with a dynamic
//                                    batch; shapes hold it as
//                                    rt::shapes::kBatch)
//
// At most one argument of a builder call may itself build a value: C++
// leaves the order of a call's arguments open, so with two the order of the
// ops (and the compiled artifact's bytes) would depend on the compiler.
// Build the others first, one statement each.
#ifndef MODELC_IR_DERIVATIVERULES_H
#define MODELC_IR_DERIVATIVERULES_H

#include "modelc/ops.h"
#include "modelc/shapes.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace mc::derivatives {

using Dims = std::vector<int64_t>;
/// Comparison directions: the registry's one enum (mc.compare's).
using Cmp = rt::CompareOp;
/// One gradient per operand, in operand order.
template <class B> using Grads = std::vector<typename B::Value>;

namespace detail {

inline Dims iota(int64_t begin, int64_t end) {
  Dims r;
  for (int64_t i = begin; i < end; ++i)
    r.push_back(i);
  return r;
}

inline Dims inversePermutation(const Dims& p) {
  Dims inv(p.size());
  for (size_t i = 0; i < p.size(); ++i)
    inv[p[i]] = static_cast<int64_t>(i);
  return inv;
}

inline int64_t product(const Dims& d) {
  int64_t n = 1;
  for (int64_t v : d)
    n *= v;
  return n;
}

/// (x <dir> y) as 0/1 in the element type of `like`.
template <class B, class V = typename B::Value>
V mask(B& b, Cmp dir, V x, V y, V like) {
  return b.castLike(b.compare(dir, x, y), like);
}

template <class B, class V = typename B::Value> V scale(B& b, V x, double v) {
  return b.mul(x, b.splatLike(x, v));
}

/// Broadcasts `x` (same rank, size-1 dims) to `shape`, as NumPy would.
template <class B, class V = typename B::Value>
V expand(B& b, V x, const Dims& shape) {
  if (b.shape(x) == shape)
    return x;
  return b.broadcastInDim(x, shape,
                          iota(0, static_cast<int64_t>(shape.size())));
}

/// `g`, the gradient of a reduction over `dims` of a `shape` tensor,
/// broadcast back to `shape`.
template <class B, class V = typename B::Value>
V expandReduced(B& b, V g, const Dims& shape, const Dims& dims, bool keepdim) {
  Dims kept = shape;
  for (int64_t d : dims)
    kept[d] = 1;
  return expand(b, keepdim ? g : b.reshape(g, kept), shape);
}

template <class B, class V = typename B::Value>
V slice(B& b, V x, const Dims& start, const Dims& limit) {
  if (std::all_of(start.begin(), start.end(), [](int64_t s) { return !s; }) &&
      limit == b.shape(x))
    return x;
  return b.slice(x, start, limit, Dims(start.size(), 1));
}

/// Zero padding; nothing when there is none.
template <class B, class V = typename B::Value>
V pad(B& b, V x, const Dims& low, const Dims& high) {
  auto zero = [](const Dims& d) {
    return std::all_of(d.begin(), d.end(), [](int64_t v) { return !v; });
  };
  if (zero(low) && zero(high))
    return x;
  return b.pad(x, low, high, 0.0);
}

/// Zero padding where `low`/`high` are positive, cropping where negative (a
/// convolution never reads what a negative padding crops).
template <class B, class V = typename B::Value>
V padOrCrop(B& b, V x, const Dims& low, const Dims& high) {
  Dims s = b.shape(x), start(s.size()), limit(s.size()), lo(s.size()),
       hi(s.size());
  for (size_t d = 0; d < s.size(); ++d) {
    start[d] = std::max<int64_t>(0, -low[d]);
    limit[d] = s[d] - std::max<int64_t>(0, -high[d]);
    lo[d] = std::max<int64_t>(0, low[d]);
    hi[d] = std::max<int64_t>(0, high[d]);
  }
  return pad(b, slice(b, x, start, limit), lo, hi);
}

/// The transpose of a strided slice: `g` (the slice's result shape) put
/// back at start[d] + i * strides[d] of a zero tensor of `inShape`. Strides
/// become zero insertion: [n] -> [n, 1] -> pad to [n, s] -> [n * s], cut to
/// (n - 1) * s + 1.
template <class B, class V = typename B::Value>
V scatterStrided(B& b, V g, const Dims& inShape, const Dims& start,
                 const Dims& strides) {
  Dims out = b.shape(g), placed = out;
  size_t rank = out.size();
  bool strided = false;
  for (size_t d = 0; d < rank; ++d)
    strided |= strides[d] > 1 && out[d] > 1;
  V v = g;
  if (strided) {
    Dims split, lo(2 * rank, 0), hi(2 * rank, 0), merged;
    for (size_t d = 0; d < rank; ++d) {
      int64_t s = out[d] > 1 ? strides[d] : 1;
      split.push_back(out[d]);
      split.push_back(1);
      hi[2 * d + 1] = s - 1;
      merged.push_back(out[d] * s);
      // A dim of the batch (-c) is never strided: it is placed whole.
      placed[d] = s == 1 ? out[d] : out[d] > 0 ? (out[d] - 1) * s + 1 : 0;
    }
    v = b.reshape(v, split);
    v = b.pad(v, lo, hi, 0.0);
    v = b.reshape(v, merged);
    v = slice(b, v, Dims(rank, 0), placed);
  }
  Dims high(rank);
  for (size_t d = 0; d < rank; ++d)
    high[d] = inShape[d] - start[d] - placed[d];
  return pad(b, v, start, high);
}

/// Reverses dims 2 and 3 (the kernel window) of an OIHW weight: reversing
/// both is reversing the flattened window, one gather over [O, I, KH*KW]
/// (one pass over the weight, not one per dim).
template <class B, class V = typename B::Value> V flipWindow(B& b, V w) {
  Dims s = b.shape(w);
  int64_t taps = s[2] * s[3];
  if (taps == 1)
    return w;
  Dims reversed;
  for (int64_t i = taps - 1; i >= 0; --i)
    reversed.push_back(i);
  V flat = b.reshape(w, {s[0], s[1], taps});
  V r = b.gather(flat, b.intConstant(V(), {taps}, reversed), 2);
  return b.reshape(r, s);
}

/// d(conv2d)/d(input): the transposed convolution, as a conv2d of the
/// zero-inserted (stride), padded gradient with the flipped weight whose
/// in/out channels are swapped within each group.
template <class B, class V = typename B::Value>
V conv2dInputGrad(B& b, V g, V w, const Dims& inShape, const Dims& strides,
                  const Dims& padding, const Dims& dilation, int64_t groups) {
  Dims ws = b.shape(w), gs = b.shape(g);
  int64_t o = ws[0], cg = ws[1], c = inShape[1], og = o / groups;
  Dims dilated{gs[0], gs[1], (gs[2] - 1) * strides[0] + 1,
               (gs[3] - 1) * strides[1] + 1};
  V gd = scatterStrided(b, g, dilated, Dims{0, 0, 0, 0},
                        Dims{1, 1, strides[0], strides[1]});
  Dims low{0, 0}, high{0, 0};
  for (int d = 0; d < 2; ++d) {
    low.push_back(dilation[d] * (ws[2 + d] - 1) - padding[d]);
    high.push_back(inShape[2 + d] + padding[d] - (gs[2 + d] - 1) * strides[d] -
                   1);
  }
  V gp = padOrCrop(b, gd, low, high);
  V wt;
  if (groups == 1) {
    wt = b.transpose(w, {1, 0, 2, 3});
  } else {
    wt = b.reshape(w, {groups, og, cg, ws[2], ws[3]});
    wt = b.transpose(wt, {0, 2, 1, 3, 4});
    wt = b.reshape(wt, {c, og, ws[2], ws[3]});
  }
  return b.conv2d(gp, flipWindow(b, wt), {1, 1}, {0, 0, 0, 0}, dilation,
                  groups);
}

/// d(conv2d)/d(weight): a conv2d with the roles swapped: the input's
/// channels become the batch, its batch the channels (per group), the
/// gradient is the weight, and stride and dilation trade places.
template <class B, class V = typename B::Value>
V conv2dWeightGrad(B& b, V g, V x, const Dims& wShape, const Dims& strides,
                   const Dims& padding, const Dims& dilation, int64_t groups) {
  Dims xs = b.shape(x);
  int64_t n = xs[0], c = xs[1], cg = c / groups;
  V xt;
  if (groups == 1) {
    xt = b.transpose(x, {1, 0, 2, 3});
  } else {
    xt = b.reshape(x, {n, groups, cg, xs[2], xs[3]});
    xt = b.transpose(xt, {2, 1, 0, 3, 4});
    xt = b.reshape(xt, {cg, groups * n, xs[2], xs[3]});
  }
  V gt = b.transpose(g, {1, 0, 2, 3});
  V r = b.conv2d(xt, gt, dilation, padding, strides, groups);
  r = slice(b, r, Dims{0, 0, 0, 0}, Dims{cg, wShape[0], wShape[2], wShape[3]});
  return b.transpose(r, {1, 0, 2, 3});
}

/// Taps of a pooling window starting at `start` inside [lo, hi).
inline int64_t tapsInside(int64_t start, int64_t dilation, int64_t kernel,
                          int64_t lo, int64_t hi) {
  int64_t n = 0;
  for (int64_t k = 0; k < kernel; ++k) {
    int64_t i = start + k * dilation;
    n += i >= lo && i < hi;
  }
  return n;
}

} // namespace detail

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <class B> Grads<B> add(B&, typename B::Value g) { return {g, g}; }

template <class B> Grads<B> sub(B& b, typename B::Value g) {
  return {g, b.neg(g)};
}

template <class B>
Grads<B> mul(B& b, typename B::Value g, typename B::Value lhs,
             typename B::Value rhs) {
  return {b.mul(g, rhs), b.mul(g, lhs)};
}

/// `y` is the op's result lhs / rhs.
template <class B>
Grads<B> div(B& b, typename B::Value g, typename B::Value rhs,
             typename B::Value y) {
  auto ga = b.div(g, rhs);
  return {ga, b.neg(b.mul(ga, y))};
}

/// maximum / minimum: ties share the gradient equally (PyTorch).
template <class B>
Grads<B> extremum(B& b, typename B::Value g, typename B::Value lhs,
                  typename B::Value rhs, bool isMax) {
  using detail::mask;
  auto wins = mask(b, isMax ? Cmp::Gt : Cmp::Lt, lhs, rhs, g);
  auto half = detail::scale(b, mask(b, Cmp::Eq, lhs, rhs, g), 0.5);
  auto loses = mask(b, isMax ? Cmp::Lt : Cmp::Gt, lhs, rhs, g);
  return {b.mul(g, b.add(wins, half)), b.mul(g, b.add(loses, half))};
}

/// `y` is a ** p.
template <class B>
Grads<B> pow(B& b, typename B::Value g, typename B::Value a,
             typename B::Value p, typename B::Value y) {
  auto ga = b.mul(g, b.mul(p, b.pow(a, b.sub(p, b.splatLike(p, 1.0)))));
  // d/dp a^p = a^p * log(a), taken as 0 where a == 0 (PyTorch does so for
  // p >= 0; for p < 0 the true value is infinite anyway).
  auto isZero = b.compare(Cmp::Eq, a, b.splatLike(a, 0.0));
  auto safeA = b.select(isZero, b.splatLike(a, 1.0), a);
  auto gy = b.mul(g, y);
  return {ga, b.mul(gy, b.log(safeA))};
}

template <class B> Grads<B> neg(B& b, typename B::Value g) {
  return {b.neg(g)};
}

/// `y` is exp(x).
template <class B>
Grads<B> exp(B& b, typename B::Value g, typename B::Value y) {
  return {b.mul(g, y)};
}

template <class B>
Grads<B> sin(B& b, typename B::Value g, typename B::Value x) {
  return {b.mul(g, b.cos(x))};
}

template <class B>
Grads<B> cos(B& b, typename B::Value g, typename B::Value x) {
  auto s = b.sin(x);
  return {b.mul(g, b.neg(s))};
}

/// `y` is tan(x): 1 + tan^2, as PyTorch.
template <class B>
Grads<B> tan(B& b, typename B::Value g, typename B::Value y) {
  return {b.mul(g, b.add(b.splatLike(y, 1.0), b.mul(y, y)))};
}

/// 1 / sqrt(1 - x^2) for asin, negated for acos.
template <class B>
Grads<B> asin(B& b, typename B::Value g, typename B::Value x, bool acos) {
  auto root = b.sqrt(b.sub(b.splatLike(x, 1.0), b.mul(x, x)));
  return {b.div(acos ? b.neg(g) : g, root)};
}

template <class B>
Grads<B> atan(B& b, typename B::Value g, typename B::Value x) {
  return {b.div(g, b.add(b.splatLike(x, 1.0), b.mul(x, x)))};
}

template <class B>
Grads<B> sinh(B& b, typename B::Value g, typename B::Value x) {
  return {b.mul(g, b.cosh(x))};
}

template <class B>
Grads<B> cosh(B& b, typename B::Value g, typename B::Value x) {
  return {b.mul(g, b.sinh(x))};
}

/// 1 / sqrt(x^2 + 1) for asinh, 1 / sqrt(x^2 - 1) for acosh (PyTorch's
/// forms).
template <class B>
Grads<B> asinh(B& b, typename B::Value g, typename B::Value x, bool acosh) {
  auto square = b.mul(x, x);
  auto one = b.splatLike(x, 1.0);
  return {b.div(g, b.sqrt(acosh ? b.sub(square, one) : b.add(square, one)))};
}

template <class B>
Grads<B> atanh(B& b, typename B::Value g, typename B::Value x) {
  return {b.div(g, b.sub(b.splatLike(x, 1.0), b.mul(x, x)))};
}

template <class B>
Grads<B> log(B& b, typename B::Value g, typename B::Value x) {
  return {b.div(g, x)};
}

/// `y` is tanh(x).
template <class B>
Grads<B> tanh(B& b, typename B::Value g, typename B::Value y) {
  auto one = b.splatLike(y, 1.0);
  return {b.mul(g, b.sub(one, b.mul(y, y)))};
}

/// `y` is sigmoid(x).
template <class B>
Grads<B> sigmoid(B& b, typename B::Value g, typename B::Value y) {
  return {b.mul(g, b.mul(y, b.sub(b.splatLike(y, 1.0), y)))};
}

/// threshold_backward: the gradient flows where the input is > 0.
template <class B>
Grads<B> relu(B& b, typename B::Value g, typename B::Value x) {
  return {b.mul(g, detail::mask(b, Cmp::Gt, x, b.splatLike(x, 0.0), g))};
}

/// `y` is sqrt(x).
template <class B>
Grads<B> sqrt(B& b, typename B::Value g, typename B::Value y) {
  return {b.div(g, detail::scale(b, y, 2.0))};
}

template <class B>
Grads<B> abs(B& b, typename B::Value g, typename B::Value x) {
  auto zero = b.splatLike(x, 0.0);
  auto positive = detail::mask(b, Cmp::Gt, x, zero, g);
  auto negative = detail::mask(b, Cmp::Lt, x, zero, g);
  auto sign = b.sub(positive, negative);
  return {b.mul(g, sign)};
}

template <class B>
Grads<B> erf(B& b, typename B::Value g, typename B::Value x) {
  auto d = detail::scale(b, b.exp(b.neg(b.mul(x, x))), 2.0 / std::sqrt(M_PI));
  return {b.mul(g, d)};
}

template <class B>
Grads<B> gelu(B& b, typename B::Value g, typename B::Value x,
              bool tanhApproximation) {
  using detail::scale;
  auto one = b.splatLike(x, 1.0);
  if (!tanhApproximation) {
    // d/dx x*Phi(x) = Phi(x) + x*phi(x).
    auto cdf = scale(b, b.add(b.erf(scale(b, x, M_SQRT1_2)), one), 0.5);
    auto pdf = scale(b, b.exp(scale(b, b.mul(x, x), -0.5)),
                     0.5 * M_2_SQRTPI * M_SQRT1_2);
    return {b.mul(g, b.add(cdf, b.mul(x, pdf)))};
  }
  // PyTorch's tanh-form gelu_backward.
  const double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715;
  auto x3 = b.mul(b.mul(x, x), x);
  auto t = b.tanh(scale(b, b.add(x, scale(b, x3, kKappa)), kBeta));
  auto left = scale(b, x, 0.5);
  auto leftDer = scale(b, b.add(t, one), 0.5);
  auto tanhDer = b.sub(one, b.mul(t, t));
  auto innerDer =
      scale(b, b.add(one, scale(b, b.mul(x, x), 3 * kKappa)), kBeta);
  auto rightDer = b.mul(b.mul(left, tanhDer), innerDer);
  return {b.mul(g, b.add(leftDer, rightDer))};
}

template <class B>
Grads<B> clamp(B& b, typename B::Value g, typename B::Value x, double lo,
               double hi) {
  auto fromLo = detail::mask(b, Cmp::Ge, x, b.splatLike(x, lo), g);
  auto upToHi = detail::mask(b, Cmp::Le, x, b.splatLike(x, hi), g);
  auto inside = b.mul(fromLo, upToHi);
  return {b.mul(g, inside)};
}

/// dropout(x, seed, offset): the same op on the gradient, the mask
/// recomputed from the same seed and offset (nothing kept between the
/// passes); none for the seed and the offset.
template <class B>
Grads<B> dropout(B& b, typename B::Value g, typename B::Value seed,
                 typename B::Value offset, double p) {
  return {b.dropout(g, seed, offset, p), typename B::Value(),
          typename B::Value()};
}

/// compare, not: i1 results carry no gradient.
template <class B> Grads<B> none(size_t operands) { return Grads<B>(operands); }

/// select(pred, onTrue, onFalse): the predicate gets none.
template <class B>
Grads<B> select(B& b, typename B::Value g, typename B::Value pred) {
  auto zero = b.splatLike(g, 0.0);
  return {typename B::Value(), b.select(pred, g, zero),
          b.select(pred, zero, g)};
}

/// Float to float: the gradient cast back; from integers or i1: none.
template <class B>
Grads<B> cast(B& b, typename B::Value g, typename B::Value x) {
  if (!b.isFloat(x))
    return {typename B::Value()};
  return {b.castLike(g, x)};
}

//===----------------------------------------------------------------------===//
// Shape
//===----------------------------------------------------------------------===//

/// Sums the broadcast result dims back, then puts the remaining dims in
/// operand order.
template <class B>
Grads<B> broadcastInDim(B& b, typename B::Value g, const Dims& inShape,
                        const Dims& dims) {
  Dims out = b.shape(g), reduce;
  std::vector<bool> mapped(out.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    mapped[dims[i]] = true;
    if (inShape[i] == 1 && out[dims[i]] != 1)
      reduce.push_back(dims[i]);
  }
  for (size_t d = 0; d < out.size(); ++d)
    if (!mapped[d])
      reduce.push_back(static_cast<int64_t>(d));
  std::sort(reduce.begin(), reduce.end());
  auto r = reduce.empty() ? g : b.reduceSum(g, reduce, /*keepdim=*/true);
  // The mapped dims in result order: (result dim, operand dim).
  std::vector<std::pair<int64_t, int64_t>> order;
  for (size_t i = 0; i < dims.size(); ++i)
    order.emplace_back(dims[i], static_cast<int64_t>(i));
  std::sort(order.begin(), order.end());
  Dims compact;
  for (auto& [rd, od] : order)
    compact.push_back(inShape[od]);
  if (b.shape(r) != compact)
    r = b.reshape(r, compact);
  if (!std::is_sorted(dims.begin(), dims.end())) {
    Dims perm(dims.size());
    for (size_t k = 0; k < order.size(); ++k)
      perm[order[k].second] = static_cast<int64_t>(k);
    r = b.transpose(r, perm);
  }
  if (b.shape(r) != inShape)
    r = b.reshape(r, inShape);
  return {r};
}

template <class B>
Grads<B> reshape(B& b, typename B::Value g, const Dims& inShape) {
  return {b.reshape(g, inShape)};
}

template <class B>
Grads<B> transpose(B& b, typename B::Value g, const Dims& permutation) {
  return {b.transpose(g, detail::inversePermutation(permutation))};
}

/// One gradient per concatenated input, sliced back out.
template <class B>
Grads<B> concat(B& b, typename B::Value g, const std::vector<Dims>& inShapes,
                int64_t axis) {
  Dims start(b.shape(g).size(), 0), limit = b.shape(g);
  Grads<B> grads;
  for (const Dims& in : inShapes) {
    limit[axis] = start[axis] + in[axis];
    grads.push_back(detail::slice(b, g, start, limit));
    start[axis] = limit[axis];
  }
  return grads;
}

/// Strided slice: the gradient scattered back with zeros between.
template <class B>
Grads<B> slice(B& b, typename B::Value g, const Dims& inShape,
               const Dims& start, const Dims& strides) {
  return {detail::scatterStrided(b, g, inShape, start, strides)};
}

template <class B>
Grads<B> pad(B& b, typename B::Value g, const Dims& inShape, const Dims& low) {
  Dims limit;
  for (size_t d = 0; d < low.size(); ++d)
    limit.push_back(low[d] + inShape[d]);
  return {detail::slice(b, g, low, limit)};
}

/// take(data, indices, axis): every gathered row adds its gradient back to
/// the row it came from, scatter_add (summed in f32, in index order:
/// memory and work the size of `g`, not K x the axis). Indices get no
/// gradient.
template <class B>
Grads<B> gather(B& b, typename B::Value g, const Dims& dataShape,
                typename B::Value indices, int64_t axis) {
  return {b.scatterAdd(g, indices, axis, dataShape[axis]), typename B::Value()};
}

/// scatter_add(updates, indices): each update's gradient is the gradient of
/// the element it was added to, a gather.
template <class B>
Grads<B> scatterAdd(B& b, typename B::Value g, typename B::Value indices,
                    int64_t axis) {
  return {b.gather(g, indices, axis), typename B::Value()};
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

template <class B>
Grads<B> reduceSum(B& b, typename B::Value g, const Dims& inShape,
                   const Dims& dims, bool keepdim) {
  return {detail::expandReduced(b, g, inShape, dims, keepdim)};
}

/// Divides by the count of the reduced elements; over a dynamic batch, by
/// the run-time batch size too, so a partial batch's mean loss is the mean
/// over its real samples.
template <class B>
Grads<B> reduceMean(B& b, typename B::Value g, const Dims& inShape,
                    const Dims& dims, bool keepdim) {
  int64_t n = 1;
  bool overBatch = false;
  for (int64_t d : dims) {
    if (rt::shapes::isBatch(inShape[d])) {
      overBatch = true;
      n *= rt::shapes::batchMultiple(inShape[d]);
    } else {
      n *= inShape[d];
    }
  }
  auto gx = detail::expandReduced(b, g, inShape, dims, keepdim);
  auto mean = b.div(gx, b.splatLike(gx, static_cast<double>(n)));
  return {overBatch ? b.div(mean, b.batchCount(gx)) : mean};
}

/// reduce_max / reduce_min (amax / amin), `y` their result: the gradient is
/// shared evenly among the extreme elements.
template <class B>
Grads<B> reduceExtremum(B& b, typename B::Value g, typename B::Value x,
                        typename B::Value y, const Dims& dims, bool keepdim) {
  Dims shape = b.shape(x);
  auto extreme = detail::expandReduced(b, y, shape, dims, keepdim);
  auto mask = detail::mask(b, Cmp::Eq, x, extreme, g);
  auto count = detail::expand(b, b.reduceSum(mask, dims, true), shape);
  auto gb = detail::expandReduced(b, g, shape, dims, keepdim);
  return {b.div(b.mul(gb, mask), count)};
}

//===----------------------------------------------------------------------===//
// Linear algebra and NN
//===----------------------------------------------------------------------===//

template <class B>
Grads<B> matmul(B& b, typename B::Value g, typename B::Value x,
                typename B::Value y, bool ta, bool tb) {
  auto gx = ta ? b.matmul(y, g, tb, true) : b.matmul(g, y, false, !tb);
  auto gy = tb ? b.matmul(g, x, true, ta) : b.matmul(x, g, !ta, false);
  return {gx, gy};
}

/// `y` is softmax(x, axis).
template <class B>
Grads<B> softmax(B& b, typename B::Value g, typename B::Value y, int64_t axis) {
  auto dot = b.reduceSum(b.mul(g, y), {axis}, /*keepdim=*/true);
  return {b.mul(y, b.sub(g, detail::expand(b, dot, b.shape(g))))};
}

/// `y` is log_softmax(x, axis).
template <class B>
Grads<B> logSoftmax(B& b, typename B::Value g, typename B::Value y,
                    int64_t axis) {
  auto total =
      detail::expand(b, b.reduceSum(g, {axis}, /*keepdim=*/true), b.shape(g));
  return {b.sub(g, b.mul(b.exp(y), total))};
}

/// x_hat = (x - mean) * rstd; y = x_hat * gamma + beta over [axis, rank).
/// The statistics are recomputed from x.
template <class B>
Grads<B> layerNorm(B& b, typename B::Value g, typename B::Value x,
                   typename B::Value gamma, int64_t axis, double epsilon) {
  Dims shape = b.shape(x);
  int64_t rank = static_cast<int64_t>(shape.size());
  Dims norm = detail::iota(axis, rank), lead = detail::iota(0, axis);
  auto rowMean = [&](typename B::Value v) {
    return detail::expand(b, b.reduceMean(v, norm, /*keepdim=*/true), shape);
  };
  auto xc = b.sub(x, rowMean(x));
  auto var = b.reduceMean(b.mul(xc, xc), norm, /*keepdim=*/true);
  auto one = b.splatLike(var, 1.0);
  auto rstd = detail::expand(
      b, b.div(one, b.sqrt(b.add(var, b.splatLike(var, epsilon)))), shape);
  auto xhat = b.mul(xc, rstd);
  auto gxhat = b.mul(g, b.broadcastInDim(gamma, shape, norm));
  auto centered = b.sub(gxhat, rowMean(gxhat));
  auto projected = b.mul(xhat, rowMean(b.mul(gxhat, xhat)));
  auto term = b.sub(centered, projected);
  auto gGamma = b.mul(g, xhat);
  if (!lead.empty())
    gGamma = b.reduceSum(gGamma, lead, /*keepdim=*/false);
  auto gBeta = lead.empty() ? g : b.reduceSum(g, lead, /*keepdim=*/false);
  return {b.mul(term, rstd), gGamma, gBeta};
}

/// batch_norm(x, scale, offset, mean, variance) with the 1-D operands along
/// `axis`: y = (x - mean) * rstd * scale + offset, rstd = 1/sqrt(var + eps).
/// Every operand gets its gradient, so training mode is this op fed with
/// the batch's mean and biased variance (computed from x by reductions):
/// the gradient reaches x through them too, which is PyTorch's
/// batch_norm_backward for training.
template <class B>
Grads<B> batchNorm(B& b, typename B::Value g, typename B::Value x,
                   typename B::Value scale, typename B::Value mean,
                   typename B::Value variance, double epsilon, int64_t axis) {
  Dims shape = b.shape(x), dims;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    if (d != axis)
      dims.push_back(d);
  auto along = [&](typename B::Value v) {
    return b.broadcastInDim(v, shape, {axis});
  };
  auto one = b.splatLike(variance, 1.0);
  auto rstd =
      b.div(one, b.sqrt(b.add(variance, b.splatLike(variance, epsilon))));
  auto xc = b.sub(x, along(mean));
  auto gx = b.mul(g, along(b.mul(scale, rstd)));
  auto gOffset = b.reduceSum(g, dims, /*keepdim=*/false);
  auto gxc = b.reduceSum(b.mul(g, xc), dims, /*keepdim=*/false);
  auto gScale = b.mul(gxc, rstd);
  auto gMean = b.neg(b.mul(gOffset, b.mul(scale, rstd)));
  auto rstd3 = b.mul(rstd, b.mul(rstd, rstd));
  auto gVar = b.mul(gxc, detail::scale(b, b.mul(scale, rstd3), -0.5));
  return {gx, gScale, gOffset, gMean, gVar};
}

/// NCHW conv2d, `padding` [top, left, bottom, right], any stride, dilation
/// and groups: both gradients are conv2d ops (see detail).
template <class B>
Grads<B> conv2d(B& b, typename B::Value g, typename B::Value x,
                typename B::Value w, const Dims& strides, const Dims& padding,
                const Dims& dilation, int64_t groups) {
  return {detail::conv2dInputGrad(b, g, w, b.shape(x), strides, padding,
                                  dilation, groups),
          detail::conv2dWeightGrad(b, g, x, b.shape(w), strides, padding,
                                   dilation, groups)};
}

/// max_pool2d, `y` its result: each output's gradient goes to the first
/// element of its window (row-major) that equals the maximum, PyTorch's tie
/// breaking. One equality mask per window offset, over the input padded
/// with -inf (padding never wins), each scattered back with the strides.
template <class B>
Grads<B> maxPool2d(B& b, typename B::Value g, typename B::Value x,
                   typename B::Value y, const Dims& kernel, const Dims& strides,
                   const Dims& padding, const Dims& dilation) {
  using V = typename B::Value;
  Dims xs = b.shape(x), ys = b.shape(y), padded = xs, low{0, 0}, high{0, 0};
  for (int d = 0; d < 2; ++d) {
    // Cover every window, ceil_mode's last ones included.
    int64_t need =
        (ys[2 + d] - 1) * strides[d] + (kernel[d] - 1) * dilation[d] + 1;
    int64_t size = std::max(xs[2 + d] + padding[d] + padding[d + 2], need);
    low.push_back(padding[d]);
    high.push_back(size - xs[2 + d] - padding[d]);
    padded[2 + d] = size;
  }
  V xp = b.pad(x, low, high, -std::numeric_limits<double>::infinity());
  V taken, sum;
  for (int64_t kh = 0; kh < kernel[0]; ++kh)
    for (int64_t kw = 0; kw < kernel[1]; ++kw) {
      Dims start{0, 0, kh * dilation[0], kw * dilation[1]};
      Dims limit{ys[0], ys[1], start[2] + (ys[2] - 1) * strides[0] + 1,
                 start[3] + (ys[3] - 1) * strides[1] + 1};
      Dims step{1, 1, strides[0], strides[1]};
      V m = detail::mask(b, Cmp::Eq, b.slice(xp, start, limit, step), y, g);
      if (kh || kw) {
        m = b.mul(m, b.sub(b.splatLike(m, 1.0), taken));
        taken = b.add(taken, m);
      } else {
        taken = m;
      }
      V part = detail::scatterStrided(b, b.mul(g, m), padded, start, step);
      sum = (kh || kw) ? b.add(sum, part) : part;
    }
  Dims limit{xs[0], xs[1], padding[0] + xs[2], padding[1] + xs[3]};
  return {detail::slice(b, sum, Dims{0, 0, padding[0], padding[1]}, limit)};
}

/// avg_pool2d: each output's gradient, divided by its window's divisor (the
/// runtime's rule: taps inside the padded input with count_include_pad,
/// else inside the input), spread over its window: a transposed depthwise
/// convolution with a kernel of ones.
template <class B>
Grads<B> avgPool2d(B& b, typename B::Value g, typename B::Value x,
                   const Dims& kernel, const Dims& strides, const Dims& padding,
                   const Dims& dilation, bool countIncludePad) {
  Dims xs = b.shape(x), gs = b.shape(g);
  std::vector<double> inverse;
  for (int64_t i = 0; i < gs[2]; ++i)
    for (int64_t j = 0; j < gs[3]; ++j) {
      int64_t hLo = countIncludePad ? -padding[0] : 0;
      int64_t hHi = countIncludePad ? xs[2] + padding[2] : xs[2];
      int64_t wLo = countIncludePad ? -padding[1] : 0;
      int64_t wHi = countIncludePad ? xs[3] + padding[3] : xs[3];
      int64_t n = detail::tapsInside(i * strides[0] - padding[0], dilation[0],
                                     kernel[0], hLo, hHi) *
                  detail::tapsInside(j * strides[1] - padding[1], dilation[1],
                                     kernel[1], wLo, wHi);
      inverse.push_back(n ? 1.0 / static_cast<double>(n) : 0.0);
    }
  auto scaled = b.mul(
      g, b.broadcastInDim(b.constant(g, {gs[2], gs[3]}, inverse), gs, {2, 3}));
  int64_t c = xs[1];
  auto ones = b.constant(
      g, {c, 1, kernel[0], kernel[1]},
      std::vector<double>(static_cast<size_t>(c * kernel[0] * kernel[1]), 1.0));
  return {detail::conv2dInputGrad(b, scaled, ones, xs, strides, padding,
                                  dilation, c)};
}

/// hardswish_backward: 0 below -3, x / 3 + 0.5 up to 3, 1 above.
template <class B>
Grads<B> hardswish(B& b, typename B::Value g, typename B::Value x) {
  auto from = detail::mask(b, Cmp::Ge, x, b.splatLike(x, -3.0), g);
  auto upTo = detail::mask(b, Cmp::Le, x, b.splatLike(x, 3.0), g);
  auto above = detail::mask(b, Cmp::Gt, x, b.splatLike(x, 3.0), g);
  auto third = detail::scale(b, x, 1.0 / 3.0);
  auto ramp = b.add(third, b.splatLike(x, 0.5));
  auto d = b.mul(from, b.add(b.mul(upTo, ramp), above));
  return {b.mul(g, d)};
}

/// The one dispatch, by registry id, of every op's rule: eager autograd
/// (frontend/Autograd.cpp) and mc-autodiff (DifferentiableOpInterface's
/// default, ir/MCGradients.cpp) both come here, with the op's operands, its
/// result `y` and its attributes under their ODS names (rt::OpAttrs, the
/// form steps carry too). A new op adds its rule above and one case here.
/// nullopt when `op` has no rule.
template <class B, class V = typename B::Value>
std::optional<Grads<B>> byOpId(B& b, rt::OpId op, V g, const std::vector<V>& in,
                               V y, const rt::OpAttrs& attrs) {
  using rt::OpId;
  auto ints = [&](const char* name) { return attrs.getInts(name); };
  auto integer = [&](const char* name) { return attrs.getInt(name); };
  auto real = [&](const char* name) { return attrs.getFloat(name); };
  auto flag = [&](const char* name) { return attrs.getBool(name); };
  switch (op) {
  // Elementwise.
  case OpId::Add:
    return add(b, g);
  case OpId::Sub:
    return sub(b, g);
  case OpId::Mul:
    return mul(b, g, in[0], in[1]);
  case OpId::Div:
    return div(b, g, in[1], y);
  case OpId::Maximum:
    return extremum(b, g, in[0], in[1], true);
  case OpId::Minimum:
    return extremum(b, g, in[0], in[1], false);
  case OpId::Pow:
    return pow(b, g, in[0], in[1], y);
  case OpId::Neg:
    return neg(b, g);
  case OpId::Exp:
    return exp(b, g, y);
  case OpId::Log:
    return log(b, g, in[0]);
  case OpId::Tanh:
    return tanh(b, g, y);
  case OpId::Sigmoid:
    return sigmoid(b, g, y);
  case OpId::Relu:
    return relu(b, g, in[0]);
  case OpId::Sqrt:
    return sqrt(b, g, y);
  case OpId::Abs:
    return abs(b, g, in[0]);
  case OpId::Erf:
    return erf(b, g, in[0]);
  case OpId::Sin:
    return sin(b, g, in[0]);
  case OpId::Cos:
    return cos(b, g, in[0]);
  case OpId::Tan:
    return tan(b, g, y);
  case OpId::Asin:
  case OpId::Acos:
    return asin(b, g, in[0], op == OpId::Acos);
  case OpId::Atan:
    return atan(b, g, in[0]);
  case OpId::Sinh:
    return sinh(b, g, in[0]);
  case OpId::Cosh:
    return cosh(b, g, in[0]);
  case OpId::Asinh:
  case OpId::Acosh:
    return asinh(b, g, in[0], op == OpId::Acosh);
  case OpId::Atanh:
    return atanh(b, g, in[0]);
  case OpId::Hardswish:
    return hardswish(b, g, in[0]);
  case OpId::Gelu:
    return gelu(b, g, in[0], flag("tanh_approximation"));
  case OpId::Clamp:
    return clamp(b, g, in[0], real("min"), real("max"));
  case OpId::Dropout:
    return dropout(b, g, in[1], in[2], real("p"));
  case OpId::Compare: // i1 results: the drivers never ask
  case OpId::Not:
    return none<B>(in.size());
  case OpId::Select:
    return select(b, g, in[0]);
  case OpId::Cast:
    return cast(b, g, in[0]);
  // Shape.
  case OpId::BroadcastInDim:
    return broadcastInDim(b, g, b.shape(in[0]), ints("dims"));
  case OpId::Reshape:
    return reshape(b, g, b.shape(in[0]));
  case OpId::Transpose:
    return transpose(b, g, ints("permutation"));
  case OpId::Concat: {
    std::vector<Dims> shapes;
    for (const V& v : in)
      shapes.push_back(b.shape(v));
    return concat(b, g, shapes, integer("axis"));
  }
  case OpId::Slice:
    return slice(b, g, b.shape(in[0]), ints("start"), ints("strides"));
  case OpId::Pad:
    return pad(b, g, b.shape(in[0]), ints("low"));
  case OpId::Gather:
    return gather(b, g, b.shape(in[0]), in[1], integer("axis"));
  case OpId::ScatterAdd:
    return scatterAdd(b, g, in[1], integer("axis"));
  // Reductions.
  case OpId::ReduceSum:
    return reduceSum(b, g, b.shape(in[0]), ints("dims"), flag("keepdim"));
  case OpId::ReduceMean:
    return reduceMean(b, g, b.shape(in[0]), ints("dims"), flag("keepdim"));
  case OpId::ReduceMax:
  case OpId::ReduceMin:
    return reduceExtremum(b, g, in[0], y, ints("dims"), flag("keepdim"));
  // Linear algebra and NN.
  case OpId::Matmul:
    return matmul(b, g, in[0], in[1], flag("transpose_a"),
                  flag("transpose_b"));
  case OpId::Softmax:
    return softmax(b, g, y, integer("axis"));
  case OpId::LogSoftmax:
    return logSoftmax(b, g, y, integer("axis"));
  case OpId::LayerNorm:
    return layerNorm(b, g, in[0], in[1], integer("axis"), real("epsilon"));
  case OpId::BatchNorm:
    return batchNorm(b, g, in[0], in[1], in[3], in[4], real("epsilon"),
                     integer("feature_axis"));
  case OpId::Conv2d:
    return conv2d(b, g, in[0], in[1], ints("strides"), ints("padding"),
                  ints("dilation"), integer("groups"));
  case OpId::MaxPool2d:
    return maxPool2d(b, g, in[0], y, ints("kernel"), ints("strides"),
                     ints("padding"), ints("dilation"));
  case OpId::AvgPool2d:
    return avgPool2d(b, g, in[0], ints("kernel"), ints("strides"),
                     ints("padding"), ints("dilation"),
                     flag("count_include_pad"));
  default:
    return std::nullopt;
  }
}

} // namespace mc::derivatives

#endif // MODELC_IR_DERIVATIVERULES_H
