// Reverse-mode derivatives of the mc ops (DifferentiableOpInterface): each
// op's buildGradients calls its rule in ir/DerivativeRules.h, the one eager
// autograd uses too, through a builder that emits mc ops.
#include "ir/DerivativeRules.h"
#include "ir/MCDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mc;
namespace rules = mc::derivatives;
using rules::Dims;

namespace {

RankedTensorType tensorType(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

ArrayRef<int64_t> shapeOf(Value v) { return tensorType(v).getShape(); }

Dims dims(ArrayRef<int64_t> a) { return Dims(a.begin(), a.end()); }

bool isFloatTensor(Value v) {
  auto t = llvm::dyn_cast<RankedTensorType>(v.getType());
  return t && llvm::isa<FloatType>(t.getElementType());
}

/// The rules' directions are the registry's rt::CompareOp, one encoding with
/// the dialect's (static_assert in MCOps.cpp).
ComparisonDirection direction(rules::Cmp c) {
  return static_cast<ComparisonDirection>(static_cast<int>(c));
}

/// The builder of DerivativeRules.h over mc ops, located at the op being
/// differentiated (so the backward ops keep its module path). The dialect
/// has no implicit broadcast: scalars are splat constants of the full shape.
class GradBuilder {
public:
  using Value = mlir::Value;

  GradBuilder(OpBuilder& b, Location loc) : b(b), loc(loc) {}

  Dims shape(Value v) { return dims(shapeOf(v)); }
  bool isFloat(Value v) { return isFloatTensor(v); }

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

  Value splatLike(Value like, double v) {
    return constant(like, shape(like), {v});
  }
  /// `values` (one for a splat) in the float element type of `like`.
  Value constant(Value like, const Dims& shape,
                 const std::vector<double>& values) {
    auto type = RankedTensorType::get(shape, tensorType(like).getElementType());
    const llvm::fltSemantics& sem =
        llvm::cast<FloatType>(type.getElementType()).getFloatSemantics();
    SmallVector<APFloat> floats;
    for (double v : values) {
      APFloat f(v);
      bool lost = false;
      f.convert(sem, APFloat::rmNearestTiesToEven, &lost);
      floats.push_back(f);
    }
    if (floats.size() == 1)
      return ConstantOp::create(b, loc,
                                DenseElementsAttr::get(type, floats[0]));
    return ConstantOp::create(b, loc, DenseElementsAttr::get(type, floats));
  }
  /// Integers of `like`'s element type (i64 without one).
  Value intConstant(Value like, const Dims& shape, const Dims& values) {
    Type it = like ? tensorType(like).getElementType() : b.getI64Type();
    auto type = RankedTensorType::get(shape, it);
    SmallVector<APInt> bits;
    for (int64_t v : values)
      bits.push_back(APInt(it.getIntOrFloatBitWidth(), v, /*isSigned=*/true));
    return ConstantOp::create(b, loc, DenseElementsAttr::get(type, bits));
  }

  Value compare(rules::Cmp dir, Value x, Value y) {
    auto type = RankedTensorType::get(shapeOf(x), b.getI1Type());
    return CompareOp::create(b, loc, type, direction(dir), x, y);
  }
  Value select(Value pred, Value x, Value y) {
    return SelectOp::create(b, loc, x.getType(), pred, x, y);
  }
  Value castLike(Value x, Value like) {
    auto type =
        RankedTensorType::get(shapeOf(x), tensorType(like).getElementType());
    if (type == x.getType())
      return x;
    return CastOp::create(b, loc, type, x);
  }

  Value reshape(Value x, const Dims& shape) {
    if (shapeOf(x) == ArrayRef<int64_t>(shape))
      return x;
    auto type = RankedTensorType::get(shape, tensorType(x).getElementType());
    return ReshapeOp::create(b, loc, type, x);
  }
  Value broadcastInDim(Value x, const Dims& shape, const Dims& dims) {
    auto type = RankedTensorType::get(shape, tensorType(x).getElementType());
    return BroadcastInDimOp::create(b, loc, type, x, dims);
  }
  Value transpose(Value x, const Dims& perm) {
    SmallVector<int64_t> shape;
    for (int64_t p : perm)
      shape.push_back(shapeOf(x)[p]);
    auto type = RankedTensorType::get(shape, tensorType(x).getElementType());
    return TransposeOp::create(b, loc, type, x, perm);
  }
  Value reduceSum(Value x, const Dims& dims, bool keepdim) {
    return ReduceSumOp::create(b, loc, x, dims, keepdim);
  }
  Value reduceMean(Value x, const Dims& dims, bool keepdim) {
    return ReduceMeanOp::create(b, loc, x, dims, keepdim);
  }
  Value matmul(Value x, Value y, bool transposeA, bool transposeB) {
    return MatmulOp::create(b, loc, x, y, transposeA, transposeB);
  }
  Value slice(Value x, const Dims& start, const Dims& limit,
              const Dims& strides) {
    return SliceOp::create(b, loc, x, start, limit, strides);
  }
  Value pad(Value x, const Dims& low, const Dims& high, double value) {
    return PadOp::create(b, loc, x, low, high, APFloat(value));
  }
  Value conv2d(Value x, Value w, const Dims& strides, const Dims& padding,
               const Dims& dilation, int64_t groups) {
    return Conv2dOp::create(b, loc, x, w, strides, padding, dilation,
                            static_cast<uint64_t>(groups));
  }
  Value gather(Value x, Value indices, int64_t axis) {
    return GatherOp::create(b, loc, x, indices, static_cast<uint64_t>(axis));
  }

private:
  OpBuilder& b;
  Location loc;
};

using Grads = rules::Grads<GradBuilder>;

/// The driver shared by every op: one entry per operand, no gradient
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
  Grads grads = rule(e, g);
  assert(grads.size() == op->getNumOperands() && "one gradient per operand");
  for (auto [i, grad] : llvm::enumerate(grads))
    if (grad && isFloatTensor(op->getOperand(i)))
      operandGrads[i] = grad;
  return success();
}

} // namespace

/// Defines OP::buildGradients as `differentiate` with the rule expression
/// RULE, which sees the builder `e`, the result gradient `g` and the op.
#define MC_GRADIENT(OP, RULE)                                                  \
  LogicalResult OP::buildGradients(OpBuilder& b, ValueRange resultGrads,       \
                                   SmallVectorImpl<Value>& operandGrads) {     \
    return differentiate(*this, b, resultGrads, operandGrads,                  \
                         [&](GradBuilder& e, Value g) { return RULE; });       \
  }

// Elementwise.
MC_GRADIENT(AddOp, rules::add(e, g))
MC_GRADIENT(SubOp, rules::sub(e, g))
MC_GRADIENT(MulOp, rules::mul(e, g, getLhs(), getRhs()))
MC_GRADIENT(DivOp, rules::div(e, g, getRhs(), getResult()))
MC_GRADIENT(MaximumOp, rules::extremum(e, g, getLhs(), getRhs(), true))
MC_GRADIENT(MinimumOp, rules::extremum(e, g, getLhs(), getRhs(), false))
MC_GRADIENT(PowOp, rules::pow(e, g, getLhs(), getRhs(), getResult()))
MC_GRADIENT(NegOp, rules::neg(e, g))
MC_GRADIENT(ExpOp, rules::exp(e, g, getResult()))
MC_GRADIENT(LogOp, rules::log(e, g, getInput()))
MC_GRADIENT(TanhOp, rules::tanh(e, g, getResult()))
MC_GRADIENT(SigmoidOp, rules::sigmoid(e, g, getResult()))
MC_GRADIENT(ReluOp, rules::relu(e, g, getInput()))
MC_GRADIENT(SqrtOp, rules::sqrt(e, g, getResult()))
MC_GRADIENT(AbsOp, rules::abs(e, g, getInput()))
MC_GRADIENT(ErfOp, rules::erf(e, g, getInput()))
MC_GRADIENT(GeluOp, rules::gelu(e, g, getInput(), getTanhApproximation()))
MC_GRADIENT(ClampOp, rules::clamp(e, g, getInput(), getMin().convertToDouble(),
                                  getMax().convertToDouble()))
// i1 results: the driver never calls these rules.
MC_GRADIENT(CompareOp, rules::none<GradBuilder>(2))
MC_GRADIENT(NotOp, rules::none<GradBuilder>(1))
MC_GRADIENT(SelectOp, rules::select(e, g, getPred()))
MC_GRADIENT(CastOp, rules::cast(e, g, getInput()))

// Shape.
MC_GRADIENT(BroadcastInDimOp,
            rules::broadcastInDim(e, g, e.shape(getInput()), dims(getDims())))
MC_GRADIENT(ReshapeOp, rules::reshape(e, g, e.shape(getInput())))
MC_GRADIENT(TransposeOp, rules::transpose(e, g, dims(getPermutation())))
MC_GRADIENT(ConcatOp, ([&] {
              std::vector<Dims> shapes;
              for (Value in : getInputs())
                shapes.push_back(e.shape(in));
              return rules::concat(e, g, shapes,
                                   static_cast<int64_t>(getAxis()));
            }()))
MC_GRADIENT(SliceOp, rules::slice(e, g, e.shape(getInput()), dims(getStart()),
                                  dims(getStrides())))
MC_GRADIENT(PadOp, rules::pad(e, g, e.shape(getInput()), dims(getLow())))
MC_GRADIENT(GatherOp, rules::gather(e, g, e.shape(getInput()), getIndices(),
                                    static_cast<int64_t>(getAxis())))

// Reductions.
MC_GRADIENT(ReduceSumOp, rules::reduceSum(e, g, e.shape(getInput()),
                                          dims(getDims()), getKeepdim()))
MC_GRADIENT(ReduceMeanOp, rules::reduceMean(e, g, e.shape(getInput()),
                                            dims(getDims()), getKeepdim()))
MC_GRADIENT(ReduceMaxOp, rules::reduceExtremum(e, g, getInput(), getResult(),
                                               dims(getDims()), getKeepdim()))
MC_GRADIENT(ReduceMinOp, rules::reduceExtremum(e, g, getInput(), getResult(),
                                               dims(getDims()), getKeepdim()))

// Linear algebra and NN.
MC_GRADIENT(MatmulOp, rules::matmul(e, g, getLhs(), getRhs(), getTransposeA(),
                                    getTransposeB()))
MC_GRADIENT(SoftmaxOp,
            rules::softmax(e, g, getResult(), static_cast<int64_t>(getAxis())))
MC_GRADIENT(LogSoftmaxOp, rules::logSoftmax(e, g, getResult(),
                                            static_cast<int64_t>(getAxis())))
MC_GRADIENT(LayerNormOp, rules::layerNorm(e, g, getInput(), getGamma(),
                                          static_cast<int64_t>(getAxis()),
                                          getEpsilon().convertToDouble()))
MC_GRADIENT(BatchNormOp,
            rules::batchNorm(e, g, getInput(), getScale(), getMean(),
                             getVariance(), getEpsilon().convertToDouble(),
                             static_cast<int64_t>(getFeatureAxis())))
MC_GRADIENT(Conv2dOp,
            rules::conv2d(e, g, getInput(), getWeight(), dims(getStrides()),
                          dims(getPadding()), dims(getDilation()),
                          static_cast<int64_t>(getGroups())))
MC_GRADIENT(MaxPool2dOp,
            rules::maxPool2d(e, g, getInput(), getResult(), dims(getKernel()),
                             dims(getStrides()), dims(getPadding()),
                             dims(getDilation())))
MC_GRADIENT(AvgPool2dOp,
            rules::avgPool2d(e, g, getInput(), dims(getKernel()),
                             dims(getStrides()), dims(getPadding()),
                             dims(getDilation()), getCountIncludePad()))

LogicalResult mc::buildRegisteredGradients(Operation* op, OpBuilder& b,
                                           ValueRange resultGrads,
                                           SmallVectorImpl<Value>& operandGrads) {
  rt::OpId id;
  if (!rt::findOp(op->getName().getStringRef(), &id))
    return op->emitOpError() << "is not in the op registry";
  std::vector<Value> in(op->getOperands().begin(), op->getOperands().end());
  bool known = true;
  LogicalResult result = differentiate(
      op, b, resultGrads, operandGrads, [&](GradBuilder& e, Value g) {
        auto grads = rules::byOpId(e, id, g, in, Value(op->getResult(0)));
        known = grads.has_value();
        return grads ? *grads : Grads(in.size());
      });
  if (!known)
    return op->emitOpError()
           << "has no derivative rule (add one to derivatives::byOpId in "
              "ir/DerivativeRules.h)";
  return result;
}
