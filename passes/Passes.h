// modelc's passes and pipelines: declarations and registration.
#ifndef MODELC_PASSES_PASSES_H
#define MODELC_PASSES_PASSES_H

#include "ir/MCDialect.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "modelc/ops.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"

#include <optional>
#include <string>

namespace llvm::cl {
/// Pass options that can be absent (mc-optimizer's weight-decay, whose
/// default depends on the optimizer): "" (or "None", how an absent value
/// prints) is absent, anything else must be a number. A value the user gives
/// is never mistaken for "not given".
template <>
class parser<std::optional<double>>
    : public basic_parser<std::optional<double>> {
public:
  parser(Option& O) : basic_parser(O) {}
  // Returns true on error.
  bool parse(Option& O, StringRef, StringRef arg,
             std::optional<double>& value) {
    if (arg.empty() || arg == "None") {
      value = std::nullopt;
      return false;
    }
    double number;
    if (!llvm::to_float(arg, number))
      return O.error("'" + arg + "' value invalid for floating point argument!");
    value = number;
    return false;
  }
  StringRef getValueName() const override { return "number"; }
  void printOptionDiff(const Option& O, const OptVal&, const OptVal&,
                       size_t GlobalWidth) const {
    printOptionNoValue(O, GlobalWidth);
  }
};
} // namespace llvm::cl

namespace mlir {
class SymbolTable;
namespace func {
class FuncOp;
} // namespace func
namespace ml_program {
class GlobalOp;
} // namespace ml_program
} // namespace mlir

namespace mc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// What the passes ask of a codegen target (codegen/Target.h registers one
/// per target; passes cannot depend on codegen): the element types it has
/// kernels for, per op, as the op registry's comma-separated list ("" =
/// whatever the op's ODS constraints accept).
struct TargetContract {
  std::string name;
  std::string (*elementTypes)(rt::OpId op) = nullptr;
};
void registerTargetContract(const TargetContract& contract);
/// Null when no target of that name is registered.
const TargetContract* lookupTargetContract(llvm::StringRef name);
/// "cpu" (the registered targets, comma-separated), for error messages.
std::string knownTargetsText();

/// Options of the compile pipeline (see Pipelines.cpp for the order).
struct CompilePipelineOptions {
  std::string target = "cpu";
  std::string entry;
  /// Mixed precision for inference: "" (off), "bf16" or "f16".
  std::string amp;
  std::string ampLevel = "O1";
  /// mc-amp's list changes and per-location overrides, as for training.
  std::vector<std::string> ampLowOps, ampF32Ops, ampLocations;
  /// mc-fuse (fused regions and epilogues); off: one step per op.
  bool fuse = true;
  /// mc-fuse's epilogues and attention options (off when a target of the
  /// compile does not run such regions, e.g. cuda).
  bool fuseEpilogues = true, fuseAttention = true, fuseViews = true,
       fuseAttentionViews = true;
  /// mc-split-reductions before fusion: reductions of at most
  /// `splitMaxOutputs` outputs (0: none) and at least `splitMinReduced`
  /// elements per output (codegen sets the targets' limits).
  int64_t splitMaxOutputs = 0, splitMinReduced = 0;
  /// mc-pretranspose-weights: constant weights that matmuls read
  /// transposed stored as they are read (codegen: when every target of the
  /// compile asks for it, Target::pretransposesWeights; the CPU does).
  bool pretransposeWeights = false;
  /// mc-channels-last: convolutions and pooling on NHWC activations
  /// (codegen: when every target asks for it, Target::runsChannelsLast;
  /// the CPU does).
  bool channelsLast = false;
  bool channelsLastF16 = false; // f16 convolutions too (mc-channels-last f16)
};

/// Appends the inference compile pipeline: inline, canonicalize, cse,
/// batch-norm folding, AMP, fusion, contract check.
void buildCompilePipeline(mlir::OpPassManager& pm,
                          const CompilePipelineOptions& options);

/// Options of the training pipeline (`modelc compile --train`).
struct TrainPipelineOptions {
  std::string target = "cpu";
  std::string entry;
  // mc-optimizer
  std::string optimizer = "sgd";
  /// Unset: the optimizer's default (torch.optim's: sgd 0.01, adam(w) 1e-3).
  std::optional<double> lr;
  double momentum = 0, dampening = 0;
  /// Unset: the optimizer's default (sgd and adam 0, adamw 0.01).
  std::optional<double> weightDecay;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  /// > 0: the gradients' global L2 norm clipped to it (clip_grad_norm_).
  double maxGradNorm = 0;
  /// > 1: update every gradAccum calls with the mean of their gradients.
  int64_t gradAccum = 1;
  /// Glob patterns of parameters without weight decay ("*.bias").
  std::vector<std::string> noWeightDecay;
  /// mc-autodiff: parameters left untrained (names, or module paths).
  std::vector<std::string> freeze;
  /// The learning rate over the steps: "constant", "linear" or "cosine"
  /// after `warmupSteps` of linear warmup; linear and cosine need
  /// `totalSteps` > `warmupSteps` (Hugging Face's schedules).
  std::string lrSchedule = "constant";
  int64_t warmupSteps = 0, totalSteps = 0;
  // mc-amp: "" (off), "bf16" or "f16"
  std::string amp;
  std::string ampLevel = "O1";
  std::vector<std::string> ampLowOps, ampF32Ops, ampLocations;
  // mc-loss-scaling: "auto" (on for f16, off otherwise), "on", "off"
  std::string lossScaling = "auto";
  double scaleInit = 65536, scaleGrowth = 2, scaleBackoff = 0.5;
  int64_t scaleInterval = 2000;
  /// mc-dp-partition: ranks > 1 makes the step of one data-parallel rank.
  int64_t dpRanks = 1;
  double dpBucketMb = 25;
  /// mc-fuse on the finished step.
  bool fuse = true;
  bool fuseEpilogues = true, fuseAttention = true, fuseViews = true,
       fuseAttentionViews = true;
  /// mc-split-reductions before fusion: reductions of at most
  /// `splitMaxOutputs` outputs (0: none) and at least `splitMinReduced`
  /// elements per output (codegen sets the targets' limits).
  int64_t splitMaxOutputs = 0, splitMinReduced = 0;
};

/// Appends the training pipeline (see Pipelines.cpp for the order):
/// a function computing a scalar loss becomes one training step.
void buildTrainPipeline(mlir::OpPassManager& pm,
                        const TrainPipelineOptions& options);

/// Registers every mc pass and the `mc-compile-pipeline` pipeline.
void registerAllPasses();

/// Finds the entry function: `name` when given, else the only public
/// func.func. Emits an error on the module and returns null otherwise.
mlir::Operation* findEntryFunction(mlir::ModuleOp module, llvm::StringRef name);

/// Appends " a b c ... (N in all)" (the first 8 of `names`) to an error
/// that lists what an option could have named.
void appendNames(mlir::InFlightDiagnostic& diag,
                 llvm::ArrayRef<llvm::StringRef> names);

/// The value of a constant tensor: an mc.constant's, or the immutable
/// global's an ml_program.global_load_const reads; null for anything else
/// (a parameter, a computed value, a global without a value).
mlir::ElementsAttr constantElements(mlir::Value v);

/// A private mutable global of a training step's state, initialised to
/// `init`, located at `loc` and inserted before `fn`: named `name`, or
/// `name.1`, `name.2`... when `symbols` already has that name.
mlir::ml_program::GlobalOp createStateGlobal(mlir::func::FuncOp fn,
                                             mlir::SymbolTable& symbols,
                                             llvm::StringRef name,
                                             mlir::DenseElementsAttr init,
                                             mlir::Location loc);

/// Appends `value` to `fn`'s results (its type, its return) with the
/// result attribute mc.name = `name`.
void appendNamedResult(mlir::func::FuncOp fn, mlir::Value value,
                       llvm::StringRef name);

/// The index of `fn`'s result whose mc.name is `name`, if any.
std::optional<unsigned> findNamedResult(mlir::func::FuncOp fn,
                                        llvm::StringRef name);

} // namespace mc

#endif // MODELC_PASSES_PASSES_H
