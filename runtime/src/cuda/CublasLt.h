// cuBLASLt, loaded at run time (dlopen "libcublasLt.so.13"), and the
// matmul the CUDA device's Matmul and Fused kernels bind through it:
// row-major tensors, column-major library, so C^T = B^T A^T. Internal to
// the runtime.
#ifndef MODELC_RUNTIME_CUDA_CUBLASLT_H
#define MODELC_RUNTIME_CUDA_CUBLASLT_H

#include "modelc/device.h"

#include <cublasLt.h>

namespace mc::rt::cuda {

class CudaDevice;

#define MC_CUBLASLT_FUNCTIONS(X)                                               \
  X(create, cublasLtCreate)                                                    \
  X(destroy, cublasLtDestroy)                                                  \
  X(getVersion, cublasLtGetVersion)                                            \
  X(getStatusName, cublasLtGetStatusName)                                      \
  X(getStatusString, cublasLtGetStatusString)                                  \
  X(matmul, cublasLtMatmul)                                                    \
  X(matmulDescCreate, cublasLtMatmulDescCreate)                                \
  X(matmulDescDestroy, cublasLtMatmulDescDestroy)                              \
  X(matmulDescSetAttribute, cublasLtMatmulDescSetAttribute)                    \
  X(matrixLayoutCreate, cublasLtMatrixLayoutCreate)                            \
  X(matrixLayoutDestroy, cublasLtMatrixLayoutDestroy)                          \
  X(matrixLayoutSetAttribute, cublasLtMatrixLayoutSetAttribute)                \
  X(preferenceCreate, cublasLtMatmulPreferenceCreate)                          \
  X(preferenceDestroy, cublasLtMatmulPreferenceDestroy)                        \
  X(preferenceSetAttribute, cublasLtMatmulPreferenceSetAttribute)              \
  X(algoGetHeuristic, cublasLtMatmulAlgoGetHeuristic)

struct CublasLt {
#define MC_CUBLASLT_MEMBER(member, fn) decltype(&::fn) member = nullptr;
  MC_CUBLASLT_FUNCTIONS(MC_CUBLASLT_MEMBER)
#undef MC_CUBLASLT_MEMBER
  size_t version = 0; // cublasLtGetVersion: 130000 and up for CUDA 13
};

/// The process's cuBLASLt (libcublasLt.so.13, else libcublasLt.so, found
/// as CudaDriver.h's openLibrary finds libraries), loaded on first call.
/// Needs no driver; creating a handle does.
Status loadCublasLt(const CublasLt** out);

/// cublasLtCreate, its failure said ("cublasLtCreate failed:
/// CUBLAS_STATUS_NOT_INITIALIZED (...)" without a driver).
Status createCublasLtHandle(const CublasLt& lt, cublasLtHandle_t* out);

/// "CUBLAS_STATUS_NOT_SUPPORTED (the functionality requested is not
/// supported)".
std::string statusText(const CublasLt& lt, cublasStatus_t s);

/// What follows the product in cuBLASLt's epilogue: a bias along the
/// output's last dim (added in f32), then an activation.
enum class GemmActivation { None, Relu, GeluTanh };

/// D[b] = act(op(A[b]) op(B[b]) + bias) for b < batch, row-major: A is
/// [M, K] ([K, M] when transposeA), B [K, N] ([N, K] when transposeB), D
/// [M, N], each batch entry contiguous after the previous; bias [N] or
/// null. One dtype for all (f32, f16, bf16), accumulated in f32 (f32 uses
/// TF32 tensor cores unless MODELC_CUDA_TF32=0).
struct GemmProblem {
  DType dtype = DType::F32;
  bool transposeA = false, transposeB = false;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  void* d = nullptr;
  const void* bias = nullptr;
  GemmActivation activation = GemmActivation::None;
};

/// Picks cuBLASLt's algorithm for the problem once (its heuristic, with the
/// pointers' actual alignment) and returns the kernel that runs it on the
/// device's stream; `*workspaceBytes` is what that algorithm needs.
Status bindGemm(CudaDevice& device, const KernelRequest& request,
                const GemmProblem& problem, BoundKernel* out,
                size_t* workspaceBytes);

/// Whether f32 matmuls may use TF32 (MODELC_CUDA_TF32, default on).
bool tf32Allowed();

} // namespace mc::rt::cuda

#endif // MODELC_RUNTIME_CUDA_CUBLASLT_H
