// cuDNN 9, loaded at run time (dlopen "libcudnn.so.9"), and the graphs
// the CUDA device binds through its graph API (the backend descriptors of
// cudnn_graph.h, called through dlsym: docs/decisions.md says why not
// cudnn-frontend): the NCHW convolution of Conv2d and conv Fused steps,
// and the fused attention of attention regions. Each can also be planned
// with no GPU, for one described by device properties (CudnnPlanTest).
// Internal to the runtime.
#ifndef MODELC_RUNTIME_CUDA_CUDNN_H
#define MODELC_RUNTIME_CUDA_CUDNN_H

#include "modelc/device.h"
#include "modelc/kernels.h"
#include "modelc/library_region.h"

#include <cudnn_graph.h>

#include <memory>

namespace mc::rt::cuda {

class CudaDevice;

#define MC_CUDNN_FUNCTIONS(X)                                                  \
  X(getVersion, cudnnGetVersion)                                               \
  X(getErrorString, cudnnGetErrorString)                                       \
  X(getLastErrorString, cudnnGetLastErrorString)                               \
  X(create, cudnnCreate)                                                       \
  X(destroy, cudnnDestroy)                                                     \
  X(setStream, cudnnSetStream)                                                 \
  X(createDescriptor, cudnnBackendCreateDescriptor)                            \
  X(destroyDescriptor, cudnnBackendDestroyDescriptor)                          \
  X(finalize, cudnnBackendFinalize)                                            \
  X(setAttribute, cudnnBackendSetAttribute)                                    \
  X(getAttribute, cudnnBackendGetAttribute)                                    \
  X(execute, cudnnBackendExecute)

struct Cudnn {
#define MC_CUDNN_MEMBER(member, fn) decltype(&::fn) member = nullptr;
  MC_CUDNN_FUNCTIONS(MC_CUDNN_MEMBER)
#undef MC_CUDNN_MEMBER
  size_t version = 0; // cudnnGetVersion: 90000 and up
};

/// The process's cuDNN (libcudnn.so.9, else libcudnn.so, found as
/// CudaDriver.h's openLibrary finds libraries; when it comes from a
/// toolkit folder, its sub-libraries are loaded from there too), loaded on
/// first call. Needs no driver; creating a handle does.
Status loadCudnn(const Cudnn** out);

/// cudnnCreate, its failure said ("cudnnCreate failed:
/// CUDNN_STATUS_NOT_INITIALIZED (1001) ..." without a driver).
Status createCudnnHandle(const Cudnn& dnn, cudnnHandle_t* out);

/// "CUDNN_STATUS_NOT_SUPPORTED (3000)", then cuDNN's last error message
/// when it has one.
std::string statusText(const Cudnn& dnn, cudnnStatus_t s);

/// y = act(conv2d(x, w) + bias), the CPU's semantics (kernels.h): x [n, c,
/// h, w], w [k, c/groups, r, s], y [n, k, oh, ow] as dims, stored NCHW and
/// KCRS, or NHWC (channelsLast) and KRSC (filterChannelsLast); bias [k]
/// along the channels, or null; relu or not. One dtype for all (f32, f16,
/// bf16), accumulated in f32 (f32 on TF32 tensor cores unless
/// MODELC_CUDA_TF32=0).
struct ConvProblem {
  DType dtype = DType::F32;
  Shape x, w, y; // logical NCHW and KCRS dims, whatever the layout
  Conv2dParams params;
  bool channelsLast = false;       // x and y stored NHWC (channels_last)
  bool filterChannelsLast = false; // w stored KRSC
  /// Memory the data pointers read that the bound step must keep (a KRSC
  /// copy of the weight).
  std::shared_ptr<const void> owned;
  const void* xData = nullptr;
  const void* wData = nullptr;
  void* yData = nullptr;
  const void* bias = nullptr;
  bool relu = false;
};

/// A KRSC copy, in new device memory, of the KCRS filter W (f32, f16 or
/// bf16) on the device: for a channels_last convolution whose weight is a
/// constant, so that cuDNN's NHWC kernels read it as it lies (with a KCRS
/// filter, its plans transpose the filter into their workspace at every
/// call). Made once, through the host.
Status channelsLastFilter(CudaDevice& device, const ConstTensor& w,
                          std::shared_ptr<const void>* out);

/// Where cuDNN makes a plan: on a device, its handle; with no GPU (cuDNN
/// 9.8 and up), a device-property descriptor of the GPU the plan is for,
/// made from cuDNN's JSON description of it (deviceProperties below): the
/// heuristic and the plan are then those of that GPU, and the plan can be
/// made, not executed.
struct PlanTarget {
  cudnnHandle_t handle = nullptr;
  cudnnBackendDescriptor_t deviceProperties = nullptr;
};

/// What planning picked.
struct PlanInfo {
  int64_t workspace = 0; // bytes
  int64_t engine = -1;   // cuDNN's global engine index
  int64_t tried = 0;     // engine configurations looked at
  std::string heuristic; // "A" or "fallback": the list it came from
  /// Planned with no GPU, a runtime-compiled engine: its graph validated
  /// and its kernel compiled (NVRTC); the plan failed only at loading it,
  /// which needs a driver. Unchecked: whether the GPU takes the kernel
  /// (shared memory, launch limits) and the workspace (then 0).
  bool compiledOnly = false;
  /// The plan of an identical graph for the same target was alive: reused
  /// (no heuristic, no compile), with that plan's figures above.
  bool cached = false;
};

/// A device-property descriptor, destroyed with the object, made from
/// cuDNN's JSON description of a GPU (CUDNN_ATTR_DEVICEPROP_JSON_
/// REPRESENTATION: multiProcessorCount, deviceVer, l2CacheSize, ...;
/// test/gpu/Inputs/*.json hold an A100's and an H100's). No GPU needed.
class DeviceProperties {
public:
  DeviceProperties() = default;
  DeviceProperties(const DeviceProperties&) = delete;
  DeviceProperties& operator=(const DeviceProperties&) = delete;
  ~DeviceProperties();
  static Status fromJson(const Cudnn& dnn, const std::string& json,
                         DeviceProperties* out);
  /// The properties of the GPU behind a handle (needs the device).
  static Status fromHandle(const Cudnn& dnn, cudnnHandle_t handle,
                           DeviceProperties* out);
  /// cuDNN's JSON description (what fromJson reads).
  Status json(std::string* out) const;
  cudnnBackendDescriptor_t get() const { return d_; }

private:
  static Status make(const Cudnn& dnn, cudnnBackendAttributeName_t attr,
                     cudnnBackendAttributeType_t type, int64_t count,
                     const void* value, const char* from,
                     DeviceProperties* out);
  const Cudnn* dnn_ = nullptr;
  cudnnBackendDescriptor_t d_ = nullptr;
};

/// Builds the cuDNN graph of the problem (convolution, then the bias add
/// and relu as pointwise ops), picks the first engine of cuDNN's heuristic
/// whose numerics fit (no TF32 for f32 when it is off, no f16 reductions,
/// no inputs converted down) and makes its plan, once; returns the kernel
/// that executes it on the device's stream. `*workspaceBytes` is what the
/// plan needs.
Status bindConv(CudaDevice& device, const KernelRequest& request,
                const ConvProblem& problem, BoundKernel* out,
                size_t* workspaceBytes);

/// O = softmax(scale * (Q KT) + bias) V, the softmax over the last dim, as
/// one cuDNN graph (the composition cuDNN's fused flash-attention engines
/// take: matmul, scale, bias add, max, sub, exp, sum, div, matmul, with the
/// scores in f32). f16 or bf16 Q, KT, V and O; Q [b, h, sq, d], KT [b, h,
/// d, skv], V [b, h, skv, dv], O [b, h, sq, dv], each with its strides in
/// elements (KT may be a transposed view of a [b, h, skv, d] K); the bias
/// [b|1, h|1, sq, skv] (stride 0 along a broadcast dim), in the dtype or
/// f32, or none.
struct AttentionProblem {
  DType dtype = DType::BF16;
  int64_t b = 1, h = 1, sq = 0, skv = 0, d = 0, dv = 0;
  std::vector<int64_t> qStrides, ktStrides, vStrides, oStrides;
  float scale = 1.0f;
  bool hasBias = false;
  DType biasType = DType::BF16;
  Shape biasDims;
  std::vector<int64_t> biasStrides;
  const void* q = nullptr;
  const void* kt = nullptr;
  const void* v = nullptr;
  const void* bias = nullptr;
  void* o = nullptr;
};

/// The problem of an attention region (rt::matchAttentionRegion's match
/// on the step's INPUTS and OUTPUT, their data pointers taken): q, k (or
/// its transposed view), v and the output as 4-d tensors ([heads, s, d]
/// as [1, heads, s, d]), the mask with stride 0 (and size 1) along the
/// dims it is broadcast over, SCALE the scores' factor.
Status attentionProblemOf(const AttentionRegion& match,
                          const std::vector<ConstTensor>& inputs,
                          const MutTensor& output, float scale,
                          AttentionProblem* out);

/// Binds the attention graph on the device (as bindConv): the plan once,
/// the scale passed by value.
Status bindAttention(CudaDevice& device, const KernelRequest& request,
                     const AttentionProblem& problem, BoundKernel* out,
                     size_t* workspaceBytes);

/// The plan of the attention graph for `target` (as planConv).
Status planAttention(const Cudnn& dnn, PlanTarget target,
                     const AttentionProblem& p, PlanInfo* info,
                     std::shared_ptr<const void>* keep = nullptr);

/// The plan bindConv would make, made for `target` instead (a GPU's device
/// properties, with no GPU: CI checks every graph the device builds
/// against cuDNN's own validation and heuristics this way). The data
/// pointers may be null (16-byte alignment is assumed).
///
/// Plans are shared: while a plan lives (a bound step holds it, or
/// `keep`), planning an identical graph for the same target (handle or
/// device properties) and the same TF32 choice returns it (PlanInfo::
/// cached) instead of running the heuristic and compiling again. The
/// graph's identity is every descriptor created and every attribute set
/// on them, in order, links by the descriptors' order of creation.
Status planConv(const Cudnn& dnn, PlanTarget target, const ConvProblem& p,
                PlanInfo* info, std::shared_ptr<const void>* keep = nullptr);

} // namespace mc::rt::cuda

#endif // MODELC_RUNTIME_CUDA_CUDNN_H
