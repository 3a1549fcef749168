// The compile driver (see Compile.h).
#include "codegen/Compile.h"

#include "codegen/ArtifactWriter.h"
#include "codegen/MCToPlan.h"
#include "codegen/MemoryPlanner.h"
#include "codegen/Target.h"

#include <algorithm>
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

/// Bytes of intermediates a plan's steps write per run: every Arena output
/// but the model's outputs.
uint64_t intermediateBytes(const Plan& plan) {
  std::vector<bool> isOutput(plan.buffers.size(), false);
  for (const PlanSignature& o : plan.outputs)
    if (o.buffer < isOutput.size())
      isOutput[o.buffer] = true;
  uint64_t written = 0;
  for (const PlanStep& s : plan.steps)
    for (uint32_t o : s.outputs)
      if (o < plan.buffers.size() &&
          plan.buffers[o].kind == fb::BufferKind::Arena && !isOutput[o])
        written += plan.buffers[o].byteSize();
  return written;
}

/// The plan with every fused region expanded into one step per op (each
/// value a buffer; a reshape a view), planned by the same planner: what
/// fusion saved, for --verbose and `modelc inspect`.
Plan::Stats unfusedStats(const Plan& plan) {
  bool fused = llvm::any_of(plan.steps,
                            [](const PlanStep& s) { return !s.body.empty(); });
  if (!fused) // already one step per op: no second planning
    return Plan::Stats{plan.steps.size(), intermediateBytes(plan),
                       plan.arenaSize};
  Plan expanded;
  expanded.entry = plan.entry;
  expanded.batch = plan.batch;
  expanded.inputs = plan.inputs;
  expanded.outputs = plan.outputs;
  expanded.buffers.reserve(plan.buffers.size());
  for (const PlanBuffer& b : plan.buffers) {
    PlanBuffer copy = b;
    copy.data.clear(); // sizes come from shapes; weights are not needed
    expanded.buffers.push_back(std::move(copy));
  }
  for (const PlanStep& s : plan.steps) {
    if (s.body.empty()) {
      expanded.steps.push_back(s);
      continue;
    }
    std::vector<uint32_t> value = s.inputs;
    for (size_t k = 0; k < s.body.size(); ++k) {
      const PlanRegionOp& r = s.body[k];
      if (r.op == rt::OpId::Reshape) {
        value.push_back(value[r.operands[0]]);
        continue;
      }
      uint32_t out = s.outputs[0];
      uint32_t number = uint32_t(s.inputs.size() + k);
      auto extra = llvm::find(s.extraOutputs, number);
      if (extra != s.extraOutputs.end()) {
        out = s.outputs[1 + (extra - s.extraOutputs.begin())];
      } else if (k + 1 < s.body.size()) {
        PlanBuffer b;
        b.name = "region value";
        b.dtype = r.dtype;
        b.shape = r.shape;
        b.batchScale = r.batchScale;
        expanded.buffers.push_back(std::move(b));
        out = uint32_t(expanded.buffers.size() - 1);
      }
      PlanStep step;
      step.op = r.op;
      for (uint32_t v : r.operands)
        step.inputs.push_back(value[v]);
      step.outputs.push_back(out);
      expanded.steps.push_back(std::move(step));
      value.push_back(out);
    }
  }
  Plan::Stats stats;
  if (!planMemory(expanded))
    return stats;
  stats.steps = expanded.steps.size();
  stats.intermediateBytes = intermediateBytes(expanded);
  stats.arenaSize = expanded.arenaSize;
  return stats;
}

/// "modelc: plan: ..." for --verbose: steps, fused regions, bytes of
/// intermediates written per run and arena size, each next to what one step
/// per op would give.
void printPlanStats(const Plan& plan) {
  size_t regions = 0;
  for (const PlanStep& s : plan.steps)
    regions += !s.body.empty();
  llvm::errs() << "modelc: plan: " << plan.steps.size() << " steps ("
               << regions << " fused regions; one step per op: "
               << plan.unfused.steps << "), " << intermediateBytes(plan)
               << " bytes of intermediates written per run (one step per op: "
               << plan.unfused.intermediateBytes << "), arena "
               << plan.arenaSize << " bytes (one step per op: "
               << plan.unfused.arenaSize << ")"
               << (plan.batch.dynamic() ? " (at the max batch)" : "") << "\n";
}

} // namespace

/// The targets of a --target value ("cpu", or a comma-separated list).
static FailureOr<std::vector<const Target*>>
resolveTargets(ModuleOp module, const std::string& spec) {
  registerTargets();
  std::vector<const Target*> out;
  // "cpu,cuda:sm_80,sm_90": a target's options follow its name after ':';
  // the items after it that are not target names continue its options.
  std::vector<std::pair<std::string, std::string>> items;
  for (StringRef item : llvm::split(StringRef(spec), ',')) {
    item = item.trim();
    auto [name, opts] = item.split(':');
    if (!items.empty() && !item.contains(':') && !lookupTarget(name) &&
        !items.back().second.empty()) {
      items.back().second += "," + item.str();
      continue;
    }
    items.push_back({name.str(), opts.str()});
  }
  for (const auto& [nameText, opts] : items) {
    StringRef name = nameText;
    const Target* t = lookupTarget(name);
    if (t && !opts.empty()) {
      std::string error;
      if (failed(t->configure(opts, &error))) {
        module.emitError() << "target '" << name << "': " << error;
        return failure();
      }
    }
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

/// mc-split-reductions' limits: the widest any target asks for (none
/// with --split-reductions=off; at least cuda's with =on).
static void splitLimits(const std::vector<const Target*>& targets,
                        const CompileOptions& options, int64_t* maxOutputs,
                        int64_t* minReduced) {
  *maxOutputs = 0;
  *minReduced = 0;
  if (options.splitReductions == false)
    return;
  for (const Target* t : targets) {
    Target::ReductionSplit s = t->reductionSplit(options.fuse);
    if (s.maxOutputs <= 0)
      continue;
    *maxOutputs = std::max(*maxOutputs, s.maxOutputs);
    *minReduced = *minReduced == 0 ? s.minReduced
                                   : std::min(*minReduced, s.minReduced);
  }
  if (options.splitReductions == true) { // at least cuda's
    *maxOutputs = std::max<int64_t>(*maxOutputs, 1024);
    *minReduced = *minReduced == 0 ? 8192
                                   : std::min<int64_t>(*minReduced, 8192);
  }
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
    training.fuse = options.fuse;
    for (const Target* t : *targets) {
      training.fuseEpilogues &= t->fusesEpilogues();
      training.fuseAttention &= t->fusesAttention();
      training.fuseViews &= t->fusesViews();
      training.fuseAttentionViews &= t->fusesAttentionViews();
    }
    splitLimits(*targets, options, &training.splitMaxOutputs,
                &training.splitMinReduced);
    buildTrainPipeline(pm, training);
  } else {
    CompilePipelineOptions pipeline;
    pipeline.target = (*targets)[0]->name();
    pipeline.entry = options.entry;
    pipeline.amp = options.training.amp;
    pipeline.ampLevel = options.training.ampLevel;
    pipeline.ampLowOps = options.training.ampLowOps;
    pipeline.ampF32Ops = options.training.ampF32Ops;
    pipeline.ampLocations = options.training.ampLocations;
    pipeline.fuse = options.fuse;
    for (const Target* t : *targets) {
      pipeline.fuseEpilogues &= t->fusesEpilogues();
      pipeline.fuseAttention &= t->fusesAttention();
      pipeline.fuseViews &= t->fusesViews();
      pipeline.fuseAttentionViews &= t->fusesAttentionViews();
    }
    splitLimits(*targets, options, &pipeline.splitMaxOutputs,
                &pipeline.splitMinReduced);
    pipeline.pretransposeWeights = options.pretransposeWeights.value_or(
        llvm::all_of(*targets, [](const Target* t) {
          return t->pretransposesWeights();
        }));
    pipeline.channelsLast = options.channelsLast.value_or(llvm::all_of(
        *targets, [](const Target* t) { return t->runsChannelsLast(); }));
    pipeline.channelsLastF16 = llvm::all_of(
        *targets, [](const Target* t) { return t->runsChannelsLastF16(); });
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
  plan->unfused = unfusedStats(*plan);
  if (options.verbose)
    printPlanStats(*plan);
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
