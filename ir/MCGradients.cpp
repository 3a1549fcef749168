// Reverse-mode derivatives of the mc ops (DifferentiableOpInterface): every
// op's buildGradients is the interface's default, which reads the op's
// attributes in registry form and calls the one dispatch of rules in
// ir/DerivativeRules.h (derivatives::byOpId) that eager autograd uses too,
// through a builder that emits mc ops. No op has a case here.
#include "ir/Batch.h"
#include "ir/DerivativeRules.h"
#include "ir/MCDialect.h"
#include "ir/RegistryOps.h"

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

Dims dims(ArrayRef<int64_t> a) { return Dims(a.begin(), a.end()); }

/// The tensor type of a rules' shape (a dim of the batch, -c, back to `?`).
RankedTensorType typeOf(const Dims& shape, Type element) {
  return symbolicType(SmallVector<int64_t>(shape.begin(), shape.end()),
                      element);
}

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

  Dims shape(Value v) { return dims(symbolicShape(v.getType())); }
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
  Value sin(Value x) { return SinOp::create(b, loc, x); }
  Value cos(Value x) { return CosOp::create(b, loc, x); }
  Value sinh(Value x) { return SinhOp::create(b, loc, x); }
  Value cosh(Value x) { return CoshOp::create(b, loc, x); }

  /// A static `like` gets a splat constant of its shape; one with the
  /// dynamic batch, a rank-0 constant broadcast to its type.
  Value splatLike(Value like, double v) {
    if (tensorType(like).hasStaticShape())
      return constant(like, shape(like), {v});
    return BroadcastInDimOp::create(b, loc, like.getType(),
                                    constant(like, {}, {v}), ArrayRef<int64_t>{});
  }
  /// The run-time batch size, splat like `like`: the sum of a batch of
  /// ones (f32, exact to 2^24, then cast to like's element type).
  Value batchCount(Value like) {
    Type f32 = b.getF32Type();
    auto one = ConstantOp::create(
        b, loc, DenseElementsAttr::get(RankedTensorType::get({}, f32),
                                       APFloat(1.0f)));
    Value ones = BroadcastInDimOp::create(
        b, loc, RankedTensorType::get({ShapedType::kDynamic}, f32), one,
        ArrayRef<int64_t>{});
    Value n = ReduceSumOp::create(b, loc, ones, ArrayRef<int64_t>{0}, false);
    Value splat = BroadcastInDimOp::create(
        b, loc, withElementType(tensorType(like), f32), n,
        ArrayRef<int64_t>{});
    return castLike(splat, like);
  }
  /// `values` (one for a splat) in the float element type of `like`.
  Value constant(Value like, const Dims& shape,
                 const std::vector<double>& values) {
    auto type = typeOf(shape, tensorType(like).getElementType());
    assert(type.hasStaticShape() && "constants have static shapes");
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
    auto type = withElementType(tensorType(x), b.getI1Type());
    return CompareOp::create(b, loc, type, direction(dir), x, y);
  }
  Value select(Value pred, Value x, Value y) {
    return SelectOp::create(b, loc, x.getType(), pred, x, y);
  }
  Value castLike(Value x, Value like) {
    auto type = withElementType(tensorType(x), tensorType(like).getElementType());
    if (type == x.getType())
      return x;
    return CastOp::create(b, loc, type, x);
  }

  Value reshape(Value x, const Dims& shape) {
    auto type = typeOf(shape, tensorType(x).getElementType());
    if (type == x.getType())
      return x;
    return ReshapeOp::create(b, loc, type, x);
  }
  Value broadcastInDim(Value x, const Dims& shape, const Dims& dims) {
    auto type = typeOf(shape, tensorType(x).getElementType());
    return BroadcastInDimOp::create(b, loc, type, x, dims);
  }
  Value transpose(Value x, const Dims& perm) {
    SmallVector<int64_t> shape;
    SmallVector<int64_t> in = symbolicShape(x.getType());
    for (int64_t p : perm)
      shape.push_back(in[p]);
    auto type = symbolicType(shape, tensorType(x).getElementType());
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
  Value scatterAdd(Value g, Value indices, int64_t axis, int64_t size) {
    // mc.scatter_add sums in f32: a low-precision gradient goes through it.
    Value f32 = g;
    auto type = tensorType(g);
    if (!type.getElementType().isF32())
      f32 = CastOp::create(b, loc, withElementType(type, b.getF32Type()), g);
    Value sum =
        ScatterAddOp::create(b, loc, f32, indices, static_cast<uint64_t>(axis),
                             static_cast<uint64_t>(size));
    return castLike(sum, g);
  }
  Value dropout(Value x, Value seed, Value offset, double p) {
    return DropoutOp::create(b, loc, x, seed, offset, APFloat(p));
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

LogicalResult mc::buildRegisteredGradients(Operation* op, OpBuilder& b,
                                           ValueRange resultGrads,
                                           SmallVectorImpl<Value>& operandGrads) {
  rt::OpId id;
  if (!rt::findOp(op->getName().getStringRef(), &id))
    return op->emitOpError() << "is not in the op registry";
  FailureOr<rt::OpAttrs> attrs = registryAttributes(op, rt::opInfo(id));
  if (failed(attrs))
    return failure();
  // The rules are written for NCHW; mc-channels-last runs on inference
  // graphs only, after any differentiation.
  if (attrs->getBool("channels_last"))
    return op->emitOpError()
           << "has channels_last, which autodiff does not differentiate "
              "(training graphs keep NCHW; mc-channels-last is an inference "
              "pass)";
  // gather's gradient sums rows into a tensor of the gathered axis's size,
  // which must be static: a gather along the dynamic batch (a pick of
  // samples) has none to sum into.
  if (id == rt::OpId::Gather) {
    int64_t axis = attrs->getInt("axis");
    auto data = symbolicShape(op->getOperand(0).getType());
    if (axis >= 0 && axis < int64_t(data.size()) &&
        rt::shapes::isBatch(data[size_t(axis)]))
      return op->emitOpError()
             << "gathers along the dynamic batch dimension (axis " << axis
             << "), whose gradient autodiff does not build (it sums into a "
                "tensor of the axis's size, which must be static); give the "
                "model a static batch (no --batch range)";
  }
  std::vector<Value> in(op->getOperands().begin(), op->getOperands().end());
  bool known = true;
  LogicalResult result = differentiate(
      op, b, resultGrads, operandGrads, [&](GradBuilder& e, Value g) {
        auto grads =
            rules::byOpId(e, id, g, in, Value(op->getResult(0)), *attrs);
        known = grads.has_value();
        return grads ? *grads : Grads(in.size());
      });
  if (!known)
    return op->emitOpError()
           << "has no derivative rule (add one to derivatives::byOpId in "
              "ir/DerivativeRules.h)";
  return result;
}
