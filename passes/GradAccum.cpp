// mc-grad-accum: gradient accumulation over N calls of a training step
// (micro-batches) as graph state; the update's passes read `update_due`.
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mc {
#define GEN_PASS_DEF_GRADACCUMPASS
#include "passes/Passes.h.inc"
} // namespace mc

using namespace mlir;

namespace {

struct GradAccumPass : mc::impl::GradAccumPassBase<GradAccumPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    const int64_t n = steps; // (a copy: options stream as characters)
    if (n < 1 || n > (int64_t(1) << 24)) {
      emitError(module.getLoc())
          << "--grad-accum=" << n << " must be in [1, 2^24]";
      return signalPassFailure();
    }
    auto fn = llvm::dyn_cast_or_null<func::FuncOp>(
        mc::findEntryFunction(module, entry));
    if (!fn)
      return signalPassFailure();
    if (n == 1)
      return;
    if (mc::findNamedResult(fn, "update_due")) {
      fn.emitOpError() << "already accumulates gradients (it returns "
                          "update_due); run mc-grad-accum once";
      return signalPassFailure();
    }
    if (mc::findNamedResult(fn, "grads_finite")) {
      fn.emitOpError() << "already has loss scaling (grads_finite): run "
                          "mc-grad-accum before mc-loss-scaling, so the "
                          "finite check and the scale's update see a "
                          "group's summed gradients";
      return signalPassFailure();
    }
    auto ret = llvm::cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    SmallVector<unsigned> grads;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i)
      if (auto name = fn.getResultAttrOfType<StringAttr>(i, "mc.name"))
        if (name.getValue().starts_with("grad."))
          grads.push_back(i);
    if (grads.empty()) {
      fn.emitOpError() << "returns no grad.<parameter> results; run "
                          "mc-autodiff first";
      return signalPassFailure();
    }

    SymbolTable symbols(module);
    OpBuilder b(ret);
    Location loc = ret.getLoc();
    auto counterType = RankedTensorType::get({}, b.getI64Type());
    auto counter = [&](int64_t v) -> Value {
      return mc::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(counterType,
                                 b.getI64IntegerAttr(v).getValue()));
    };
    auto storeTo = [&](ml_program::GlobalOp g, Value v) {
      ml_program::GlobalStoreOp::create(
          b, loc, FlatSymbolRefAttr::get(g.getSymNameAttr()), v);
    };
    // The position in the group: the last call (n - 1) is due to update
    // and starts the next group at 0.
    ml_program::GlobalOp microGlobal = mc::createStateGlobal(
        fn, symbols, "optimizer.micro_step",
        DenseElementsAttr::get(counterType, b.getI64IntegerAttr(0).getValue()),
        fn.getLoc());
    Value micro = ml_program::GlobalLoadOp::create(
        b, loc, counterType,
        FlatSymbolRefAttr::get(microGlobal.getSymNameAttr()));
    Value due = mc::CompareOp::create(
        b, loc, RankedTensorType::get({}, b.getI1Type()),
        mc::ComparisonDirection::EQ, micro, counter(n - 1));
    Value next = mc::AddOp::create(b, loc, micro, counter(1));
    storeTo(microGlobal, mc::SelectOp::create(b, loc, due, counter(0), next));

    for (unsigned i : grads) {
      Value g = ret.getOperand(i);
      auto type = llvm::cast<RankedTensorType>(g.getType());
      auto element = llvm::dyn_cast<FloatType>(type.getElementType());
      if (!element) {
        fn.emitOpError() << "result " << i << " (a gradient) is " << type
                         << "; gradients to accumulate are floats";
        return signalPassFailure();
      }
      auto splat = [&](double v) -> Value {
        return mc::ConstantOp::create(
            b, loc, DenseElementsAttr::get(type, b.getFloatAttr(element, v)));
      };
      // <p>.grad_accum holds the group's sum so far; the due call adds its
      // own, passes on the mean and restarts the sum at 0 (as
      // optimizer.zero_grad() after the step, taken or skipped).
      StringRef param = fn.getResultAttrOfType<StringAttr>(i, "mc.name")
                            .getValue()
                            .drop_front(5);
      auto paramGlobal = symbols.lookup<ml_program::GlobalOp>(param);
      ml_program::GlobalOp acc = mc::createStateGlobal(
          fn, symbols, (param + ".grad_accum").str(),
          DenseElementsAttr::get(type, b.getFloatAttr(element, 0.0)),
          paramGlobal ? paramGlobal.getLoc() : fn.getLoc());
      Value kept = ml_program::GlobalLoadOp::create(
          b, loc, type, FlatSymbolRefAttr::get(acc.getSymNameAttr()));
      Value sum = mc::AddOp::create(b, loc, kept, g);
      Value restart = mc::BroadcastInDimOp::create(
          b, loc, RankedTensorType::get(type.getShape(), b.getI1Type()), due,
          ArrayRef<int64_t>{});
      storeTo(acc, mc::SelectOp::create(b, loc, restart, splat(0.0), sum));
      ret->setOperand(
          i,
          mc::MulOp::create(b, loc, sum, splat(1.0 / double(n))).getResult());
    }
    mc::appendNamedResult(fn, due, "update_due");
  }
};

} // namespace
