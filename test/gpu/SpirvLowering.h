// Test harness: lowers a gpu-dialect kernel module to SPIR-V words that
// VulkanRunner dispatches on lavapipe (docs/cuda.md, "Checking kernels on
// lavapipe"). Not part of the compiler: the CUDA target lowers the same
// kernels through NVVM.
#ifndef MODELC_TEST_GPU_SPIRVLOWERING_H
#define MODELC_TEST_GPU_SPIRVLOWERING_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mc::gputest {

/// The dialects a kernel module may use (gpu, arith, math, scf, memref, spirv
/// for its attributes): register them in the context that parses the kernel.
void registerSpirvLoweringDialects(mlir::DialectRegistry &registry);

/// Lowers `module` (with `gpu.container_module` and exactly one `gpu.module`)
/// to a SPIR-V binary for Vulkan; the caller's module is not modified (a
/// clone is lowered). Each `gpu.func ... kernel` needs
/// `spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [N, 1, 1]>`
/// and becomes a GLCompute entry point of the same name.
///
/// Binding, what the runner must do: kernel argument i is a storage buffer at
/// descriptor set 0, binding i, memrefs and scalars alike. A memref<NxT>
/// buffer holds the N elements packed. A scalar argument (i64, i32, f32;
/// index is i32) becomes a storage buffer holding a one-member struct: a
/// buffer of exactly sizeof(T) bytes holding the value (i64 works: lavapipe
/// has shaderInt64). Shared memory (`memref.alloc()` in memory space 3 or
/// #gpu.address_space<workgroup> inside the kernel) becomes a Workgroup
/// variable and takes no binding.
///
/// Order: a `spirv.target_env` for lavapipe is attached unless the module
/// has one (SPIR-V 1.3 for Vulkan 1.1: Shader, Int8/16/64, Float16, 8- and
/// 16-bit storage, GroupNonUniform{,Arithmetic,Ballot,Shuffle}, subgroup
/// size 8); types without a SPIR-V form (bf16, f64, f8: MLIR would
/// reinterpret their bits silently) and gpu.shuffle widths other than the
/// constant 8 are refused; math ops are expanded in the gpu.module (erf,
/// erfc, cbrt, tanh by MLIR's polynomial approximations, f16 through f32;
/// exp2 by its expansion; trunc as copysign(floor(|x|), x)); memref memory
/// spaces are mapped to storage classes (Vulkan's numbering, plus
/// #gpu.address_space); then convert-math-to-spirv on the gpu.module,
/// convert-gpu-to-spirv (which brings arith, scf, memref, func), and
/// spirv-lower-abi-attrs, spirv-update-vce on the spirv.module, and
/// spirv::serialize.
///
/// On failure returns failure() and sets *error (when non-null) to a summary
/// line and the diagnostics, with file:line:col locations.
mlir::FailureOr<std::vector<uint32_t>>
lowerGpuModuleToSpirv(mlir::ModuleOp module, std::string *error);

} // namespace mc::gputest

#endif // MODELC_TEST_GPU_SPIRVLOWERING_H
