// The pass pipelines, registered in one place. The order is fixed here and
// explained next to it.
#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

/// mc-split-reductions with a target's limits (none when maxOutputs is 0).
static void addSplitReductions(OpPassManager& pm, const std::string& entry,
                               int64_t maxOutputs, int64_t minReduced) {
  if (maxOutputs <= 0)
    return;
  mc::SplitReductionsPassOptions split;
  split.entry = entry;
  split.maxOutputs = maxOutputs;
  split.minReduced = minReduced;
  pm.addPass(mc::createSplitReductionsPass(split));
}

void mc::buildCompilePipeline(OpPassManager& pm,
                              const CompilePipelineOptions& options) {
  // 1. Inline helper functions: codegen lowers one straight-line function.
  pm.addPass(createInlinerPass());
  // 2. Canonicalize (folders: x+0, x*1, cast/transpose/reshape chains), then
  //    CSE so a value computed twice is computed once; canonicalize again
  //    since CSE exposes new chains.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createSymbolDCEPass());
  //    A layer norm exported as ReduceMean/Sub/Pow/.../Div (ONNX below
  //    opset 17) becomes one op, before AMP decides its precision (f32,
  //    as layer_norm's) and fusion groups what is left.
  RaiseLayerNormPassOptions raise;
  raise.entry = options.entry;
  pm.addPass(createRaiseLayerNormPass(raise));
  pm.addPass(createCanonicalizerPass());
  // 3. Inference folding: constant subgraphs computed once; a batch norm
  //    after a conv becomes the conv's weight and bias (before AMP, whose
  //    casts of the folded weights are folded in turn).
  FoldConstantsPassOptions fold;
  fold.entry = options.entry;
  pm.addPass(createFoldConstantsPass(fold));
  FoldBatchNormPassOptions bn;
  bn.entry = options.entry;
  pm.addPass(createFoldBatchNormPass(bn));
  pm.addPass(createCanonicalizerPass());
  //    The weights a matmul reads transposed (nn.Linear's), stored as read
  //    when the targets' libraries are faster so; before AMP, whose casts
  //    of them are then folded as of any weight.
  if (options.pretransposeWeights) {
    PretransposeWeightsPassOptions pre;
    pre.entry = options.entry;
    pm.addPass(createPretransposeWeightsPass(pre));
    pm.addPass(createSymbolDCEPass());
  }
  //    Convolutions and pooling on NHWC activations when the targets run
  //    them faster so, after the batch norms folded into them (a rule
  //    written for NCHW) and before fusion groups the epilogues.
  if (options.channelsLast) {
    ChannelsLastPassOptions last;
    last.entry = options.entry;
    last.f16 = options.channelsLastF16;
    pm.addPass(createChannelsLastPass(last));
    pm.addPass(createCanonicalizerPass());
  }
  // 4. Mixed precision for inference, when asked: decisions on the clean
  //    graph; canonicalize again to fold cast chains it creates.
  if (!options.amp.empty()) {
    AutoMixedPrecisionPassOptions amp;
    amp.dtype = options.amp;
    amp.level = options.ampLevel;
    amp.entry = options.entry;
    amp.lowOps.assign(options.ampLowOps.begin(), options.ampLowOps.end());
    amp.f32Ops.assign(options.ampF32Ops.begin(), options.ampF32Ops.end());
    amp.locations.assign(options.ampLocations.begin(),
                         options.ampLocations.end());
    pm.addPass(createAutoMixedPrecisionPass(amp));
    pm.addPass(createCanonicalizerPass());
    //  The casts of constant weights it made, folded: the file holds each
    //  weight in the precision its matmul or conv reads, so no run casts
    //  it again. The f32 weights no op reads any more go.
    pm.addPass(createFoldConstantsPass(fold));
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createSymbolDCEPass());
  }
  // 5. Fusion last among the rewrites: it groups the final ops (casts
  //    included) into regions, and no pass after it looks inside them.
  //    Reductions into few outputs are split first (a GPU would run them
  //    on a few SMs, a region on one thread), so each part fuses with
  //    what feeds it.
  addSplitReductions(pm, options.entry, options.splitMaxOutputs,
                     options.splitMinReduced);
  if (options.fuse) {
    FusePassOptions fuse;
    fuse.entry = options.entry;
    fuse.epilogues = options.fuseEpilogues;
    fuse.attention = options.fuseAttention;
    fuse.views = options.fuseViews;
    fuse.attentionViews = options.fuseAttentionViews;
    pm.addPass(createFusePass(fuse));
  }
  // 6. Last, the contract: what reaches codegen has static shapes,
  //    supported types and a kernel for every op on the target.
  VerifyContractPassOptions contract;
  contract.target = options.target;
  contract.entry = options.entry;
  pm.addPass(createVerifyContractPass(contract));
}

void mc::buildTrainPipeline(OpPassManager& pm,
                            const TrainPipelineOptions& o) {
  // 1. A clean forward function: inline helpers, fold, dedupe.
  pm.addPass(createInlinerPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  //    Constant subgraphs (masks, position ids) once, now; never an op on
  //    a global (a parameter, or state the step updates).
  FoldConstantsPassOptions fold;
  fold.entry = o.entry;
  fold.globals = false; // the parameters: folded, they get no gradient
  pm.addPass(createFoldConstantsPass(fold));
  // 2. Precision decisions on the forward pass only: autodiff then
  //    differentiates through the casts, so the gradients of the f32 master
  //    weights come out in f32 and the backward ops run in the precision
  //    their forward ops chose.
  if (!o.amp.empty()) {
    AutoMixedPrecisionPassOptions amp;
    amp.dtype = o.amp;
    amp.level = o.ampLevel;
    amp.lowOps.assign(o.ampLowOps.begin(), o.ampLowOps.end());
    amp.f32Ops.assign(o.ampF32Ops.begin(), o.ampF32Ops.end());
    amp.locations.assign(o.ampLocations.begin(), o.ampLocations.end());
    amp.entry = o.entry;
    pm.addPass(createAutoMixedPrecisionPass(amp));
  }
  // 3. (loss, gradient of every parameter).
  AutodiffPassOptions ad;
  ad.entry = o.entry;
  ad.freeze.assign(o.freeze.begin(), o.freeze.end());
  pm.addPass(createAutodiffPass(ad));
  // 4. Data parallelism: the gradients become the mean over the ranks,
  //    bucketed and started as the backward pass produces them. Before loss
  //    scaling, so its finite check sees the reduced gradients, which are
  //    equal on every rank: every rank skips the same steps.
  if (o.dpRanks > 1) {
    DataParallelPartitionPassOptions dp;
    dp.ranks = o.dpRanks;
    dp.bucketMb = o.dpBucketMb;
    dp.entry = o.entry;
    pm.addPass(createDataParallelPartitionPass(dp));
  }
  //    Gradient accumulation: each call a micro-batch, the gradients a
  //    group's mean; before loss scaling, whose check and scale update see
  //    the group's sum on its last call (update_due).
  if (o.gradAccum != 1) {
    GradAccumPassOptions accum;
    accum.steps = o.gradAccum;
    accum.entry = o.entry;
    pm.addPass(createGradAccumPass(accum));
  }
  // 5. Loss scaling needs the backward seed and the gradients, and must come
  //    before the optimizer, which guards its updates with grads_finite.
  bool scaling = o.lossScaling == "on" ||
                 (o.lossScaling == "auto" && o.amp == "f16");
  if (scaling) {
    LossScalingPassOptions ls;
    ls.init = o.scaleInit;
    ls.growth = o.scaleGrowth;
    ls.backoff = o.scaleBackoff;
    ls.interval = o.scaleInterval;
    ls.entry = o.entry;
    pm.addPass(createLossScalingPass(ls));
  }
  // 6. The update: parameters and optimizer state become graph state.
  OptimizerPassOptions opt;
  opt.kind = o.optimizer;
  opt.lr = o.lr;
  opt.momentum = o.momentum;
  opt.dampening = o.dampening;
  opt.nesterov = o.nesterov;
  opt.weightDecay = o.weightDecay;
  opt.beta1 = o.beta1;
  opt.beta2 = o.beta2;
  opt.eps = o.eps;
  opt.maxGradNorm = o.maxGradNorm;
  opt.noDecay.assign(o.noWeightDecay.begin(), o.noWeightDecay.end());
  opt.lrSchedule = o.lrSchedule;
  opt.warmupSteps = o.warmupSteps;
  opt.totalSteps = o.totalSteps;
  opt.entry = o.entry;
  pm.addPass(createOptimizerPass(opt));
  // 7. Clean up what the passes built, then check the contract last.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createSymbolDCEPass());
  // 8. Fusion of the whole step (forward, backward and the update's
  //    elementwise math); the state stores stay outside every region.
  //    Long reductions into few outputs (the loss, loss scaling's
  //    non-finite checks) are split first, as the targets ask.
  addSplitReductions(pm, o.entry, o.splitMaxOutputs,
                     o.splitMinReduced);
  if (o.fuse) {
    FusePassOptions fuse;
    fuse.entry = o.entry;
    fuse.epilogues = o.fuseEpilogues;
    fuse.attention = o.fuseAttention;
    fuse.views = o.fuseViews;
    fuse.attentionViews = o.fuseAttentionViews;
    pm.addPass(createFusePass(fuse));
  }
  VerifyContractPassOptions contract;
  contract.target = o.target;
  contract.entry = o.entry;
  pm.addPass(createVerifyContractPass(contract));
}

namespace {
/// The options both pipelines end with: fusion and the reduction split
/// before it.
template <typename Derived>
struct FuseCLOptions : public PassPipelineOptions<Derived> {
  template <typename T>
  using Option = mlir::detail::PassOptions::Option<T>;
  Option<bool> fuse{*this, "fuse", llvm::cl::desc("run mc-fuse"),
                    llvm::cl::init(true)};
  Option<int64_t> splitMaxOutputs{
      *this, "split-max-outputs",
      llvm::cl::desc("mc-split-reductions' max-outputs (0: no split; "
                     "modelc compile takes its targets': cpu 1 when "
                     "fusing, cuda 1024)"),
      llvm::cl::init(1)};
  Option<int64_t> splitMinReduced{
      *this, "split-min-reduced",
      llvm::cl::desc("mc-split-reductions' min-reduced (cpu 65537, cuda "
                     "8192)"),
      llvm::cl::init(65537)};
};

struct TrainPipelineCLOptions : public FuseCLOptions<TrainPipelineCLOptions> {
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("sgd, adam or adamw"),
                                llvm::cl::init("sgd")};
  Option<std::optional<double>> lr{
      *this, "lr",
      llvm::cl::desc("learning rate (default: 0.01 sgd, 1e-3 adam(w))")};
  Option<double> momentum{*this, "momentum", llvm::cl::init(0.0)};
  Option<std::optional<double>> weightDecay{*this, "weight-decay"};
  Option<std::string> amp{*this, "amp", llvm::cl::desc("bf16, f16 or empty"),
                          llvm::cl::init("")};
  Option<std::string> ampLevel{*this, "amp-level", llvm::cl::init("O1")};
  Option<std::string> lossScaling{*this, "loss-scaling",
                                  llvm::cl::desc("auto, on or off"),
                                  llvm::cl::init("auto")};
  Option<int64_t> scaleInterval{*this, "loss-scale-interval",
                                llvm::cl::init(2000)};
  Option<double> dampening{*this, "dampening", llvm::cl::init(0.0)};
  Option<bool> nesterov{*this, "nesterov", llvm::cl::init(false)};
  Option<double> beta1{*this, "beta1", llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::init(1e-8)};
  Option<double> maxGradNorm{*this, "max-grad-norm", llvm::cl::init(0.0)};
  ListOption<std::string> freeze{*this, "freeze"};
  Option<int64_t> gradAccum{*this, "grad-accum", llvm::cl::init(1)};
  ListOption<std::string> noWeightDecay{*this, "no-weight-decay"};
  Option<std::string> lrSchedule{*this, "lr-schedule",
                                 llvm::cl::desc("constant, linear or cosine"),
                                 llvm::cl::init("constant")};
  Option<int64_t> warmupSteps{*this, "warmup-steps", llvm::cl::init(0)};
  Option<int64_t> totalSteps{*this, "total-steps", llvm::cl::init(0)};
  ListOption<std::string> ampLowOps{*this, "amp-low-ops"};
  ListOption<std::string> ampF32Ops{*this, "amp-f32-ops"};
  ListOption<std::string> ampLocations{*this, "amp-locations"};
  Option<double> scaleInit{*this, "loss-scale-init", llvm::cl::init(65536.0)};
  Option<double> scaleGrowth{*this, "loss-scale-growth", llvm::cl::init(2.0)};
  Option<double> scaleBackoff{*this, "loss-scale-backoff",
                              llvm::cl::init(0.5)};
  Option<std::string> entry{*this, "entry", llvm::cl::init("")};
  Option<int64_t> dpRanks{*this, "dp-ranks",
                          llvm::cl::desc("data-parallel ranks (mc-dp-partition)"),
                          llvm::cl::init(1)};
  Option<double> dpBucketMb{*this, "dp-bucket-mb", llvm::cl::init(25.0)};
};

struct CompilePipelineCLOptions
    : public FuseCLOptions<CompilePipelineCLOptions> {
  Option<std::string> amp{*this, "amp", llvm::cl::desc("bf16, f16 or empty"),
                          llvm::cl::init("")};
  Option<std::string> ampLevel{*this, "amp-level", llvm::cl::init("O1")};
  Option<std::string> target{*this, "target",
                             llvm::cl::desc("codegen target (cpu)"),
                             llvm::cl::init("cpu")};
  Option<std::string> entry{*this, "entry",
                            llvm::cl::desc("entry function name"),
                            llvm::cl::init("")};
  Option<bool> pretransposeWeights{
      *this, "pretranspose-weights",
      llvm::cl::desc("mc-pretranspose-weights, for target=cpu only (modelc "
                     "compile --pretranspose-weights=on forces it for any "
                     "target)"),
      llvm::cl::init(true)};
  Option<bool> channelsLast{
      *this, "channels-last",
      llvm::cl::desc("mc-channels-last, for target=cpu and cuda (f16 "
                     "convolutions too on cuda; modelc compile "
                     "--channels-last=on forces it for any target)"),
      llvm::cl::init(true)};
};
} // namespace

void mc::registerAllPasses() {
  registerMCPasses();
  PassPipelineRegistration<CompilePipelineCLOptions>(
      "mc-compile-pipeline",
      "inline, canonicalize, cse, fold batch norms, amp, fuse and check the "
      "codegen contract",
      [](OpPassManager& pm, const CompilePipelineCLOptions& cl) {
        CompilePipelineOptions options;
        options.target = cl.target;
        options.entry = cl.entry;
        options.amp = cl.amp;
        options.ampLevel = cl.ampLevel;
        options.fuse = cl.fuse;
        options.splitMaxOutputs = cl.splitMaxOutputs;
        options.splitMinReduced = cl.splitMinReduced;
        options.pretransposeWeights =
            cl.pretransposeWeights && cl.target == "cpu";
        options.channelsLast =
            cl.channelsLast && (cl.target == "cpu" || cl.target == "cuda");
        options.channelsLastF16 = cl.target == "cuda";
        buildCompilePipeline(pm, options);
      });
  PassPipelineRegistration<TrainPipelineCLOptions>(
      "mc-train-pipeline",
      "amp, autodiff, loss scaling, optimizer: a loss function becomes a "
      "training step",
      [](OpPassManager& pm, const TrainPipelineCLOptions& cl) {
        TrainPipelineOptions o;
        o.optimizer = cl.optimizer;
        o.lr = cl.lr.getValue();
        o.momentum = cl.momentum;
        o.weightDecay = cl.weightDecay.getValue();
        o.amp = cl.amp;
        o.ampLevel = cl.ampLevel;
        o.lossScaling = cl.lossScaling;
        o.scaleInterval = cl.scaleInterval;
        o.dampening = cl.dampening;
        o.nesterov = cl.nesterov;
        o.beta1 = cl.beta1;
        o.beta2 = cl.beta2;
        o.eps = cl.eps;
        o.maxGradNorm = cl.maxGradNorm;
        o.freeze.assign(cl.freeze.begin(), cl.freeze.end());
        o.gradAccum = cl.gradAccum;
        o.noWeightDecay.assign(cl.noWeightDecay.begin(),
                               cl.noWeightDecay.end());
        o.lrSchedule = cl.lrSchedule;
        o.warmupSteps = cl.warmupSteps;
        o.totalSteps = cl.totalSteps;
        o.fuse = cl.fuse;
        o.splitMaxOutputs = cl.splitMaxOutputs;
        o.splitMinReduced = cl.splitMinReduced;
        o.ampLowOps.assign(cl.ampLowOps.begin(), cl.ampLowOps.end());
        o.ampF32Ops.assign(cl.ampF32Ops.begin(), cl.ampF32Ops.end());
        o.ampLocations.assign(cl.ampLocations.begin(), cl.ampLocations.end());
        o.scaleInit = cl.scaleInit;
        o.scaleGrowth = cl.scaleGrowth;
        o.scaleBackoff = cl.scaleBackoff;
        o.entry = cl.entry;
        o.dpRanks = cl.dpRanks;
        o.dpBucketMb = cl.dpBucketMb;
        buildTrainPipeline(pm, o);
      });
}
