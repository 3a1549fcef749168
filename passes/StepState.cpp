// Helpers shared by the training passes (mc-grad-accum, mc-loss-scaling,
// mc-optimizer): the step's state globals and its named results.
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;

ml_program::GlobalOp mc::createStateGlobal(func::FuncOp fn,
                                           SymbolTable& symbols, StringRef name,
                                           DenseElementsAttr init,
                                           Location loc) {
  std::string unique = name.str();
  for (int k = 1; symbols.lookup(unique); ++k)
    unique = name.str() + "." + std::to_string(k);
  OpBuilder b(fn);
  auto type = llvm::cast<RankedTensorType>(init.getType());
  auto global = ml_program::GlobalOp::create(b, loc, unique, type,
                                             /*is_mutable=*/true, init,
                                             b.getStringAttr("private"));
  symbols.insert(global);
  return global;
}

void mc::appendNamedResult(func::FuncOp fn, Value value, StringRef name) {
  auto ret = llvm::cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  SmallVector<DictionaryAttr> attrs;
  fn.getAllResultAttrs(attrs);
  Builder b(fn.getContext());
  attrs.push_back(
      b.getDictionaryAttr(b.getNamedAttr("mc.name", b.getStringAttr(name))));
  SmallVector<Value> results(ret.getOperands());
  results.push_back(value);
  ret->setOperands(results);
  SmallVector<Type> types(fn.getFunctionType().getResults());
  types.push_back(value.getType());
  fn.setFunctionType(FunctionType::get(
      fn.getContext(), fn.getFunctionType().getInputs(), types));
  fn.setAllResultAttrs(attrs);
}

std::optional<unsigned> mc::findNamedResult(func::FuncOp fn, StringRef name) {
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (auto n = fn.getResultAttrOfType<StringAttr>(i, "mc.name"))
      if (n.getValue() == name)
        return i;
  return std::nullopt;
}
