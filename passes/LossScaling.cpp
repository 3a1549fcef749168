// mc-loss-scaling: dynamic loss scaling as graph state (GradScaler's rules),
// with no host synchronisation: the skip is a select, not a branch.
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace mc {
#define GEN_PASS_DEF_LOSSSCALINGPASS
#include "passes/Passes.h.inc"
} // namespace mc

using namespace mlir;

namespace {

struct LossScalingPass : mc::impl::LossScalingPassBase<LossScalingPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext* ctx = module.getContext();
    // The scale is an f32 global: --loss-scale-init=1e39 is a double but
    // inf in f32, and 1e-50 is 0.
    // The gradients are unscaled by dividing by it: a scale below the
    // smallest normal f32 (1.17549435e-38) would make every unscaled
    // gradient inf or NaN, skip every step and back the scale off to 0.
    float initF32 = static_cast<float>(init);
    auto text = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.9g", v);
      return std::string(buf);
    };
    if (!(init > 0) || !std::isfinite(initF32) ||
        !(initF32 >= std::numeric_limits<float>::min())) {
      emitError(module.getLoc())
          << "loss scaling: --loss-scale-init=" << text(init)
          << " (the pass's init) is not a normal positive f32 number; the "
             "initial scale must be in [1.17549435e-38, 3.40282347e+38] "
             "(gradients are divided by it)";
      return signalPassFailure();
    }
    if (!(growth >= 1) || !std::isfinite(static_cast<float>(growth)) ||
        !(backoff > 0 && backoff <= 1) || interval < 1) {
      emitError(module.getLoc())
          << "loss scaling needs init > 0, growth >= 1 (finite), "
             "0 < backoff <= 1 and interval >= 1";
      return signalPassFailure();
    }
    // Both are f32 constants of the step: a backoff that is 0 in f32 would
    // set the scale to 0 at the first overflow, for good; the clean-step
    // counter is an f32, exact up to 2^24, so a longer interval is never
    // reached and the scale never grows.
    if (!(static_cast<float>(backoff) > 0)) {
      emitError(module.getLoc())
          << "loss scaling: --loss-scale-backoff=" << text(backoff)
          << " is 0 in f32 (the scale's type); the first overflow would set "
             "the scale to 0 for good";
      return signalPassFailure();
    }
    if (interval > (int64_t(1) << 24)) {
      emitError(module.getLoc())
          << "loss scaling: --loss-scale-interval="
          << static_cast<int64_t>(interval)
          << " is above 16777216 (2^24): the clean-step counter is an f32 "
             "and could never reach it";
      return signalPassFailure();
    }
    auto fn = llvm::dyn_cast_or_null<func::FuncOp>(
        mc::findEntryFunction(module, entry));
    if (!fn)
      return signalPassFailure();
    Block& body = fn.getBody().front();
    auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());

    // The backward seed mc-autodiff made.
    mc::ConstantOp seed;
    fn.walk([&](mc::ConstantOp c) {
      if (c->hasAttr("mc.autodiff_seed"))
        seed = c;
    });
    if (!seed) {
      fn.emitOpError() << "has no backward seed (mc.autodiff_seed); run "
                          "mc-autodiff first";
      return signalPassFailure();
    }
    SmallVector<unsigned> gradResults;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i)
      if (auto name = fn.getResultAttrOfType<StringAttr>(i, "mc.name"))
        if (name.getValue().starts_with("grad."))
          gradResults.push_back(i);
    if (gradResults.empty()) {
      fn.emitOpError() << "returns no grad.<parameter> results; run "
                          "mc-autodiff first";
      return signalPassFailure();
    }

    OpBuilder b(ctx);
    Location loc = ret.getLoc();
    auto f32 = b.getF32Type();
    auto scalar = RankedTensorType::get({}, f32);
    auto boolScalar = RankedTensorType::get({}, b.getI1Type());
    auto splat = [&](RankedTensorType type, double v) -> Value {
      return mc::ConstantOp::create(
          b, loc, DenseElementsAttr::get(type, APFloat(static_cast<float>(v))));
    };
    SymbolTable symbols(module);
    auto global = [&](StringRef name, double value) {
      return mc::createStateGlobal(
          fn, symbols, name,
          DenseElementsAttr::get(scalar, APFloat(static_cast<float>(value))),
          fn.getLoc());
    };
    auto scaleGlobal = global("loss_scale", init);
    auto trackerGlobal = global("loss_scale.growth_tracker", 0.0);

    // Seed the backward pass with the scale.
    b.setInsertionPointToStart(&body);
    Value scale = ml_program::GlobalLoadOp::create(
        b, loc, scalar, FlatSymbolRefAttr::get(scaleGlobal.getSymNameAttr()));
    Value tracker = ml_program::GlobalLoadOp::create(
        b, loc, scalar,
        FlatSymbolRefAttr::get(trackerGlobal.getSymNameAttr()));
    auto seedType = llvm::cast<RankedTensorType>(seed.getType());
    if (!seedType.getElementType().isF32()) {
      seed.emitOpError() << "seeds a " << seedType
                         << " loss; loss scaling needs an f32 loss";
      return signalPassFailure();
    }
    b.setInsertionPoint(seed);
    Value seedValue =
        seedType == scalar
            ? scale
            : mc::BroadcastInDimOp::create(b, seed.getLoc(), seedType, scale,
                                           ArrayRef<int64_t>{})
                  .getResult();
    seed.getResult().replaceAllUsesWith(seedValue);
    seed.erase();

    // Unscale every gradient and check it is finite.
    b.setInsertionPoint(ret);
    Value one = splat(scalar, 1.0);
    Value inv = mc::DivOp::create(b, loc, one, scale);
    Value allFinite = one; // 1.0 while every element seen is finite
    for (unsigned i : gradResults) {
      Value g = ret.getOperand(i);
      auto type = llvm::cast<RankedTensorType>(g.getType());
      Type element = type.getElementType();
      Value invT = inv;
      if (!element.isF32())
        invT = mc::CastOp::create(b, loc, RankedTensorType::get({}, element),
                                  inv);
      Value unscaled = mc::MulOp::create(
          b, loc, g,
          mc::BroadcastInDimOp::create(b, loc, type, invT, ArrayRef<int64_t>{})
              .getResult());
      ret->setOperand(i, unscaled);
      // x - x is 0 exactly when x is finite (inf - inf and NaN give NaN).
      Value diff = mc::SubOp::create(b, loc, unscaled, unscaled);
      Value zero = mc::ConstantOp::create(
          b, loc, DenseElementsAttr::get(type, b.getZeroAttr(element)));
      Value ok = mc::CompareOp::create(
          b, loc, RankedTensorType::get(type.getShape(), b.getI1Type()),
          mc::ComparisonDirection::EQ, diff, zero);
      Value okF = mc::CastOp::create(
          b, loc, RankedTensorType::get(type.getShape(), f32), ok);
      SmallVector<int64_t> dims;
      for (int64_t d = 0; d < type.getRank(); ++d)
        dims.push_back(d);
      Value minOk = type.getRank() == 0
                        ? okF
                        : mc::ReduceMinOp::create(b, loc, scalar, okF, dims,
                                                  /*keepdim=*/false)
                              .getResult();
      allFinite = mc::MinimumOp::create(b, loc, allFinite, minOk);
    }
    Value finite = mc::CompareOp::create(
        b, loc, boolScalar, mc::ComparisonDirection::EQ, allFinite, one);

    // GradScaler's update: backoff and reset on overflow; growth after
    // `interval` clean steps in a row.
    Value zero = splat(scalar, 0.0);
    Value counted = mc::AddOp::create(b, loc, tracker, one);
    Value due = mc::CompareOp::create(
        b, loc, boolScalar, mc::ComparisonDirection::GE, counted,
        splat(scalar, static_cast<double>(interval)));
    // A grown scale is kept only if it is finite (torch._amp_update_scale_):
    // else the scale stays, the largest finite one reached, and the tracker
    // restarts. An inf scale would unscale every gradient to NaN (inf * 0)
    // and skip every step from then on. `grown <= FLT_MAX` is false for inf
    // and NaN alike.
    Value grown = mc::MulOp::create(b, loc, scale, splat(scalar, growth));
    Value grownFinite = mc::CompareOp::create(
        b, loc, boolScalar, mc::ComparisonDirection::LE, grown,
        splat(scalar, std::numeric_limits<float>::max()));
    Value grownOrKept =
        mc::SelectOp::create(b, loc, grownFinite, grown, scale);
    Value cleanScale = mc::SelectOp::create(b, loc, due, grownOrKept, scale);
    Value cleanTracker = mc::SelectOp::create(b, loc, due, zero, counted);
    Value backedOff = mc::MulOp::create(b, loc, scale, splat(scalar, backoff));
    Value newScale = mc::SelectOp::create(b, loc, finite, cleanScale, backedOff);
    Value newTracker = mc::SelectOp::create(b, loc, finite, cleanTracker, zero);
    // Accumulating (mc-grad-accum): GradScaler's update() runs once per
    // optimizer step, on the group's last micro-batch; the scale stays for
    // the rest, so every micro-batch of a group is scaled alike.
    if (std::optional<unsigned> due = mc::findNamedResult(fn, "update_due")) {
      Value isDue = ret.getOperand(*due);
      newScale = mc::SelectOp::create(b, loc, isDue, newScale, scale);
      newTracker = mc::SelectOp::create(b, loc, isDue, newTracker, tracker);
    }
    ml_program::GlobalStoreOp::create(
        b, loc, FlatSymbolRefAttr::get(scaleGlobal.getSymNameAttr()), newScale);
    ml_program::GlobalStoreOp::create(
        b, loc, FlatSymbolRefAttr::get(trackerGlobal.getSymNameAttr()),
        newTracker);

    // Return grads_finite for mc-optimizer to guard its updates with.
    mc::appendNamedResult(fn, finite, "grads_finite");
  }
};

} // namespace
