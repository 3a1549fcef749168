// mc-amp: mixed precision by op policy (O1) or for the whole model (O2),
// with one cast per value and the decision recorded on every op.
#include "passes/Passes.h"
#include "modelc/ops.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <cstdio>

namespace mc {
#define GEN_PASS_DEF_AUTOMIXEDPRECISIONPASS
#include "passes/Passes.h.inc"
} // namespace mc

using namespace mlir;

namespace {

bool isFloatTensor(Type t) {
  auto r = llvm::dyn_cast<RankedTensorType>(t);
  return r && llvm::isa<FloatType>(r.getElementType());
}

Type withElement(Type t, Type element) {
  auto r = llvm::cast<RankedTensorType>(t);
  return RankedTensorType::get(r.getShape(), element, r.getEncoding());
}

/// Widest of f32 > f16 ~ bf16 (f16 and bf16 mixed widen to f32).
Type widest(Type a, Type b) {
  if (!a)
    return b;
  if (!b || a == b)
    return a;
  return Float32Type::get(a.getContext());
}

/// A view that moves or repeats its operand's values without computing.
bool isView(Operation* op) {
  return llvm::isa_and_nonnull<mc::BroadcastInDimOp, mc::ReshapeOp,
                               mc::TransposeOp>(op);
}

/// The value of a constant operand (an mc.constant, or a load of an
/// immutable global with a value, or a view of either), or null.
ElementsAttr constantValue(Value v) {
  Operation* def = v.getDefiningOp();
  if (isView(def))
    return constantValue(def->getOperand(0));
  return mc::constantElements(v);
}

/// Calls `visit` on each f32 value of `value` where they lie (a dense
/// attribute's storage, a resource blob); false when they cannot be read so
/// (another element type).
template <typename Visit> bool forEachF32(ElementsAttr value, Visit visit) {
  if (!value.getElementType().isF32())
    return false;
  if (auto dense = llvm::dyn_cast<DenseElementsAttr>(value)) {
    if (dense.isSplat()) {
      visit(dense.getSplatValue<float>());
      return true;
    }
    for (float x : dense.getValues<float>())
      visit(x);
    return true;
  }
  if (auto blob = llvm::dyn_cast<DenseF32ResourceElementsAttr>(value)) {
    if (std::optional<ArrayRef<float>> a = blob.tryGetAsArrayRef()) {
      for (float x : *a)
        visit(x);
      return true;
    }
  }
  return false;
}

std::string numberText(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", v);
  return text;
}

/// Why the f32 constant `value` does not survive a cast to `low` (f16 or
/// bf16), or "": a finite value that would round to inf, or values so far
/// below the type's normal range that the cast's error bound passes 4 units
/// of its roundoff relative to the tensor's norm (a batch norm with a tiny
/// gamma folded into a conv's weight: f16 subnormals of ~3 bits).
std::string castLoss(ElementsAttr value, Type low) {
  bool f16 = low.isF16();
  // |x| at and above which the cast rounds to inf; the smallest normal;
  // the unit roundoff; the largest error of a subnormal.
  double overflow = f16 ? 65520.0 : 3.3961e38;
  double minNormal = f16 ? std::ldexp(1.0, -14) : std::ldexp(1.0, -126);
  double unit = f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  double subnormalError = f16 ? std::ldexp(1.0, -25) : std::ldexp(1.0, -134);
  const char* name = f16 ? "f16" : "bf16";
  double norm2 = 0, error2 = 0, largest = 0;
  float overflowed = 0; // the first finite value that would be inf
  bool read = forEachF32(value, [&](float x) {
    double a = std::fabs(double(x));
    if (!std::isfinite(a) || overflowed != 0)
      return;
    if (a >= overflow) {
      overflowed = x;
      return;
    }
    largest = std::max(largest, a);
    norm2 += a * a;
    // Zero casts exactly; below half the smallest subnormal a value flushes
    // to zero (its error is itself).
    double e = a >= minNormal         ? a * unit
               : a >= 2 * subnormalError ? subnormalError
                                         : a;
    error2 += e * e;
  });
  if (!read)
    return "";
  if (overflowed != 0)
    return "holds " + numberText(overflowed) + ", which is " +
           (overflowed < 0 ? "-inf" : "inf") + " in " + name;
  if (norm2 > 0 && error2 > 16 * unit * unit * norm2)
    return "is below " + std::string(name) + "'s normal range (largest |x| " +
           numberText(largest) + "): the cast's error could reach " +
           numberText(std::sqrt(error2 / norm2)) +
           " of its norm, against " + numberText(unit) + " in range";
  return "";
}

struct AutoMixedPrecisionPass
    : mc::impl::AutoMixedPrecisionPassBase<AutoMixedPrecisionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext* ctx = module.getContext();
    Type low;
    if (dtype == "bf16")
      low = BFloat16Type::get(ctx);
    else if (dtype == "f16")
      low = Float16Type::get(ctx);
    else {
      emitError(module.getLoc())
          << "unknown AMP dtype '" << dtype << "' (expected bf16 or f16)";
      return signalPassFailure();
    }
    if (level != "O1" && level != "O2") {
      emitError(module.getLoc())
          << "unknown AMP level '" << level << "' (expected O1 or O2)";
      return signalPassFailure();
    }
    Type f32 = Float32Type::get(ctx);

    // The default lists (PyTorch autocast / Paddle AMP), then overrides.
    // The default lists come from each op's ODS declaration (mcAmp, through
    // the op registry): "low" ops run in the low-precision type, "f32" ops
    // stay in f32.
    llvm::StringSet<> lowList, f32List;
    for (const mc::rt::OpInfo& info : mc::rt::opTable()) {
      if (info.amp == mc::rt::AmpClass::Low)
        lowList.insert(std::string("mc.") + info.mnemonic);
      else if (info.amp == mc::rt::AmpClass::F32)
        f32List.insert(std::string("mc.") + info.mnemonic);
    }
    llvm::StringSet<> norms = {"mc.layer_norm", "mc.batch_norm"};
    // Op names may be given with or without the dialect prefix ("matmul"
    // or "mc.matmul"); an unknown name is an error, not a silent no-op.
    auto opName = [&](const std::string& name) -> std::optional<std::string> {
      std::string full = StringRef(name).starts_with("mc.") ? name : "mc." + name;
      if (!RegisteredOperationName::lookup(full, ctx)) {
        emitError(module.getLoc())
            << "unknown op '" << name << "' in an AMP list (expected an mc "
               "op such as mc.matmul)";
        return std::nullopt;
      }
      return full;
    };
    SmallVector<std::string> f32Names;
    for (const std::string& op : lowOps) {
      auto full = opName(op);
      if (!full)
        return signalPassFailure();
      f32List.erase(*full);
      lowList.insert(*full);
    }
    for (const std::string& op : f32Ops) {
      auto full = opName(op);
      if (!full)
        return signalPassFailure();
      lowList.erase(*full);
      f32List.insert(*full);
      f32Names.push_back(*full);
    }
    llvm::StringMap<Type> byLocation;
    for (const std::string& entry : locations) {
      size_t colon = entry.rfind(':');
      std::string name = entry.substr(0, colon);
      std::string type = colon == std::string::npos ? "" : entry.substr(colon + 1);
      if (colon == std::string::npos || (type != "f32" && type != dtype)) {
        emitError(module.getLoc())
            << "bad location override '" << entry << "' (expected NAME:f32 or NAME:"
            << dtype << ")";
        return signalPassFailure();
      }
      byLocation[name] = type == "f32" ? f32 : low;
    }

    auto fn = llvm::dyn_cast_or_null<func::FuncOp>(
        mc::findEntryFunction(module, entry));
    if (!fn)
      return signalPassFailure();

    // One cast per (value, type): placed right after the value's definition.
    llvm::DenseMap<std::pair<Value, Type>, Value> casts;
    auto castTo = [&](Value v, Type element) -> Value {
      auto type = llvm::cast<RankedTensorType>(v.getType());
      if (type.getElementType() == element)
        return v;
      auto key = std::make_pair(v, element);
      if (Value c = casts.lookup(key))
        return c;
      OpBuilder b(ctx);
      if (Operation* def = v.getDefiningOp())
        b.setInsertionPointAfter(def);
      else
        b.setInsertionPointToStart(llvm::cast<BlockArgument>(v).getOwner());
      Value c = mc::CastOp::create(b, v.getLoc(),
                                   withElement(type, element), v);
      casts[key] = c;
      return c;
    };

    llvm::StringSet<> locationsSeen;
    SmallVector<Operation*> ops;
    for (Operation& op : fn.getBody().front())
      ops.push_back(&op);
    for (Operation* op : ops) {
      if (!llvm::isa<mc::MCDialect>(op->getDialect()) ||
          llvm::isa<mc::CastOp, mc::ConstantOp>(op))
        continue;
      // Only ops that compute on floats: some float operand or result.
      bool floatOp = llvm::any_of(op->getResultTypes(), isFloatTensor) ||
                     llvm::any_of(op->getOperandTypes(), isFloatTensor);
      if (!floatOp)
        continue;
      StringRef name = op->getName().getStringRef();
      Type target;
      std::string reason;
      std::string locName;
      if (auto nameLoc = llvm::dyn_cast<NameLoc>(op->getLoc()))
        locName = nameLoc.getName().str();
      if (!locName.empty() && byLocation.count(locName)) {
        locationsSeen.insert(locName);
        target = byLocation[locName];
        reason = "location override (" + locName + ")";
      } else if (level == "O2") {
        if (norms.contains(name)) {
          target = f32;
          reason = "O2: norms stay f32";
        } else if (llvm::is_contained(f32Names, name.str())) {
          target = f32;
          reason = "O2: f32 override";
        } else {
          target = low;
          reason = "O2: whole model in " + dtype;
        }
      } else if (lowList.contains(name)) {
        target = low;
        reason = "O1: low-precision list";
      } else if (f32List.contains(name)) {
        target = f32;
        reason = "O1: f32 list";
      } else {
        Type w;
        for (Type t : op->getOperandTypes())
          if (isFloatTensor(t))
            w = widest(w, llvm::cast<RankedTensorType>(t).getElementType());
        target = w ? w : f32;
        reason = "O1: follows its inputs (widest)";
      }
      // A view of a constant stays f32: its readers decide (below), and a
      // reader in the low type reads it through a cast that folds.
      if (target == low && isView(op) && constantValue(op->getOperand(0))) {
        target = f32;
        reason = level.getValue() +
                 ": a view of a constant (its readers' precision decides)";
      }
      // A constant operand that the cast would ruin (inf, or subnormal
      // noise) keeps the op in f32, whatever the level or list said; a
      // location override is the user's word and stays.
      if (target == low && reason.rfind("location override", 0) != 0) {
        for (OpOperand& operand : op->getOpOperands()) {
          if (!isFloatTensor(operand.get().getType()))
            continue;
          ElementsAttr value = constantValue(operand.get());
          std::string loss = value ? castLoss(value, low) : "";
          if (loss.empty())
            continue;
          target = f32;
          reason = level.getValue() + ": kept f32, constant operand " +
                   std::to_string(operand.getOperandNumber()) + " " + loss;
          op->emitWarning() << "mc-amp: kept in f32: its constant operand "
                            << operand.getOperandNumber() << " " << loss;
          break;
        }
      }
      // Rewrite in place: float operands cast to the target, float results
      // retyped.
      for (OpOperand& operand : op->getOpOperands())
        if (isFloatTensor(operand.get().getType()))
          operand.set(castTo(operand.get(), target));
      for (OpResult r : op->getResults())
        if (isFloatTensor(r.getType()))
          r.setType(withElement(r.getType(), target));
      op->setAttr("mc.precision",
                  StringAttr::get(ctx, target == f32 ? "f32" : dtype.getValue()));
      op->setAttr("mc.precision_reason", StringAttr::get(ctx, reason));
    }

    for (auto& entry : byLocation)
      if (!locationsSeen.contains(entry.getKey()))
        emitWarning(module.getLoc())
            << "AMP location override '" << entry.getKey()
            << "' matches no op (op locations look like loc(\"NAME\"))";

    // Uses outside mc ops (return, stores) keep their types: cast back.
    for (Operation* op : ops) {
      if (llvm::isa<mc::MCDialect>(op->getDialect()))
        continue;
      for (OpOperand& operand : op->getOpOperands()) {
        Value v = operand.get();
        if (!isFloatTensor(v.getType()))
          continue;
        Type expected;
        if (auto ret = llvm::dyn_cast<func::ReturnOp>(op))
          expected = fn.getFunctionType().getResult(operand.getOperandNumber());
        else if (auto store = llvm::dyn_cast<ml_program::GlobalStoreOp>(op)) {
          auto global =
              SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(
                  op, store.getGlobalAttr());
          expected = global ? global.getType() : Type();
        }
        if (expected && expected != v.getType())
          operand.set(castTo(
              v, llvm::cast<RankedTensorType>(expected).getElementType()));
      }
    }
    if (failed(verify(fn))) {
      fn.emitOpError() << "does not verify after mc-amp (a bug)";
      return signalPassFailure();
    }
  }
};

} // namespace
