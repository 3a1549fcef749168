// The compiler's seam for backends: a Target (name, element types per op,
// its lowering of a planned module, how it serializes executables),
// registered by name. The CPU target is the first; a CUDA target plugs in
// as another file here and a Device in the runtime (docs/compiler.md,
// "How to add a target").
#ifndef MODELC_CODEGEN_TARGET_H
#define MODELC_CODEGEN_TARGET_H

#include "codegen/Plan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/LLVM.h"

#include <memory>
#include <string>
#include <vector>

namespace mc::codegen {

class Target {
public:
  virtual ~Target();
  /// "cpu": what --target names and what the artifact's targets list holds.
  virtual std::string name() const = 0;
  /// The element types this target has kernels for, for `op`, as the op
  /// registry's comma-separated list ("" = whatever ODS accepts). The
  /// contract check (mc-verify-contract) asks this.
  virtual std::string elementTypes(rt::OpId op) const = 0;
  /// Passes this target runs after the common pipeline, before lowering to
  /// steps (kernel generation, library-call selection); none on the CPU.
  virtual void buildLoweringPipeline(mlir::OpPassManager& pm) const {}
  /// Turns the module's generated kernels into executables of `plan`
  /// (cubins, PTX) and points steps at their entry points; the CPU target
  /// generates none (its steps run the runtime's registered kernels).
  /// Applies the options of `--target name:options` ("sm_80,sm_90" for
  /// cuda); targets without options refuse any.
  virtual mlir::LogicalResult configure(llvm::StringRef options,
                                        std::string* error) const {
    *error = "takes no options (got '" + options.str() + "')";
    return mlir::failure();
  }
  /// Whether this target runs the regions mc-fuse makes with a matmul or
  /// conv2d anchor (epilogues), and attention regions; when a target of the
  /// compile does not, mc-fuse leaves them as separate steps.
  virtual bool fusesEpilogues() const { return true; }
  virtual bool fusesAttention() const { return true; }
  /// Whether its region kernels read inputs through views (transpose,
  /// reshape, slice ops in the region: schema 2.6), in elementwise regions
  /// and in attention regions.
  virtual bool fusesViews() const { return true; }
  virtual bool fusesAttentionViews() const { return true; }
  /// Which reductions mc-split-reductions splits in two before fusion for
  /// this target (`fuse`: whether mc-fuse runs): those of at most
  /// `maxOutputs` outputs (0: none) and at least `minReduced` elements per
  /// output. The compile splits what any of its targets asks for.
  struct ReductionSplit {
    int64_t maxOutputs = 0, minReduced = 0;
  };
  virtual ReductionSplit reductionSplit(bool fuse) const { return {}; }
  /// Whether its matrix products are faster with a constant right operand
  /// stored `[..., K, N]` than read transposed from `[..., N, K]`: then
  /// mc-pretranspose-weights stores such weights (nn.Linear's) as read,
  /// when every target of the compile asks for it.
  virtual bool pretransposesWeights() const { return false; }
  /// Whether its convolutions and pooling run faster on NHWC activations
  /// (`channels_last`) than on NCHW: then mc-channels-last switches them,
  /// when every target of the compile asks for it.
  virtual bool runsChannelsLast() const { return false; }
  /// Whether f16 convolutions switch too (when every target says so; f32
  /// and bf16 ones always do).
  virtual bool runsChannelsLastF16() const { return false; }
  virtual mlir::LogicalResult serializeExecutables(mlir::ModuleOp module,
                                                   Plan& plan) const {
    return mlir::success();
  }
};

/// Registers the built-in targets (the CPU) with codegen and with the
/// passes' contract registry; idempotent. Tools call it at start.
void registerTargets();
/// The target called `name`, or null.
const Target* lookupTarget(llvm::StringRef name);
/// Every registered target's name.
std::vector<std::string> targetNames();

} // namespace mc::codegen

#endif // MODELC_CODEGEN_TARGET_H
