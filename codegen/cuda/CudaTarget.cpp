// The CUDA target (`--target cuda[:sm_80,sm_90]`, docs/cuda.md): a kernel
// generated in MLIR's gpu dialect for every step that is not a library call
// (matmul through cuBLASLt, conv2d through cuDNN), lowered through NVVM and
// LLVM's NVPTX backend to PTX, assembled by ptxas into one cubin per
// architecture. The artifact holds the cubins and the PTX (which the driver
// compiles for newer GPUs); every executable holds the same entry points.
#include "codegen/cuda/CudaTarget.h"

#include "codegen/cuda/KernelGen.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;

namespace mc::codegen::cuda {
namespace {

/// The CUDA toolkit: $MODELC_CUDA_PATH, else $CUDA_PATH, else
/// /usr/local/cuda.
std::string toolkitPath() {
  for (const char* var : {"MODELC_CUDA_PATH", "CUDA_PATH"})
    if (const char* v = std::getenv(var); v && *v)
      return v;
  return "/usr/local/cuda";
}

void appendKernelRegistry(MLIRContext& context) {
  DialectRegistry registry;
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  NVVM::registerConvertGpuToNVVMInterface(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  context.appendDialectRegistry(registry);
  loadKernelDialects(context);
  context.loadDialect<cf::ControlFlowDialect, LLVM::LLVMDialect,
                      NVVM::NVVMDialect>();
}

/// math.sqrt as NVVM's llvm.nvvm.sqrt.rn.f, the correctly rounded sqrt.rn
/// (the CPU's std::sqrt). convert-gpu-to-nvvm would call libdevice's
/// __nv_sqrtf, which is sqrt.approx unless __CUDA_PREC_SQRT is reflected
/// as 1 (nothing here sets it), and it refuses LLVM's own sqrt intrinsic.
struct PreciseSqrt : OpRewritePattern<math::SqrtOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::SqrtOp op,
                                PatternRewriter& rewriter) const override {
    if (!op.getType().isF32())
      return failure();
    rewriter.replaceOpWithNewOp<LLVM::CallIntrinsicOp>(
        op, op.getType(), rewriter.getStringAttr("llvm.nvvm.sqrt.rn.f"),
        ValueRange{op.getOperand()});
    return success();
  }
};

/// What the kernels need before convert-gpu-to-nvvm: gpu.subgroup_reduce
/// expanded into shuffles of a 32-lane warp (the NVVM conversion refuses
/// the op itself), and precise square roots.
struct PrepareKernelsForNvvm
    : PassWrapper<PrepareKernelsForNvvm, OperationPass<gpu::GPUModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(PrepareKernelsForNvvm)
  StringRef getArgument() const override {
    return "mc-prepare-kernels-for-nvvm";
  }
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateGpuBreakDownSubgroupReducePatterns(patterns, 32);
    populateGpuLowerSubgroupReduceToShufflePatterns(patterns, 32);
    patterns.add<PreciseSqrt>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

/// Runs ptxas on `ptx` for `arch`; on failure the error holds the command
/// that reproduces it, with the PTX kept on disk.
LogicalResult assemble(Location loc, const std::string& ptx,
                       const std::string& arch, std::vector<uint8_t>* cubin) {
  std::string ptxas = toolkitPath() + "/bin/ptxas";
  if (!llvm::sys::fs::can_execute(ptxas))
    return emitError(loc) << "ptxas not found at " << ptxas
                          << " (the cuda target needs the CUDA toolkit; set "
                             "MODELC_CUDA_PATH to its directory)";
  SmallString<128> in, out, err;
  int fd;
  if (llvm::sys::fs::createTemporaryFile("modelc-kernels", "ptx", fd, in))
    return emitError(loc) << "cannot create a temporary file for ptxas";
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << ptx;
  }
  llvm::sys::fs::createTemporaryFile("modelc-kernels-" + arch, "cubin", out);
  llvm::sys::fs::createTemporaryFile("modelc-ptxas", "log", err);
  // Named: a StringRef to a temporary `"-arch=" + arch` would dangle.
  std::string archFlag = "-arch=" + arch;
  SmallVector<StringRef> argv = {ptxas, archFlag, "-O3", in, "-o", out};
  std::string command = llvm::join(argv, " ");
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(err),
                                          StringRef(err)};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(ptxas, argv, std::nullopt, redirects,
                                     /*secondsToWait=*/300, 0, &execError);
  auto log = llvm::MemoryBuffer::getFile(err);
  std::string logText = log ? (*log)->getBuffer().str() : "";
  llvm::sys::fs::remove(err);
  if (rc != 0) {
    llvm::sys::fs::remove(out);
    return emitError(loc) << "ptxas failed for " << arch << " (exit " << rc
                          << (execError.empty() ? "" : ", " + execError)
                          << "):\n"
                          << logText << "reproduce with: " << command;
  }
  llvm::sys::fs::remove(in);
  auto bin = llvm::MemoryBuffer::getFile(out, /*IsText=*/false);
  llvm::sys::fs::remove(out);
  if (!bin)
    return emitError(loc) << "ptxas wrote no cubin for " << arch;
  cubin->assign((*bin)->getBufferStart(), (*bin)->getBufferEnd());
  return success();
}

class CudaTarget final : public Target {
public:
  std::string name() const override { return "cuda"; }

  std::string elementTypes(rt::OpId op) const override {
    // What the CPU runs, the CUDA target runs, except ops it has no kernel
    // for (step by step, classifyStep says why at compile time).
    return rt::opInfo(op).cpuTypes;
  }

  LogicalResult configure(llvm::StringRef opts,
                          std::string* error) const override {
    return setArchitectures(opts, error);
  }
  bool fusesEpilogues() const override { return true; }
  // Attention regions the device runs as cuDNN's fused attention stay
  // whole; placeAttentionRegions expands the others into their ops.
  bool fusesAttention() const override { return true; }
  // Views: the generated kernels read them (KernelGen's viewLoad, checked
  // on lavapipe); cuDNN's attention graph and the expansion of attention
  // regions do not yet (docs/fusion.md, "Views").
  bool fusesViews() const override { return true; }
  /// cuDNN's tensor-core convolutions read NHWC activations and KRSC
  /// filters; on NCHW ones every plan transposes both into its workspace
  /// at every call (docs/decisions.md, "Channels-last on cuda").
  bool runsChannelsLast() const override { return true; }
  bool runsChannelsLastF16() const override { return true; }
  bool fusesAttentionViews() const override { return false; }
  // A reduction kernel gives an output one block (rows) or one thread: a
  // full reduction of a gradient would run on one SM of 132. Fused or not.
  ReductionSplit reductionSplit(bool) const override { return {1024, 8192}; }

  LogicalResult serializeExecutables(ModuleOp module,
                                     Plan& plan) const override {
    return generate(module, plan, options());
  }
};

} // namespace

CudaOptions& options() {
  static CudaOptions o;
  return o;
}

LogicalResult setArchitectures(llvm::StringRef list, std::string* error) {
  std::vector<std::string> archs;
  SmallVector<StringRef> parts;
  list.split(parts, ',', -1, false);
  for (StringRef p : parts) {
    p = p.trim();
    unsigned v = 0;
    StringRef name = p;
    if (!p.consume_front("sm_") || p.getAsInteger(10, v) || v < 50 ||
        v > 200) {
      *error = "unknown CUDA architecture '" + name.str() + "' in '" +
               list.str() + "' (expected sm_NN, e.g. sm_80,sm_90)";
      return failure();
    }
    // The PTX is generated for sm_80 (bf16, cp.async): older GPUs cannot
    // run it, and ptxas refuses it for them.
    if (v < 80) {
      *error = "CUDA architecture '" + name.str() +
               "' is older than the oldest the cuda target generates for "
               "(sm_80, the A100)";
      return failure();
    }
    archs.push_back("sm_" + std::to_string(v));
  }
  if (archs.empty()) {
    *error = "no CUDA architecture in '" + list.str() + "'";
    return failure();
  }
  options().architectures = archs;
  return success();
}

FailureOr<std::string> lowerToPtx(ModuleOp kernels, unsigned indexBits) {
  MLIRContext& context = *kernels.getContext();
  appendKernelRegistry(context);
  PassManager pm(&context);
  GpuNVVMAttachTargetOptions attach;
  attach.chip = "sm_80"; // the lowest: the cubins for newer ones come from
                         // ptxas, and the PTX JITs anywhere
  attach.features = "+ptx80";
  attach.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(attach));
  OpPassManager& gm = pm.nest<gpu::GPUModuleOp>();
  gm.addPass(std::make_unique<PrepareKernelsForNvvm>());
  gm.addPass(createSCFToControlFlowPass());
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.useBarePtrCallConv = true;
  nvvm.indexBitwidth = indexBits;
  gm.addPass(createConvertGpuOpsToNVVMOps(nvvm));
  gm.addPass(createCanonicalizerPass());
  gm.addPass(createCSEPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.toolkitPath = toolkitPath();
  binary.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(binary));
  if (failed(pm.run(kernels)))
    return failure();
  std::string ptx;
  kernels.walk([&](gpu::BinaryOp bin) {
    for (Attribute a : bin.getObjects())
      if (auto obj = llvm::dyn_cast<gpu::ObjectAttr>(a))
        ptx = obj.getObject().getValue().str();
  });
  if (ptx.empty())
    return kernels.emitError("the NVPTX backend produced no PTX");
  // A generated kernel never allocates: a memref.alloc left in a kernel
  // lowers to a device-heap malloc per thread (shared memory that is not
  // shared, and a leak per launch), which no check without a GPU would see.
  if (ptx.find("call.uni (retval0), malloc") != std::string::npos ||
      ptx.find(".extern .func  (.param .b64 func_retval0) malloc") !=
          std::string::npos)
    return kernels.emitError("a generated kernel calls malloc (a "
                             "memref.alloc left in a kernel; shared memory "
                             "must be a workgroup attribution)");
  return ptx;
}

/// Whether the cuda device runs STEP (a fused region) as one library call:
/// the runtime's own matcher (rt::matchLibraryRegion, the rules the device
/// binds by), on the region's types at the batch's max, and this target's
/// policy on top:
/// - a matmul region keeps cuBLASLt's epilogue only with a bias, and not
///   for f16 results (an f16 output with an f32 bias is not one call);
/// - a conv2d region only in f16 and bf16: cuDNN's runtime fusion may have
///   no engine for an f32 conv with pointwise ops, and an f32 region split
///   in two loses little.
bool isLibraryRegion(const Plan& plan, const PlanStep& step) {
  if (step.op != rt::OpId::Fused || step.body.empty())
    return false;
  rt::LibraryRegion match = matchLibraryStep(plan, step);
  rt::DType dtype = step.body[0].dtype;
  switch (match.kind) {
  case rt::LibraryRegion::Kind::MatmulEpilogue:
    return match.bias >= 0 && dtype != rt::DType::F16;
  case rt::LibraryRegion::Kind::ConvEpilogue:
    return dtype == rt::DType::F16 || dtype == rt::DType::BF16;
  case rt::LibraryRegion::Kind::None:
    return false;
  }
  return false;
}

/// A new arena buffer of the plan; its index.
uint32_t addBuffer(Plan& plan, std::string name, rt::DType dtype,
                   std::vector<int64_t> shape,
                   std::vector<int64_t> batchScale) {
  PlanBuffer b;
  b.name = std::move(name);
  b.dtype = dtype;
  b.shape = std::move(shape);
  b.batchScale = std::move(batchScale);
  plan.buffers.push_back(std::move(b));
  return uint32_t(plan.buffers.size() - 1);
}

/// A step of region op OP alone (as the CPU lowering would make it),
/// reading INPUTS (buffers, one per operand).
PlanStep stepOf(PlanRegionOp op, std::vector<uint32_t> inputs) {
  PlanStep step;
  step.op = op.op;
  step.attrs = std::move(op.attrs);
  step.inputs = std::move(inputs);
  step.location = std::move(op.location);
  step.precision = std::move(op.precision);
  step.precisionReason = std::move(op.precisionReason);
  return step;
}

/// Why the cuda device cannot run attention step STEP as cuDNN's fused
/// attention (rt::matchAttentionRegion, the rule the device binds by, and
/// this target's policy: a constant scale, which the device reads once at
/// bind; a static shape, since a cuDNN plan is made for one), or empty.
std::string attentionMisfit(const Plan& plan, const PlanStep& step) {
  rt::AttentionRegion m = matchAttentionStep(plan, step);
  if (!m.ok)
    return m.why;
  if (m.scale >= 0 &&
      plan.buffers[step.inputs[size_t(m.scale)]].kind != fb::BufferKind::Constant)
    return "its scale is not a constant";
  for (uint32_t b : step.inputs)
    if (!plan.buffers[b].batchScale.empty())
      return "its shapes follow the dynamic batch";
  if (!plan.buffers[step.outputs[0]].batchScale.empty())
    return "its shapes follow the dynamic batch";
  return "";
}

/// Replaces region step I by the steps of its ops: a run of consecutive
/// elementwise ops of one shape whose values are read only inside the run
/// (a scale's broadcast and its multiply; a cast, a mask's broadcast and
/// the add), or one elementwise op reading a rank-0 input (a splat),
/// becomes one elementwise region, as mc-fuse would have made it; any
/// other op a step of its own. Each value but the last gets a buffer.
void expandRegion(Plan& plan, size_t i) {
  PlanStep region = std::move(plan.steps[i]);
  plan.steps.erase(plan.steps.begin() + i);
  const size_t n = region.inputs.size(), count = region.body.size();
  std::vector<uint32_t> buffer(region.inputs);
  buffer.resize(n + count, UINT32_MAX);
  std::vector<PlanStep> steps;
  const std::string base = plan.buffers[region.outputs[0]].name;
  // The last body op reading each value (values read by nothing: none).
  std::vector<size_t> lastUse(n + count, 0);
  std::vector<bool> used(n + count, false);
  for (size_t k = 0; k < count; ++k)
    for (uint32_t v : region.body[k].operands) {
      lastUse[v] = k;
      used[v] = true;
    }
  auto elementwise = [&](const PlanRegionOp& op) {
    return rt::opInfo(op.op).fusible && op.op != rt::OpId::Reshape;
  };
  auto resultBuffer = [&](size_t k) {
    const PlanRegionOp& op = region.body[k];
    uint32_t b = k + 1 == count ? region.outputs[0]
                                : addBuffer(plan, base + ".v" + std::to_string(k),
                                            op.dtype, op.shape, op.batchScale);
    buffer[n + k] = b;
    return b;
  };
  for (size_t k = 0; k < count;) {
    // The run of elementwise ops from k: each value but the run's last
    // read only inside the run.
    size_t end = k;
    while (end < count && elementwise(region.body[end]) &&
           region.body[end].shape == region.body[k].shape &&
           region.body[end].batchScale == region.body[k].batchScale)
      ++end;
    while (end > k + 1) {
      bool contained = true;
      for (size_t j = k; j + 1 < end; ++j)
        contained &= used[n + j] && lastUse[n + j] < end;
      if (contained)
        break;
      --end;
    }
    // One elementwise op that reads a rank-0 input (a splat constant):
    // a region of one op, which reads it as its splat.
    bool readsSplat = false;
    if (end == k + 1 && region.body[k].op != rt::OpId::BroadcastInDim)
      for (uint32_t v : region.body[k].operands)
        readsSplat |= v < n && plan.buffers[buffer[v]].shape.empty() &&
                      !region.body[k].shape.empty();
    if (end > k + 1 || readsSplat) {
      // The run's inputs: the values from outside it, in order of first
      // use; its body values follow them.
      PlanStep fused;
      fused.op = rt::OpId::Fused;
      std::vector<uint32_t> local(n + count, UINT32_MAX);
      for (size_t j = k; j < end; ++j)
        for (uint32_t v : region.body[j].operands)
          if (v < n + k && local[v] == UINT32_MAX) {
            local[v] = uint32_t(fused.inputs.size());
            fused.inputs.push_back(buffer[v]);
          }
      for (size_t j = k; j < end; ++j)
        local[n + j] = uint32_t(fused.inputs.size() + (j - k));
      for (size_t j = k; j < end; ++j) {
        fused.body.push_back(region.body[j]);
        for (uint32_t& v : fused.body.back().operands)
          v = local[v];
      }
      fused.location = region.body[end - 1].location;
      fused.outputs = {resultBuffer(end - 1)};
      steps.push_back(std::move(fused));
      k = end;
      continue;
    }
    std::vector<uint32_t> inputs;
    for (uint32_t v : region.body[k].operands)
      inputs.push_back(buffer[v]);
    uint32_t out = resultBuffer(k);
    PlanStep step = stepOf(std::move(region.body[k]), std::move(inputs));
    step.outputs = {out};
    steps.push_back(std::move(step));
    ++k;
  }
  plan.steps.insert(plan.steps.begin() + i,
                    std::make_move_iterator(steps.begin()),
                    std::make_move_iterator(steps.end()));
}

/// The body op of attention step STEP whose operand 1 is k: the scores'
/// matmul (the first matmul), or null.
PlanRegionOp* scoresMatmul(PlanStep& step) {
  for (PlanRegionOp& op : step.body)
    if (op.op == rt::OpId::Matmul)
      return &op;
  return nullptr;
}

/// cuDNN reads k with its head dim contiguous (matmul transpose_b). A
/// region that reads k as [.., d, s] gets it as [.., s, d] instead: the
/// transpose step that made it (used by nothing else) permutes the other
/// way, or a new transpose step makes it. Returns false, changing
/// nothing, when the region would not fit cuDNN even so.
bool readKWithItsHeadDimContiguous(Plan& plan, size_t* at) {
  size_t i = *at;
  PlanStep trial = plan.steps[i];
  PlanRegionOp* mm = scoresMatmul(trial);
  if (!mm || mm->attrs.getBool("transpose_b") || mm->operands.size() != 2 ||
      mm->operands[1] >= trial.inputs.size())
    return false;
  uint32_t kIn = mm->operands[1], kBuf = trial.inputs[kIn];
  // k read by nothing else in the region (its shape is about to change).
  int reads = 0;
  for (const PlanRegionOp& op : trial.body)
    for (uint32_t v : op.operands)
      reads += v == kIn;
  if (reads != 1)
    return false;
  std::vector<int64_t> kShape = plan.buffers[kBuf].shape;
  size_t rank = kShape.size();
  if (rank < 2 || !plan.buffers[kBuf].batchScale.empty())
    return false;
  std::vector<int64_t> swapped = kShape;
  std::swap(swapped[rank - 1], swapped[rank - 2]);
  // Try the region on a k of the swapped shape, read with transpose_b.
  mm->attrs.set(rt::OpAttr::boolean("transpose_b", true));
  PlanBuffer probe = plan.buffers[kBuf];
  probe.shape = swapped;
  plan.buffers.push_back(probe);
  trial.inputs[kIn] = uint32_t(plan.buffers.size() - 1);
  bool fits = attentionMisfit(plan, trial).empty();
  plan.buffers.pop_back();
  if (!fits)
    return false;
  // The producer: a transpose step, possibly through casts (mc-amp's),
  // each result read only by the next and no output of the graph.
  auto onlyReadOnce = [&](uint32_t buf, int64_t* producer) {
    int64_t readers = 0;
    *producer = -1;
    for (size_t j = 0; j < plan.steps.size(); ++j) {
      for (uint32_t o : plan.steps[j].outputs)
        if (o == buf)
          *producer = int64_t(j);
      for (uint32_t in : plan.steps[j].inputs)
        readers += in == buf;
    }
    bool hidden = plan.buffers[buf].kind == fb::BufferKind::Arena &&
                  plan.buffers[buf].aliasOf < 0;
    for (const PlanSignature& o : plan.outputs)
      hidden &= o.buffer != buf;
    for (const PlanBuffer& b : plan.buffers)
      hidden &= b.aliasOf != int64_t(buf);
    return hidden && readers == 1 && *producer >= 0;
  };
  std::vector<uint32_t> chain; // buffers from k back to the transpose's
  int64_t producer = -1;
  uint32_t buf = kBuf;
  bool found = false;
  while (onlyReadOnce(buf, &producer)) {
    chain.push_back(buf);
    const PlanStep& p = plan.steps[size_t(producer)];
    if (p.op == rt::OpId::Transpose) {
      found = true;
      break;
    }
    if (p.op != rt::OpId::Cast)
      break;
    buf = p.inputs[0];
  }
  PlanStep& region = plan.steps[i];
  if (found) {
    PlanStep& t = plan.steps[size_t(producer)];
    std::vector<int64_t> perm = t.attrs.getInts("permutation");
    std::swap(perm[rank - 1], perm[rank - 2]);
    t.attrs.set(rt::OpAttr::list("permutation", perm));
    for (uint32_t b : chain)
      std::swap(plan.buffers[b].shape[rank - 1],
                plan.buffers[b].shape[rank - 2]);
    // A transpose that only swapped the last two dims (q k.transpose(-2,
    // -1)) is now the identity: a view of its input, no copy.
    bool identity = true;
    for (size_t d = 0; d < perm.size(); ++d)
      identity &= perm[d] == int64_t(d);
    uint32_t from = t.inputs[0], to = t.outputs[0];
    int64_t root = plan.buffers[from].aliasOf >= 0 ? plan.buffers[from].aliasOf
                                                   : int64_t(from);
    if (identity && plan.buffers[size_t(root)].kind == fb::BufferKind::Arena &&
        plan.buffers[from].dtype == plan.buffers[to].dtype) {
      plan.buffers[to].aliasOf = root;
      plan.steps.erase(plan.steps.begin() + producer);
      if (size_t(producer) < i)
        --i;
    }
  } else {
    uint32_t kt = addBuffer(plan, plan.buffers[kBuf].name + ".t",
                            plan.buffers[kBuf].dtype, swapped, {});
    PlanStep t;
    t.op = rt::OpId::Transpose;
    std::vector<int64_t> perm(rank);
    for (size_t d = 0; d < rank; ++d)
      perm[d] = int64_t(d);
    std::swap(perm[rank - 1], perm[rank - 2]);
    t.attrs = {rt::OpAttr::list("permutation", perm)};
    t.location = region.location;
    t.inputs = {kBuf};
    t.outputs = {kt};
    region.inputs[kIn] = t.outputs[0];
    plan.steps.insert(plan.steps.begin() + i, std::move(t));
    ++i;
  }
  *at = i;
  PlanStep& kept = plan.steps[i];
  scoresMatmul(kept)->attrs.set(rt::OpAttr::boolean("transpose_b", true));
  return true;
}

/// Attention regions: kept where the device runs them as cuDNN's fused
/// attention (k made head-dim contiguous first when needed), expanded
/// into their ops (cuBLASLt matmuls, generated kernels) elsewhere.
void placeAttentionRegions(Plan& plan, bool verbose) {
  auto say = [&](const PlanStep& step, const std::string& how) {
    if (verbose)
      llvm::errs() << "modelc: cuda: the attention region at "
                   << (step.location.empty() ? "?" : step.location) << " "
                   << how << "\n";
  };
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& step = plan.steps[i];
    if (step.op != rt::OpId::Fused || !step.attrs.getBool("attention"))
      continue;
    std::string why = attentionMisfit(plan, step);
    if (why.empty()) {
      say(step, "runs as cuDNN's fused attention");
      continue;
    }
    if (readKWithItsHeadDimContiguous(plan, &i)) {
      // i: the region, past a transpose inserted before it.
      say(plan.steps[i], "runs as cuDNN's fused attention (k read with its "
                         "head dim contiguous)");
      continue;
    }
    say(step, "runs as its ops: " + why);
    expandRegion(plan, i); // step i is now the region's first op
  }
}

/// A region led by a matmul or conv2d anchor that the device does not run
/// as one library call becomes two steps: the anchor (a library call) into
/// a new buffer, then the rest of the region, which reads it as one more
/// input. Value numbers stay as they were: the new input takes the number
/// the anchor's result had. A rest of one op becomes a step of that op.
void splitAnchorRegions(Plan& plan) {
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    PlanStep& step = plan.steps[i];
    if (step.op != rt::OpId::Fused || step.body.empty() ||
        step.attrs.getBool("attention") ||
        (step.body[0].op != rt::OpId::Matmul &&
         step.body[0].op != rt::OpId::Conv2d) ||
        isLibraryRegion(plan, step))
      continue;
    PlanRegionOp anchorOp = std::move(step.body[0]);
    step.body.erase(step.body.begin());
    uint32_t a = addBuffer(plan, plan.buffers[step.outputs[0]].name + ".anchor",
                           anchorOp.dtype, anchorOp.shape, anchorOp.batchScale);
    std::vector<uint32_t> anchorInputs;
    for (uint32_t v : anchorOp.operands)
      anchorInputs.push_back(step.inputs[v]);
    PlanStep anchor = stepOf(std::move(anchorOp), std::move(anchorInputs));
    anchor.outputs = {a};
    uint32_t n = uint32_t(step.inputs.size());
    if (!step.body.empty() && step.body[0].op == rt::OpId::Reshape &&
        step.body[0].operands.size() == 1 && step.body[0].operands[0] == n) {
      // The anchor's reshape becomes a view of its buffer (as the CPU
      // lowering makes every reshape), and leaves the region.
      uint32_t view = addBuffer(plan, plan.buffers[a].name + ".view",
                                step.body[0].dtype, step.body[0].shape,
                                step.body[0].batchScale);
      plan.buffers[view].aliasOf = a;
      a = view;
      step.body.erase(step.body.begin());
      for (PlanRegionOp& op : step.body)
        for (uint32_t& v : op.operands)
          if (v > n)
            --v; // the reshape's result (n + 1) is the new input n
    }
    step.inputs.push_back(a);
    if (step.body.size() == 1) {
      // One op left (a loss's mean of a matmul): a step of its own op, as
      // the CPU lowering would make it; a region of one reduction is not
      // one the kernels take.
      std::vector<uint32_t> inputs;
      for (uint32_t v : step.body[0].operands)
        inputs.push_back(step.inputs[v]);
      std::vector<uint32_t> outputs = std::move(step.outputs);
      step = stepOf(std::move(step.body[0]), std::move(inputs));
      step.outputs = std::move(outputs);
    }
    plan.steps.insert(plan.steps.begin() + i, std::move(anchor));
    ++i;
  }
}

LogicalResult generate(ModuleOp module, Plan& plan, const CudaOptions& opts) {
  MLIRContext& context = *module.getContext();
  appendKernelRegistry(context);
  OpBuilder b(&context);
  OwningOpRef<ModuleOp> kernels = ModuleOp::create(module.getLoc());
  (*kernels)->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                      b.getUnitAttr());
  b.setInsertionPointToEnd(kernels->getBody());
  auto gm = gpu::GPUModuleOp::create(b, module.getLoc(), "modelc_kernels");
  placeAttentionRegions(plan, opts.verbose);
  splitAnchorRegions(plan);
  KernelFlavor flavor;
  std::vector<std::string> entries;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    PlanStep& step = plan.steps[i];
    std::string why;
    KernelKind kind = classifyStep(plan, step, flavor, &why);
    if (kind == KernelKind::None) {
      if (!why.empty())
        return module.emitError()
               << "the cuda target cannot run step " << i << " (mc."
               << rt::opName(step.op)
               << (step.location.empty() ? "" : " at " + step.location)
               << "): " << why;
      continue;
    }
    std::string name = "k" + std::to_string(i) + "_" + rt::opName(step.op);
    FailureOr<rt::LaunchInfo> launch =
        emitKernel(gm, plan, step, name, flavor);
    if (failed(launch))
      return failure();
    step.launch = *launch;
    step.entry = name;
    entries.push_back(name);
  }
  if (entries.empty())
    return success(); // only library steps: nothing to generate
  if (opts.emitKernels)
    *opts.emitKernels = kernels->clone();
  // 32-bit index arithmetic (a 64-bit division is a long instruction
  // sequence on NVIDIA GPUs) when every tensor has fewer than 2^31
  // elements.
  // Every tensor a kernel indexes: the buffers, and the values inside
  // fused regions, which are no buffer (a pairwise distance's [8192, 8192,
  // 128] difference before its reduction has 2^33 elements while every
  // buffer has under 2^31: its flat index wrapped in 32 bits).
  uint64_t largest = 0;
  auto count = [&](const std::vector<int64_t>& shape) {
    largest = std::max(largest, uint64_t(rt::numElements(shape)));
  };
  for (const PlanBuffer& buf : plan.buffers)
    count(buf.shape);
  for (const PlanStep& step : plan.steps)
    for (const PlanRegionOp& op : step.body)
      count(op.shape);
  // With headroom: a grid-stride loop adds the grid's thread count (about
  // 1M at most: the runtime caps the grid at 4 waves) to an index that may
  // be just under the count, and a signed 32-bit sum past 2^31 would wrap
  // negative and pass `i < n`.
  unsigned indexBits =
      largest < (uint64_t(1) << 31) - (uint64_t(1) << 24) ? 32 : 64;
  if (opts.verbose)
    llvm::errs() << "modelc: cuda: kernels index in " << indexBits
                 << " bits (the largest tensor, buffer or region value, has "
                 << largest << " elements)\n";
  FailureOr<std::string> ptx = lowerToPtx(*kernels, indexBits);
  if (failed(ptx))
    return failure();
  if (opts.ptx)
    *opts.ptx = *ptx;
  int32_t first = int32_t(plan.executables.size());
  for (const std::string& arch : opts.architectures) {
    PlanExecutable exe;
    exe.target = "cuda";
    exe.format = "cuda-cubin-" + arch;
    exe.entryPoints = entries;
    if (failed(assemble(module.getLoc(), *ptx, arch, &exe.data)))
      return failure();
    plan.executables.push_back(std::move(exe));
  }
  PlanExecutable ptxExe;
  ptxExe.target = "cuda";
  ptxExe.format = "cuda-ptx";
  ptxExe.entryPoints = entries;
  ptxExe.data.assign(ptx->begin(), ptx->end());
  plan.executables.push_back(std::move(ptxExe));
  // Steps name the first executable; a device picks the one for its GPU
  // among those of the target (all hold the same entry points).
  for (PlanStep& step : plan.steps)
    if (!step.entry.empty())
      step.executable = first;
  return success();
}

std::unique_ptr<Target> createCudaTarget() {
  return std::make_unique<CudaTarget>();
}

} // namespace mc::codegen::cuda
