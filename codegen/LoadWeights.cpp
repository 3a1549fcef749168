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

LogicalResult loadWeights(ModuleOp module, llvm::StringRef path) {
  rt::Checkpoint ckpt;
  if (rt::Status st = rt::readCheckpointFile(path.str(), &ckpt); !st)
    return emitError(module.getLoc()) << "--weights: " << st.message();
  llvm::StringMap<const rt::CheckpointEntry*> byName;
  for (const rt::CheckpointEntry& e : ckpt.entries)
    byName[e.name] = &e;
  std::vector<std::string> kept; // weights of the model the file lacks
  llvm::StringSet<> used;
  size_t loaded = 0;
  for (auto global : module.getOps<ml_program::GlobalOp>()) {
    auto type = llvm::dyn_cast<RankedTensorType>(global.getType());
    if (!type || !global.getValue())
      continue;
    StringRef name = global.getSymName();
    auto it = byName.find(name);
    if (it == byName.end()) {
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
    ++loaded;
  }
  std::vector<std::string> unknown; // names that are neither
  for (const rt::CheckpointEntry& e : ckpt.entries)
    if (!used.count(e.name) && !isTrainingState(e.name))
      unknown.push_back(e.name);
  if (loaded == 0)
    return emitError(module.getLoc())
           << "--weights: " << path
           << " holds none of the model's weights (the model's:" << listed(kept)
           << "; the checkpoint's:" << listed(unknown) << ")";
  if (!kept.empty())
    emitWarning(module.getLoc())
        << "--weights: " << kept.size() << " of the model's "
        << kept.size() + loaded
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
