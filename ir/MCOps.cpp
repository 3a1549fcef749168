// The mc ops: type inference, verifiers, folders and canonicalizations.
#include "ir/MCDialect.h"
#include "ir/ShapeInference.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mc;

#define GET_OP_CLASSES
#include "ir/MCOps.cpp.inc"

namespace {

/// An error function for inferReturnTypes: reports at `loc` when there is
/// one, and drops the diagnostic otherwise (callers that only probe).

struct OptionalEmitter {
  std::optional<Location> loc;
  StringRef opName;
  InFlightDiagnostic operator()() const {
    if (!loc)
      return InFlightDiagnostic();
    return mlir::emitError(*loc) << "'" << opName << "' op ";
  }
};

/// True when `attr` is a splat constant equal to `value`.
bool isSplatOf(Attribute attr, int64_t value) {
  auto dense = llvm::dyn_cast_if_present<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat())
    return false;
  Type et = dense.getElementType();
  if (llvm::isa<FloatType>(et)) {
    APFloat v = dense.getSplatValue<APFloat>();
    bool lost = false;
    v.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
    return v.convertToDouble() == static_cast<double>(value);
  }
  if (llvm::isa<IntegerType>(et))
    return dense.getSplatValue<APInt>().getSExtValue() == value;
  return false;
}

RankedTensorType tensorType(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

} // namespace

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// Elementwise folders
//===----------------------------------------------------------------------===//

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 0))
    return getLhs();
  if (isSplatOf(adaptor.getLhs(), 0))
    return getRhs();
  return {};
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 0))
    return getLhs();
  return {};
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1))
    return getLhs();
  if (isSplatOf(adaptor.getLhs(), 1))
    return getRhs();
  return {};
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1))
    return getLhs();
  return {};
}

//===----------------------------------------------------------------------===//
// CastOp
//===----------------------------------------------------------------------===//

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

namespace {

/// True when every value of type `from` is exactly representable in `to`.
bool isLosslessWidening(Type from, Type to) {
  if (from == to || from.isInteger(1))
    return true;
  if (to.isF32())
    return from.isF16() || from.isBF16();
  if (to.isInteger(64))
    return from.isInteger(32);
  return false;
}

/// cast(cast(x : A -> B) : B -> C) -> cast(x : A -> C) when B holds every
/// value of A exactly: converting the same value from A or from B to C then
/// gives the same result.
struct FoldLosslessCastChain : OpRewritePattern<CastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CastOp op,
                                PatternRewriter& rewriter) const override {
    auto producer = op.getInput().getDefiningOp<CastOp>();
    if (!producer)
      return rewriter.notifyMatchFailure(op, "input is not a cast");
    Type a = tensorType(producer.getInput()).getElementType();
    Type b = tensorType(producer.getResult()).getElementType();
    if (!isLosslessWidening(a, b))
      return rewriter.notifyMatchFailure(
          op, "the inner cast rounds, so the chain is not one cast");
    rewriter.replaceOpWithNewOp<CastOp>(op, op.getType(),
                                        producer.getInput());
    return success();
  }
};

} // namespace

void CastOp::getCanonicalizationPatterns(RewritePatternSet& results,
                                         MLIRContext* context) {
  results.add<FoldLosslessCastChain>(context);
}

//===----------------------------------------------------------------------===//
// BroadcastInDimOp
//===----------------------------------------------------------------------===//

LogicalResult BroadcastInDimOp::verify() {
  return verifyBroadcastInDim(tensorType(getInput()).getShape(), getDims(),
                              getType().getShape(),
                              [&] { return emitOpError(); });
}

OpFoldResult BroadcastInDimOp::fold(FoldAdaptor) {
  if (getInput().getType() != getType())
    return {};
  for (auto [i, d] : llvm::enumerate(getDims()))
    if (d != static_cast<int64_t>(i))
      return {};
  return getInput();
}

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = tensorType(getInput());
  if (in.getNumElements() != getType().getNumElements())
    return emitOpError() << "cannot reshape " << in << " ("
                         << in.getNumElements() << " elements) to "
                         << getType() << " (" << getType().getNumElements()
                         << " elements)";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  return {};
}

//===----------------------------------------------------------------------===//
// TransposeOp
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(
    MLIRContext*, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type>& inferred) {
  auto in = tensorType(adaptor.getInput());
  auto shape =
      inferTransposeShape(in.getShape(), adaptor.getPermutation(),
                          OptionalEmitter{location, getOperationName()});
  if (failed(shape))
    return failure();
  inferred.push_back(RankedTensorType::get(*shape, in.getElementType()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  for (auto [i, p] : llvm::enumerate(getPermutation()))
    if (p != static_cast<int64_t>(i))
      return {};
  return getInput();
}

namespace {

/// transpose(transpose(x, p1), p2) -> transpose(x, q) with q[j] = p1[p2[j]].
struct ComposeTransposes : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter& rewriter) const override {
    auto producer = op.getInput().getDefiningOp<TransposeOp>();
    if (!producer)
      return rewriter.notifyMatchFailure(op, "input is not a transpose");
    ArrayRef<int64_t> inner = producer.getPermutation();
    SmallVector<int64_t> composed;
    for (int64_t p : op.getPermutation())
      composed.push_back(inner[p]);
    rewriter.replaceOpWithNewOp<TransposeOp>(op, op.getType(),
                                             producer.getInput(), composed);
    return success();
  }
};

} // namespace

void TransposeOp::getCanonicalizationPatterns(RewritePatternSet& results,
                                              MLIRContext* context) {
  results.add<ComposeTransposes>(context);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

template <typename Adaptor>
static LogicalResult inferReduce(std::optional<Location> location,
                                 StringRef name, Adaptor adaptor,
                                 SmallVectorImpl<Type>& inferred) {
  auto in = tensorType(adaptor.getInput());
  auto shape = inferReduceShape(in.getShape(), adaptor.getDims(),
                                adaptor.getKeepdim(),
                                OptionalEmitter{location, name});
  if (failed(shape))
    return failure();
  inferred.push_back(RankedTensorType::get(*shape, in.getElementType()));
  return success();
}

#define MC_REDUCE_INFER(OP)                                                    \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext*, std::optional<Location> location, Adaptor adaptor,         \
      SmallVectorImpl<Type>& inferred) {                                       \
    return inferReduce(location, getOperationName(), adaptor, inferred);       \
  }
MC_REDUCE_INFER(ReduceSumOp)
MC_REDUCE_INFER(ReduceMeanOp)
MC_REDUCE_INFER(ReduceMaxOp)
#undef MC_REDUCE_INFER

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext*,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type>& inferred) {
  auto lhs = tensorType(adaptor.getLhs());
  auto rhs = tensorType(adaptor.getRhs());
  OptionalEmitter emit{location, getOperationName()};
  if (lhs.getElementType() != rhs.getElementType()) {
    emit() << "expects operands of one element type, got "
           << lhs.getElementType() << " and " << rhs.getElementType();
    return failure();
  }
  auto shape =
      inferMatmulShape(lhs.getShape(), rhs.getShape(), adaptor.getTransposeA(),
                       adaptor.getTransposeB(), emit);
  if (failed(shape))
    return failure();
  inferred.push_back(RankedTensorType::get(*shape, lhs.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// SoftmaxOp
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  int64_t rank = getType().getRank();
  if (getAxis() < 0 || getAxis() >= rank)
    return emitOpError() << "axis " << getAxis()
                         << " is out of range for rank " << rank;
  return success();
}
