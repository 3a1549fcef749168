// The CUDA target (see CudaTarget.cpp and docs/cuda.md).
#ifndef MODELC_CODEGEN_CUDA_CUDATARGET_H
#define MODELC_CODEGEN_CUDA_CUDATARGET_H

#include "codegen/Target.h"

#include <optional>
#include <string>
#include <vector>

namespace mc::codegen::cuda {

struct CudaOptions {
  /// ptxas makes one cubin per architecture (`--target cuda:sm_80,sm_90`).
  std::vector<std::string> architectures = {"sm_80", "sm_90"};
  /// When set, receive the generated PTX (`modelc compile --emit=ptx`) and
  /// a copy of the kernels' gpu-dialect module before lowering.
  std::string* ptx = nullptr;
  mlir::OwningOpRef<mlir::ModuleOp>* emitKernels = nullptr;
  /// `modelc compile -v`: say, on stderr, how each attention region runs
  /// (cuDNN's fused attention, or its ops and why).
  bool verbose = false;
};

/// The options the registered target uses (the compile driver sets them).
CudaOptions& options();
/// Parses "sm_80,sm_90" into options().architectures.
mlir::LogicalResult setArchitectures(llvm::StringRef list, std::string* error);

/// Generates the kernels of `plan`'s steps, lowers them to PTX, assembles a
/// cubin per architecture and adds the executables; points each step at
/// its entry point and launch.
mlir::LogicalResult generate(mlir::ModuleOp module, Plan& plan,
                             const CudaOptions& options);
/// Lowers a module holding one gpu.module of kernels to PTX (sm_80, PTX
/// 8.0), in place, with index arithmetic of `indexBits` (32 or 64).
mlir::FailureOr<std::string> lowerToPtx(mlir::ModuleOp kernels,
                                        unsigned indexBits = 64);

std::unique_ptr<Target> createCudaTarget();

} // namespace mc::codegen::cuda

#endif // MODELC_CODEGEN_CUDA_CUDATARGET_H
