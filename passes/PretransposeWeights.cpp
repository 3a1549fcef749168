// mc-pretranspose-weights: a constant a matmul reads transposed (an
// nn.Linear weight) stored in the layout it is read in, once, at compile
// time (rules in Passes.td; why: docs/benchmarks.md, "Weights in the
// layout the product reads").
#include "ir/Batch.h"
#include "ir/RegistryOps.h"
#include "modelc/kernels.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/MapVector.h"

namespace mc {
#define GEN_PASS_DEF_PRETRANSPOSEWEIGHTSPASS
#include "passes/Passes.h.inc"
} // namespace mc

using namespace mlir;

namespace {

/// The value of a constant tensor: an mc.constant's, or the immutable
/// global's an ml_program.global_load_const reads, through reshapes (which
/// keep the bytes: an imported LSTM's [1, 4H, I] weight read as [4H, I]);
/// null otherwise.
ElementsAttr constantValue(Value v) {
  while (auto reshape = v.getDefiningOp<mc::ReshapeOp>())
    v = reshape.getInput();
  return mc::constantElements(v);
}

/// Whether the reshapes between `w` and its constant read nothing that
/// something else reads too (the constant would then stay beside its
/// transposed copy).
bool onlyReadThroughW(Value w) {
  Operation* def = w.getDefiningOp();
  while (auto reshape = llvm::dyn_cast_or_null<mc::ReshapeOp>(def)) {
    if (!reshape.getInput().hasOneUse())
      return false;
    def = reshape.getInput().getDefiningOp();
  }
  return true;
}

/// Whether `use` is a matmul reading its operand as the transposed right
/// operand.
bool isTransposedRhs(OpOperand& use) {
  auto mm = llvm::dyn_cast<mc::MatmulOp>(use.getOwner());
  return mm && use.getOperandNumber() == 1 && mm.getTransposeB();
}

/// Products of fewer rows than this are close to matrix-vector products,
/// which oneDNN runs faster from W [N, K] (a dot product per output):
/// 1 x 1024 x 1024 in 0.58 of the time, 2 rows 0.35, 6 rows 0.82; from 8
/// rows on [K, N] wins (0.84 at 8 x 1024 x 1024, 0.43 at 8 x 768 x 3072).
/// The exception, one row of a short K (1 x 1024 x 256: 0.67 from
/// [K, N]), is left to [N, K] too (modelc-gemm-bench --weights).
constexpr int64_t kMinRows = 8;

/// The rows of `mm`'s product: static, or for a dynamic batch its rows at
/// the batch the function favours (`mc.batch`'s OPT: c * OPT rows for a
/// dim of c times the batch); -1 for a dynamic dim without bounds.
int64_t rowsOf(mc::MatmulOp mm, const std::optional<mc::BatchBounds>& batch) {
  SmallVector<int64_t> lhs = mc::symbolicShape(mm.getLhs().getType());
  size_t r = lhs.size();
  int64_t m = mm.getTransposeA() ? lhs[r - 1] : lhs[r - 2];
  if (m >= 0)
    return m;
  return batch ? -m * batch->opt : -1;
}

/// Whether every reader of `w` multiplies it with fewer than kMinRows rows
/// (statically, or at the favoured batch): then it stays as it is.
bool onlyMatrixVector(Value w, const std::optional<mc::BatchBounds>& batch) {
  return llvm::all_of(w.getUses(), [&](OpOperand& use) {
    int64_t m = rowsOf(llvm::cast<mc::MatmulOp>(use.getOwner()), batch);
    return m >= 0 && m < kMinRows;
  });
}

/// `value` (of `type`) with its last two dimensions swapped, by the
/// runtime's transpose kernel, as an attribute of the transposed type;
/// failure where its bytes cannot be read.
FailureOr<DenseElementsAttr> transposed(ElementsAttr value,
                                        RankedTensorType type) {
  size_t rank = type.getRank();
  SmallVector<int64_t> outShape(type.getShape());
  std::swap(outShape[rank - 2], outShape[rank - 1]);
  auto outType = RankedTensorType::get(outShape, type.getElementType());
  FailureOr<mc::rt::DType> dtype = mc::elementDType(type.getElementType());
  if (failed(dtype) || *dtype == mc::rt::DType::I1)
    return failure();
  size_t bytes = size_t(type.getNumElements()) * mc::rt::dtypeSize(*dtype);
  std::vector<uint8_t> copy;
  const void* data = nullptr;
  if (auto view = mc::elementsBytesView(value); view && view->size() == bytes) {
    data = view->data();
  } else {
    FailureOr<std::vector<uint8_t>> read = mc::elementsBytes(value, nullptr);
    if (failed(read) || read->size() != bytes)
      return failure();
    copy = std::move(*read);
    data = copy.data();
  }
  std::vector<int64_t> perm(rank);
  for (size_t d = 0; d < rank; ++d)
    perm[d] = int64_t(d);
  std::swap(perm[rank - 2], perm[rank - 1]);
  std::vector<char> out(bytes);
  mc::rt::ConstTensor in{
      *dtype, mc::rt::Shape(type.getShape().begin(), type.getShape().end()),
      data};
  mc::rt::MutTensor result{
      *dtype, mc::rt::Shape(outShape.begin(), outShape.end()), out.data()};
  if (!mc::rt::transpose(in, perm, result))
    return failure();
  return DenseElementsAttr::getFromRawBuffer(outType, out);
}

struct PretransposeWeightsPass
    : mc::impl::PretransposeWeightsPassBase<PretransposeWeightsPass> {
  using Base::Base;

  void runOnOperation() override {
    auto fn = llvm::dyn_cast_or_null<func::FuncOp>(
        mc::findEntryFunction(getOperation(), entry));
    if (!fn)
      return signalPassFailure();
    std::optional<mc::BatchBounds> batch = mc::getBatchBounds(fn);
    // Each constant read transposed, in program order (the new constants'
    // order in the output does not depend on pointer values).
    llvm::MapVector<Value, ElementsAttr> weights;
    fn.walk([&](mc::MatmulOp mm) {
      if (!mm.getTransposeB())
        return;
      Value w = mm.getRhs();
      auto type = llvm::dyn_cast<RankedTensorType>(w.getType());
      if (!type || !type.hasStaticShape() || weights.count(w))
        return;
      // A splat reads the same either way, and is stored as one element
      // (then broadcast at run time) where a global's is stored whole.
      ElementsAttr value = constantValue(w);
      auto dense = llvm::dyn_cast_or_null<DenseElementsAttr>(value);
      if (value && !(dense && dense.isSplat()))
        weights.insert({w, value});
    });
    for (auto& [w, value] : weights) {
      if (!llvm::all_of(w.getUses(), isTransposedRhs) || !onlyReadThroughW(w) ||
          onlyMatrixVector(w, batch))
        continue;
      auto type = llvm::cast<RankedTensorType>(w.getType());
      FailureOr<DenseElementsAttr> t = transposed(value, type);
      if (failed(t))
        continue;
      OpBuilder b(w.getDefiningOp());
      auto c = mc::ConstantOp::create(b, w.getLoc(), *t);
      for (OpOperand& use : llvm::make_early_inc_range(w.getUses())) {
        auto mm = llvm::cast<mc::MatmulOp>(use.getOwner());
        use.set(c.getResult());
        mm.setTransposeB(false);
      }
      // The reshapes and the load nothing else reads go.
      for (Operation* def = w.getDefiningOp(); def && def->use_empty();) {
        Operation* next = def->getNumOperands() == 1
                              ? def->getOperand(0).getDefiningOp()
                              : nullptr;
        def->erase();
        def = next;
      }
    }
  }
};

} // namespace
