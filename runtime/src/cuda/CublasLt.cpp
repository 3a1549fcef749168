// cuBLASLt loaded at run time, and row-major batched matmuls with fused
// epilogues (bias, relu, tanh-gelu) through it (see CublasLt.h).
#include "CublasLt.h"

#include "CudaDevice.h"

#include <climits>
#include <dlfcn.h>
#include <mutex>

namespace mc::rt::cuda {

Status loadCublasLt(const CublasLt** out) {
  static CublasLt lt;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = openLibrary({"libcublasLt.so.13", "libcublasLt.so"}, &error);
    if (!h) {
      error = "cuBLASLt: " + error +
              "; add its folder to LD_LIBRARY_PATH (a PyTorch install has "
              "it in site-packages/nvidia/cublas/lib)";
      return;
    }
#define MC_CUBLASLT_LOAD(member, fn)                                           \
  lt.member = reinterpret_cast<decltype(lt.member)>(dlsym(h, #fn));            \
  if (!lt.member) {                                                            \
    error = "cuBLASLt: the library lacks " #fn;                                \
    return;                                                                    \
  }
    MC_CUBLASLT_FUNCTIONS(MC_CUBLASLT_LOAD)
#undef MC_CUBLASLT_LOAD
    lt.version = lt.getVersion();
  });
  if (!error.empty())
    return Status::error(error);
  *out = &lt;
  return Status::ok();
}

std::string statusText(const CublasLt& lt, cublasStatus_t s) {
  const char* name = lt.getStatusName ? lt.getStatusName(s) : nullptr;
  const char* text = lt.getStatusString ? lt.getStatusString(s) : nullptr;
  std::string r = name ? name : "cuBLAS status " + std::to_string(int(s));
  if (text)
    r += std::string(" (") + text + ")";
  return r;
}

Status createCublasLtHandle(const CublasLt& lt, cublasLtHandle_t* out) {
  cublasStatus_t s = lt.create(out);
  if (s != CUBLAS_STATUS_SUCCESS) {
    *out = nullptr;
    return Status::error("cublasLtCreate failed: " + statusText(lt, s));
  }
  return Status::ok();
}

bool tf32Allowed() { return envFlag("MODELC_CUDA_TF32", true); }

namespace {

/// The descriptors of one bound matmul, destroyed with it.
struct GemmState {
  const CublasLt* lt = nullptr;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layoutA = nullptr, layoutB = nullptr,
                         layoutD = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  // cuBLASLt's A and B: our B and A (C^T = B^T A^T).
  const void* a = nullptr;
  const void* b = nullptr;
  void* d = nullptr;
  ~GemmState() {
    if (desc)
      lt->matmulDescDestroy(desc);
    for (cublasLtMatrixLayout_t l : {layoutA, layoutB, layoutD})
      if (l)
        lt->matrixLayoutDestroy(l);
  }
};

cudaDataType_t dataType(DType t) {
  switch (t) {
  case DType::F16:
    return CUDA_R_16F;
  case DType::BF16:
    return CUDA_R_16BF;
  default:
    return CUDA_R_32F;
  }
}

/// The largest power of two up to 256 dividing the address and, for a
/// batch, the byte stride between its entries: what every entry is
/// aligned to (the heuristic's MIN_ALIGNMENT preferences).
uint32_t alignmentOf(const void* p, int64_t batch, uint64_t strideBytes) {
  uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(p));
  if (batch > 1)
    bits |= strideBytes;
  uint32_t a = 256;
  while (a > 1 && (bits & (a - 1)))
    a >>= 1;
  return a;
}

/// "bf16 [2 x 64, 32] x [2 x 32, 48] (transpose_b) + bias, relu".
std::string describe(const GemmProblem& p) {
  auto dims = [&](int64_t r, int64_t c) {
    return "[" + (p.batch > 1 ? std::to_string(p.batch) + " x " : "") +
           std::to_string(r) + ", " + std::to_string(c) + "]";
  };
  std::string s = std::string(dtypeName(p.dtype)) + " " +
                  (p.transposeA ? dims(p.k, p.m) : dims(p.m, p.k)) + " x " +
                  (p.transposeB ? dims(p.n, p.k) : dims(p.k, p.n));
  if (p.transposeA || p.transposeB)
    s += std::string(" (") +
         (p.transposeA ? (p.transposeB ? "transpose_a, transpose_b"
                                       : "transpose_a")
                       : "transpose_b") +
         ")";
  if (p.bias)
    s += " + bias";
  if (p.activation == GemmActivation::Relu)
    s += ", relu";
  if (p.activation == GemmActivation::GeluTanh)
    s += ", gelu (tanh)";
  return s;
}

} // namespace

Status bindGemm(CudaDevice& dev, const KernelRequest& r, const GemmProblem& p,
                BoundKernel* out, size_t* workspaceBytes) {
  *workspaceBytes = 0;
  if (p.dtype != DType::F32 && p.dtype != DType::F16 &&
      p.dtype != DType::BF16)
    return Status::error(std::string("matmul: cuBLASLt takes f32, f16 and "
                                     "bf16, not ") +
                         dtypeName(p.dtype));
  if (p.batch == 0 || p.m == 0 || p.n == 0) {
    *out = [](void*) { return Status::ok(); };
    return Status::ok();
  }
  if (p.k == 0) { // an empty sum: zeros (cuBLASLt wants K >= 1)
    if (p.bias || p.activation != GemmActivation::None)
      return Status::error("matmul: K = 0 with an epilogue (" + describe(p) +
                           ") has no cuda kernel");
    size_t bytes = size_t(p.batch * p.m * p.n) * dtypeSize(p.dtype);
    *out = dev.step(r, [&dev, d = p.d, bytes](void*) {
      return dev.check(dev.driver().memsetD8Async(CUdeviceptr(d), 0, bytes,
                                                  dev.stream()),
                       "cuMemsetD8Async");
    });
    return Status::ok();
  }
  if (p.batch > INT_MAX)
    return Status::error("matmul: a batch of " + std::to_string(p.batch) +
                         " is more than cuBLASLt takes");
  const CublasLt* lt = nullptr;
  cublasLtHandle_t handle = nullptr;
  MC_RETURN_IF_ERROR(dev.cublasLt(&lt, &handle));
  auto st = std::make_shared<GemmState>();
  st->lt = lt;
  st->handle = handle;
  st->a = p.b;
  st->b = p.a;
  st->d = p.d;
  auto fail = [&](const char* call, cublasStatus_t s) {
    return Status::error("matmul " + describe(p) + ": " + call + " failed: " +
                         statusText(*lt, s));
  };
#define MC_LT(call)                                                            \
  do {                                                                         \
    cublasStatus_t _s = (call);                                                \
    if (_s != CUBLAS_STATUS_SUCCESS)                                           \
      return fail(#call, _s);                                                  \
  } while (0)

  cudaDataType_t type = dataType(p.dtype);
  cublasComputeType_t compute =
      p.dtype == DType::F32 && tf32Allowed() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                             : CUBLAS_COMPUTE_32F;
  MC_LT(lt->matmulDescCreate(&st->desc, compute, CUDA_R_32F));
  auto setDesc = [&](cublasLtMatmulDescAttributes_t a, const auto& v) {
    return lt->matmulDescSetAttribute(st->desc, a, &v, sizeof v);
  };
  // Row-major X [r, c] is column-major X^T [c, r] with ld c. cuBLASLt
  // computes D^T [N, M] = op(B^T) op(A^T): its A is our B and its B our A.
  int32_t opA = p.transposeB ? CUBLAS_OP_T : CUBLAS_OP_N;
  int32_t opB = p.transposeA ? CUBLAS_OP_T : CUBLAS_OP_N;
  MC_LT(setDesc(CUBLASLT_MATMUL_DESC_TRANSA, opA));
  MC_LT(setDesc(CUBLASLT_MATMUL_DESC_TRANSB, opB));
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  switch (p.activation) {
  case GemmActivation::None:
    epilogue = p.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    break;
  case GemmActivation::Relu:
    epilogue = p.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    break;
  case GemmActivation::GeluTanh:
    epilogue = p.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    break;
  }
  MC_LT(setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue));
  if (p.bias) {
    // D^T's rows are our columns: a bias of N broadcast along M (and over
    // the batch, stride 0).
    const void* bias = p.bias;
    int32_t biasType = type;
    int64_t biasStride = 0;
    MC_LT(setDesc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias));
    MC_LT(setDesc(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, biasType));
    MC_LT(setDesc(CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, biasStride));
  }
  uint64_t m = uint64_t(p.m), n = uint64_t(p.n), k = uint64_t(p.k);
  // Its A: our B, stored [K, N] (column-major N x K, ld N) or, transposed,
  // [N, K] (column-major K x N, ld K).
  uint64_t aRows = p.transposeB ? k : n, aCols = p.transposeB ? n : k;
  // Its B: our A, stored [M, K] (column-major K x M, ld K) or, transposed,
  // [K, M] (column-major M x K, ld M).
  uint64_t bRows = p.transposeA ? m : k, bCols = p.transposeA ? k : m;
  MC_LT(lt->matrixLayoutCreate(&st->layoutA, type, aRows, aCols,
                               int64_t(aRows)));
  MC_LT(lt->matrixLayoutCreate(&st->layoutB, type, bRows, bCols,
                               int64_t(bRows)));
  MC_LT(lt->matrixLayoutCreate(&st->layoutD, type, n, m, int64_t(n)));
  int64_t strideA = int64_t(n * k), strideB = int64_t(m * k),
          strideD = int64_t(m * n);
  if (p.batch > 1) {
    int32_t count = int32_t(p.batch);
    auto setBatch = [&](cublasLtMatrixLayout_t l, int64_t stride) {
      cublasStatus_t s = lt->matrixLayoutSetAttribute(
          l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
      if (s == CUBLAS_STATUS_SUCCESS)
        s = lt->matrixLayoutSetAttribute(
            l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
            sizeof stride);
      return s;
    };
    MC_LT(setBatch(st->layoutA, strideA));
    MC_LT(setBatch(st->layoutB, strideB));
    MC_LT(setBatch(st->layoutD, strideD));
  }

  cublasLtMatmulPreference_t pref = nullptr;
  MC_LT(lt->preferenceCreate(&pref));
  std::unique_ptr<cublasLtMatmulPreferenceOpaque_t,
                  cublasStatus_t (*)(cublasLtMatmulPreference_t)>
      prefOwner(pref, lt->preferenceDestroy);
  auto setPref = [&](cublasLtMatmulPreferenceAttributes_t a, const auto& v) {
    return lt->preferenceSetAttribute(pref, a, &v, sizeof v);
  };
  // Up to 32 MiB of scratch (what NVIDIA suggests for Hopper); the session
  // allocates what the chosen algorithm needs.
  uint64_t maxWorkspace = 32ull << 20;
  size_t elem = dtypeSize(p.dtype);
  uint32_t alignA = alignmentOf(st->a, p.batch, uint64_t(strideA) * elem),
           alignB = alignmentOf(st->b, p.batch, uint64_t(strideB) * elem),
           alignD = alignmentOf(st->d, p.batch, uint64_t(strideD) * elem);
  MC_LT(setPref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, maxWorkspace));
  MC_LT(setPref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignA));
  MC_LT(setPref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignB));
  MC_LT(setPref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignD));
  MC_LT(setPref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignD));
#undef MC_LT
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t s = lt->algoGetHeuristic(handle, st->desc, st->layoutA,
                                          st->layoutB, st->layoutD,
                                          st->layoutD, pref, 1, &result,
                                          &found);
  if (s != CUBLAS_STATUS_SUCCESS || found < 1 ||
      result.state != CUBLAS_STATUS_SUCCESS)
    return Status::error(
        "matmul " + describe(p) + ": cuBLASLt has no algorithm for it (" +
        statusText(*lt, s != CUBLAS_STATUS_SUCCESS ? s : result.state) +
        "; alignment of A, B, D: " + std::to_string(alignB) + ", " +
        std::to_string(alignA) + ", " + std::to_string(alignD) + " bytes)");
  st->algo = result.algo;
  st->workspace = result.workspaceSize;
  *workspaceBytes = st->workspace;
  *out = dev.step(r, [st, &dev, what = describe(p)](void* workspace) {
    float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t s = st->lt->matmul(
        st->handle, st->desc, &alpha, st->a, st->layoutA, st->b, st->layoutB,
        &beta, st->d, st->layoutD, st->d, st->layoutD, &st->algo,
        st->workspace ? workspace : nullptr, st->workspace,
        reinterpret_cast<cudaStream_t>(dev.stream()));
    if (s != CUBLAS_STATUS_SUCCESS)
      return Status::error("cublasLtMatmul (" + what +
                           ") failed: " + statusText(*st->lt, s));
    return Status::ok();
  });
  return Status::ok();
}

} // namespace mc::rt::cuda
