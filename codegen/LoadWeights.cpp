// `modelc compile --weights CHECKPOINT.mcst`: the trained values of a
// training run (modelc-run --train --checkpoint) put into the globals of
// the model being compiled, by name, so a traced or exported inference
// graph becomes the trained model's artifact.
#include "codegen/Compile.h"

#include "modelc/checkpoint.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace mc::codegen {
namespace {

/// A checkpoint's dtype as an element type; null for i1 (bit-packed in
/// MLIR's dense attributes, and never a weight).
Type elementTypeOf(MLIRContext* ctx, rt::DType t) {
  Builder b(ctx);
  switch (t) {
  case rt::DType::F32:
    return b.getF32Type();
  case rt::DType::F16:
    return b.getF16Type();
  case rt::DType::BF16:
    return b.getBF16Type();
  case rt::DType::I32:
    return b.getI32Type();
  case rt::DType::I64:
    return b.getI64Type();
  case rt::DType::I1:
    return {};
  }
  return {};
}

/// State a training step keeps besides the model's weights: the
/// optimizer's, loss scaling's, accumulation's and the dropout
/// generator's (docs/training.md, "mc-optimizer and persistent state").
bool isTrainingState(llvm::StringRef name) {
  for (llvm::StringRef prefix : {"optimizer.", "loss_scale", "rng."})
    if (name.starts_with(prefix))
      return true;
  for (llvm::StringRef suffix :
       {".exp_avg", ".exp_avg_sq", ".momentum_buffer", ".grad_accum"})
    if (name.ends_with(suffix))
      return true;
  return false;
}

std::string shapeText(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// " a, b, c ... (N in all)": the first 8 of `names`.
std::string listed(ArrayRef<std::string> names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < 8; ++i)
    s += (i ? ", " : " ") + names[i];
  if (names.size() > 8)
    s += " ... (" + std::to_string(names.size()) + " in all)";
  return s;
}

} // namespace

LogicalResult loadWeights(ModuleOp module, const rt::Checkpoint& ckpt,
                          llvm::StringRef path,
                          const std::set<std::string>& usedAtImport) {
  llvm::StringMap<const rt::CheckpointEntry*> byName;
  for (const rt::CheckpointEntry& e : ckpt.entries)
    byName[e.name] = &e;
  std::vector<std::string> kept; // float weights the file lacks
  llvm::StringSet<> used;
  for (const std::string& name : usedAtImport)
    used.insert(name);
  size_t weights = 0;
  for (auto global : module.getOps<ml_program::GlobalOp>()) {
    auto type = llvm::dyn_cast<RankedTensorType>(global.getType());
    if (!type || !global.getValue())
      continue;
    StringRef name = global.getSymName();
    // (An integer global, such as an ONNX model's index tensor, is no
    // weight a training run changes.)
    bool isFloat = llvm::isa<FloatType>(type.getElementType());
    weights += isFloat;
    auto it = byName.find(name);
    if (it == byName.end()) {
      if (isFloat)
        kept.push_back(name.str());
      continue;
    }
    const rt::CheckpointEntry& e = *it->second;
    Type element = elementTypeOf(module.getContext(), e.dtype);
    if (!element || element != type.getElementType() ||
        ArrayRef<int64_t>(e.shape) != type.getShape()) {
      std::string have;
      llvm::raw_string_ostream os(have);
      os << type.getElementType() << shapeText(type.getShape());
      return global.emitError()
             << "--weights: " << path << " holds '" << name << "' as "
             << rt::dtypeName(e.dtype) << shapeText(e.shape)
             << ", but the model's is " << have
             << " (a checkpoint of another model, or of another size?)";
    }
    auto raw = ArrayRef<char>(reinterpret_cast<const char*>(e.data),
                              size_t(e.byteSize));
    global.setValueAttr(DenseElementsAttr::getFromRawBuffer(type, raw));
    used.insert(name);
  }
  std::vector<std::string> unknown; // names that are neither
  for (const rt::CheckpointEntry& e : ckpt.entries)
    if (!used.count(e.name) && !isTrainingState(e.name))
      unknown.push_back(e.name);
  if (used.empty())
    return emitError(module.getLoc())
           << "--weights: " << path
           << " holds none of the model's weights (the model's:" << listed(kept)
           << "; the checkpoint's:" << listed(unknown) << ")";
  if (!kept.empty())
    emitWarning(module.getLoc())
        << "--weights: " << kept.size() << " of the model's " << weights
        << " weights are not in the checkpoint and keep the model file's "
           "values (frozen while training?):"
        << listed(kept);
  if (!unknown.empty())
    emitWarning(module.getLoc())
        << "--weights: " << unknown.size() << " of the checkpoint's "
        << ckpt.entries.size()
        << " tensors name no weight of the model and are left out:"
        << listed(unknown);
  return success();
}

} // namespace mc::codegen
