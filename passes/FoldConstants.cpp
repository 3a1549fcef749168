// mc-fold-constants: ops whose operands are all constants, computed once at
// compile time by the runtime's own CPU kernels (rules in Passes.td).
#include "passes/Passes.h"

#include "ir/RegistryOps.h"
#include "modelc/device.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"

#include <memory>
#include <optional>

namespace mc {
#define GEN_PASS_DEF_FOLDCONSTANTSPASS
#include "passes/Passes.h.inc"
} // namespace mc

using namespace mlir;
namespace rt = mc::rt;

namespace {

/// A constant's value in the runtime's layout (i1: one byte per element).
struct HostTensor {
  rt::DType dtype;
  rt::Shape shape;
  std::vector<uint8_t> bytes;
  rt::ConstTensor view() const { return {dtype, shape, bytes.data()}; }
};

struct FoldConstantsPass : mc::impl::FoldConstantsPassBase<FoldConstantsPass> {
  using Base::Base;

  std::shared_ptr<rt::Device> cpu;
  llvm::DenseMap<Value, std::shared_ptr<HostTensor>> values;

  void runOnOperation() override {
    auto fn = llvm::dyn_cast_or_null<func::FuncOp>(
        mc::findEntryFunction(getOperation(), entry));
    if (!fn)
      return signalPassFailure();
    std::unique_ptr<rt::Device> device;
    rt::Status st = rt::createDevice("cpu", &device);
    cpu = std::move(device);
    values.clear();
    if (!st) {
      fn.emitOpError() << "mc-fold-constants: " << st.message();
      return signalPassFailure();
    }
    SmallVector<Operation*> ops;
    for (Operation& op : fn.getBody().front())
      ops.push_back(&op);
    for (Operation* op : ops) {
      if (!isFoldable(op))
        continue;
      // A broadcast alone is left to fusion (it reads the small tensor);
      // it is computed when something foldable reads it.
      if (llvm::isa<mc::BroadcastInDimOp>(op))
        continue;
      std::shared_ptr<HostTensor> result = evaluate(op);
      if (!result)
        continue;
      OpBuilder b(op);
      auto type = llvm::cast<RankedTensorType>(op->getResult(0).getType());
      auto c = mc::ConstantOp::create(b, op->getLoc(), toAttr(*result, type));
      op->getResult(0).replaceAllUsesWith(c.getResult());
      values[c.getResult()] = result;
    }
    // What the folded ops read and nothing else does goes away.
    for (Operation* op : llvm::reverse(ops))
      if (op->use_empty() && llvm::isa<mc::MCDialect>(op->getDialect()) &&
          isFoldable(op))
        op->erase();
  }

  /// An mc step op of static shape and a result no larger than the limit,
  /// every operand of which is a constant or a foldable broadcast of one.
  bool isFoldable(Operation* op) {
    rt::OpId id;
    if (!llvm::isa<mc::MCDialect>(op->getDialect()) ||
        !rt::findOp(op->getName().getStringRef(), &id) ||
        !rt::opInfo(id).isStep || op->getNumResults() != 1 ||
        op->getNumOperands() == 0 || llvm::isa<mc::FusedOp>(op))
      return false;
    auto type = llvm::dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!type || !type.hasStaticShape() || failed(mc::elementDType(type.getElementType())))
      return false;
    uint64_t bytes = uint64_t(type.getNumElements()) *
                     rt::dtypeSize(*mc::elementDType(type.getElementType()));
    for (Value v : op->getOperands())
      if (!isConstant(v))
        return false;
    return bytes <= uint64_t(maxBytes) || replacesItsOperands(op, bytes);
  }

  /// Whether folding `op` (a result of `bytes`) does not grow the file: it
  /// alone reads each of its operands, stored constants (not broadcasts),
  /// which are at least as large together. A weight cast to bf16 by
  /// mc-amp is the case: its f32 constant goes, its half-size cast stays.
  static bool replacesItsOperands(Operation* op, uint64_t bytes) {
    uint64_t freed = 0;
    for (Value v : op->getOperands()) {
      Operation* def = v.getDefiningOp();
      if (!v.hasOneUse() ||
          !llvm::isa<mc::ConstantOp, ml_program::GlobalLoadConstOp>(def))
        return false;
      auto t = llvm::cast<RankedTensorType>(v.getType());
      auto dtype = mc::elementDType(t.getElementType());
      if (failed(dtype) || !t.hasStaticShape())
        return false;
      // A splat is stored as one element (MCToPlan's lowerSplat).
      auto c = llvm::dyn_cast<mc::ConstantOp>(def);
      auto dense = c ? llvm::dyn_cast<DenseElementsAttr>(c.getValue())
                     : DenseElementsAttr();
      int64_t stored = dense && dense.isSplat() ? 1 : t.getNumElements();
      freed += uint64_t(stored) * rt::dtypeSize(*dtype);
    }
    return bytes <= freed;
  }

  bool isConstant(Value v) {
    Operation* def = v.getDefiningOp();
    if (!def)
      return false;
    if (llvm::isa<mc::ConstantOp>(def))
      return true;
    if (auto load = llvm::dyn_cast<ml_program::GlobalLoadConstOp>(def)) {
      if (!globals)
        return false;
      auto global = SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(
          def, load.getGlobalAttr());
      return global && !global.getIsMutable() &&
             llvm::isa_and_nonnull<ElementsAttr>(global.getValueAttr());
    }
    return llvm::isa<mc::BroadcastInDimOp>(def) && isFoldable(def);
  }

  std::shared_ptr<HostTensor> constantValue(Value v) {
    auto it = values.find(v);
    if (it != values.end())
      return it->second;
    Operation* def = v.getDefiningOp();
    Attribute attr;
    if (auto c = llvm::dyn_cast<mc::ConstantOp>(def))
      attr = c.getValue();
    else if (auto load = llvm::dyn_cast<ml_program::GlobalLoadConstOp>(def))
      attr = SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(
                 def, load.getGlobalAttr())
                 .getValueAttr();
    else
      return evaluate(def); // a broadcast of a constant
    auto elements = llvm::dyn_cast_or_null<ElementsAttr>(attr);
    if (!elements)
      return nullptr;
    auto type = llvm::cast<RankedTensorType>(elements.getType());
    auto dtype = mc::elementDType(type.getElementType());
    auto bytes = mc::elementsBytes(elements, /*op=*/nullptr);
    if (failed(dtype) || failed(bytes))
      return nullptr; // left for run time
    auto t = std::make_shared<HostTensor>();
    t->dtype = *dtype;
    t->shape.assign(type.getShape().begin(), type.getShape().end());
    t->bytes = std::move(*bytes);
    values[v] = t;
    return t;
  }

  /// The op computed by the CPU device's kernel; null when it cannot be
  /// (the op is left for run time).
  std::shared_ptr<HostTensor> evaluate(Operation* op) {
    auto known = values.find(op->getResult(0));
    if (known != values.end())
      return known->second;
    rt::OpId id;
    rt::findOp(op->getName().getStringRef(), &id);
    auto attrs = mc::registryAttributes(op, rt::opInfo(id));
    if (failed(attrs))
      return nullptr;
    // Reduce dims sorted, as lowering writes them for the kernels.
    for (rt::OpAttr& a : attrs->all())
      if (a.name == "dims" && !llvm::isa<mc::BroadcastInDimOp>(op))
        llvm::sort(a.ints);
    std::vector<std::shared_ptr<HostTensor>> inputs;
    std::vector<rt::ConstTensor> views;
    for (Value v : op->getOperands()) {
      auto t = constantValue(v);
      if (!t)
        return nullptr;
      inputs.push_back(t);
      views.push_back(t->view());
    }
    auto type = llvm::cast<RankedTensorType>(op->getResult(0).getType());
    auto out = std::make_shared<HostTensor>();
    out->dtype = *mc::elementDType(type.getElementType());
    out->shape.assign(type.getShape().begin(), type.getShape().end());
    out->bytes.resize(size_t(type.getNumElements()) *
                      rt::dtypeSize(out->dtype));
    rt::KernelFactory factory = rt::findKernel(cpu->kind(), id);
    if (!factory)
      return nullptr;
    rt::BoundKernel kernel;
    size_t scratch = 0;
    rt::MutTensor result{out->dtype, out->shape, out->bytes.data()};
    if (!factory(rt::KernelRequest{id, *attrs, views, result, *cpu}, &kernel,
                 &scratch))
      return nullptr;
    std::vector<uint8_t> workspace(scratch);
    // A run-time error (an index out of range in a gather) stays a run-time
    // error: the op is left as it is.
    if (!kernel(workspace.data()))
      return nullptr;
    values[op->getResult(0)] = out;
    return out;
  }

  static DenseElementsAttr toAttr(const HostTensor& t, RankedTensorType type) {
    if (t.dtype == rt::DType::I1) {
      SmallVector<bool> bits;
      for (uint8_t b : t.bytes)
        bits.push_back(b != 0);
      return DenseElementsAttr::get(type, ArrayRef<bool>(bits));
    }
    ArrayRef<char> raw(reinterpret_cast<const char*>(t.bytes.data()),
                       t.bytes.size());
    return DenseElementsAttr::getFromRawBuffer(type, raw);
  }
};

} // namespace
