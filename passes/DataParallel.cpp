// mc-dp-partition: the training step of one data-parallel rank. Gradients
// are averaged over the ranks in buckets, each started as soon as its last
// gradient exists and finished just before the update (docs/decisions.md,
// "Data parallelism: start/wait all-reduce buckets").
#include "passes/Passes.h"

#include "ir/MCDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLExtras.h"

namespace mc {
#define GEN_PASS_DEF_DATAPARALLELPARTITIONPASS
#include "passes/Passes.h.inc"
} // namespace mc

using namespace mlir;

namespace {

/// One gradient result: its index in the return and where it is produced.
struct Grad {
  unsigned result;
  Value value;
  /// Position of its defining op in the body (-1: a block argument, ready
  /// from the start).
  int64_t position;
  int64_t bytes;
};

struct DataParallelPartitionPass
    : public mc::impl::DataParallelPartitionPassBase<
          DataParallelPartitionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (ranks < 1) {
      emitError(module.getLoc())
          << "mc-dp-partition: ranks must be >= 1, got "
          << static_cast<int64_t>(ranks);
      return signalPassFailure();
    }
    if (!(bucketMb > 0)) {
      emitError(module.getLoc())
          << "mc-dp-partition: bucket-mb must be > 0, got "
          << static_cast<double>(bucketMb);
      return signalPassFailure();
    }
    auto fn = llvm::dyn_cast_or_null<func::FuncOp>(
        mc::findEntryFunction(module, entry));
    if (!fn)
      return signalPassFailure();
    Block& body = fn.getBody().front();
    auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());

    llvm::DenseMap<Operation*, int64_t> position;
    int64_t n = 0;
    for (Operation& op : body)
      position[&op] = n++;

    SmallVector<Grad> grads;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      auto name = fn.getResultAttrOfType<StringAttr>(i, "mc.name");
      if (!name || !name.getValue().starts_with("grad."))
        continue;
      Value g = ret.getOperand(i);
      auto type = llvm::dyn_cast<RankedTensorType>(g.getType());
      if (!type || !type.hasStaticShape() ||
          !type.getElementType().isF32()) {
        fn.emitOpError() << "result " << i << " ('" << name.getValue()
                         << "') is " << g.getType()
                         << "; mc-dp-partition all-reduces static f32 "
                            "gradients (the master weights' type)";
        return signalPassFailure();
      }
      Operation* def = g.getDefiningOp();
      grads.push_back({i, g, def ? position[def] : -1,
                       type.getNumElements() * 4});
    }
    if (grads.empty()) {
      fn.emitOpError() << "returns no grad.<parameter> results; run "
                          "mc-autodiff first";
      return signalPassFailure();
    }
    if (ranks == 1)
      return; // one process: the gradients are already the global ones

    // The order the backward pass produces them in; ties (one op, or two
    // arguments) keep the result order.
    llvm::stable_sort(grads, [](const Grad& a, const Grad& b) {
      return a.position < b.position;
    });
    const int64_t limit = static_cast<int64_t>(bucketMb * 1024 * 1024);
    SmallVector<SmallVector<Grad>> buckets(1);
    int64_t filled = 0;
    for (const Grad& g : grads) {
      buckets.back().push_back(g);
      filled += g.bytes;
      if (filled >= limit) {
        buckets.emplace_back();
        filled = 0;
      }
    }
    if (buckets.back().empty())
      buckets.pop_back();

    OpBuilder b(module.getContext());
    auto f32 = b.getF32Type();
    SmallVector<Value> inFlight;
    for (auto [k, bucket] : llvm::enumerate(buckets)) {
      // Right after the last gradient of the bucket exists.
      const Grad& last = bucket.back();
      if (Operation* def = last.value.getDefiningOp())
        b.setInsertionPointAfter(def);
      else
        b.setInsertionPointToStart(&body);
      SmallVector<Value> values;
      int64_t elements = 0;
      for (const Grad& g : bucket) {
        values.push_back(g.value);
        elements += g.bytes / 4;
      }
      Location loc = NameLoc::get(
          b.getStringAttr("dp.bucket" + std::to_string(k)), ret.getLoc());
      auto start = mc::AllReduceStartOp::create(
          b, loc, RankedTensorType::get({elements}, f32), values,
          static_cast<uint64_t>(ranks));
      inFlight.push_back(start.getResult());
    }

    // Every wait after the whole backward pass, in the order the buckets
    // started, then the gradients cut out of the reduced buckets.
    b.setInsertionPoint(ret);
    const double scale = 1.0 / static_cast<double>(ranks);
    for (auto [k, bucket] : llvm::enumerate(buckets)) {
      Value started = inFlight[k];
      Location loc = started.getLoc();
      Value sum = mc::AllReduceWaitOp::create(b, loc, started.getType(),
                                              started,
                                              b.getF64FloatAttr(scale));
      int64_t offset = 0;
      for (const Grad& g : bucket) {
        int64_t count = g.bytes / 4;
        Value flat = mc::SliceOp::create(
            b, loc, sum, ArrayRef<int64_t>{offset},
            ArrayRef<int64_t>{offset + count}, ArrayRef<int64_t>{1});
        offset += count;
        Value reduced = flat;
        if (g.value.getType() != flat.getType())
          reduced = mc::ReshapeOp::create(b, loc, g.value.getType(), flat);
        ret->setOperand(g.result, reduced);
      }
    }
  }
};

} // namespace
