// mc-channels-last: convolutions and pooling switched to NHWC activations,
// and the transposes that switch them moved through the elementwise ops,
// reductions and concats between them until they cancel (rules in
// Passes.td; why: docs/decisions.md, "Channels-last activations").
#include "ir/Batch.h"
#include "ir/RegistryOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mc {
#define GEN_PASS_DEF_CHANNELSLASTPASS
#include "passes/Passes.h.inc"
} // namespace mc

using namespace mlir;

namespace {

/// NCHW -> NHWC, and back: transpose(x, kToLast) is x in NHWC.
constexpr int64_t kToLast[] = {0, 2, 3, 1};
constexpr int64_t kToFirst[] = {0, 3, 1, 2};

/// `type` with its dims permuted as transpose(., perm) would: result dim i
/// is input dim perm[i]. A batch-scaled dim stays batch-scaled.
RankedTensorType permuted(Type type, ArrayRef<int64_t> perm) {
  SmallVector<int64_t> shape = mc::symbolicShape(type), out;
  for (int64_t p : perm)
    out.push_back(shape[size_t(p)]);
  return mc::symbolicType(out,
                          llvm::cast<RankedTensorType>(type).getElementType());
}

/// Whether `t` is NHWC back to NCHW, as this pass makes them (a model's
/// own [0, 3, 1, 2] moves too, which is as correct). The rules move only
/// those, so attention's head transposes ([0, 2, 1, 3]) stay where mc-fuse
/// looks for them.
bool isToFirst(mc::TransposeOp t) {
  return t && t.getPermutation() == ArrayRef<int64_t>(kToFirst);
}

bool isRank4(Value v) {
  auto t = llvm::dyn_cast<RankedTensorType>(v.getType());
  return t && t.getRank() == 4;
}

/// The registry's elementwise ops (mc-fuse's): every operand and the
/// result of one shape, no attribute that names a dimension.
bool isElementwise(Operation* op) {
  mc::rt::OpId id;
  if (!llvm::isa<mc::MCDialect>(op->getDialect()) ||
      !mc::rt::findOp(op->getName().getStringRef(), &id) ||
      !mc::rt::opInfo(id).fusible || llvm::isa<mc::BroadcastInDimOp>(op) ||
      op->getNumResults() != 1 || op->getNumOperands() == 0)
    return false;
  Type result = op->getResult(0).getType();
  SmallVector<int64_t> shape = mc::symbolicShape(result);
  return llvm::all_of(op->getOperandTypes(), [&](Type t) {
    return llvm::isa<RankedTensorType>(t) && mc::symbolicShape(t) == shape;
  });
}

/// transpose(v, [0, 2, 3, 1]) computed before `op` in its block, if any.
Value nhwcCopyBefore(Value v, Operation* op) {
  for (Operation* user : v.getUsers()) {
    auto t = llvm::dyn_cast<mc::TransposeOp>(user);
    if (t && t.getPermutation() == ArrayRef<int64_t>(kToLast) &&
        t->getBlock() == op->getBlock() && t->isBeforeInBlock(op))
      return t.getResult();
  }
  return {};
}

/// Rewrites conv2d and pooling ops to channels_last, between a transpose
/// of their input to NHWC and one of their result back to NCHW.
Operation* toChannelsLast(OpBuilder& b, Operation* op) {
  b.setInsertionPoint(op);
  Location loc = op->getLoc();
  Value x = op->getOperand(0);
  Value xt = mc::TransposeOp::create(b, loc, x, kToLast);
  Operation* clone = b.clone(*op);
  clone->setOperand(0, xt);
  clone->setAttr("channels_last", b.getUnitAttr());
  Value y = clone->getResult(0);
  y.setType(permuted(y.getType(), kToLast));
  Value back = mc::TransposeOp::create(b, loc, y, kToFirst);
  op->getResult(0).replaceAllUsesWith(back);
  op->erase();
  return clone;
}

/// elementwise(transpose(a, P), transpose(b, P), c, broadcast, splat)
///   -> transpose(elementwise(a, b, c', broadcast', splat'), P)
/// where P is NHWC -> NCHW, c' is an NHWC copy of c made before the op,
/// and broadcast' and splat' are built in a's layout; at least one operand
/// is a transpose, and every operand is one of these.
struct SinkThroughElementwise : RewritePattern {
  SinkThroughElementwise(MLIRContext* ctx)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}

  LogicalResult matchAndRewrite(Operation* op,
                                PatternRewriter& rewriter) const override {
    if (!isElementwise(op))
      return failure();
    // The permutation and the layout of the first transposed operand.
    mc::TransposeOp lead;
    for (Value v : op->getOperands())
      if (auto t = v.getDefiningOp<mc::TransposeOp>(); isToFirst(t)) {
        lead = t;
        break;
      }
    if (!lead)
      return rewriter.notifyMatchFailure(op, "no operand is NHWC -> NCHW");
    ArrayRef<int64_t> perm = lead.getPermutation();
    auto inner = llvm::cast<RankedTensorType>(lead.getInput().getType());
    SmallVector<Value> operands;
    for (Value v : op->getOperands()) {
      auto type = llvm::cast<RankedTensorType>(v.getType());
      if (auto t = v.getDefiningOp<mc::TransposeOp>()) {
        if (t.getPermutation() != perm)
          return rewriter.notifyMatchFailure(op, "another permutation");
        operands.push_back(t.getInput());
        continue;
      }
      // A value already transposed to NHWC before `op` (a block's input,
      // transposed for its first convolution, added back as the residual).
      if (Value last = nhwcCopyBefore(v, op)) {
        operands.push_back(last);
        continue;
      }
      if (auto bc = v.getDefiningOp<mc::BroadcastInDimOp>()) {
        // Input dim k lands on dim dims[k] of the transposed value, which
        // is dim perm[dims[k]] of its input.
        SmallVector<int64_t> dims;
        for (int64_t d : bc.getDims())
          dims.push_back(perm[size_t(d)]);
        operands.push_back(mc::BroadcastInDimOp::create(
            rewriter, bc.getLoc(), inner.clone(type.getElementType()),
            bc.getInput(), dims));
        continue;
      }
      auto c = v.getDefiningOp<mc::ConstantOp>();
      auto dense = c ? llvm::dyn_cast<DenseElementsAttr>(c.getValue())
                     : DenseElementsAttr();
      if (dense && dense.isSplat() && inner.hasStaticShape()) {
        auto t = inner.clone(type.getElementType());
        operands.push_back(mc::ConstantOp::create(
            rewriter, c.getLoc(), t,
            DenseElementsAttr::get(t, dense.getSplatValue<Attribute>())));
        continue;
      }
      return rewriter.notifyMatchFailure(
          op, "an operand is not a transpose, broadcast or splat");
    }
    OperationState state(op->getLoc(), op->getName());
    state.addOperands(operands);
    state.addAttributes(op->getAttrs());
    state.addTypes(
        inner.clone(llvm::cast<RankedTensorType>(op->getResult(0).getType())
                        .getElementType()));
    Operation* moved = rewriter.create(state);
    rewriter.replaceOpWithNewOp<mc::TransposeOp>(op, moved->getResult(0), perm);
    return success();
  }
};

/// reduce(transpose(a, P), dims) -> reduce(a, P[dims]), then the transpose
/// of what is left (with keepdim: P itself; without: P restricted to the
/// kept dims), which the unit-dims rule below often makes a reshape.
template <typename Reduce> struct SinkThroughReduce : OpRewritePattern<Reduce> {
  using OpRewritePattern<Reduce>::OpRewritePattern;
  LogicalResult matchAndRewrite(Reduce op,
                                PatternRewriter& rewriter) const override {
    auto t = op.getInput().template getDefiningOp<mc::TransposeOp>();
    if (!isToFirst(t))
      return rewriter.notifyMatchFailure(op, "input is not NHWC -> NCHW");
    ArrayRef<int64_t> perm = t.getPermutation();
    size_t rank = perm.size();
    std::vector<bool> reduced(rank, false); // in a's dims
    SmallVector<int64_t> dims;
    for (int64_t d : op.getDims()) {
      reduced[size_t(perm[size_t(d)])] = true;
      dims.push_back(perm[size_t(d)]);
    }
    llvm::sort(dims);
    Value r = Reduce::create(rewriter, op.getLoc(), t.getInput(), dims,
                             op.getKeepdim());
    SmallVector<int64_t> rest;
    if (op.getKeepdim()) {
      rest.assign(perm.begin(), perm.end());
    } else {
      // a's kept dims, numbered as in r; then each kept result dim's.
      std::vector<int64_t> index(rank, -1);
      int64_t next = 0;
      for (size_t d = 0; d < rank; ++d)
        if (!reduced[d])
          index[d] = next++;
      for (int64_t p : perm)
        if (!reduced[size_t(p)])
          rest.push_back(index[size_t(p)]);
    }
    rewriter.replaceOpWithNewOp<mc::TransposeOp>(op, r, rest);
    return success();
  }
};

/// concat(transpose(a_i, P), axis) -> transpose(concat(a_i, P[axis]), P).
struct SinkThroughConcat : OpRewritePattern<mc::ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(mc::ConcatOp op,
                                PatternRewriter& rewriter) const override {
    SmallVector<Value> inputs;
    ArrayRef<int64_t> perm;
    for (Value v : op.getInputs()) {
      auto t = v.getDefiningOp<mc::TransposeOp>();
      if (!isToFirst(t))
        return rewriter.notifyMatchFailure(op, "not all NHWC -> NCHW");
      perm = t.getPermutation();
      inputs.push_back(t.getInput());
    }
    int64_t axis = op.getAxis();
    if (axis < 0 || axis >= int64_t(perm.size()))
      return rewriter.notifyMatchFailure(op, "axis out of range");
    Value c = mc::ConcatOp::create(rewriter, op.getLoc(), inputs,
                                   perm[size_t(axis)]);
    rewriter.replaceOpWithNewOp<mc::TransposeOp>(op, c, perm);
    return success();
  }
};

/// A transpose that moves only size-1 dims keeps the element order: a
/// reshape ([N, 1, 1, C] -> [N, C, 1, 1] after a global average pool).
struct UnitTransposeToReshape : OpRewritePattern<mc::TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(mc::TransposeOp op,
                                PatternRewriter& rewriter) const override {
    if (!isToFirst(op))
      return rewriter.notifyMatchFailure(op, "not NHWC -> NCHW");
    SmallVector<int64_t> shape = mc::symbolicShape(op.getInput().getType());
    int64_t last = -1;
    for (int64_t p : op.getPermutation()) {
      if (shape[size_t(p)] == 1)
        continue;
      if (p < last)
        return rewriter.notifyMatchFailure(op, "moves a dim of size > 1");
      last = p;
    }
    rewriter.replaceOpWithNewOp<mc::ReshapeOp>(op, op.getType(), op.getInput());
    return success();
  }
};

struct ChannelsLastPass : mc::impl::ChannelsLastPassBase<ChannelsLastPass> {
  using ChannelsLastPassBase::ChannelsLastPassBase;

  void runOnOperation() override {
    auto fn = llvm::dyn_cast_or_null<func::FuncOp>(
        mc::findEntryFunction(getOperation(), entry));
    if (!fn)
      return signalPassFailure();
    // f32 and bf16 convolutions (oneDNN's NHWC kernels; AVX512_BF16 for
    // bf16): f16 ones run the CPU's NCHW reference on most hosts, which
    // would transpose around each, so they move only with `f16` (cuDNN).
    // Pooling of those types, only in a function where a convolution
    // moved (alone, it would only add transposes).
    auto switches = [&](Type t) {
      return t.isF32() || t.isBF16() || (f16 && t.isF16());
    };
    SmallVector<Operation*> convs, pools;
    fn.walk([&](Operation* op) {
      if (op->hasAttr("channels_last") || op->getNumOperands() == 0 ||
          !isRank4(op->getOperand(0)))
        return;
      if (auto conv = llvm::dyn_cast<mc::Conv2dOp>(op)) {
        Type t = llvm::cast<RankedTensorType>(conv.getType()).getElementType();
        if (switches(t))
          convs.push_back(op);
      } else if (llvm::isa<mc::MaxPool2dOp, mc::AvgPool2dOp>(op)) {
        Type t = llvm::cast<RankedTensorType>(op->getResult(0).getType())
                     .getElementType();
        if (switches(t))
          pools.push_back(op);
      }
    });
    if (convs.empty())
      return;
    OpBuilder b(&getContext());
    for (Operation* op : convs)
      toChannelsLast(b, op);
    for (Operation* op : pools)
      toChannelsLast(b, op);

    RewritePatternSet patterns(&getContext());
    patterns.add<SinkThroughElementwise, SinkThroughConcat,
                 SinkThroughReduce<mc::ReduceSumOp>,
                 SinkThroughReduce<mc::ReduceMeanOp>,
                 SinkThroughReduce<mc::ReduceMaxOp>,
                 SinkThroughReduce<mc::ReduceMinOp>, UnitTransposeToReshape>(
        &getContext());
    mc::TransposeOp::getCanonicalizationPatterns(patterns, &getContext());
    if (failed(applyPatternsGreedily(fn, std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
