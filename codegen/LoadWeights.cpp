// `modelc compile --weights CHECKPOINT.mcst`: the trained values of a
// training run (modelc-run --train --checkpoint) put into the globals of
// the model being compiled, by name, so a traced or exported inference
// graph becomes the trained model's artifact.
#include "codegen/Compile.h"

#include "ir/RegistryOps.h"
#include "modelc/checkpoint.h"
#include "modelc/kernels.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace mc::codegen {
namespace {

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

} // namespace

LogicalResult loadWeights(ModuleOp module, const rt::Checkpoint& ckpt,
                          llvm::StringRef path,
                          const std::set<std::string>& usedAtImport) {
  llvm::StringMap<const rt::CheckpointEntry*> byName;
  for (const rt::CheckpointEntry& e : ckpt.entries)
    byName[e.name] = &e;
  SmallVector<StringRef> kept; // float weights the file lacks
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
        kept.push_back(name);
      continue;
    }
    const rt::CheckpointEntry& e = *it->second;
    FailureOr<rt::DType> dtype = elementDType(type.getElementType());
    rt::Shape shape(type.getShape().begin(), type.getShape().end());
    // (i1 is bit-packed in MLIR's dense attributes: never a weight.)
    if (failed(dtype) || *dtype != e.dtype || e.dtype == rt::DType::I1 ||
        e.shape != shape) {
      InFlightDiagnostic diag = global.emitError();
      diag << "--weights: " << path << " holds '" << name << "' as "
           << rt::dtypeName(e.dtype) << rt::shapeString(e.shape)
           << ", but the model's is ";
      if (succeeded(dtype))
        diag << rt::dtypeName(*dtype);
      else
        diag << type.getElementType();
      return diag << rt::shapeString(shape)
                  << " (a checkpoint of another model, or of another size?)";
    }
    auto raw = ArrayRef<char>(reinterpret_cast<const char*>(e.data),
                              size_t(e.byteSize));
    global.setValueAttr(DenseElementsAttr::getFromRawBuffer(type, raw));
    used.insert(name);
  }
  SmallVector<StringRef> unknown; // names that are neither
  for (const rt::CheckpointEntry& e : ckpt.entries)
    if (!used.count(e.name) && !isTrainingState(e.name))
      unknown.push_back(e.name);
  if (used.empty()) {
    InFlightDiagnostic diag = emitError(module.getLoc());
    diag << "--weights: " << path
         << " holds none of the model's weights (the model's:";
    mc::appendNames(diag, kept);
    diag << "; the checkpoint's:";
    mc::appendNames(diag, unknown);
    return diag << ")";
  }
  if (!kept.empty()) {
    InFlightDiagnostic diag = emitWarning(module.getLoc());
    diag << "--weights: " << kept.size() << " of the model's " << weights
         << " weights are not in the checkpoint and keep the model file's "
            "values (frozen while training?):";
    mc::appendNames(diag, kept);
  }
  if (!unknown.empty()) {
    InFlightDiagnostic diag = emitWarning(module.getLoc());
    diag << "--weights: " << unknown.size() << " of the checkpoint's "
         << ckpt.entries.size()
         << " tensors name no weight of the model and are left out:";
    mc::appendNames(diag, unknown);
  }
  return success();
}

} // namespace mc::codegen
