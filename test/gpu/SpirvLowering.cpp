// Test harness: gpu-dialect kernels to SPIR-V words, in process (see
// SpirvLowering.h for the binding contract and the pass order).
#include "test/gpu/SpirvLowering.h"

#include <cmath>
#include <type_traits>

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Conversion/GPUToSPIRV/GPUToSPIRVPass.h"
#include "mlir/Conversion/MathToSPIRV/MathToSPIRVPass.h"
#include "mlir/Conversion/MemRefToSPIRV/MemRefToSPIRV.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVDialect.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVOps.h"
#include "mlir/Dialect/SPIRV/IR/TargetAndABI.h"
#include "mlir/Dialect/SPIRV/Transforms/Passes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/SPIRV/Serialization.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace mc::gputest {
namespace {

// What lavapipe (Mesa 22.3, Vulkan 1.3) offers, as vulkaninfo reports it.
// SPIR-V 1.3 is what Vulkan 1.1 accepts; spirv-update-vce lowers the
// module's requirements to what it uses.
constexpr const char *kLavapipeTargetEnv =
    "#spirv.target_env<#spirv.vce<v1.3, [Shader, Int8, Int16, Int64, "
    "Int64Atomics, Float16, "
    "StorageBuffer8BitAccess, StorageBuffer16BitAccess, GroupNonUniform, "
    "GroupNonUniformArithmetic, GroupNonUniformBallot, "
    "GroupNonUniformShuffle], [SPV_KHR_storage_buffer_storage_class, "
    "SPV_KHR_8bit_storage, SPV_KHR_16bit_storage]>, api=Vulkan, "
    "#spirv.resource_limits<max_compute_shared_memory_size = 32768, "
    "max_compute_workgroup_invocations = 1024, max_compute_workgroup_size = "
    "[1024, 1024, 1024], subgroup_size = 8, min_subgroup_size = 8, "
    "max_subgroup_size = 8>>";

// Math ops expanded by upstream polynomial approximations (f16 through f32):
// erf, erfc and cbrt have no SPIR-V instruction; tanh has GLSL's, but
// lavapipe's loses up to 2.7e-6 relative near 0 (GLSL.std.450 only inherits
// its precision from the exp formula) where the polynomial stays within
// 3e-7. atan2 is left out: its approximation is off by 1.5e-6 absolute.
bool approximatedOnSpirv(StringRef name) {
  return llvm::is_contained(
      {math::ErfOp::getOperationName(), math::ErfcOp::getOperationName(),
       math::CbrtOp::getOperationName(), math::TanhOp::getOperationName()},
      name);
}

// GLSL.std.450 has Trunc but the SPIR-V dialect does not: trunc(x) =
// copysign(floor(|x|), x), keeping -0.0 and the sign of NaN.
struct TruncAsFloorOfAbs : OpRewritePattern<math::TruncOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::TruncOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value abs = math::AbsFOp::create(rewriter, loc, op.getOperand());
    Value floor = math::FloorOp::create(rewriter, loc, abs);
    rewriter.replaceOpWithNewOp<math::CopySignOp>(op, floor, op.getOperand());
    return success();
  }
};

// pow as C's powf, which CUDA's is (libdevice's __nv_powf): GLSL's Pow,
// what math.powf becomes on SPIR-V, is undefined for x < 0 and for x = 0
// with y <= 0, and lavapipe gave 0 for pow(0, 0) and -0 for pow(-2, 0.5),
// so no kernel with mc.pow passed the signed run. |x|^y as
// exp2(y * log2|x|) (relative error about |y log2 x| * 2^-23; |0|^y by
// hand, Log2 being undefined at 0 as well; NaNs by hand), then C's
// cases: a negative base with an odd integer power is negative, with a
// non-integer power NaN (but -inf is not); y = 0 or x = 1 give 1, NaN or
// not; x = -1 with y = +-inf gives 1.
struct PowFAsC : OpRewritePattern<math::PowFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::PowFOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value x = op.getLhs(), y = op.getRhs();
    Type t = x.getType();
    auto c = [&](double v) -> Value {
      return arith::ConstantOp::create(b, loc, b.getFloatAttr(t, v));
    };
    auto cmp = [&](arith::CmpFPredicate p, Value u, Value v) -> Value {
      return arith::CmpFOp::create(b, loc, p, u, v);
    };
    auto both = [&](Value u, Value v) -> Value {
      return arith::AndIOp::create(b, loc, u, v);
    };
    auto pick = [&](Value cond, Value u, Value v) -> Value {
      return arith::SelectOp::create(b, loc, cond, u, v);
    };
    Value ax = math::AbsFOp::create(b, loc, x);
    Value log2 = math::Log2Op::create(b, loc, ax);
    Value mag = math::Exp2Op::create(
        b, loc, arith::MulFOp::create(b, loc, y, log2));
    // GLSL's Log2 is undefined at 0 too: |0|^y is inf below 0, else 0.
    mag = pick(cmp(arith::CmpFPredicate::OEQ, ax, c(0)),
               pick(cmp(arith::CmpFPredicate::OLT, y, c(0)), c(INFINITY),
                    c(0)),
               mag);
    Value whole = cmp(arith::CmpFPredicate::OEQ,
                      math::FloorOp::create(b, loc, y), y);
    Value half = arith::MulFOp::create(b, loc, y, c(0.5));
    Value odd = both(whole, cmp(arith::CmpFPredicate::ONE,
                                math::FloorOp::create(b, loc, half), half));
    Value negative = cmp(arith::CmpFPredicate::OLT,
                         math::CopySignOp::create(b, loc, c(1), x), c(0));
    Value r = pick(both(negative, odd), arith::NegFOp::create(b, loc, mag),
                   mag);
    Value finiteBelowZero =
        both(cmp(arith::CmpFPredicate::OLT, x, c(0)),
             cmp(arith::CmpFPredicate::ONE, ax, c(INFINITY)));
    Value notWhole = arith::XOrIOp::create(
        b, loc, whole,
        arith::ConstantOp::create(b, loc, b.getBoolAttr(true)));
    r = pick(both(finiteBelowZero, notWhole), c(NAN), r);
    // llvmpipe's Log2 and Exp2 need not carry a NaN (pow(NaN, 2.5) gave 0).
    r = pick(cmp(arith::CmpFPredicate::UNO, x, y), c(NAN), r);
    Value one = both(cmp(arith::CmpFPredicate::OEQ, ax, c(1)),
                     cmp(arith::CmpFPredicate::OEQ,
                         math::AbsFOp::create(b, loc, y), c(INFINITY)));
    one = arith::OrIOp::create(b, loc, one,
                               cmp(arith::CmpFPredicate::OEQ, y, c(0)));
    one = arith::OrIOp::create(b, loc, one,
                               cmp(arith::CmpFPredicate::OEQ, x, c(1)));
    rewriter.replaceOp(op, pick(one, c(1), r));
    return success();
  }
};

// asin and acos through atan: lavapipe's GLSL Asin and Acos (GLSL.std.450
// only inherits their precision from atan2's formula) were off by up to
// 3.3e-4 near |x| = 0.9, where its Atan stays within 2e-5 (CUDA's
// libdevice __nv_asinf and __nv_acosf are accurate). asin(x) =
// atan(x / sqrt((1 - x)(1 + x))) and acos(x) = 2 atan(sqrt((1 - x) /
// (1 + x))), which keep +-1 (+-pi/2, 0 and pi) and give NaN outside
// [-1, 1].
template <typename MathOp> struct InverseSineAsAtan : OpRewritePattern<MathOp> {
  using OpRewritePattern<MathOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(MathOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    Value x = op.getOperand();
    Type t = x.getType();
    auto c = [&](double v) -> Value {
      return arith::ConstantOp::create(b, loc, b.getFloatAttr(t, v));
    };
    Value below = arith::SubFOp::create(b, loc, c(1), x);
    Value above = arith::AddFOp::create(b, loc, c(1), x);
    Value r;
    if constexpr (std::is_same_v<MathOp, math::AsinOp>) {
      Value root = math::SqrtOp::create(
          b, loc, arith::MulFOp::create(b, loc, below, above));
      r = math::AtanOp::create(b, loc, arith::DivFOp::create(b, loc, x, root));
    } else {
      Value root = math::SqrtOp::create(
          b, loc, arith::DivFOp::create(b, loc, below, above));
      r = arith::MulFOp::create(b, loc, c(2),
                                math::AtanOp::create(b, loc, root));
    }
    // Outside [-1, 1] and for NaN (GLSL's Sqrt is undefined below 0:
    // lavapipe gave 0), by hand.
    Value outside =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UGT,
                              math::AbsFOp::create(b, loc, x), c(1));
    rewriter.replaceOp(op, arith::SelectOp::create(b, loc, outside, c(NAN), r));
    return success();
  }
};

LogicalResult expandMathOps(gpu::GPUModuleOp gpuModule) {
  RewritePatternSet patterns(gpuModule.getContext());
  populateMathF32ExpansionPatterns(patterns, approximatedOnSpirv);
  populateMathPolynomialApproximationPatterns(patterns, approximatedOnSpirv);
  math::populateExpansionPatterns(patterns, {"exp2"});
  patterns.add<TruncAsFloorOfAbs, PowFAsC, InverseSineAsAtan<math::AsinOp>,
               InverseSineAsAtan<math::AcosOp>>(gpuModule.getContext());
  return applyPatternsGreedily(gpuModule, std::move(patterns));
}

// Vulkan's numbering (map-memref-spirv-storage-class{client-api=vulkan}: 0
// StorageBuffer, 3 Workgroup, ...) plus the #gpu.address_space attributes
// that the NVVM path writes, which that pass rejects.
std::optional<spirv::StorageClass> vulkanStorageClass(Attribute space) {
  if (auto gpuSpace = dyn_cast_if_present<gpu::AddressSpaceAttr>(space)) {
    switch (gpuSpace.getValue()) {
    case gpu::AddressSpace::Global:
      return spirv::StorageClass::StorageBuffer;
    case gpu::AddressSpace::Workgroup:
      return spirv::StorageClass::Workgroup;
    case gpu::AddressSpace::Private:
      return spirv::StorageClass::Function;
    }
  }
  return spirv::mapMemorySpaceToVulkanStorageClass(space);
}

// The kernels' shared memory is a gpu.func workgroup attribution (on NVVM
// a `.shared` array), which MLIR 22's gpu-to-spirv leaves as an
// unrealized cast; a memref.alloc in the workgroup space becomes a
// Workgroup variable. Each attribution becomes such an alloc at the
// kernel's entry (one per workgroup either way).
void attributionsToAllocs(gpu::GPUModuleOp gpuModule) {
  for (auto func : gpuModule.getOps<gpu::GPUFuncOp>()) {
    unsigned n = func.getNumWorkgroupAttributions();
    if (n == 0)
      continue;
    Block &entry = func.getBody().front();
    OpBuilder b = OpBuilder::atBlockBegin(&entry);
    unsigned first = func.getFirstWorkgroupAttributionIndex();
    for (unsigned i = 0; i < n; ++i) {
      BlockArgument arg = entry.getArgument(first + i);
      Value alloc = memref::AllocOp::create(
          b, arg.getLoc(), cast<MemRefType>(arg.getType()));
      arg.replaceAllUsesWith(alloc);
    }
    entry.eraseArguments(first, n);
    func->setAttr(gpu::GPUFuncOp::getNumWorkgroupAttributionsAttrName(),
                  b.getI64IntegerAttr(0));
  }
}

// MLIR 22's scf-to-spirv lowers a loop's results through a variable that
// only the loop body stores (llvm/llvm-project#211981, fixed upstream by
// #206280): a loop that runs zero times reads a variable never written,
// 0 on lavapipe, instead of its initial values. A row kernel's thread with
// no element of a short row did so, and a min or max row came back 0.
// Each loop with results is guarded: `lb < ub ? loop : inits`, so a loop
// that runs has run its body once.
void guardZeroTripLoops(gpu::GPUModuleOp gpuModule) {
  SmallVector<scf::ForOp> loops;
  gpuModule.walk([&](scf::ForOp loop) {
    if (loop.getNumResults() > 0)
      loops.push_back(loop);
  });
  for (scf::ForOp loop : loops) {
    OpBuilder b(loop);
    Location loc = loop.getLoc();
    Value runs = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                       loop.getLowerBound(),
                                       loop.getUpperBound());
    auto guard = scf::IfOp::create(b, loc, loop.getResultTypes(), runs,
                                   /*addThenBlock=*/true,
                                   /*addElseBlock=*/true);
    loop->replaceAllUsesWith(guard.getResults());
    Block *thenBlock = guard.thenBlock();
    loop->moveBefore(thenBlock, thenBlock->end());
    b.setInsertionPointToEnd(thenBlock);
    scf::YieldOp::create(b, loc, loop.getResults());
    b.setInsertionPointToEnd(guard.elseBlock());
    scf::YieldOp::create(b, loc, loop.getInitArgs());
  }
}

LogicalResult mapMemorySpaces(gpu::GPUModuleOp gpuModule) {
  spirv::MemorySpaceToStorageClassConverter converter(vulkanStorageClass);
  spirv::convertMemRefTypesAndAttrs(gpuModule, converter);
  std::unique_ptr<ConversionTarget> target =
      spirv::getMemorySpaceToStorageClassTarget(*gpuModule.getContext());
  WalkResult walk = gpuModule.walk([&](Operation *op) {
    if (!target->isIllegal(op))
      return WalkResult::advance();
    op->emitOpError("has a memref memory space with no Vulkan storage class");
    return WalkResult::interrupt();
  });
  return failure(walk.wasInterrupted());
}

// The SPIR-V type converter "emulates" float types the target lacks by
// reinterpreting their bits: a memref<64xbf16> became 32 f32 loaded as if
// they were the values, with no error. Only the types lavapipe has get
// through.
bool hasSpirvType(Type type) {
  if (auto floatType = dyn_cast<FloatType>(type))
    return floatType.isF16() || floatType.isF32();
  if (auto intType = dyn_cast<IntegerType>(type))
    return llvm::is_contained({1u, 8u, 16u, 32u, 64u}, intType.getWidth());
  return true;
}

// What the conversion would get wrong silently (types) or refuse with only
// "failed to legalize" (shuffle widths), said plainly.
LogicalResult checkKernelOps(gpu::GPUModuleOp gpuModule,
                             spirv::TargetEnvAttr env) {
  int64_t subgroupSize = env.getResourceLimits().getSubgroupSize();
  WalkResult walk = gpuModule.walk([&](Operation *op) {
    SmallVector<Type> types(op->getResultTypes());
    llvm::append_range(types, op->getOperandTypes());
    for (Region &region : op->getRegions())
      for (Block &block : region)
        llvm::append_range(types, block.getArgumentTypes());
    for (Type type : types) {
      Type bad;
      type.walk([&](Type inner) {
        if (!bad && !hasSpirvType(inner))
          bad = inner;
      });
      if (bad) {
        op->emitOpError("uses ")
            << bad << ", which has no SPIR-V type on lavapipe (only f16, f32 "
            << "and i1/i8/i16/i32/i64); for bf16 test with f16 or f32 "
            << "storage, or carry it as i16 bits";
        return WalkResult::interrupt();
      }
    }
    auto shuffle = dyn_cast<gpu::ShuffleOp>(op);
    APInt width;
    if (shuffle && !(matchPattern(shuffle.getWidth(), m_ConstantInt(&width)) &&
                     width == subgroupSize)) {
      shuffle.emitOpError("width must be the constant ")
          << subgroupSize << ", the target's subgroup size, to lower to "
          << "SPIR-V (use gpu.subgroup_reduce to stay size-agnostic)";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

// Checks the input contract so that a wrong module gets a sentence, not a
// pass failure deep in the conversion (or a silent miscompile).
LogicalResult checkInput(ModuleOp module, gpu::GPUModuleOp &gpuModule) {
  if (!module->hasAttr(gpu::GPUDialect::getContainerModuleAttrName()))
    return module.emitError("expected a module with the 'gpu.container_module' "
                            "attribute");
  auto gpuModules = llvm::to_vector(module.getOps<gpu::GPUModuleOp>());
  if (gpuModules.size() != 1)
    return module.emitError("expected exactly one gpu.module, found ")
           << gpuModules.size();
  gpuModule = gpuModules.front();
  int kernels = 0;
  for (auto func : gpuModule.getOps<gpu::GPUFuncOp>()) {
    if (!func.isKernel())
      continue;
    ++kernels;
    if (!func->hasAttr(spirv::getEntryPointABIAttrName()))
      return func.emitOpError("kernel needs a 'spirv.entry_point_abi' "
                              "attribute (#spirv.entry_point_abi<"
                              "workgroup_size = [N, 1, 1]>)");
  }
  if (kernels == 0)
    return gpuModule.emitError("expected at least one gpu.func kernel");
  return success();
}

std::string formatDiagnostic(Diagnostic &diag) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto printOne = [&](Diagnostic &d, StringRef severity) {
    if (auto at = dyn_cast<FileLineColLoc>(d.getLocation()))
      os << at.getFilename() << ":" << at.getLine() << ":" << at.getColumn();
    else
      os << d.getLocation();
    os << ": " << severity << ": " << d << "\n";
  };
  switch (diag.getSeverity()) {
  case DiagnosticSeverity::Error:
    printOne(diag, "error");
    break;
  case DiagnosticSeverity::Warning:
    printOne(diag, "warning");
    break;
  default:
    printOne(diag, "note");
    break;
  }
  for (Diagnostic &note : diag.getNotes())
    printOne(note, "note");
  return text;
}

} // namespace

void registerSpirvLoweringDialects(DialectRegistry &registry) {
  registry
      .insert<arith::ArithDialect, gpu::GPUDialect, math::MathDialect,
              memref::MemRefDialect, scf::SCFDialect, spirv::SPIRVDialect>();
}

FailureOr<std::vector<uint32_t>> lowerGpuModuleToSpirv(ModuleOp module,
                                                       std::string *error) {
  MLIRContext *context = module.getContext();
  std::string diagnostics;
  ScopedDiagnosticHandler handler(context, [&](Diagnostic &diag) {
    diagnostics += formatDiagnostic(diag);
    return success();
  });
  auto fail = [&](StringRef what) -> FailureOr<std::vector<uint32_t>> {
    if (error)
      *error = (what + ":\n" + diagnostics).str();
    return failure();
  };

  context->getOrLoadDialect<spirv::SPIRVDialect>();
  OwningOpRef<ModuleOp> copy(module.clone());
  gpu::GPUModuleOp gpuModule;
  if (failed(verify(*copy)) || failed(checkInput(*copy, gpuModule)))
    return fail("lowerGpuModuleToSpirv: the input was refused");
  spirv::TargetEnvAttr env = spirv::lookupTargetEnv(gpuModule);
  if (!env) {
    env = dyn_cast_if_present<spirv::TargetEnvAttr>(
        parseAttribute(kLavapipeTargetEnv, context));
    assert(env && "the lavapipe target env must parse");
    (*copy)->setAttr(spirv::getTargetEnvAttrName(), env);
  }
  if (failed(checkKernelOps(gpuModule, env)))
    return fail("lowerGpuModuleToSpirv: the input was refused");

  attributionsToAllocs(gpuModule);
  if (failed(expandMathOps(gpuModule)) || failed(mapMemorySpaces(gpuModule)))
    return fail("lowerGpuModuleToSpirv: preparing the gpu.module failed");
  guardZeroTripLoops(gpuModule);

  PassManager pm(context);
  pm.nest<gpu::GPUModuleOp>().addPass(createConvertMathToSPIRVPass());
  pm.addPass(createConvertGPUToSPIRVPass(/*mapMemorySpace=*/false));
  OpPassManager &spirvModulePm = pm.nest<spirv::ModuleOp>();
  spirvModulePm.addPass(spirv::createSPIRVLowerABIAttributesPass());
  spirvModulePm.addPass(spirv::createSPIRVUpdateVCEPass());
  if (failed(pm.run(*copy)))
    return fail("lowerGpuModuleToSpirv: the SPIR-V conversion failed");

  auto spirvModules = llvm::to_vector(copy->getOps<spirv::ModuleOp>());
  if (spirvModules.size() != 1)
    return fail("lowerGpuModuleToSpirv: expected one spirv.module after "
                "convert-gpu-to-spirv, found " +
                std::to_string(spirvModules.size()));
  // spirv-update-vce does not know that 64-bit atomics (the kernels' error
  // records, modelc/error_record.h) need Int64Atomics: add it.
  spirv::ModuleOp spirvModule = spirvModules.front();
  bool atomics64 = false;
  spirvModule.walk([&](Operation *op) {
    if (op->getName().getStringRef().starts_with("spirv.Atomic") &&
        op->getNumResults() == 1 && op->getResult(0).getType().isInteger(64))
      atomics64 = true;
  });
  if (auto vce = spirvModule.getVceTriple(); atomics64 && vce) {
    SmallVector<spirv::Capability> caps(vce->getCapabilities());
    if (!llvm::is_contained(caps, spirv::Capability::Int64Atomics))
      caps.push_back(spirv::Capability::Int64Atomics);
    SmallVector<spirv::Extension> exts(vce->getExtensions());
    spirvModule.setVceTripleAttr(spirv::VerCapExtAttr::get(
        vce->getVersion(), caps, exts, spirvModule.getContext()));
  }
  SmallVector<uint32_t, 0> words;
  if (failed(spirv::serialize(spirvModules.front(), words)))
    return fail("lowerGpuModuleToSpirv: spirv::serialize failed");
  return std::vector<uint32_t>(words.begin(), words.end());
}

} // namespace mc::gputest
