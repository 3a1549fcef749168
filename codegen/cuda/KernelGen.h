// Kernel generation for the CUDA target: one `gpu.func` per step of the
// plan that the target does not hand to a library (docs/cuda.md). A kernel
// is written once in MLIR's gpu, scf, arith, math and memref dialects and
// lowered two ways: through NVVM to PTX and cubins for the artifact, and
// (in the tests only) through SPIR-V to Vulkan on lavapipe, so its logic
// runs in CI without a GPU.
//
// The kernel ABI (Step.launch in runtime/schema/mcpk.fbs): one pointer per
// step input in order, then one to the output, then the session's batch (0
// for a static model). Every kernel loops over its units (elements or rows)
// with a grid stride, so any grid is correct.
#ifndef MODELC_CODEGEN_CUDA_KERNELGEN_H
#define MODELC_CODEGEN_CUDA_KERNELGEN_H

#include "codegen/Plan.h"
#include "modelc/device.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace mc::codegen::cuda {

/// Which lowering the kernel is for; the body is the same.
struct KernelFlavor {
  /// SPIR-V (the lavapipe check): the subgroup size is read at run time (8
  /// on lavapipe), the entry point carries its workgroup size, and bf16 is
  /// stored as its i16 bits, widened and rounded (nearest even) by integer
  /// ops, since SPIR-V has no bf16 type. NVVM: subgroups of 32, bf16.
  bool spirv = false;
  /// Threads per block of row kernels and of elementwise kernels (SPIR-V:
  /// the workgroup size fixed in the entry point).
  unsigned block = 256;
};

/// What kind of kernel a step gets.
enum class KernelKind {
  None,        // a library call or a view: no generated kernel
  Elementwise, // one unit per output element (regions, broadcasts, casts)
  Index,       // one unit per output element, reading one input element
               // (transpose, slice, pad, concat)
  Rows,        // one block per row of the trailing dims (softmax,
               // log_softmax, layer_norm, trailing reductions)
  Reduce,      // one unit per output element looping over the reduced dims
  Pool,        // one unit per output element looping over its window
  Scatter,     // scatter_add: one unit per (column, run of rows), looping
               // over every index (the sums in index order)
};

/// How the CUDA target runs `step`: the kind of generated kernel, or None
/// for steps the device runs with a library (matmul, conv2d); on failure,
/// the reason the target cannot run the step ("" otherwise).
KernelKind classifyStep(const Plan& plan, const PlanStep& step,
                        const KernelFlavor& flavor, std::string* whyNot);

/// Appends kernel `name` computing `step` to `module` and returns its
/// launch. classifyStep must have returned a kernel kind.
mlir::FailureOr<rt::LaunchInfo> emitKernel(mlir::gpu::GPUModuleOp module,
                                           const Plan& plan,
                                           const PlanStep& step,
                                           llvm::StringRef name,
                                           const KernelFlavor& flavor);

/// The dialects kernels use (load them into the context first).
void loadKernelDialects(mlir::MLIRContext& context);

} // namespace mc::codegen::cuda

#endif // MODELC_CODEGEN_CUDA_KERNELGEN_H
