// mc-verify-contract: checks that a module is something codegen accepts.
#include "passes/Passes.h"
#include "ir/Batch.h"
#include "modelc/kernels.h"
#include "modelc/ops.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>

namespace mc {
#define GEN_PASS_DEF_VERIFYCONTRACTPASS
#include "passes/Passes.h.inc"
} // namespace mc

using namespace mlir;

static std::vector<mc::TargetContract>& targetContracts() {
  static std::vector<mc::TargetContract> contracts;
  return contracts;
}

void mc::registerTargetContract(const TargetContract& contract) {
  for (TargetContract& c : targetContracts())
    if (c.name == contract.name) {
      c = contract;
      return;
    }
  targetContracts().push_back(contract);
}

const mc::TargetContract* mc::lookupTargetContract(StringRef name) {
  for (const TargetContract& c : targetContracts())
    if (c.name == name)
      return &c;
  return nullptr;
}

std::string mc::knownTargetsText() {
  std::string s;
  for (const TargetContract& c : targetContracts())
    s += (s.empty() ? "" : ", ") + c.name;
  return s.empty() ? "none (call mc::codegen::registerTargets())" : s;
}

ElementsAttr mc::constantElements(Value v) {
  Operation* def = v.getDefiningOp();
  if (auto c = llvm::dyn_cast_or_null<mc::ConstantOp>(def))
    return llvm::dyn_cast<ElementsAttr>(c.getValue());
  if (auto load = llvm::dyn_cast_or_null<ml_program::GlobalLoadConstOp>(def)) {
    auto global = SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(
        def, load.getGlobalAttr());
    if (global && !global.getIsMutable())
      return llvm::dyn_cast_or_null<ElementsAttr>(global.getValueAttr());
  }
  return {};
}

void mc::appendNames(InFlightDiagnostic& diag, ArrayRef<StringRef> names) {
  for (size_t k = 0; k < names.size() && k < 8; ++k)
    diag << " " << names[k];
  if (names.size() > 8)
    diag << " ... (" << names.size() << " in all)";
}

mlir::Operation* mc::findEntryFunction(ModuleOp module, StringRef name) {
  if (!name.empty()) {
    auto fn = module.lookupSymbol<func::FuncOp>(name);
    if (!fn)
      emitError(module.getLoc()) << "entry function '" << name << "' not found";
    return fn;
  }
  func::FuncOp found;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (!fn.isPublic() || fn.isExternal())
      continue;
    if (found) {
      emitError(module.getLoc()) << "more than one public function ('"
                         << found.getSymName() << "', '" << fn.getSymName()
                         << "'); choose the entry with entry=NAME";
      return nullptr;
    }
    found = fn;
  }
  if (!found)
    emitError(module.getLoc()) << "no public func.func to compile";
  return found;
}

namespace {

std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

bool isSupportedElementType(Type t) {
  return t.isF32() || t.isF16() || t.isBF16() || t.isInteger(32) ||
         t.isInteger(64) || t.isInteger(1);
}

/// Checks one tensor type; `what` names the value in the message. The size
/// is checked where a value is defined (CHECKSIZE), not again at each use.
/// With `batch` (the entry function's bounds), a `?` is the batch and the
/// size is checked at its upper bound.
LogicalResult checkTensorType(Operation* op, Type type, const Twine& what,
                              bool checkSize = true,
                              std::optional<mc::BatchBounds> batch = {}) {
  auto tensor = llvm::dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return op->emitOpError() << what << " has type " << type
                             << "; codegen needs ranked tensors";
  if (!tensor.hasStaticShape() && !batch)
    return op->emitOpError()
           << what << " has a dynamic shape " << type
           << "; codegen needs static shapes, or batch bounds on the entry "
              "function (mc.batch; modelc compile --batch=MIN..MAX)";
  if (!isSupportedElementType(tensor.getElementType()))
    return op->emitOpError() << what << " has element type "
                             << tensor.getElementType()
                             << "; supported: f32, f16, bf16, i32, i64, i1";
  if (tensor.getRank() > 8)
    return op->emitOpError() << what << " has rank " << tensor.getRank()
                             << "; the runtime supports rank <= 8";
  // The runtime refuses a tensor of more than rt::kMaxTensorElements (and
  // every buffer's byte size is an int64 in the artifact): a shape beyond
  // it is the model's mistake, not the writer's.
  if (!checkSize)
    return success();
  // As rt::checkElementCount: the product of the nonzero dims is bounded
  // (the runtime refuses [5, 2^50, 0] too).
  int64_t elements = 1;
  bool tooLarge = false;
  for (int64_t d : mc::symbolicShape(tensor)) {
    if (d == 0)
      continue;
    int64_t size = d;
    if (d < 0)
      tooLarge |= __builtin_mul_overflow(-d, batch->max, &size);
    tooLarge |= __builtin_mul_overflow(elements, size, &elements);
    tooLarge |= elements > mc::rt::kMaxTensorElements;
  }
  if (tooLarge)
    return op->emitOpError()
           << what << " of type " << type << " is too large: it has more "
           << "than " << mc::rt::kMaxTensorElements
           << " (2^36) elements, the limit for one tensor";
  return success();
}

struct VerifyContractPass
    : mc::impl::VerifyContractPassBase<VerifyContractPass> {
  using Base::Base;
  const mc::TargetContract* contract = nullptr;
  /// The entry function's batch bounds, when it has a dynamic batch.
  std::optional<mc::BatchBounds> batch;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    contract = mc::lookupTargetContract(target);
    if (!contract) {
      emitError(module.getLoc()) << "unknown target '" << target
                                 << "'; known targets: "
                                 << mc::knownTargetsText();
      return signalPassFailure();
    }
    bool ok = true;
    for (Operation& op : module.getBody()->getOperations()) {
      if (auto global = llvm::dyn_cast<ml_program::GlobalOp>(op)) {
        ok &= succeeded(checkGlobal(global));
      } else if (!llvm::isa<func::FuncOp>(op)) {
        op.emitOpError() << "is not allowed at module level; codegen accepts "
                            "func.func and ml_program.global";
        ok = false;
      }
    }
    auto entryFn =
        llvm::dyn_cast_or_null<func::FuncOp>(mc::findEntryFunction(module, entry));
    if (!entryFn)
      return signalPassFailure();
    ok &= succeeded(checkEntry(entryFn));
    if (!ok)
      signalPassFailure();
  }

  LogicalResult checkGlobal(ml_program::GlobalOp global) {
    // Mutable globals are training state (parameters, optimizer moments):
    // the runtime keeps them between runs.
    auto value = llvm::dyn_cast_or_null<ElementsAttr>(global.getValueAttr());
    if (!value)
      return global.emitOpError() << "has no tensor value";
    return checkTensorType(global, value.getType(),
                           "parameter '" + global.getSymName() + "'");
  }

  LogicalResult checkEntry(func::FuncOp fn) {
    // The signature first: when it is wrong, every op would repeat it.
    FunctionType type = fn.getFunctionType();
    batch = mc::getBatchBounds(fn);
    if (fn->hasAttr(mc::kBatchAttrName) && !batch)
      return failure(); // the dialect's verifier has said why
    bool batchArgument = false;
    for (auto [i, t] : llvm::enumerate(type.getInputs())) {
      std::string what = ("argument " + Twine(i) + argName(fn, i)).str();
      if (failed(checkTensorType(fn, t, what, true, batch)))
        return failure();
      // The runtime learns the batch from the inputs: only their leading
      // dim may be it.
      auto tensor = llvm::cast<RankedTensorType>(t);
      for (int64_t d = 1; d < tensor.getRank(); ++d)
        if (tensor.isDynamicDim(d))
          return fn.emitOpError()
                 << what << " has type " << t << ": only the leading "
                 << "(batch) dimension of an input may be dynamic";
      if (tensor.getEncoding())
        return fn.emitOpError()
               << what << " has type " << t << ": an input's leading dim is "
               << "the batch itself, not a multiple of it";
      batchArgument |= tensor.getRank() > 0 && tensor.isDynamicDim(0);
    }
    if (batch && !batchArgument)
      return fn.emitOpError()
             << "has batch bounds (mc.batch) but no argument with a dynamic "
                "leading dimension, so the runtime could not learn the batch";
    for (auto [i, t] : llvm::enumerate(type.getResults()))
      if (failed(checkTensorType(fn, t, "result " + Twine(i), true, batch)))
        return failure();
    // Inputs and outputs are found by name at run time (--input x=...).
    if (failed(checkUniqueNames(fn, "argument", fn.getNumArguments(),
                                [&](unsigned i) {
                                  return fn.getArgAttrOfType<StringAttr>(
                                      i, "mc.name");
                                })) ||
        failed(checkUniqueNames(fn, "result", fn.getNumResults(),
                                [&](unsigned i) {
                                  return fn.getResultAttrOfType<StringAttr>(
                                      i, "mc.name");
                                })))
      return failure();
    bool ok = true;
    if (fn.getBody().getBlocks().size() != 1) {
      fn.emitOpError() << "has " << fn.getBody().getBlocks().size()
                       << " blocks; codegen needs straight-line code";
      return failure();
    }
    for (Operation& op : fn.getBody().front())
      ok &= succeeded(checkOp(&op));
    return success(ok);
  }

  /// No two of the COUNT arguments (or results) share an mc.name.
  static LogicalResult
  checkUniqueNames(func::FuncOp fn, StringRef what, unsigned count,
                   llvm::function_ref<StringAttr(unsigned)> nameOf) {
    llvm::StringMap<unsigned> first;
    for (unsigned i = 0; i < count; ++i) {
      StringAttr name = nameOf(i);
      if (!name)
        continue;
      auto [it, inserted] = first.try_emplace(name.getValue(), i);
      if (!inserted)
        return fn.emitOpError()
               << what << "s " << it->second << " and " << i
               << " are both named '" << name.getValue()
               << "' (mc.name); input and output names must be unique";
    }
    return success();
  }

  static std::string argName(func::FuncOp fn, unsigned i) {
    if (auto name = fn.getArgAttrOfType<StringAttr>(i, "mc.name"))
      return (" ('" + name.getValue() + "')").str();
    return "";
  }

  LogicalResult checkOp(Operation* op) {
    if (llvm::isa<func::ReturnOp, mc::YieldOp>(op))
      return success();
    // A fused region: its ops, each under the same rules.
    if (auto fused = llvm::dyn_cast<mc::FusedOp>(op)) {
      bool ok = true;
      for (Operation& inner : fused.getBody().front())
        ok &= succeeded(checkOp(&inner));
      return success(ok);
    }
    if (llvm::isa<ml_program::GlobalLoadOp, ml_program::GlobalStoreOp>(op)) {
      SymbolRefAttr ref =
          llvm::isa<ml_program::GlobalLoadOp>(op)
              ? llvm::cast<ml_program::GlobalLoadOp>(op).getGlobalAttr()
              : llvm::cast<ml_program::GlobalStoreOp>(op).getGlobalAttr();
      auto global =
          SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(op, ref);
      if (!global || !global.getIsMutable())
        return op->emitOpError() << "accesses " << ref
                                 << ", which is not a mutable global";
      return success();
    }
    if (auto load = llvm::dyn_cast<ml_program::GlobalLoadConstOp>(op)) {
      if (!SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(
              op, load.getGlobalAttr()))
        return op->emitOpError() << "reads " << load.getGlobalAttr()
                                 << ", which is not an ml_program.global";
      return checkTensorType(op, load.getType(), "result");
    }
    if (!llvm::isa<mc::MCDialect>(op->getDialect()))
      return op->emitOpError()
             << "is outside the codegen contract: the entry function may hold "
                "only mc ops, ml_program.global_load_const, global_load, "
                "global_store and func.return";
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      if (failed(checkTensorType(op, v.getType(), "operand " + Twine(i),
                                 /*checkSize=*/false, batch)))
        return failure();
    for (auto [i, v] : llvm::enumerate(op->getResults()))
      if (failed(checkTensorType(op, v.getType(), "result " + Twine(i), true,
                                 batch)))
        return failure();
    Type et =
        llvm::cast<RankedTensorType>(op->getResult(0).getType()).getElementType();
    // The type that picks the kernel: the operands' for ops whose result
    // type differs (matmul accumulates, compare returns i1).
    if (op->getNumOperands() > 0 && llvm::isa<mc::MatmulOp, mc::CompareOp>(op))
      et = llvm::cast<RankedTensorType>(op->getOperand(0).getType())
               .getElementType();
    mc::rt::OpId id;
    if (!mc::rt::findOp(op->getName().getStringRef(), &id))
      return op->emitOpError() << "is not in the op registry "
                                  "(runtime/include/modelc/ops.inc is stale?)";
    std::string types = contract->elementTypes(id);
    if (types.empty())
      return success();
    bool ok = mc::rt::typeListHas(types, typeName(et));
    // i1 compares only for equality.
    if (ok && et.isInteger(1))
      if (auto cmp = llvm::dyn_cast<mc::CompareOp>(op))
        ok = cmp.getDirection() == mc::ComparisonDirection::EQ ||
             cmp.getDirection() == mc::ComparisonDirection::NE;
    if (ok)
      return success();
    std::string listed = types;
    if (llvm::isa<mc::CompareOp>(op) && StringRef(listed).ends_with(",i1"))
      listed.resize(listed.size() - 3);
    listed = mc::rt::typeListText(listed);
    return op->emitOpError() << "on " << et << " has no kernel on the "
                             << target << " target (" << listed
                             << (llvm::isa<mc::CompareOp>(op)
                                     ? "; i1 for EQ/NE"
                                     : "")
                             << ")";

  }
};

} // namespace
