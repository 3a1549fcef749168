// mc-raise-layer-norm: a layer norm written out as reductions and
// elementwise ops (what PyTorch exports to ONNX below opset 17) becomes one
// mc.layer_norm (rules in Passes.td).
#include "ir/MCDialect.h"
#include "ir/RegistryOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>
#include <optional>

namespace mc {
#define GEN_PASS_DEF_RAISELAYERNORMPASS
#include "passes/Passes.h.inc"
} // namespace mc

using namespace mlir;

namespace {

using mc::floatSplatValue;

/// The operand of a broadcast that only expands size-1 dims of a value of
/// the same rank (`dims = [0, 1, ..., rank)`: a keepdim reduction's result
/// spread back over its row), with no other user.
Value rowBroadcastOperand(Value v) {
  auto b = llvm::dyn_cast_or_null<mc::BroadcastInDimOp>(v.getDefiningOp());
  if (!b || !b->hasOneUse())
    return {};
  auto in = llvm::cast<RankedTensorType>(b.getInput().getType());
  ArrayRef<int64_t> dims = b.getDims();
  for (int64_t i = 0; i < in.getRank(); ++i)
    if (static_cast<int64_t>(dims.size()) != in.getRank() || dims[i] != i)
      return {};
  return b.getInput();
}

/// The axis of a keepdim reduce_mean over the trailing dims [axis, rank)
/// of `input`, whose sizes are static; nullopt otherwise.
std::optional<int64_t> trailingMeanAxis(mc::ReduceMeanOp mean) {
  if (!mean.getKeepdim())
    return std::nullopt;
  auto type = llvm::cast<RankedTensorType>(mean.getInput().getType());
  SmallVector<int64_t> dims(mean.getDims());
  llvm::sort(dims);
  if (dims.empty())
    return std::nullopt;
  int64_t axis = type.getRank() - static_cast<int64_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != axis + static_cast<int64_t>(i) ||
        ShapedType::isDynamic(type.getDimSize(dims[i])))
      return std::nullopt;
  return axis;
}

/// The normalized shape's type: input.shape[axis:], input's element type.
RankedTensorType normalizedType(Value input, int64_t axis) {
  auto type = llvm::cast<RankedTensorType>(input.getType());
  return RankedTensorType::get(type.getShape().drop_front(axis),
                               type.getElementType());
}

Value splatConstant(PatternRewriter& rewriter, Location loc,
                    RankedTensorType type, double v) {
  auto attr = DenseElementsAttr::get(
      type, ArrayRef<Attribute>{FloatAttr::get(type.getElementType(), v)});
  return mc::ConstantOp::create(rewriter, loc, attr);
}

/// `(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)`, every mean a
/// keepdim reduce_mean over the same trailing dims, the square a pow by 2
/// or a mul of the difference by itself, every intermediate used only
/// inside the pattern: mc.layer_norm(x, ones, zeros).
struct RaiseNormalization : OpRewritePattern<mc::DivOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(mc::DivOp div,
                                PatternRewriter& rewriter) const override {
    Value diff = div.getLhs();
    Value root = rowBroadcastOperand(div.getRhs());
    auto sqrt = llvm::dyn_cast_or_null<mc::SqrtOp>(
        root ? root.getDefiningOp() : nullptr);
    if (!sqrt || !sqrt->hasOneUse())
      return rewriter.notifyMatchFailure(div, "not a division by a sqrt");
    auto add = sqrt.getInput().getDefiningOp<mc::AddOp>();
    if (!add || !add->hasOneUse())
      return rewriter.notifyMatchFailure(div, "no variance + epsilon");
    // The variance and epsilon, either way round.
    Value var = add.getLhs();
    std::optional<double> eps = floatSplatValue(add.getRhs());
    if (!eps) {
      var = add.getRhs();
      eps = floatSplatValue(add.getLhs());
    }
    auto varMean = var.getDefiningOp<mc::ReduceMeanOp>();
    if (!eps || !varMean || !varMean->hasOneUse())
      return rewriter.notifyMatchFailure(div, "no mean + epsilon");
    // mc.layer_norm's epsilon is finite and >= 0 (its verifier); another
    // constant stays the ops it is.
    if (!std::isfinite(*eps) || *eps < 0)
      return rewriter.notifyMatchFailure(div, "epsilon is negative or not "
                                              "finite");
    Operation* square = varMean.getInput().getDefiningOp();
    if (!square || !square->hasOneUse())
      return rewriter.notifyMatchFailure(div, "no square");
    bool squares = false;
    if (auto pow = llvm::dyn_cast<mc::PowOp>(square))
      squares = pow.getLhs() == diff && floatSplatValue(pow.getRhs()) == 2.0;
    else if (auto mul = llvm::dyn_cast<mc::MulOp>(square))
      squares = mul.getLhs() == diff && mul.getRhs() == diff;
    if (!squares)
      return rewriter.notifyMatchFailure(div, "the variance's square is not "
                                              "of the centered value");
    auto sub = diff.getDefiningOp<mc::SubOp>();
    if (!sub)
      return rewriter.notifyMatchFailure(div, "the numerator is not x - mean");
    for (Operation* user : diff.getUsers())
      if (user != square && user != div.getOperation())
        return rewriter.notifyMatchFailure(div, "x - mean has another user");
    Value x = sub.getLhs();
    Value meanValue = rowBroadcastOperand(sub.getRhs());
    auto mean = llvm::dyn_cast_or_null<mc::ReduceMeanOp>(
        meanValue ? meanValue.getDefiningOp() : nullptr);
    if (!mean || !mean->hasOneUse() || mean.getInput() != x)
      return rewriter.notifyMatchFailure(div, "no x - mean(x)");
    std::optional<int64_t> axis = trailingMeanAxis(mean);
    if (!axis || trailingMeanAxis(varMean) != axis)
      return rewriter.notifyMatchFailure(
          div, "the means are not over the same trailing dims");
    RankedTensorType norm = normalizedType(x, *axis);
    if (!llvm::isa<FloatType>(norm.getElementType()))
      return rewriter.notifyMatchFailure(div, "not a float tensor");
    // Located where the pattern starts (the first mean), which names the
    // norm's module in a traced or imported model.
    Location loc = mean.getLoc();
    Value ones = splatConstant(rewriter, loc, norm, 1.0);
    Value zeros = splatConstant(rewriter, loc, norm, 0.0);
    rewriter.replaceOpWithNewOp<mc::LayerNormOp>(
        div, div.getType(), x, ones, zeros,
        rewriter.getI64IntegerAttr(*axis), rewriter.getF64FloatAttr(*eps));
    return success();
  }
};

/// A value of the normalized shape spread over the trailing dims of a
/// norm's result (`broadcast_in_dim %g, dims = [axis, ..., rank)`).
Value trailingBroadcastOperand(Value v, mc::LayerNormOp norm) {
  auto b = llvm::dyn_cast_or_null<mc::BroadcastInDimOp>(v.getDefiningOp());
  if (!b)
    return {};
  int64_t axis = norm.getAxis();
  if (b.getInput().getType() != norm.getGamma().getType())
    return {};
  ArrayRef<int64_t> dims = b.getDims();
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != axis + static_cast<int64_t>(i))
      return {};
  return b.getInput();
}

/// The norm and the other operand of a binary op one of whose operands is a
/// layer_norm used only there.
template <class BinaryOp>
std::pair<mc::LayerNormOp, Value> normOperand(BinaryOp op) {
  for (auto [mine, other] : {std::pair(op.getLhs(), op.getRhs()),
                             std::pair(op.getRhs(), op.getLhs())}) {
    auto norm = mine.template getDefiningOp<mc::LayerNormOp>();
    if (norm && norm->hasOneUse())
      if (Value v = trailingBroadcastOperand(other, norm))
        return {norm, v};
  }
  return {};
}

/// layer_norm(x, ones, zeros) * broadcast(g) -> layer_norm(x, g, zeros).
struct FoldScale : OpRewritePattern<mc::MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(mc::MulOp mul,
                                PatternRewriter& rewriter) const override {
    auto [norm, gamma] = normOperand(mul);
    if (!norm || floatSplatValue(norm.getGamma()) != 1.0 ||
        floatSplatValue(norm.getBeta()) != 0.0)
      return rewriter.notifyMatchFailure(mul, "no unscaled norm times a "
                                              "broadcast of the norm's shape");
    rewriter.replaceOpWithNewOp<mc::LayerNormOp>(
        mul, mul.getType(), norm.getInput(), gamma, norm.getBeta(),
        norm.getAxisAttr(), norm.getEpsilonAttr());
    return success();
  }
};

/// layer_norm(x, g, zeros) + broadcast(b) -> layer_norm(x, g, b).
struct FoldOffset : OpRewritePattern<mc::AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(mc::AddOp add,
                                PatternRewriter& rewriter) const override {
    auto [norm, beta] = normOperand(add);
    if (!norm || floatSplatValue(norm.getBeta()) != 0.0)
      return rewriter.notifyMatchFailure(add, "no unshifted norm plus a "
                                              "broadcast of the norm's shape");
    rewriter.replaceOpWithNewOp<mc::LayerNormOp>(
        add, add.getType(), norm.getInput(), norm.getGamma(), beta,
        norm.getAxisAttr(), norm.getEpsilonAttr());
    return success();
  }
};

struct RaiseLayerNormPass
    : mc::impl::RaiseLayerNormPassBase<RaiseLayerNormPass> {
  using Base::Base;

  void runOnOperation() override {
    auto fn = llvm::dyn_cast_or_null<func::FuncOp>(
        mc::findEntryFunction(getOperation(), entry));
    if (!fn)
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseNormalization, FoldScale, FoldOffset>(&getContext());
    if (failed(applyPatternsGreedily(fn, std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
