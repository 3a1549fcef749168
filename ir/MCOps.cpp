// The mc ops: type inference, verifiers, folders and canonicalizations.
#include "ir/MCDialect.h"
#include "ir/Batch.h"
#include "modelc/ops.h"
#include "ir/RegistryOps.h"
#include "ir/ShapeInference.h"
#include "modelc/shapes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <optional>

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

/// The value of a float splat attribute, as a double.
std::optional<double> floatSplatOf(Attribute attr) {
  auto dense = llvm::dyn_cast_if_present<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat() ||
      !llvm::isa<FloatType>(dense.getElementType()))
    return std::nullopt;
  APFloat v = dense.getSplatValue<APFloat>();
  bool lost = false;
  v.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
  return v.convertToDouble();
}

/// True when `attr` is a splat constant equal to `value`.
bool isSplatOf(Attribute attr, int64_t value) {
  if (std::optional<double> f = floatSplatOf(attr))
    return *f == static_cast<double>(value);
  auto dense = llvm::dyn_cast_if_present<DenseElementsAttr>(attr);
  if (dense && dense.isSplat() && llvm::isa<IntegerType>(dense.getElementType()))
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

/// cast(transpose(x)) -> transpose(cast(x)), and the same through a
/// reshape, when the cast narrows (f32 to bf16 / f16) and the transpose or
/// reshape has no other user: the same values, but the transpose moves half
/// the bytes, and a cast that meets the widening cast AMP put before it
/// folds away with it (bf16 -> f32 -> transpose -> bf16 becomes one bf16
/// transpose). Data movement only, so exact.
struct NarrowBeforeTranspose : OpRewritePattern<CastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CastOp op,
                                PatternRewriter& rewriter) const override {
    Operation* mover = op.getInput().getDefiningOp();
    if (!mover || !llvm::isa<TransposeOp, ReshapeOp>(mover) ||
        !mover->hasOneUse())
      return rewriter.notifyMatchFailure(op, "input is not a transpose or "
                                             "reshape only this cast reads");
    Type from = tensorType(op.getInput()).getElementType();
    Type to = op.getType().getElementType();
    if (!llvm::isa<FloatType>(from) || !llvm::isa<FloatType>(to) ||
        to.getIntOrFloatBitWidth() >= from.getIntOrFloatBitWidth())
      return rewriter.notifyMatchFailure(op, "not a narrowing float cast");
    Value source = mover->getOperand(0);
    auto inType = tensorType(source);
    auto narrowed = RankedTensorType::get(inType.getShape(), to,
                                          inType.getEncoding());
    Value cast = CastOp::create(rewriter, op.getLoc(), narrowed, source);
    if (auto transpose = llvm::dyn_cast<TransposeOp>(mover))
      rewriter.replaceOpWithNewOp<TransposeOp>(op, op.getType(), cast,
                                               transpose.getPermutation());
    else
      rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), cast);
    return success();
  }
};

} // namespace

void CastOp::getCanonicalizationPatterns(RewritePatternSet& results,
                                         MLIRContext* context) {
  results.add<FoldLosslessCastChain, NarrowBeforeTranspose>(context);
}

//===----------------------------------------------------------------------===//
// BroadcastInDimOp
//===----------------------------------------------------------------------===//

LogicalResult BroadcastInDimOp::verify() {
  return verifyBroadcastInDim(symbolicShape(getInput().getType()), getDims(),
                              symbolicShape(getType()),
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
  if (in.hasStaticShape() && getType().hasStaticShape()) {
    if (in.getNumElements() != getType().getNumElements())
      return emitOpError() << "cannot reshape " << in << " ("
                           << in.getNumElements() << " elements) to "
                           << getType() << " (" << getType().getNumElements()
                           << " elements)";
    return success();
  }
  return verifyReshape(symbolicShape(in), symbolicShape(getType()),
                       [&] { return emitOpError(); });
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
      inferTransposeShape(symbolicShape(in), adaptor.getPermutation(),
                          OptionalEmitter{location, getOperationName()});
  if (failed(shape))
    return failure();
  inferred.push_back(symbolicType(*shape, in.getElementType()));
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
// Splats
//===----------------------------------------------------------------------===//

std::optional<double> mc::floatSplatValue(Value v) {
  if (auto b = v.getDefiningOp<BroadcastInDimOp>())
    return floatSplatValue(b.getInput());
  auto c = v.getDefiningOp<ConstantOp>();
  return c ? floatSplatOf(c.getValue()) : std::nullopt;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

template <typename Adaptor>
static LogicalResult inferReduce(std::optional<Location> location,
                                 StringRef name, Adaptor adaptor,
                                 SmallVectorImpl<Type>& inferred) {
  auto in = tensorType(adaptor.getInput());
  auto shape = inferReduceShape(symbolicShape(in), adaptor.getDims(),
                                adaptor.getKeepdim(),
                                OptionalEmitter{location, name});
  if (failed(shape))
    return failure();
  inferred.push_back(symbolicType(*shape, in.getElementType()));
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
MC_REDUCE_INFER(ReduceMinOp)
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
      inferMatmulShape(symbolicShape(lhs), symbolicShape(rhs), adaptor.getTransposeA(),
                       adaptor.getTransposeB(), emit);
  if (failed(shape))
    return failure();
  inferred.push_back(symbolicType(*shape, lhs.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// SoftmaxOp
//===----------------------------------------------------------------------===//

/// I64Attr accessors return uint64_t; axes are signed.
template <typename Op> static LogicalResult verifyAxis(Op op) {
  int64_t rank = op.getType().getRank();
  int64_t axis = static_cast<int64_t>(op.getAxis());
  if (axis < 0 || axis >= rank)
    return op.emitOpError() << "axis " << axis << " is out of range for rank "
                            << rank;
  return success();
}

LogicalResult SoftmaxOp::verify() { return verifyAxis(*this); }

LogicalResult LogSoftmaxOp::verify() { return verifyAxis(*this); }

//===----------------------------------------------------------------------===//
// Ops of real models
//===----------------------------------------------------------------------===//

LogicalResult AllReduceStartOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "needs at least one tensor to reduce";
  if (static_cast<int64_t>(getRanks()) < 1)
    return emitOpError() << "ranks must be >= 1, got "
                         << static_cast<int64_t>(getRanks());
  auto bucket = llvm::cast<RankedTensorType>(getResult().getType());
  int64_t total = 0;
  for (auto [k, v] : llvm::enumerate(getInputs())) {
    auto type = llvm::cast<RankedTensorType>(v.getType());
    if (!type.hasStaticShape())
      return emitOpError() << "operand " << k << " has a dynamic shape "
                           << type << "; buckets hold static tensors";
    if (type.getElementType() != bucket.getElementType())
      return emitOpError() << "operand " << k << " is " << type
                           << ", but the bucket's element type is "
                           << bucket.getElementType();
    total += type.getNumElements();
  }
  if (bucket.getRank() != 1 || bucket.getDimSize(0) != total)
    return emitOpError() << "result must be the 1-D bucket of every operand's "
                            "elements, "
                         << RankedTensorType::get({total},
                                                  bucket.getElementType())
                         << "; got " << bucket;
  return success();
}

LogicalResult AllReduceWaitOp::verify() {
  if (!getBucket().getDefiningOp<AllReduceStartOp>())
    return emitOpError() << "waits on a value no mc.all_reduce_start made";
  double scale = getScale().convertToDouble();
  if (!(scale > 0) || std::isinf(scale))
    return emitOpError() << "scale must be finite and > 0, got " << scale;
  return success();
}

LogicalResult ClampOp::verify() {
  if (getMin().convertToDouble() > getMax().convertToDouble())
    return emitOpError() << "min " << getMin().convertToDouble()
                         << " is greater than max "
                         << getMax().convertToDouble();
  return success();
}

LogicalResult DropoutOp::verify() {
  double p = getP().convertToDouble();
  if (!(p >= 0 && p <= 1))
    return emitOpError() << "p " << p << " is outside [0, 1]";
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext*,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type>& inferred) {
  OptionalEmitter emit{location, getOperationName()};
  SmallVector<SmallVector<int64_t>> symbolic;
  SmallVector<ArrayRef<int64_t>> shapes;
  Type element;
  for (Value v : adaptor.getInputs()) {
    auto t = tensorType(v);
    if (element && t.getElementType() != element) {
      emit() << "expects inputs of one element type, got " << element
             << " and " << t.getElementType();
      return failure();
    }
    element = t.getElementType();
    symbolic.push_back(symbolicShape(t));
  }
  for (const SmallVector<int64_t>& s : symbolic)
    shapes.push_back(s);
  auto shape = inferConcatShape(shapes, adaptor.getAxis(), emit);
  if (failed(shape))
    return failure();
  inferred.push_back(symbolicType(*shape, element));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext*,
                                        std::optional<Location> location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type>& inferred) {
  auto in = tensorType(adaptor.getInput());
  auto shape = inferSliceShape(symbolicShape(in), adaptor.getStart(),
                               adaptor.getLimit(), adaptor.getStrides(),
                               OptionalEmitter{location, getOperationName()});
  if (failed(shape))
    return failure();
  inferred.push_back(symbolicType(*shape, in.getElementType()));
  return success();
}

OpFoldResult PadOp::fold(FoldAdaptor) {
  if (getInput().getType() != getType() ||
      llvm::any_of(getLow(), [](int64_t v) { return v != 0; }) ||
      llvm::any_of(getHigh(), [](int64_t v) { return v != 0; }))
    return {};
  return getInput();
}

OpFoldResult SliceOp::fold(FoldAdaptor) {
  if (getInput().getType() != getType())
    return {};
  for (auto [s, st] : llvm::zip(getStart(), getStrides()))
    if (s != 0 || st != 1)
      return {};
  return getInput();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext*,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type>& inferred) {
  auto in = tensorType(adaptor.getInput());
  auto shape = inferGatherShape(symbolicShape(in),
                                symbolicShape(adaptor.getIndices().getType()),
                                adaptor.getAxis(),
                                OptionalEmitter{location, getOperationName()});
  if (failed(shape))
    return failure();
  inferred.push_back(symbolicType(*shape, in.getElementType()));
  return success();
}

LogicalResult ScatterAddOp::inferReturnTypes(MLIRContext*,
                                             std::optional<Location> location,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type>& inferred) {
  auto updates = tensorType(adaptor.getUpdates());
  auto shape = inferScatterAddShape(
      symbolicShape(updates), symbolicShape(adaptor.getIndices().getType()),
      adaptor.getAxis(), adaptor.getSize(),
      OptionalEmitter{location, getOperationName()});
  if (failed(shape))
    return failure();
  inferred.push_back(symbolicType(*shape, updates.getElementType()));
  return success();
}

LogicalResult PadOp::inferReturnTypes(MLIRContext*,
                                      std::optional<Location> location,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type>& inferred) {
  auto in = tensorType(adaptor.getInput());
  auto shape = inferPadShape(symbolicShape(in), adaptor.getLow(),
                             adaptor.getHigh(),
                             OptionalEmitter{location, getOperationName()});
  if (failed(shape))
    return failure();
  inferred.push_back(symbolicType(*shape, in.getElementType()));
  return success();
}

LogicalResult Conv2dOp::inferReturnTypes(MLIRContext*,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type>& inferred) {
  OptionalEmitter emit{location, getOperationName()};
  auto in = tensorType(adaptor.getInput());
  auto w = tensorType(adaptor.getWeight());
  if (in.getElementType() != w.getElementType()) {
    emit() << "expects input and weight of one element type, got "
           << in.getElementType() << " and " << w.getElementType();
    return failure();
  }
  auto shape = inferConv2dShape(symbolicShape(in), symbolicShape(w),
                                adaptor.getStrides(), adaptor.getPadding(),
                                adaptor.getDilation(), adaptor.getGroups(),
                                adaptor.getChannelsLast(), emit);
  if (failed(shape))
    return failure();
  inferred.push_back(symbolicType(*shape, in.getElementType()));
  return success();
}

template <typename Adaptor>
static LogicalResult inferPool(std::optional<Location> location,
                               StringRef name, Adaptor adaptor,
                               SmallVectorImpl<Type>& inferred) {
  auto in = tensorType(adaptor.getInput());
  auto shape = inferPool2dShape(
      symbolicShape(in), adaptor.getKernel(), adaptor.getStrides(),
      adaptor.getPadding(), adaptor.getDilation(), adaptor.getCeilMode(),
      adaptor.getChannelsLast(), OptionalEmitter{location, name});
  if (failed(shape))
    return failure();
  inferred.push_back(symbolicType(*shape, in.getElementType()));
  return success();
}

LogicalResult MaxPool2dOp::inferReturnTypes(MLIRContext*,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type>& inferred) {
  return inferPool(location, getOperationName(), adaptor, inferred);
}

LogicalResult AvgPool2dOp::inferReturnTypes(MLIRContext*,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type>& inferred) {
  if (adaptor.getDilation() != ArrayRef<int64_t>{1, 1}) {
    OptionalEmitter{location, getOperationName()}()
        << "dilation must be [1, 1] for average pooling";
    return failure();
  }
  return inferPool(location, getOperationName(), adaptor, inferred);
}

/// The artifact verifier's rule for a normalization's epsilon: NaN or inf
/// normalizes nothing.
static LogicalResult verifyEpsilon(Operation* op, const APFloat& epsilon) {
  double eps = epsilon.convertToDouble();
  if (eps >= 0 && !std::isinf(eps))
    return success();
  auto diag = op->emitOpError() << "epsilon must be finite and >= 0, got ";
  if (std::isnan(eps))
    return diag << "nan";
  if (std::isinf(eps))
    return diag << (eps < 0 ? "-inf" : "inf");
  return diag << eps;
}

LogicalResult BatchNormOp::verify() {
  auto in = tensorType(getInput());
  auto scale = tensorType(getScale());
  int64_t axis = static_cast<int64_t>(getFeatureAxis());
  if (axis < 0 || axis >= in.getRank())
    return emitOpError() << "feature_axis " << axis
                         << " is out of range for rank " << in.getRank();
  if (in.isDynamicDim(axis))
    return emitOpError() << "feature_axis " << axis
                         << " is the batch (?), whose size is only known at "
                            "run time";
  if (scale.getRank() != 1 || scale.getDimSize(0) != in.getDimSize(axis))
    return emitOpError() << "expects scale, offset, mean and variance of "
                            "shape ["
                         << in.getDimSize(axis) << "] (the size of feature "
                         << "axis " << axis << "), got " << scale;
  if (scale.getElementType() != in.getElementType())
    return emitOpError() << "expects parameters of the input's element type "
                         << in.getElementType() << ", got " << scale;
  if (failed(verifyEpsilon(*this, getEpsilon())))
    return failure();
  return success();
}

LogicalResult LayerNormOp::verify() {
  auto in = tensorType(getInput());
  auto gamma = tensorType(getGamma());
  int64_t axis = static_cast<int64_t>(getAxis());
  if (axis < 0 || axis >= in.getRank())
    return emitOpError() << "axis " << axis << " is out of range for rank "
                         << in.getRank();
  if (gamma.getShape() != in.getShape().drop_front(axis))
    return emitOpError() << "expects gamma and beta of the normalized shape "
                            "(input dimensions from axis "
                         << axis << " on), got " << gamma << " for input "
                         << in;
  if (gamma.getElementType() != in.getElementType())
    return emitOpError() << "expects gamma and beta of the input's element "
                            "type "
                         << in.getElementType() << ", got " << gamma;
  if (failed(verifyEpsilon(*this, getEpsilon())))
    return failure();
  return success();
}

// mc.compare's direction travels as its integer value (artifact steps, the
// frontend's records): the dialect's enum and the registry's are one
// encoding.
static_assert(static_cast<int>(mc::ComparisonDirection::EQ) ==
                      static_cast<int>(mc::rt::CompareOp::Eq) &&
                  static_cast<int>(mc::ComparisonDirection::NE) ==
                      static_cast<int>(mc::rt::CompareOp::Ne) &&
                  static_cast<int>(mc::ComparisonDirection::LT) ==
                      static_cast<int>(mc::rt::CompareOp::Lt) &&
                  static_cast<int>(mc::ComparisonDirection::LE) ==
                      static_cast<int>(mc::rt::CompareOp::Le) &&
                  static_cast<int>(mc::ComparisonDirection::GT) ==
                      static_cast<int>(mc::rt::CompareOp::Gt) &&
                  static_cast<int>(mc::ComparisonDirection::GE) ==
                      static_cast<int>(mc::rt::CompareOp::Ge),
              "ir/MCEnums.td and modelc/ops.h disagree on directions");

//===----------------------------------------------------------------------===//
// mc.fused
//===----------------------------------------------------------------------===//

/// A view inside a region (schema 2.6): a transpose, reshape or slice of a
/// region input or of another view, not the region's last op; the device
/// reads it in place, as a strided view of the input's bytes.
static bool isRegionView(Operation* op) {
  if (!llvm::isa_and_nonnull<TransposeOp, ReshapeOp, SliceOp>(op) ||
      llvm::isa<YieldOp>(op->getNextNode()))
    return false;
  Value in = op->getOperand(0);
  return llvm::isa<BlockArgument>(in) || isRegionView(in.getDefiningOp());
}

/// A view must be a strided view of the input its chain starts from
/// (shapes::applyView, as the artifact verifier and the kernels compute
/// it); checked where the shapes are static.
static LogicalResult verifyRegionView(Operation* op) {
  SmallVector<Operation*> chain{op};
  Value root = op->getOperand(0);
  while (Operation* def = root.getDefiningOp()) {
    chain.push_back(def);
    root = def->getOperand(0);
  }
  // Dynamic shapes are checked where they are known (the kernels).
  auto isStatic = [](Value v) {
    return llvm::cast<RankedTensorType>(v.getType()).hasStaticShape();
  };
  if (!isStatic(root) || !llvm::all_of(chain, [&](Operation* v) {
        return isStatic(v->getResult(0));
      }))
    return success();
  ArrayRef<int64_t> start =
      llvm::cast<RankedTensorType>(root.getType()).getShape();
  rt::shapes::StridedView view = rt::shapes::contiguousView(
      rt::shapes::Dims(start.begin(), start.end()));
  for (Operation* v : llvm::reverse(chain)) {
    rt::Status s = applyViewOf(v, &view);
    if (!s)
      return v->emitOpError() << "in an mc.fused region is no strided view of "
                                 "the region's input: "
                              << s.message();
  }
  return success();
}

/// Ops that read a view must be the region's compute ops (not an anchor or
/// a broadcast, which read inputs) and read it at `shape` (elementwise) or
/// with the result's rank and leading `lead` dims (attention).
static LogicalResult checkViewReaders(Operation& op, ArrayRef<int64_t> shape,
                                      std::optional<size_t> lead) {
  for (Value v : op.getOperands()) {
    if (!isRegionView(v.getDefiningOp()) || isRegionView(&op))
      continue;
    auto t = llvm::cast<RankedTensorType>(v.getType());
    bool fits = lead ? (t.getRank() == int64_t(shape.size()) &&
                        t.getShape().take_front(*lead) ==
                            shape.take_front(*lead))
                     : t.getShape() == shape;
    if (!fits)
      return op.emitOpError()
             << "reads the view " << t << ", which lacks the region's "
             << (lead ? "rank and leading dims" : "shape");
  }
  return success();
}

/// An attention region: matmul, softmax and elementwise ops (broadcasts
/// reading inputs), every value of the result's rank and leading dims,
/// softmax over the last dim.
static LogicalResult verifyAttentionBody(FusedOp fused, Block& body,
                                         ArrayRef<int64_t> shape) {
  if (shape.size() < 2)
    return fused.emitOpError() << "with attention needs a result of rank >= 2";
  size_t lead = shape.size() - 2;
  for (Operation& op : body.without_terminator()) {
    if (isRegionView(&op)) {
      if (failed(verifyRegionView(&op)))
        return failure();
      continue;
    }
    if (failed(checkViewReaders(op, shape, lead)))
      return failure();
    rt::OpId id;
    if (!llvm::isa<MCDialect>(op.getDialect()) ||
        !rt::findOp(op.getName().getStringRef(), &id) ||
        !(rt::opInfo(id).fusible || llvm::isa<MatmulOp, SoftmaxOp>(op)))
      return op.emitOpError() << "cannot be in an attention region (matmul, "
                                 "softmax and elementwise ops)";
    auto t = llvm::cast<RankedTensorType>(op.getResult(0).getType());
    if (t.getRank() != int64_t(shape.size()) ||
        t.getShape().take_front(lead) != shape.take_front(lead))
      return op.emitOpError()
             << "computes " << t << ", but every value of an attention region "
             << "has the result's rank and leading dims";
    if (auto sm = llvm::dyn_cast<SoftmaxOp>(op))
      if (sm.getAxis() != uint64_t(t.getRank() - 1))
        return op.emitOpError() << "in an attention region must be over the "
                                   "last dim";
    if (llvm::isa<BroadcastInDimOp>(op) &&
        !llvm::isa<BlockArgument>(op.getOperand(0)))
      return op.emitOpError() << "must take the region's inputs as operands "
                                 "(a broadcast inside mc.fused reads only "
                                 "inputs)";
  }
  return success();
}

/// The main result is the last op's value; more results (a plain
/// elementwise region only: no attention, no anchor, no reduction ending
/// it) are distinct values elementwise ops of the body compute, each of the
/// main result's shape (the artifact's Step.extra_outputs).
static LogicalResult verifyExtraResults(FusedOp fused, Block& body,
                                        YieldOp yield) {
  auto ops = body.without_terminator();
  if (ops.empty())
    return success(); // reported below
  Operation& last = *std::prev(ops.end());
  if (yield.getValues().front().getDefiningOp() != &last)
    return fused.emitOpError()
           << "must yield its last op's value first (its main result)";
  if (yield.getValues().size() == 1)
    return success();
  rt::OpId id;
  Operation& front = *ops.begin();
  bool anchor = rt::findOp(front.getName().getStringRef(), &id) &&
                rt::opInfo(id).epilogueAnchor;
  bool reduction = rt::findOp(last.getName().getStringRef(), &id) &&
                   rt::isReduction(id);
  if (fused.getAttention() || anchor || reduction)
    return fused.emitOpError()
           << "has " << yield.getValues().size()
           << " results, but only a plain elementwise region (no attention, "
              "anchor or reduction) may have more than one";
  llvm::SmallPtrSet<Value, 4> seen;
  for (auto [i, v] : llvm::enumerate(yield.getValues())) {
    Operation* def = v.getDefiningOp();
    if (!seen.insert(v).second)
      return fused.emitOpError() << "yields one value twice (result " << i
                                 << ")";
    if (!def || llvm::isa<BroadcastInDimOp>(def) || isRegionView(def) ||
        !rt::findOp(def->getName().getStringRef(), &id) ||
        !rt::opInfo(id).fusible)
      return fused.emitOpError()
             << "result " << i << " must be computed by an elementwise op "
             << "of the body (not an input, a broadcast or a view)";
  }
  return success();
}

LogicalResult FusedOp::verifyRegions() {
  Block& body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "has " << getInputs().size()
                         << " inputs but its body takes "
                         << body.getNumArguments() << " arguments";
  for (auto [i, input, arg] :
       llvm::enumerate(getInputs(), body.getArguments()))
    if (input.getType() != arg.getType())
      return emitOpError() << "input " << i << " has type " << input.getType()
                           << " but body argument " << i << " has type "
                           << arg.getType();
  auto yield = body.empty() ? YieldOp() : llvm::dyn_cast<YieldOp>(body.back());
  if (!yield)
    return emitOpError() << "body must end with mc.yield";
  if (getResults().empty())
    return emitOpError() << "needs a result";
  if (yield.getValues().getTypes() != getResults().getTypes())
    return emitOpError() << "yields " << yield.getValues().getTypes()
                         << " but its results have types "
                         << getResults().getTypes();
  ArrayRef<int64_t> shape =
      llvm::cast<RankedTensorType>(getResult().getType()).getShape();
  if (getAttention()) {
    if (failed(verifyAttentionBody(*this, body, shape)))
      return failure();
    return verifyExtraResults(*this, body, yield);
  }
  // A trailing reduction may end the region: the values before it have its
  // operand's shape, whose trailing dims it reduces.
  Operation* reduction = nullptr;
  if (!body.without_terminator().empty()) {
    Operation& last = *std::prev(body.without_terminator().end());
    rt::OpId lastId;
    if (rt::findOp(last.getName().getStringRef(), &lastId) &&
        rt::isReduction(lastId)) {
      reduction = &last;
      auto in = llvm::cast<RankedTensorType>(last.getOperand(0).getType());
      auto dims =
          llvm::cast<DenseI64ArrayAttr>(last.getAttr("dims")).asArrayRef();
      SmallVector<int64_t> sorted(dims.begin(), dims.end());
      llvm::sort(sorted);
      for (size_t i = 0; i < sorted.size(); ++i)
        if (sorted[i] != in.getRank() - int64_t(sorted.size()) + int64_t(i))
          return last.emitOpError()
                 << "ends an mc.fused region but does not reduce the "
                    "trailing dims of its operand";
      if (sorted.empty())
        return last.emitOpError() << "ends an mc.fused region but reduces "
                                     "no dims";
      shape = in.getShape();
    }
  }
  bool first = true;
  Operation* anchorOp = nullptr;
  for (Operation& op : body.without_terminator()) {
    if (isRegionView(&op)) {
      first = false; // an anchor comes first, before any view
      if (failed(verifyRegionView(&op)))
        return failure();
      continue;
    }
    if (failed(checkViewReaders(op, shape, std::nullopt)))
      return failure();
    // The anchor's reshape: right after it, to the region's shape.
    if (auto r = llvm::dyn_cast<ReshapeOp>(op)) {
      if (!anchorOp || r.getInput().getDefiningOp() != anchorOp ||
          &op != anchorOp->getNextNode())
        return op.emitOpError()
               << "in an mc.fused region may only reshape the anchor's "
                  "result, right after it";
      if (llvm::cast<RankedTensorType>(r.getType()).getShape() != shape)
        return op.emitOpError() << "computes a value of another shape than "
                                   "the region's result "
                                << getResult().getType();
      continue;
    }
    rt::OpId id;
    if (!llvm::isa<MCDialect>(op.getDialect()) ||
        !rt::findOp(op.getName().getStringRef(), &id))
      return op.emitOpError() << "cannot be in an mc.fused region (only mc "
                                 "ops of the registry)";
    const rt::OpInfo& info = rt::opInfo(id);
    bool anchor = first && info.epilogueAnchor;
    first = false;
    if (anchor)
      anchorOp = &op;
    if (&op == reduction)
      continue;
    if (!anchor && !info.fusible)
      return op.emitOpError()
             << "cannot be in an mc.fused region: only elementwise ops, "
                "after at most one matmul or conv2d as the first op";
    auto next = llvm::dyn_cast_or_null<ReshapeOp>(op.getNextNode());
    bool reshaped = anchor && next && next.getInput().getDefiningOp() == &op;
    if (op.getNumResults() != 1 ||
        (!reshaped &&
         llvm::cast<RankedTensorType>(op.getResult(0).getType()).getShape() !=
             shape))
      return op.emitOpError() << "computes a value of another shape than the "
                                 "region's result "
                              << getResult().getType();
    // Elementwise ops read values of their own shape (their ODS traits
    // say so), which is the region's; only a broadcast reads another.
    for (Value v : op.getOperands())
      if ((anchor || llvm::isa<BroadcastInDimOp>(op)) &&
          !llvm::isa<BlockArgument>(v))
        return op.emitOpError()
               << "must take the region's inputs as operands (an anchor or a "
                  "broadcast inside mc.fused reads only inputs)";
  }
  return verifyExtraResults(*this, body, yield);
}
