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
