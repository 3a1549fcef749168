// mc-optimizer: appends the SGD / Adam / AdamW update (PyTorch's formulas) to a
// training step made by mc-autodiff, with parameters and optimizer state as
// mutable ml_program globals.
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/GlobPattern.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace mc {
#define GEN_PASS_DEF_OPTIMIZERPASS
#include "passes/Passes.h.inc"
} // namespace mc

using namespace mlir;

namespace {

/// Builds the update ops: splat constants and elementwise mc ops.
class UpdateBuilder {
public:
  UpdateBuilder(OpBuilder& b, Location loc) : b(b), loc(loc) {}

  /// Optimizer math is f32 (master weights), checked by the pass.
  Value splat(RankedTensorType type, double v) {
    auto attr = DenseElementsAttr::get(type, APFloat(static_cast<float>(v)));
    return mc::ConstantOp::create(b, loc, attr);
  }
  Value add(Value x, Value y) { return mc::AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return mc::SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return mc::MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return mc::DivOp::create(b, loc, x, y); }
  Value sqrt(Value x) { return mc::SqrtOp::create(b, loc, x); }
  Value pow(Value x, Value y) { return mc::PowOp::create(b, loc, x, y); }
  Value exp(Value x) { return mc::ExpOp::create(b, loc, x); }
  Value log(Value x) { return mc::LogOp::create(b, loc, x); }
  Value neg(Value x) { return mc::NegOp::create(b, loc, x); }
  Value cos(Value x) { return mc::CosOp::create(b, loc, x); }
  Value maximum(Value x, Value y) {
    return mc::MaximumOp::create(b, loc, x, y);
  }
  Value compare(mc::ComparisonDirection d, Value x, Value y) {
    auto type = llvm::cast<RankedTensorType>(x.getType());
    return mc::CompareOp::create(
        b, loc, RankedTensorType::get(type.getShape(), b.getI1Type()), d, x,
        y);
  }
  Value select(Value c, Value x, Value y) {
    return mc::SelectOp::create(b, loc, c, x, y);
  }

  /// AdamW's bias correction 1 - beta^t for the step count `t` (rank-0
  /// f32), to f32's precision. PyTorch computes it in double; 1 -
  /// pow(beta, t) in f32 loses 1 - beta's low bits to beta's rounding
  /// (1e-5 relative for beta2 = 0.999, 7e-4 for 0.99999). Here beta^t is
  /// u = exp(t ln beta), with ln beta rounded once from double, and 1 - u
  /// near 1 is Kahan's -expm1: (1 - u) * x / log(u), x = t ln beta (exact
  /// 1 - u over the rounding of u); u = 1 gives -x; below 1/2, 1 - u has
  /// no cancellation (beta = 0: ln beta = -inf, u = 0, 1).
  Value biasCorrection(double beta, Value t) {
    auto type = llvm::cast<RankedTensorType>(t.getType());
    Value one = splat(type, 1.0);
    Value x = mul(t, splat(type, std::log(beta)));
    Value u = exp(x);
    Value oneMinusU = sub(one, u);
    Value kahan = mul(oneMinusU, div(x, log(u)));
    Value nearOne =
        compare(mc::ComparisonDirection::GE, u, splat(type, 0.5));
    Value isOne = compare(mc::ComparisonDirection::EQ, u, one);
    return select(nearOne, select(isOne, neg(x), kahan), oneMinusU);
  }
  Value mulScalar(Value x, double v) {
    return mul(x, splat(llvm::cast<RankedTensorType>(x.getType()), v));
  }
  /// A rank-0 tensor broadcast to `type`.
  Value broadcast(Value scalar, RankedTensorType type) {
    if (scalar.getType() == type)
      return scalar;
    return mc::BroadcastInDimOp::create(b, loc, type, scalar,
                                        ArrayRef<int64_t>{});
  }

  OpBuilder& b;
  Location loc;
};

/// A number as a message shows it: 0.003, -0.5, 1e+39, inf, nan.
std::string numberText(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

struct Parameter {
  ml_program::GlobalOp global;
  Value value; // the loaded parameter
  Value grad;
};

struct OptimizerPass : mc::impl::OptimizerPassBase<OptimizerPass> {
  using Base::Base;

  /// --no-weight-decay: the parameters a glob matches (PyTorch's parameter
  /// groups with weight_decay 0). Failure, reported, for a pattern that is
  /// no glob or matches no trained parameter, and on a step without weight
  /// decay (where the option would do nothing).
  FailureOr<llvm::StringSet<>>
  exemptFromDecay(ModuleOp module, ArrayRef<Parameter> params, double decay) {
    llvm::StringSet<> exempt;
    if (!noDecay.empty() && decay == 0)
      return emitError(module.getLoc())
             << "--no-weight-decay has no effect: this step has no weight "
                "decay (--weight-decay is 0"
             << (weightDecay.getValue() ? ""
                 : kind == "sgd"        ? ", SGD's default"
                                        : ", Adam's default")
             << ")";
    SmallVector<StringRef> names;
    for (Parameter p : params) // (op accessors are not const)
      names.push_back(p.global.getSymName());
    for (const std::string& text : noDecay) {
      llvm::Expected<llvm::GlobPattern> glob = llvm::GlobPattern::create(text);
      if (!glob)
        return emitError(module.getLoc())
               << "--no-weight-decay '" << text << "' is not a glob pattern: "
               << llvm::toString(glob.takeError());
      bool any = false;
      for (StringRef name : names)
        if (glob->match(name)) {
          exempt.insert(name);
          any = true;
        }
      if (!any) {
        InFlightDiagnostic d = emitError(module.getLoc())
                               << "--no-weight-decay '" << text
                               << "' matches no trained parameter; they are:";
        mc::appendNames(d, names);
        return d;
      }
    }
    return exempt;
  }

  /// Hugging Face's get_{constant,linear,cosine}_schedule_with_warmup at
  /// step `t` (f32 scalar), in f32: t / max(1, W) while t < W; then 1,
  /// max(0, (T - t) / max(1, T - W)), or max(0, (1 + cos(pi * p)) / 2)
  /// with p = (t - W) / max(1, T - W) (which rises again after T, as
  /// theirs does).
  Value scheduleFactor(UpdateBuilder& u, Value t, RankedTensorType type) {
    auto c = [&](double v) { return u.splat(type, v); };
    double w = double(warmupSteps), total = double(totalSteps);
    Value after;
    if (lrSchedule == "constant") {
      after = c(1.0);
    } else {
      Value span = c(std::max(1.0, total - w));
      if (lrSchedule == "linear") {
        Value left = u.sub(c(total), t);
        after = u.maximum(c(0.0), u.div(left, span));
      } else {
        Value done = u.sub(t, c(w));
        Value progress = u.div(done, span);
        Value wave = u.cos(u.mul(progress, c(M_PI)));
        Value half = u.mul(u.add(c(1.0), wave), c(0.5));
        after = u.maximum(c(0.0), half);
      }
    }
    if (warmupSteps == 0)
      return after;
    Value warm = u.div(t, c(std::max(1.0, w)));
    Value warming = u.compare(mc::ComparisonDirection::LT, t, c(w));
    return u.select(warming, warm, after);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (kind != "sgd" && kind != "adam" && kind != "adamw") {
      emitError(module.getLoc()) << "unknown optimizer kind '" << kind
                                 << "' (expected sgd, adam or adamw)";
      return signalPassFailure();
    }
    // Every option is checked, given or default, by the name of its flag
    // (modelc compile --lr=..., the pass's lr=...). The update computes in
    // f32, so a value must stay finite and in range once rounded to f32:
    // --beta1=0.99999999 is 1 in f32, --eps=1e-50 is 0, --lr=1e39 is inf.
    auto inRange = [&](StringRef flag, double value,
                       function_ref<bool(double)> ok, StringRef range) {
      float rounded = static_cast<float>(value);
      if (std::isfinite(value) && std::isfinite(rounded) && ok(value) &&
          ok(rounded))
        return true;
      InFlightDiagnostic diag = emitError(module.getLoc())
                                << "optimizer option --" << flag << "="
                                << numberText(value);
      if (!std::isfinite(value))
        diag << " is not a finite number";
      else if (!std::isfinite(rounded))
        diag << " is not a finite f32 number (the update computes in f32)";
      else if (!ok(value))
        diag << " is out of range: " << range;
      else
        diag << " is out of range: " << range << " (it is "
             << numberText(rounded) << " in f32)";
      return false;
    };
    auto atLeastZero = [](double v) { return v >= 0; };
    auto aBeta = [](double v) { return v >= 0 && v < 1; };
    // Not given: the optimizer's default (torch.optim's Adam and AdamW:
    // 1e-3).
    const bool adam = kind == "adam" || kind == "adamw";
    const double lr = this->lr.getValue().value_or(adam ? 1e-3 : 0.01);
    if (!inRange("lr", lr, atLeastZero, "lr must be >= 0") ||
        !inRange("momentum", momentum, atLeastZero, "momentum must be >= 0") ||
        !inRange("dampening", dampening, atLeastZero,
                 "dampening must be >= 0") ||
        (weightDecay.getValue() &&
         !inRange("weight-decay", *weightDecay.getValue(), atLeastZero,
                  "weight decay must be >= 0")) ||
        !inRange("beta1", beta1, aBeta, "beta1 must be in [0, 1)") ||
        !inRange("beta2", beta2, aBeta, "beta2 must be in [0, 1)") ||
        !inRange(
            "eps", eps, [](double v) { return v > 0; }, "eps must be > 0") ||
        !inRange("max-grad-norm", maxGradNorm, atLeastZero,
                 "max-grad-norm must be >= 0 (0: no clipping)"))
      return signalPassFailure();
    if (lrSchedule != "constant" && lrSchedule != "linear" &&
        lrSchedule != "cosine") {
      emitError(module.getLoc()) << "unknown --lr-schedule '" << lrSchedule
                                 << "' (expected constant, linear or cosine)";
      return signalPassFailure();
    }
    // Step counts are f32 in the schedule's math: exact to 2^24. (Copies:
    // the options stream into a diagnostic as characters.)
    const int64_t warmup = warmupSteps, total = totalSteps;
    const int64_t maxSteps = int64_t(1) << 24;
    if (warmup < 0 || warmup > maxSteps || total < 0 || total > maxSteps) {
      emitError(module.getLoc())
          << "--warmup-steps=" << warmup << " and --total-steps=" << total
          << " must be in [0, 2^24] (the schedule counts in f32)";
      return signalPassFailure();
    }
    if (lrSchedule != "constant" && total <= warmup) {
      emitError(module.getLoc())
          << "--lr-schedule=" << lrSchedule << " needs --total-steps greater "
          << "than --warmup-steps (" << warmup << "), got " << total;
      return signalPassFailure();
    }
    if (lrSchedule == "constant" && total != 0) {
      emitError(module.getLoc())
          << "--total-steps=" << total << " has no effect with a "
          << "constant learning rate (give --lr-schedule=linear or cosine)";
      return signalPassFailure();
    }
    if (nesterov && (momentum <= 0 || dampening != 0)) {
      emitError(module.getLoc())
          << "nesterov needs momentum > 0 and dampening 0";
      return signalPassFailure();
    }
    // Not given: the optimizer's default (torch.optim's: SGD and Adam 0,
    // AdamW 0.01).
    double decay =
        weightDecay.getValue().value_or(kind == "adamw" ? 0.01 : 0.0);
    auto fn = llvm::dyn_cast_or_null<func::FuncOp>(
        mc::findEntryFunction(module, entry));
    if (!fn)
      return signalPassFailure();
    auto ret = llvm::cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    if (ret.getNumOperands() < 2) {  // (loss, grads...)
      fn.emitOpError() << "returns " << ret.getNumOperands()
                       << " values; mc-optimizer expects (loss, grad.<param>"
                          "...) from mc-autodiff";
      return signalPassFailure();
    }

    // Match gradients to parameters by the result names mc-autodiff sets;
    // mc-loss-scaling adds `grads_finite` and mc-grad-accum `update_due`,
    // which guard every update.
    SymbolTable symbols(module);
    SmallVector<Parameter> params;
    Value gradsFinite, updateDue;
    for (unsigned i = 1; i < ret.getNumOperands(); ++i) {
      auto name = fn.getResultAttrOfType<StringAttr>(i, "mc.name");
      if (name && name.getValue() == "grads_finite") {
        gradsFinite = ret.getOperand(i);
        continue;
      }
      if (name && name.getValue() == "update_due") {
        updateDue = ret.getOperand(i);
        continue;
      }
      if (!name || !name.getValue().starts_with("grad.")) {
        fn.emitOpError() << "result " << i
                         << " is not named grad.<parameter>; run mc-autodiff "
                            "first";
        return signalPassFailure();
      }
      StringRef paramName = name.getValue().drop_front(5);
      auto global = symbols.lookup<ml_program::GlobalOp>(paramName);
      if (!global) {
        fn.emitOpError() << "result " << i << " is the gradient of '"
                         << paramName << "', which is not a global";
        return signalPassFailure();
      }
      params.push_back({global, Value(), ret.getOperand(i)});
    }
    FailureOr<llvm::StringSet<>> exempt =
        exemptFromDecay(module, params, decay);
    if (failed(exempt))
      return signalPassFailure();

    // Parameters become mutable state read with global_load.
    OpBuilder b(module.getContext());
    for (Parameter& p : params) {
      p.global.setIsMutable(true);
      SmallVector<ml_program::GlobalLoadConstOp> loads;
      fn.walk([&](ml_program::GlobalLoadConstOp load) {
        if (load.getGlobal().getLeafReference() == p.global.getSymNameAttr())
          loads.push_back(load);
      });
      b.setInsertionPointToStart(&fn.getBody().front());
      auto load = ml_program::GlobalLoadOp::create(
          b, p.global.getLoc(), p.global.getType(),
          FlatSymbolRefAttr::get(p.global.getSymNameAttr()));
      for (auto old : loads) {
        old.getResult().replaceAllUsesWith(load.getResult());
        old.erase();
      }
      p.value = load.getResult();
    }

    Location loc = ret.getLoc();
    auto scalarType = RankedTensorType::get({}, b.getF32Type());
    // The step counter is i64: exact however long training runs.
    auto counterType = RankedTensorType::get({}, b.getI64Type());
    auto newGlobal = [&](StringRef name, RankedTensorType type,
                         Location at) -> ml_program::GlobalOp {
      return mc::createStateGlobal(
          fn, symbols, name,
          DenseElementsAttr::get(type, b.getZeroAttr(type.getElementType())),
          at);
    };
    auto load = [&](ml_program::GlobalOp g) {
      return ml_program::GlobalLoadOp::create(
                 b, loc, g.getType(), FlatSymbolRefAttr::get(g.getSymNameAttr()))
          .getResult();
    };
    // `g` = v where `when` (an i1 scalar) holds, else unchanged; always
    // when null.
    auto storeWhen = [&](ml_program::GlobalOp g, Value v, Value when) {
      if (when) {
        auto type = llvm::cast<RankedTensorType>(v.getType());
        Value keep = load(g);
        Value pred = when;
        if (type.getRank() != 0)
          pred = mc::BroadcastInDimOp::create(
              b, loc, RankedTensorType::get(type.getShape(), b.getI1Type()),
              when, ArrayRef<int64_t>{});
        v = mc::SelectOp::create(b, loc, pred, v, keep);
      }
      ml_program::GlobalStoreOp::create(
          b, loc, FlatSymbolRefAttr::get(g.getSymNameAttr()), v);
    };
    b.setInsertionPoint(ret);
    UpdateBuilder u(b, loc);
    // The update's state: kept as it was on a step with inf/NaN gradients
    // (loss scaling), and between the micro-batches of an accumulation.
    Value applies = gradsFinite ? gradsFinite : updateDue;
    if (gradsFinite && updateDue)
      applies = u.select(updateDue, gradsFinite, updateDue);
    auto store = [&](ml_program::GlobalOp g, Value v) {
      storeWhen(g, v, applies);
    };

    ml_program::GlobalOp stepGlobal =
        newGlobal("optimizer.step", counterType, fn.getLoc());
    Value step = load(stepGlobal);
    auto counter = [&](int64_t v) -> Value {
      return mc::ConstantOp::create(
          b, loc, DenseElementsAttr::get(counterType, b.getI64IntegerAttr(v)
                                                          .getValue()));
    };
    Value nextStep = u.add(step, counter(1));
    Value isFirstStep = mc::CompareOp::create(
        b, loc, RankedTensorType::get({}, b.getI1Type()),
        mc::ComparisonDirection::EQ, step, counter(0));
    // Bias corrections use the count as f32 (beta^t is 0 in f32 long
    // before t loses precision).
    Value nextStepF32 = mc::CastOp::create(b, loc, scalarType, nextStep);
    // A schedule: this step's learning rate, lr * factor(t) with t the
    // steps taken so far (torch.optim.lr_scheduler.LambdaLR after t
    // scheduler.step() calls), kept in optimizer.lr for logs.
    Value lrNow;
    if (lrSchedule != "constant" || warmupSteps > 0) {
      Value t = mc::CastOp::create(b, loc, scalarType, step);
      lrNow = u.mul(u.splat(scalarType, lr), scheduleFactor(u, t, scalarType));
      ml_program::GlobalOp lrGlobal =
          newGlobal("optimizer.lr", scalarType, fn.getLoc());
      ml_program::GlobalStoreOp::create(
          b, loc, FlatSymbolRefAttr::get(lrGlobal.getSymNameAttr()), lrNow);
    }
    // `x * lr`, the learning rate a constant or this step's.
    auto timesLr = [&](Value x) {
      if (!lrNow)
        return u.mulScalar(x, lr);
      return u.mul(
          x, u.broadcast(lrNow, llvm::cast<RankedTensorType>(x.getType())));
    };
    // AdamW's step size lr / (1 - beta1^t) and sqrt(1 - beta2^t), rank-0
    // values every parameter's update shares: built once; with a schedule,
    // the decay factor 1 - lr * weight_decay too.
    Value stepSize, rootBc2, decayFactor;
    if (adam) {
      Value bc1 = u.biasCorrection(beta1, nextStepF32);
      Value bc2 = u.biasCorrection(beta2, nextStepF32);
      stepSize = u.div(lrNow ? lrNow : u.splat(scalarType, lr), bc1);
      rootBc2 = u.sqrt(bc2);
      if (lrNow && kind == "adamw") {
        Value one = u.splat(scalarType, 1.0);
        decayFactor = u.sub(one, u.mulScalar(lrNow, decay));
      }
    }
    for (Parameter& p : params)
      if (!llvm::cast<RankedTensorType>(p.value.getType())
               .getElementType()
               .isF32()) {
        p.global.emitOpError()
            << "has element type "
            << llvm::cast<RankedTensorType>(p.value.getType()).getElementType()
            << "; the optimizer updates f32 parameters (master weights)";
        return signalPassFailure();
      }
    if (maxGradNorm > 0 && !params.empty()) {
      // torch.nn.utils.clip_grad_norm_: every gradient scaled by
      // min(1, max / (norm + 1e-6)), `norm` the L2 norm of all of them
      // together: the sum of each one's sum of squares, in parameter order
      // (PyTorch takes the norm of the per-parameter norms: the same up to
      // f32 rounding). Kept in optimizer.grad_norm for logging (not
      // guarded: a skipped step's norm is what made it skip). Inf or NaN
      // gradients give a NaN scale, on a step loss scaling skips anyway.
      Value total;
      for (Parameter& p : params) {
        auto type = llvm::cast<RankedTensorType>(p.grad.getType());
        SmallVector<int64_t> all;
        for (int64_t d = 0; d < type.getRank(); ++d)
          all.push_back(d);
        Value squares = u.mul(p.grad, p.grad);
        Value sum =
            all.empty()
                ? squares
                : Value(mc::ReduceSumOp::create(b, loc, squares, all, false));
        total = total ? u.add(total, sum) : sum;
      }
      Value norm = u.sqrt(total);
      ml_program::GlobalOp normGlobal =
          newGlobal("optimizer.grad_norm", scalarType, fn.getLoc());
      storeWhen(normGlobal, norm, updateDue); // an update's norm
      Value padded = u.add(norm, u.splat(scalarType, 1e-6));
      Value coef = u.div(u.splat(scalarType, maxGradNorm), padded);
      Value one = u.splat(scalarType, 1.0);
      Value clamped = mc::MinimumOp::create(b, loc, coef, one);
      for (Parameter& p : params) {
        auto type = llvm::cast<RankedTensorType>(p.grad.getType());
        p.grad = u.mul(p.grad, u.broadcast(clamped, type));
      }
    }
    for (Parameter& p : params) {
      auto type = llvm::cast<RankedTensorType>(p.value.getType());
      StringRef name = p.global.getSymName();
      Value w = p.value, g = p.grad, updated;
      bool decays = decay != 0 && !exempt->count(name);
      if (kind == "sgd") {
        Value d = g;
        if (decays)
          d = u.add(d, u.mulScalar(w, decay));
        if (momentum != 0) {
          ml_program::GlobalOp bufGlobal = newGlobal(
              (name + ".momentum_buffer").str(), type, p.global.getLoc());
          Value buf = load(bufGlobal);
          // Operands built one statement each: C++ leaves the order of
          // a call's arguments open, and the IR's order (so the
          // artifact's bytes) must not depend on the compiler.
          Value kept = u.mulScalar(buf, momentum);
          Value added = u.mulScalar(d, 1 - dampening);
          Value running = u.add(kept, added);
          // torch.optim.SGD starts the buffer at the first gradient.
          Value first = mc::BroadcastInDimOp::create(
              b, loc, RankedTensorType::get(type.getShape(), b.getI1Type()),
              isFirstStep, ArrayRef<int64_t>{});
          Value newBuf = mc::SelectOp::create(b, loc, first, d, running);
          store(bufGlobal, newBuf);
          d = nesterov ? u.add(d, u.mulScalar(newBuf, momentum)) : newBuf;
        }
        updated = u.sub(w, timesLr(d));
      } else {
        ml_program::GlobalOp mGlobal =
            newGlobal((name + ".exp_avg").str(), type, p.global.getLoc());
        ml_program::GlobalOp vGlobal =
            newGlobal((name + ".exp_avg_sq").str(), type, p.global.getLoc());
        // AdamW decays the weight itself (decoupled; without decay,
        // PyTorch's w * (1 - lr * 0) is w); Adam adds the L2 term to the
        // gradient, before the moments (torch.optim.Adam's
        // grad.add(param, alpha=weight_decay)).
        Value decayed = w;
        if (decays && kind == "adamw")
          decayed = decayFactor ? u.mul(w, u.broadcast(decayFactor, type))
                                : u.mulScalar(w, 1 - lr * decay);
        if (decays && kind == "adam")
          g = u.add(g, u.mulScalar(w, decay));
        // One op-building call per statement, as above.
        Value mKept = u.mulScalar(load(mGlobal), beta1);
        Value mAdded = u.mulScalar(g, 1 - beta1);
        Value m = u.add(mKept, mAdded);
        Value vKept = u.mulScalar(load(vGlobal), beta2);
        Value vAdded = u.mulScalar(u.mul(g, g), 1 - beta2);
        Value v = u.add(vKept, vAdded);
        store(mGlobal, m);
        store(vGlobal, v);
        Value rootV = u.sqrt(v);
        Value scaled = u.div(rootV, u.broadcast(rootBc2, type));
        Value denom = u.add(scaled, u.splat(type, eps));
        Value ratio = u.div(m, denom);
        Value stepSizes = u.broadcast(stepSize, type);
        updated = u.sub(decayed, u.mul(ratio, stepSizes));
      }
      store(p.global, updated);
    }
    store(stepGlobal, nextStep);

    // The step returns the loss alone.
    Value loss = ret.getOperand(0);
    DictionaryAttr lossAttrs = fn.getResultAttrDict(0);
    ret->setOperands(ValueRange{loss});
    fn.setFunctionType(FunctionType::get(
        module.getContext(), fn.getFunctionType().getInputs(),
        TypeRange{loss.getType()}));
    fn.setAllResultAttrs(ArrayRef<DictionaryAttr>{lossAttrs});
  }
};

} // namespace
