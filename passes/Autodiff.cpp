// mc-autodiff: turns a loss function into a training step that returns the
// loss and its gradient with respect to every parameter (reverse mode, one
// DifferentiableOpInterface call per op on the way from a parameter to the
// loss).
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace mc {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "passes/Passes.h.inc"
} // namespace mc

using namespace mlir;

namespace {

bool isFloatTensor(Type t) {
  auto tensor = llvm::dyn_cast<RankedTensorType>(t);
  return tensor && llvm::isa<FloatType>(tensor.getElementType());
}

/// The global a parameter load reads, or null for any other op.
SymbolRefAttr loadedGlobal(Operation* op) {
  if (auto load = llvm::dyn_cast<ml_program::GlobalLoadConstOp>(op))
    return load.getGlobalAttr();
  if (auto load = llvm::dyn_cast<ml_program::GlobalLoadOp>(op))
    return load.getGlobalAttr();
  return nullptr;
}

Value splat(OpBuilder& b, Location loc, RankedTensorType type, double v) {
  APFloat f(v);
  bool lost = false;
  f.convert(llvm::cast<FloatType>(type.getElementType()).getFloatSemantics(),
            APFloat::rmNearestTiesToEven, &lost);
  return mc::ConstantOp::create(b, loc, DenseElementsAttr::get(type, f));
}

struct AutodiffPass : mc::impl::AutodiffPassBase<AutodiffPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = llvm::dyn_cast_or_null<func::FuncOp>(
        mc::findEntryFunction(module, entry));
    if (!fn || failed(differentiate(module, fn)))
      signalPassFailure();
  }

  LogicalResult differentiate(ModuleOp module, func::FuncOp fn) {
    if (fn.getBody().getBlocks().size() != 1)
      return fn.emitOpError() << "has " << fn.getBody().getBlocks().size()
                              << " blocks; mc-autodiff differentiates "
                                 "straight-line code (inline calls first)";
    Block& body = fn.getBody().front();
    auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
    unsigned lossResult = lossIndex;
    if (lossResult >= ret.getNumOperands())
      return fn.emitOpError()
             << "has " << ret.getNumOperands() << " results; the loss is "
             << "result " << lossResult << " (loss-index)";
    Value loss = ret.getOperand(lossResult);
    auto lossType = llvm::dyn_cast<RankedTensorType>(loss.getType());
    if (!lossType || !isFloatTensor(lossType) || !lossType.hasStaticShape() ||
        lossType.getNumElements() != 1)
      return fn.emitOpError()
             << "result " << lossResult << " must be a scalar float loss "
             << "(rank 0 or one element), got " << loss.getType();

    // Parameters: float globals the function reads, in declaration order,
    // with every load of each (several loads of one global sum). Globals
    // tagged mc.buffer (BatchNorm's running statistics) are state, not
    // parameters.
    llvm::MapVector<StringAttr, SmallVector<Value>> loads;
    // --freeze: a name, or a module path the name lies under.
    std::vector<bool> matched(freeze.size(), false);
    auto frozen = [&](StringRef name) {
      bool any = false;
      for (size_t i = 0; i < freeze.size(); ++i) {
        StringRef path = freeze[i];
        if (name == path || (name.starts_with(path) &&
                             name.drop_front(path.size()).starts_with(".")))
          any = matched[i] = true;
      }
      return any;
    };
    SmallVector<StringRef> candidates;
    for (auto global : module.getOps<ml_program::GlobalOp>())
      if (isFloatTensor(global.getType()) && !global->hasAttr("mc.buffer")) {
        candidates.push_back(global.getSymName());
        if (!frozen(global.getSymName()))
          loads.insert({global.getSymNameAttr(), {}});
      }
    for (size_t i = 0; i < freeze.size(); ++i)
      if (!matched[i]) {
        InFlightDiagnostic d = emitError(fn.getLoc())
                               << "--freeze '" << freeze[i]
                               << "' names no parameter (a parameter's name, "
                                  "or a module path before a '.'); "
                                  "parameters:";
        mc::appendNames(d, candidates);
        return d;
      }
    for (Operation& op : body)
      if (SymbolRefAttr sym = loadedGlobal(&op)) {
        auto it = loads.find(sym.getRootReference());
        if (it != loads.end())
          it->second.push_back(op.getResult(0));
      }
    loads.remove_if([](const auto& entry) { return entry.second.empty(); });
    if (loads.empty())
      return fn.emitOpError()
             << "reads no parameters (float ml_program globals, not "
                "mc.buffer ones"
             << (freeze.empty() ? "" : ", not frozen by --freeze")
             << "): a training step has nothing to train";

    // Activity: the float values that depend on a parameter. Only ops with a
    // varied operand and a gradient on their result are differentiated, so
    // ops on data-only paths (labels, inputs) need no derivative.
    llvm::DenseSet<Value> varied;
    for (auto& entry : loads)
      varied.insert(entry.second.begin(), entry.second.end());
    for (Operation& op : body)
      if (llvm::any_of(op.getOperands(),
                       [&](Value v) { return varied.contains(v); }))
        for (Value r : op.getResults())
          if (isFloatTensor(r.getType()))
            varied.insert(r);

    // The reverse walk, emitting the backward ops before the return.
    SmallVector<Operation*> forward;
    for (Operation& op : body.without_terminator())
      forward.push_back(&op);
    OpBuilder b(ret);
    Location loc = ret.getLoc();
    DenseMap<Value, Value> adjoint;
    auto accumulate = [&](Value v, Value g) {
      auto [it, inserted] = adjoint.try_emplace(v, g);
      if (!inserted)
        it->second = mc::AddOp::create(b, g.getLoc(), it->second, g);
    };
    // The seed d(loss)/d(loss) = 1, tagged so mc-loss-scaling can replace it
    // with the loss scale.
    Value seed = splat(b, loc, lossType, 1.0);
    seed.getDefiningOp()->setAttr("mc.autodiff_seed", b.getUnitAttr());
    accumulate(loss, seed);
    for (Operation* op : llvm::reverse(forward)) {
      if (loadedGlobal(op))
        continue;
      SmallVector<Value> resultGrads;
      for (Value r : op->getResults())
        resultGrads.push_back(adjoint.lookup(r));
      if (llvm::all_of(resultGrads, [](Value g) { return !g; }) ||
          llvm::none_of(op->getOperands(),
                        [&](Value v) { return varied.contains(v); }))
        continue;
      auto diff = llvm::dyn_cast<mc::DifferentiableOpInterface>(op);
      if (!diff)
        return op->emitOpError()
               << "lies between a parameter and the loss but has no "
                  "derivative (it does not implement "
                  "DifferentiableOpInterface)";
      SmallVector<Value> operandGrads;
      if (failed(diff.buildGradients(b, resultGrads, operandGrads)))
        return failure();
      assert(operandGrads.size() == op->getNumOperands() &&
             "buildGradients fills one entry per operand");
      for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads)) {
        if (!g || !varied.contains(operand))
          continue;
        assert(g.getType() == operand.getType() &&
               "a gradient has its operand's type");
        accumulate(operand, g);
      }
    }

    // Gradients of the parameters, summed over their loads.
    SmallVector<Value> results{loss};
    SmallVector<DictionaryAttr> resultAttrs{
        withName(fn.getResultAttrDict(lossResult), "loss")};
    for (auto& [name, values] : loads) {
      Value grad;
      for (Value load : values)
        if (Value g = adjoint.lookup(load))
          grad = grad ? mc::AddOp::create(b, loc, grad, g) : g;
      if (!grad) {
        // As in PyTorch: no gradient at all (not a zero one), so optimizers
        // leave the parameter alone (no weight decay, no moment update).
        emitWarning(values.front().getLoc())
            << "parameter '" << name.getValue()
            << "' does not reach the loss; it gets no gradient and is not "
               "updated";
        continue;
      }
      results.push_back(grad);
      resultAttrs.push_back(
          withName(nullptr, ("grad." + name.getValue()).str()));
    }

    // The function now returns (loss, grad.<param>...); its other results
    // are dropped.
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    fn.setFunctionType(FunctionType::get(module.getContext(),
                                         fn.getFunctionType().getInputs(),
                                         ValueRange(results).getTypes()));
    fn.setAllResultAttrs(resultAttrs);
    // Drop what nobody reads: gradients of inputs and data, and the forward
    // ops of the dropped results.
    for (Operation& op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (isOpTriviallyDead(&op))
        op.erase();
    return success();
  }

  /// `attrs` with `mc.name` set to `name`.
  DictionaryAttr withName(DictionaryAttr attrs, StringRef name) {
    NamedAttrList list(attrs);
    list.set("mc.name", StringAttr::get(&getContext(), name));
    return list.getDictionary(&getContext());
  }
};

} // namespace
