// The compile driver: mc module -> pipeline -> plan -> memory plan. Shared by
// `modelc compile` and in-process compilation (tests, the JIT).
#ifndef MODELC_CODEGEN_COMPILE_H
#define MODELC_CODEGEN_COMPILE_H

#include "codegen/Plan.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"

#include "modelc/checkpoint.h"

#include <optional>
#include <set>
#include <string>

namespace mc::codegen {

struct CompileOptions {
  std::string target = "cpu";
  std::string entry; // default: the only public function
  /// Print each stage and its time to stderr (long compiles show progress).
  bool verbose = false;
  /// Compile a training step (passes/Pipelines.cpp: buildTrainPipeline)
  /// instead of inference.
  bool train = false;
  TrainPipelineOptions training;
  /// mc-fuse (`modelc compile --no-fuse` turns it off).
  bool fuse = true;
  /// mc-split-reductions: unset, what the targets ask for
  /// (Target::reductionSplit); off: none; on: at least what cuda asks
  /// for (`--split-reductions=on|off`).
  std::optional<bool> splitReductions;
  /// mc-pretranspose-weights (inference): unset, when every target asks
  /// for it (the CPU); else as given (`--pretranspose-weights=on|off`).
  std::optional<bool> pretransposeWeights;
  /// mc-channels-last (inference): unset, when every target asks for it
  /// (cpu, cuda); else as given (`--channels-last=on|off`).
  std::optional<bool> channelsLast;
};

/// `modelc compile --weights FILE.mcst`: sets every global of `module` that
/// the checkpoint `ckpt` (modelc-run --train --checkpoint, read from
/// `path`) holds under the same name to the checkpoint's value. A type or
/// shape that differs, or a checkpoint with none of the model's weights, is
/// an error; the model's float weights the file lacks (kept as they are)
/// and the file's tensors that name nothing (other than the optimizer's,
/// loss scaling's and the generator's state) are warnings naming them.
/// `usedAtImport`: names the ONNX importer already took from the
/// checkpoint (OnnxImportOptions::weights), used whether or not a global
/// has them.
mlir::LogicalResult loadWeights(mlir::ModuleOp module,
                                const rt::Checkpoint& ckpt,
                                llvm::StringRef path,
                                const std::set<std::string>& usedAtImport = {});

/// Runs the compile pipeline (passes/Pipelines.cpp) on `module` in place.
mlir::LogicalResult runCompilePipeline(mlir::ModuleOp module,
                                       const CompileOptions& options);

/// Lowers a module that went through the pipeline and assigns arena
/// offsets: the Plan the artifact writer serializes.
mlir::FailureOr<Plan> buildPlan(mlir::ModuleOp module,
                                const CompileOptions& options);

/// Pipeline + plan + artifact bytes, in one call.
mlir::FailureOr<std::vector<uint8_t>>
compileToArtifact(mlir::ModuleOp module, const CompileOptions& options);

} // namespace mc::codegen

#endif // MODELC_CODEGEN_COMPILE_H
