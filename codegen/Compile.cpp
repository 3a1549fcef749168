// The compile driver (see Compile.h).
#include "codegen/Compile.h"

#include "codegen/ArtifactWriter.h"
#include "codegen/MCToPlan.h"
#include "codegen/MemoryPlanner.h"
#include "codegen/Target.h"
#include "passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace mlir;

namespace mc::codegen {
namespace {

/// Prints "modelc: <stage> (<ms> ms)" when verbose.
class StageTimer {
public:
  StageTimer(bool verbose, const char* stage)
      : verbose(verbose), stage(stage),
        start(std::chrono::steady_clock::now()) {}
  ~StageTimer() {
    if (!verbose)
      return;
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    llvm::errs() << "modelc: " << stage << " (" << llvm::format("%.1f", ms)
                 << " ms)\n";
  }

private:
  bool verbose;
  const char* stage;
  std::chrono::steady_clock::time_point start;
};

} // namespace

/// The targets of a --target value ("cpu", or a comma-separated list).
static FailureOr<std::vector<const Target*>>
resolveTargets(ModuleOp module, const std::string& spec) {
  registerTargets();
  std::vector<const Target*> out;
  for (StringRef name : llvm::split(StringRef(spec), ',')) {
    name = name.trim();
    const Target* t = lookupTarget(name);
    if (!t) {
      std::string known;
      for (const std::string& n : targetNames())
        known += (known.empty() ? "" : ", ") + n;
      module.emitError() << "unknown target '" << name
                         << "'; known targets: " << known;
      return failure();
    }
    if (llvm::is_contained(out, t))
      continue;
    out.push_back(t);
  }
  if (out.empty()) {
    module.emitError() << "no target given";
    return failure();
  }
  return out;
}

LogicalResult runCompilePipeline(ModuleOp module,
                                 const CompileOptions& options) {
  auto targets = resolveTargets(module, options.target);
  if (failed(targets))
    return failure();
  StageTimer timer(options.verbose, "pass pipeline");
  PassManager pm(module.getContext());
  if (options.train) {
    TrainPipelineOptions training = options.training;
    training.target = (*targets)[0]->name();
    training.entry = options.entry;
    buildTrainPipeline(pm, training);
  } else {
    CompilePipelineOptions pipeline;
    pipeline.target = (*targets)[0]->name();
    pipeline.entry = options.entry;
    pipeline.amp = options.training.amp;
    pipeline.ampLevel = options.training.ampLevel;
    buildCompilePipeline(pm, pipeline);
  }
  // The pipeline checks the first target's contract; the graph must meet
  // every other named target's too, since each gets its executables.
  for (size_t i = 1; i < targets->size(); ++i) {
    VerifyContractPassOptions contract;
    contract.target = (*targets)[i]->name();
    contract.entry = options.entry;
    pm.addPass(createVerifyContractPass(contract));
  }
  for (const Target* t : *targets)
    t->buildLoweringPipeline(pm);
  return pm.run(module);
}

FailureOr<Plan> buildPlan(ModuleOp module, const CompileOptions& options) {
  auto targets = resolveTargets(module, options.target);
  if (failed(targets))
    return failure();
  FailureOr<Plan> plan;
  {
    StageTimer timer(options.verbose, "lowering to steps");
    plan = lowerToPlan(module, options.entry);
  }
  if (failed(plan))
    return failure();
  plan->targets.clear();
  for (const Target* t : *targets) {
    plan->targets.push_back(t->name());
    if (failed(t->serializeExecutables(module, *plan)))
      return failure();
  }
  StageTimer timer(options.verbose, "memory planning");
  rt::Status status = planMemory(*plan);
  if (!status) {
    module.emitError() << "memory planning failed: " << status.message();
    return failure();
  }
  return plan;
}

FailureOr<std::vector<uint8_t>>
compileToArtifact(ModuleOp module, const CompileOptions& options) {
  if (failed(runCompilePipeline(module, options)))
    return failure();
  auto plan = buildPlan(module, options);
  if (failed(plan))
    return failure();
  std::vector<uint8_t> bytes;
  rt::Status status = writeArtifactToBytes(*plan, &bytes);
  if (!status) {
    module.emitError() << "cannot write the artifact: " << status.message();
    return failure();
  }
  return bytes;
}

} // namespace mc::codegen
