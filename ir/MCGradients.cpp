// Reverse-mode derivatives of the mc ops (DifferentiableOpInterface): the
// rules of frontend/Autograd.cpp, PyTorch's formulas, written as mc ops so a
// compiled gradient matches the eager one.
#include "ir/MCDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace mc;

namespace {

/// One gradient per operand; a null Value for an operand that gets none.
using Grads = SmallVector<Value, 3>;

RankedTensorType tensorType(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

ArrayRef<int64_t> shapeOf(Value v) { return tensorType(v).getShape(); }

bool isFloatTensor(Value v) {
  auto t = llvm::dyn_cast<RankedTensorType>(v.getType());
  return t && llvm::isa<FloatType>(t.getElementType());
}

SmallVector<int64_t> iota(int64_t begin, int64_t end) {
  SmallVector<int64_t> r;
  for (int64_t i = begin; i < end; ++i)
    r.push_back(i);
  return r;
}

/// Builds the ops of a rule at the insertion point, located at the op being
/// differentiated (so the backward ops keep its module path). The dialect
/// has no implicit broadcast: scalars are splat constants of the full shape,
/// and a reduced value is broadcast back explicitly.
class GradBuilder {
public:
  GradBuilder(OpBuilder& b, Location loc) : b(b), loc(loc) {}

  Value splat(RankedTensorType type, double v) {
    APFloat f(v);
    bool lost = false;
    f.convert(llvm::cast<FloatType>(type.getElementType()).getFloatSemantics(),
              APFloat::rmNearestTiesToEven, &lost);
    return ConstantOp::create(b, loc, DenseElementsAttr::get(type, f));
  }
  Value splatLike(Value like, double v) { return splat(tensorType(like), v); }

  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value pow(Value x, Value y) { return PowOp::create(b, loc, x, y); }
  Value neg(Value x) { return NegOp::create(b, loc, x); }
  Value exp(Value x) { return ExpOp::create(b, loc, x); }
  Value log(Value x) { return LogOp::create(b, loc, x); }
  Value sqrt(Value x) { return SqrtOp::create(b, loc, x); }
  Value tanh(Value x) { return TanhOp::create(b, loc, x); }
  Value erf(Value x) { return ErfOp::create(b, loc, x); }
  /// x * v, v a scalar.
  Value scale(Value x, double v) { return mul(x, splatLike(x, v)); }
  /// v + x, v a scalar.
  Value addScalar(double v, Value x) { return add(splatLike(x, v), x); }
  /// v - x, v a scalar.
  Value rsubScalar(double v, Value x) { return sub(splatLike(x, v), x); }

  Value compare(ComparisonDirection dir, Value x, Value y) {
    auto type = RankedTensorType::get(shapeOf(x), b.getI1Type());
    return CompareOp::create(b, loc, type, dir, x, y);
  }
  /// (x <dir> y) as 0/1 in the element type of `like`.
  Value mask(ComparisonDirection dir, Value x, Value y, Value like) {
    return cast(compare(dir, x, y), tensorType(like).getElementType());
  }
  Value select(Value pred, Value x, Value y) {
    return SelectOp::create(b, loc, x.getType(), pred, x, y);
  }
  Value cast(Value x, Type elementType) {
    auto type = RankedTensorType::get(shapeOf(x), elementType);
    return CastOp::create(b, loc, type, x);
  }

  Value reshape(Value x, ArrayRef<int64_t> shape) {
    if (shapeOf(x) == shape)
      return x;
    auto type = RankedTensorType::get(shape, tensorType(x).getElementType());
    return ReshapeOp::create(b, loc, type, x);
  }
  Value broadcast(Value x, ArrayRef<int64_t> shape, ArrayRef<int64_t> dims) {
    auto type = RankedTensorType::get(shape, tensorType(x).getElementType());
    return BroadcastInDimOp::create(b, loc, type, x, dims);
  }
  /// Broadcasts `x` (same rank, size-1 dims) to `shape`, as NumPy would.
  Value expand(Value x, ArrayRef<int64_t> shape) {
    if (shapeOf(x) == shape)
      return x;
    return broadcast(x, shape, iota(0, static_cast<int64_t>(shape.size())));
  }
  Value transpose(Value x, ArrayRef<int64_t> perm) {
    SmallVector<int64_t> shape;
    for (int64_t p : perm)
      shape.push_back(shapeOf(x)[p]);
    auto type = RankedTensorType::get(shape, tensorType(x).getElementType());
    return TransposeOp::create(b, loc, type, x, perm);
  }
  Value sum(Value x, ArrayRef<int64_t> dims, bool keepdim) {
    return ReduceSumOp::create(b, loc, x, dims, keepdim);
  }
  Value mean(Value x, ArrayRef<int64_t> dims, bool keepdim) {
    return ReduceMeanOp::create(b, loc, x, dims, keepdim);
  }
  Value matmul(Value x, Value y, bool transposeA, bool transposeB) {
    return MatmulOp::create(b, loc, x, y, transposeA, transposeB);
  }
  Value slice(Value x, ArrayRef<int64_t> start, ArrayRef<int64_t> limit) {
    SmallVector<int64_t> shape, strides(start.size(), 1);
    for (auto [s, l] : llvm::zip(start, limit))
      shape.push_back(l - s);
    auto type = RankedTensorType::get(shape, tensorType(x).getElementType());
    return SliceOp::create(b, loc, type, x, start, limit, strides);
  }
  /// Zero padding.
  Value pad(Value x, ArrayRef<int64_t> low, ArrayRef<int64_t> high) {
    SmallVector<int64_t> shape;
    for (auto [d, lo, hi] : llvm::zip(shapeOf(x), low, high))
      shape.push_back(d + lo + hi);
    auto type = RankedTensorType::get(shape, tensorType(x).getElementType());
    return PadOp::create(b, loc, type, x, low, high, APFloat(0.0));
  }

  /// `g`, the gradient of a reduction over `dims` of a `shape` tensor,
  /// broadcast back to `shape`.
  Value expandReduced(Value g, ArrayRef<int64_t> shape, ArrayRef<int64_t> dims,
                      bool keepdim) {
    SmallVector<int64_t> kept(shape);
    for (int64_t d : dims)
      kept[d] = 1;
    return expand(keepdim ? g : reshape(g, kept), shape);
  }

private:
  OpBuilder& b;
  Location loc;
};

/// The driver shared by every rule: one entry per operand, no gradient
/// through integer or i1 results, and gradients kept for float operands
/// only.
template <typename Rule>
LogicalResult differentiate(Operation* op, OpBuilder& b, ValueRange resultGrads,
                            SmallVectorImpl<Value>& operandGrads, Rule rule) {
  assert(resultGrads.size() == op->getNumResults() &&
         "one gradient per result");
  operandGrads.assign(op->getNumOperands(), Value());
  Value g = resultGrads.front();
  if (!g || !isFloatTensor(op->getResult(0)))
    return success();
  GradBuilder e(b, op->getLoc());
  FailureOr<Grads> grads = rule(e, g);
  if (failed(grads))
    return failure();
  assert(grads->size() == op->getNumOperands() && "one gradient per operand");
  for (auto [i, grad] : llvm::enumerate(*grads))
    if (grad && isFloatTensor(op->getOperand(i)))
      operandGrads[i] = grad;
  return success();
}

LogicalResult noDerivative(Operation* op, StringRef why) {
  return op->emitOpError() << "has no derivative yet: " << why;
}

/// maximum / minimum: ties share the gradient equally (PyTorch).
Grads extremumGrads(GradBuilder& e, Value g, Value a, Value b, bool isMax) {
  using D = ComparisonDirection;
  Value wins = e.mask(isMax ? D::GT : D::LT, a, b, g);
  Value half = e.scale(e.mask(D::EQ, a, b, g), 0.5);
  Value loses = e.mask(isMax ? D::LT : D::GT, a, b, g);
  return {e.mul(g, e.add(wins, half)), e.mul(g, e.add(loses, half))};
}

/// reduce_max / reduce_min (amax / amin): the gradient is shared evenly
/// among the extreme elements.
Grads reduceExtremumGrads(GradBuilder& e, Value g, Value x, Value result,
                          ArrayRef<int64_t> dims, bool keepdim) {
  ArrayRef<int64_t> shape = shapeOf(x);
  Value extreme = e.expandReduced(result, shape, dims, keepdim);
  Value mask = e.mask(ComparisonDirection::EQ, x, extreme, g);
  Value count = e.expand(e.sum(mask, dims, /*keepdim=*/true), shape);
  Value gb = e.expandReduced(g, shape, dims, keepdim);
  return {e.div(e.mul(gb, mask), count)};
}

/// d/dx of broadcast_in_dim: sum the broadcast result dims back, then put
/// the remaining dims in operand order.
Value unbroadcastInDim(GradBuilder& e, Value g, ArrayRef<int64_t> inputShape,
                       ArrayRef<int64_t> dims) {
  ArrayRef<int64_t> out = shapeOf(g);
  SmallVector<bool> mapped(out.size(), false);
  SmallVector<int64_t> reduce;
  for (auto [i, d] : llvm::enumerate(dims)) {
    mapped[d] = true;
    if (inputShape[i] == 1 && out[d] != 1)
      reduce.push_back(d);
  }
  for (auto [d, m] : llvm::enumerate(mapped))
    if (!m)
      reduce.push_back(static_cast<int64_t>(d));
  llvm::sort(reduce);
  Value r = reduce.empty() ? g : e.sum(g, reduce, /*keepdim=*/true);
  // The mapped dims, in result order: (result dim, operand dim).
  SmallVector<std::pair<int64_t, int64_t>> order;
  for (auto [i, d] : llvm::enumerate(dims))
    order.emplace_back(d, static_cast<int64_t>(i));
  llvm::sort(order);
  SmallVector<int64_t> compact;
  for (auto [rd, od] : order)
    compact.push_back(inputShape[od]);
  r = e.reshape(r, compact);
  if (!llvm::is_sorted(dims)) {
    SmallVector<int64_t> perm(dims.size());
    for (auto [k, o] : llvm::enumerate(order))
      perm[o.second] = static_cast<int64_t>(k);
    r = e.transpose(r, perm);
  }
  return e.reshape(r, inputShape);
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise binary
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                    SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder&, Value g) -> FailureOr<Grads> {
                         return Grads{g, g};
                       });
}

LogicalResult SubOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                    SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         return Grads{g, e.neg(g)};
                       });
}

LogicalResult MulOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                    SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         return Grads{e.mul(g, getRhs()), e.mul(g, getLhs())};
                       });
}

LogicalResult DivOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                    SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         Value ga = e.div(g, getRhs());
                         return Grads{ga, e.neg(e.mul(ga, getResult()))};
                       });
}

LogicalResult MaximumOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                        SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         return extremumGrads(e, g, getLhs(), getRhs(), true);
                       });
}

LogicalResult MinimumOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                        SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         return extremumGrads(e, g, getLhs(), getRhs(), false);
                       });
}

LogicalResult PowOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                    SmallVectorImpl<Value>& operandGrads) {
  return differentiate(
      *this, b, resultGrads, operandGrads,
      [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
        Value a = getLhs(), p = getRhs();
        Value ga = e.mul(g, e.mul(p, e.pow(a, e.sub(p, e.splatLike(p, 1.0)))));
        // d/dp a^p = a^p * log(a), taken as 0 where a == 0 (PyTorch does so
        // for p >= 0; for p < 0 the true value is infinite anyway).
        Value isZero =
            e.compare(ComparisonDirection::EQ, a, e.splatLike(a, 0.0));
        Value safeA = e.select(isZero, e.splatLike(a, 1.0), a);
        Value gp = e.mul(e.mul(g, getResult()), e.log(safeA));
        return Grads{ga, gp};
      });
}

//===----------------------------------------------------------------------===//
// Elementwise unary
//===----------------------------------------------------------------------===//

LogicalResult NegOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                    SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         return Grads{e.neg(g)};
                       });
}

LogicalResult ExpOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                    SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         return Grads{e.mul(g, getResult())};
                       });
}

LogicalResult LogOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                    SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         return Grads{e.div(g, getInput())};
                       });
}

LogicalResult TanhOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                     SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         Value t = getResult();
                         return Grads{e.mul(g, e.rsubScalar(1.0, e.mul(t, t)))};
                       });
}

LogicalResult SigmoidOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                        SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         Value s = getResult();
                         return Grads{e.mul(g, e.mul(s, e.rsubScalar(1.0, s)))};
                       });
}

LogicalResult ReluOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                     SmallVectorImpl<Value>& operandGrads) {
  // threshold_backward: the gradient flows where the input is > 0.
  return differentiate(
      *this, b, resultGrads, operandGrads,
      [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
        Value x = getInput();
        return Grads{e.mul(
            g, e.mask(ComparisonDirection::GT, x, e.splatLike(x, 0.0), g))};
      });
}

LogicalResult SqrtOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                     SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         return Grads{e.div(g, e.scale(getResult(), 2.0))};
                       });
}

LogicalResult AbsOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                    SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         Value x = getInput(), zero = e.splatLike(x, 0.0);
                         Value sign =
                             e.sub(e.mask(ComparisonDirection::GT, x, zero, g),
                                   e.mask(ComparisonDirection::LT, x, zero, g));
                         return Grads{e.mul(g, sign)};
                       });
}

LogicalResult ErfOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                    SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         Value x = getInput();
                         Value d = e.scale(e.exp(e.neg(e.mul(x, x))),
                                           2.0 / std::sqrt(M_PI));
                         return Grads{e.mul(g, d)};
                       });
}

LogicalResult NotOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                    SmallVectorImpl<Value>& operandGrads) {
  // i1 -> i1: no gradient (the driver never calls the rule).
  return differentiate(
      *this, b, resultGrads, operandGrads,
      [&](GradBuilder&, Value) -> FailureOr<Grads> { return Grads{Value()}; });
}

LogicalResult GeluOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                     SmallVectorImpl<Value>& operandGrads) {
  return differentiate(
      *this, b, resultGrads, operandGrads,
      [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
        Value x = getInput();
        if (!getTanhApproximation()) {
          // d/dx x*Phi(x) = Phi(x) + x*phi(x).
          Value cdf = e.scale(
              e.add(e.erf(e.scale(x, M_SQRT1_2)), e.splatLike(x, 1.0)), 0.5);
          Value pdf = e.scale(e.exp(e.scale(e.mul(x, x), -0.5)),
                              0.5 * M_2_SQRTPI * M_SQRT1_2);
          return Grads{e.mul(g, e.add(cdf, e.mul(x, pdf)))};
        }
        // PyTorch's tanh-form gelu_backward.
        const double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5, kKappa = 0.044715;
        Value x3 = e.mul(e.mul(x, x), x);
        Value inner = e.scale(e.add(x, e.scale(x3, kKappa)), kBeta);
        Value t = e.tanh(inner);
        Value left = e.scale(x, 0.5);
        Value right = e.add(t, e.splatLike(x, 1.0));
        Value leftDer = e.scale(right, 0.5);
        Value tanhDer = e.rsubScalar(1.0, e.mul(t, t));
        Value innerDer =
            e.scale(e.addScalar(1.0, e.scale(e.mul(x, x), 3 * kKappa)), kBeta);
        Value rightDer = e.mul(e.mul(left, tanhDer), innerDer);
        return Grads{e.mul(g, e.add(leftDer, rightDer))};
      });
}

LogicalResult ClampOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                      SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         Value x = getInput();
                         Value lo = e.splatLike(x, getMin().convertToDouble());
                         Value hi = e.splatLike(x, getMax().convertToDouble());
                         Value inside =
                             e.mul(e.mask(ComparisonDirection::GE, x, lo, g),
                                   e.mask(ComparisonDirection::LE, x, hi, g));
                         return Grads{e.mul(g, inside)};
                       });
}

LogicalResult CompareOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                        SmallVectorImpl<Value>& operandGrads) {
  // An i1 result: no gradient (the driver never calls the rule).
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder&, Value) -> FailureOr<Grads> {
                         return Grads{Value(), Value()};
                       });
}

LogicalResult SelectOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                       SmallVectorImpl<Value>& operandGrads) {
  return differentiate(
      *this, b, resultGrads, operandGrads,
      [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
        Value p = getPred(), zero = e.splatLike(g, 0.0);
        return Grads{Value(), e.select(p, g, zero), e.select(p, zero, g)};
      });
}

LogicalResult CastOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                     SmallVectorImpl<Value>& operandGrads) {
  // Float to float: cast the gradient back. From an integer or i1: none.
  return differentiate(
      *this, b, resultGrads, operandGrads,
      [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
        if (!isFloatTensor(getInput()))
          return Grads{Value()};
        return Grads{e.cast(g, tensorType(getInput()).getElementType())};
      });
}

//===----------------------------------------------------------------------===//
// Shape
//===----------------------------------------------------------------------===//

LogicalResult
BroadcastInDimOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                 SmallVectorImpl<Value>& operandGrads) {
  return differentiate(
      *this, b, resultGrads, operandGrads,
      [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
        return Grads{unbroadcastInDim(e, g, shapeOf(getInput()), getDims())};
      });
}

LogicalResult ReshapeOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                        SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         return Grads{e.reshape(g, shapeOf(getInput()))};
                       });
}

LogicalResult
TransposeOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                            SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         ArrayRef<int64_t> perm = getPermutation();
                         SmallVector<int64_t> inverse(perm.size());
                         for (auto [i, p] : llvm::enumerate(perm))
                           inverse[p] = static_cast<int64_t>(i);
                         return Grads{e.transpose(g, inverse)};
                       });
}

LogicalResult ConcatOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                       SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         int64_t axis = static_cast<int64_t>(getAxis());
                         SmallVector<int64_t> start(shapeOf(g).size(), 0);
                         SmallVector<int64_t> limit(shapeOf(g));
                         Grads grads;
                         for (Value in : getInputs()) {
                           limit[axis] = start[axis] + shapeOf(in)[axis];
                           grads.push_back(e.slice(g, start, limit));
                           start[axis] = limit[axis];
                         }
                         return grads;
                       });
}

LogicalResult SliceOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                      SmallVectorImpl<Value>& operandGrads) {
  return differentiate(
      *this, b, resultGrads, operandGrads,
      [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
        ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(g);
        SmallVector<int64_t> low, high;
        for (auto [d, start] : llvm::enumerate(getStart())) {
          int64_t stride = getStrides()[d];
          if (stride != 1 && out[d] > 1)
            return emitOpError()
                   << "has no derivative yet: strides other than 1 (dimension "
                   << d << " has stride " << stride << ")";
          low.push_back(start);
          high.push_back(in[d] - start - out[d]);
        }
        return Grads{e.pad(g, low, high)};
      });
}

LogicalResult PadOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                    SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         SmallVector<int64_t> limit;
                         for (auto [lo, d] :
                              llvm::zip(getLow(), shapeOf(getInput())))
                           limit.push_back(lo + d);
                         return Grads{e.slice(g, getLow(), limit)};
                       });
}

/// d/d(input) of take(input, indices, axis): every gathered row adds its
/// gradient back to the row it came from (a scatter-add). Built from
/// existing ops as a matmul with the one-hot matrix of the indices, so an
/// embedding trains; memory is K x (size of the axis), K the number of
/// indices. Indices get no gradient.
LogicalResult GatherOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                       SmallVectorImpl<Value>& operandGrads) {
  return differentiate(
      *this, b, resultGrads, operandGrads,
      [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
        auto dataType = tensorType(getInput());
        auto idxType = tensorType(getIndices());
        ArrayRef<int64_t> d = dataType.getShape();
        int64_t axis = static_cast<int64_t>(getAxis());
        int64_t size = d[axis], k = idxType.getNumElements();
        int64_t pre = 1, post = 1;
        for (int64_t i = 0; i < axis; ++i)
          pre *= d[i];
        for (int64_t i = axis + 1; i < dataType.getRank(); ++i)
          post *= d[i];
        Type it = idxType.getElementType();
        Location loc = getLoc();
        auto intConst = [&](ArrayRef<int64_t> shape,
                            ArrayRef<int64_t> values) -> Value {
          auto type = RankedTensorType::get(shape, it);
          SmallVector<APInt> bits;
          for (int64_t v : values)
            bits.push_back(APInt(it.getIntOrFloatBitWidth(), v, true));
          return ConstantOp::create(b, loc, DenseElementsAttr::get(type, bits));
        };
        // Indices as a column, negative ones counted from the end.
        Value idx = e.reshape(getIndices(), {k, 1});
        SmallVector<int64_t> zeros(k, 0), sizes(k, size);
        Value negative = e.compare(ComparisonDirection::LT, idx,
                                   intConst({k, 1}, zeros));
        idx = e.select(negative, e.add(idx, intConst({k, 1}, sizes)), idx);
        Value classes = intConst({1, size}, iota(0, size));
        Value oneHot = e.cast(
            e.compare(ComparisonDirection::EQ, e.broadcast(idx, {k, size}, {0, 1}),
                      e.broadcast(classes, {k, size}, {0, 1})),
            tensorType(g).getElementType());
        // g as [pre, K, post] -> [pre * post, K] x [K, size] -> back.
        Value g2 = e.reshape(e.transpose(e.reshape(g, {pre, k, post}), {0, 2, 1}),
                             {pre * post, k});
        Value r = e.matmul(g2, oneHot, false, false);
        Value back = e.transpose(e.reshape(r, {pre, post, size}), {0, 2, 1});
        return Grads{e.reshape(back, d), Value()};
      });
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

LogicalResult
ReduceSumOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                            SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         return Grads{e.expandReduced(g, shapeOf(getInput()),
                                                      getDims(), getKeepdim())};
                       });
}

LogicalResult
ReduceMeanOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                             SmallVectorImpl<Value>& operandGrads) {
  return differentiate(
      *this, b, resultGrads, operandGrads,
      [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
        ArrayRef<int64_t> shape = shapeOf(getInput());
        int64_t n = 1;
        for (int64_t d : getDims())
          n *= shape[d];
        Value gx = e.expandReduced(g, shape, getDims(), getKeepdim());
        return Grads{e.div(gx, e.splatLike(gx, static_cast<double>(n)))};
      });
}

LogicalResult
ReduceMaxOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                            SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         return reduceExtremumGrads(e, g, getInput(),
                                                    getResult(), getDims(),
                                                    getKeepdim());
                       });
}

LogicalResult
ReduceMinOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                            SmallVectorImpl<Value>& operandGrads) {
  return differentiate(*this, b, resultGrads, operandGrads,
                       [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
                         return reduceExtremumGrads(e, g, getInput(),
                                                    getResult(), getDims(),
                                                    getKeepdim());
                       });
}

//===----------------------------------------------------------------------===//
// Linear algebra and NN
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                       SmallVectorImpl<Value>& operandGrads) {
  return differentiate(
      *this, b, resultGrads, operandGrads,
      [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
        Value x = getLhs(), y = getRhs();
        bool ta = getTransposeA(), tb = getTransposeB();
        Value gx = ta ? e.matmul(y, g, tb, true) : e.matmul(g, y, false, !tb);
        Value gy = tb ? e.matmul(g, x, true, ta) : e.matmul(x, g, !ta, false);
        return Grads{gx, gy};
      });
}

LogicalResult SoftmaxOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                                        SmallVectorImpl<Value>& operandGrads) {
  return differentiate(
      *this, b, resultGrads, operandGrads,
      [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
        Value s = getResult();
        int64_t axis = static_cast<int64_t>(getAxis());
        Value dot = e.sum(e.mul(g, s), {axis}, /*keepdim=*/true);
        return Grads{e.mul(s, e.sub(g, e.expand(dot, shapeOf(g))))};
      });
}

LogicalResult
LogSoftmaxOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                             SmallVectorImpl<Value>& operandGrads) {
  return differentiate(
      *this, b, resultGrads, operandGrads,
      [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
        int64_t axis = static_cast<int64_t>(getAxis());
        Value total = e.expand(e.sum(g, {axis}, /*keepdim=*/true), shapeOf(g));
        return Grads{e.sub(g, e.mul(e.exp(getResult()), total))};
      });
}

LogicalResult
LayerNormOp::buildGradients(OpBuilder& b, ValueRange resultGrads,
                            SmallVectorImpl<Value>& operandGrads) {
  return differentiate(
      *this, b, resultGrads, operandGrads,
      [&](GradBuilder& e, Value g) -> FailureOr<Grads> {
        // x_hat = (x - mean) * rstd; y = x_hat * gamma + beta. The
        // statistics are recomputed, as the eager rule does.
        Value x = getInput();
        ArrayRef<int64_t> shape = shapeOf(x);
        int64_t axis = static_cast<int64_t>(getAxis());
        int64_t rank = static_cast<int64_t>(shape.size());
        SmallVector<int64_t> norm = iota(axis, rank), lead = iota(0, axis);
        auto rowMean = [&](Value v) {
          return e.expand(e.mean(v, norm, /*keepdim=*/true), shape);
        };
        Value xc = e.sub(x, rowMean(x));
        Value var = e.mean(e.mul(xc, xc), norm, /*keepdim=*/true);
        Value rstd = e.expand(
            e.div(e.splatLike(var, 1.0),
                  e.sqrt(e.add(
                      var, e.splatLike(var, getEpsilon().convertToDouble())))),
            shape);
        Value xhat = e.mul(xc, rstd);
        Value gxhat = e.mul(g, e.broadcast(getGamma(), shape, norm));
        Value term = e.sub(e.sub(gxhat, rowMean(gxhat)),
                           e.mul(xhat, rowMean(e.mul(gxhat, xhat))));
        Value gx = e.mul(term, rstd);
        Value gGamma = e.mul(g, xhat);
        if (!lead.empty())
          gGamma = e.sum(gGamma, lead, /*keepdim=*/false);
        Value gBeta = lead.empty() ? g : e.sum(g, lead, /*keepdim=*/false);
        return Grads{gx, gGamma, gBeta};
      });
}

LogicalResult Conv2dOp::buildGradients(OpBuilder&, ValueRange,
                                       SmallVectorImpl<Value>&) {
  return noDerivative(*this, "convolution backward kernels are needed");
}

LogicalResult MaxPool2dOp::buildGradients(OpBuilder&, ValueRange,
                                          SmallVectorImpl<Value>&) {
  return noDerivative(*this, "pooling backward kernels are needed");
}

LogicalResult AvgPool2dOp::buildGradients(OpBuilder&, ValueRange,
                                          SmallVectorImpl<Value>&) {
  return noDerivative(*this, "pooling backward kernels are needed");
}

LogicalResult BatchNormOp::buildGradients(OpBuilder&, ValueRange,
                                          SmallVectorImpl<Value>&) {
  return noDerivative(*this, "only the inference form exists");
}
