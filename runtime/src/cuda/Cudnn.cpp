// cuDNN loaded at run time, and its graphs: NCHW convolutions (with a
// channel bias and relu fused) and fused attention, through the graph
// API's backend descriptors, planned on a device or for device
// properties (see Cudnn.h).
#include "Cudnn.h"

#include "CudaDevice.h"
#include "CublasLt.h" // tf32Allowed
#include "modelc/shapes.h"

#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <link.h>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

// The handle attributes of the operation graph and the plan are marked
// deprecated in cuDNN 9 (a device property may stand in for them, which
// is how plans are made with no GPU), but a handle is what a device has;
// they work through 9.x.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace mc::rt::cuda {

namespace {

/// cuDNN 9 is a shim (libcudnn.so.9) that loads its parts by name when
/// first needed. Where the shim came from a toolkit folder the loader does
/// not search, the parts are loaded from that folder first, so that the
/// shim's by-name loads find them already there (by soname).
void preloadParts(void* shim) {
  char dir[4096] = {0};
  if (dlinfo(shim, RTLD_DI_ORIGIN, dir) != 0)
    return;
  for (const char* part :
       {"libcudnn_graph.so.9", "libcudnn_heuristic.so.9",
        "libcudnn_engines_precompiled.so.9",
        "libcudnn_engines_runtime_compiled.so.9", "libcudnn_ops.so.9",
        "libcudnn_cnn.so.9"})
    dlopen((std::string(dir) + "/" + part).c_str(), RTLD_NOW | RTLD_LOCAL);
}

} // namespace

Status loadCudnn(const Cudnn** out) {
  static Cudnn dnn;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      h = openLibrary({"libcudnn.so.9", "libcudnn.so"}, &error);
      if (h)
        preloadParts(h);
    }
    if (!h) {
      error = "cuDNN: " + error +
              "; add its folder to LD_LIBRARY_PATH (a PyTorch install has "
              "it in site-packages/nvidia/cudnn/lib)";
      return;
    }
    error.clear();
#define MC_CUDNN_LOAD(member, fn)                                              \
  dnn.member = reinterpret_cast<decltype(dnn.member)>(dlsym(h, #fn));          \
  if (!dnn.member) {                                                           \
    error = "cuDNN: the library lacks " #fn;                                   \
    return;                                                                    \
  }
    MC_CUDNN_FUNCTIONS(MC_CUDNN_LOAD)
#undef MC_CUDNN_LOAD
    dnn.version = dnn.getVersion();
    if (dnn.version < 90000)
      error = "cuDNN: version " + std::to_string(dnn.version) +
              " found, the graph API of cuDNN 9 (90000 and up) is needed";
  });
  if (!error.empty())
    return Status::error(error);
  *out = &dnn;
  return Status::ok();
}

/// cuDNN's last error message ("" when it has none, or no such call).
std::string lastErrorText(const Cudnn& dnn) {
  char message[512] = {0};
  if (dnn.getLastErrorString)
    dnn.getLastErrorString(message, sizeof message);
  return message;
}

std::string statusText(const Cudnn& dnn, cudnnStatus_t s) {
  const char* name = dnn.getErrorString ? dnn.getErrorString(s) : nullptr;
  std::string r = (name ? std::string(name) : "cuDNN status") + " (" +
                  std::to_string(int(s)) + ")";
  std::string last = lastErrorText(dnn);
  return last.empty() ? r : r + ": " + last;
}

Status createCudnnHandle(const Cudnn& dnn, cudnnHandle_t* out) {
  cudnnStatus_t s = dnn.create(out);
  if (s != CUDNN_STATUS_SUCCESS) {
    *out = nullptr;
    return Status::error("cudnnCreate failed: " + statusText(dnn, s));
  }
  return Status::ok();
}

namespace {

/// One backend descriptor, destroyed with the object.
class Desc {
public:
  Desc() = default;
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  Desc(Desc&& o) noexcept : dnn_(o.dnn_), d_(o.d_) { o.d_ = nullptr; }
  Desc& operator=(Desc&& o) noexcept {
    if (this != &o) {
      reset();
      dnn_ = o.dnn_;
      d_ = o.d_;
      o.d_ = nullptr;
    }
    return *this;
  }
  ~Desc() { reset(); }
  void reset() {
    if (d_)
      dnn_->destroyDescriptor(d_);
    d_ = nullptr;
  }
  cudnnStatus_t create(const Cudnn& dnn, cudnnBackendDescriptorType_t t) {
    dnn_ = &dnn;
    return dnn.createDescriptor(t, &d_);
  }
  cudnnBackendDescriptor_t get() const { return d_; }

private:
  const Cudnn* dnn_ = nullptr;
  cudnnBackendDescriptor_t d_ = nullptr;
};

/// What a bound cuDNN step keeps: its plan and the device pointers of its
/// variant pack, made again when the workspace moves.
/// A plan and what planning said of it; shared by the steps of identical
/// graphs (see planConv).
struct CachedPlan {
  Desc plan;
  PlanInfo info;
};

/// Live plans by target and graph signature (weak: a plan goes with the
/// last step that holds it, before its device's cuDNN handle).
std::mutex gPlansMutex;
std::map<std::string, std::weak_ptr<CachedPlan>> gPlans;

struct PlanState {
  const Cudnn* dnn = nullptr;
  cudnnHandle_t handle = nullptr;
  std::shared_ptr<const CachedPlan> plan;
  std::vector<int64_t> uids;
  std::vector<void*> pointers;
  int64_t workspace = 0;
  Desc pack;
  void* packWorkspace = nullptr;
  float byValue = 0; // a by-value tensor's value (the attention's scale)
  std::shared_ptr<const void> owned; // memory the pointers read (ConvProblem)
};

cudnnDataType_t dataType(DType t) {
  switch (t) {
  case DType::F16:
    return CUDNN_DATA_HALF;
  case DType::BF16:
    return CUDNN_DATA_BFLOAT16;
  default:
    return CUDNN_DATA_FLOAT;
  }
}

/// "bf16 [8, 16, 32, 32] * [32, 4, 3, 3] (strides [2, 2], padding [1, 1,
/// 0, 0], dilation [1, 1], groups 4) + bias, relu"; the dims are NCHW and
/// KCRS, and ", NHWC" or ", NHWC, KRSC" after the groups says how they
/// are stored otherwise.
std::string describe(const ConvProblem& p) {
  const Conv2dParams& c = p.params;
  auto pair = [](int64_t a, int64_t b) {
    return "[" + std::to_string(a) + ", " + std::to_string(b) + "]";
  };
  std::string s = std::string(dtypeName(p.dtype)) + " " + shapeString(p.x) +
                  " * " + shapeString(p.w) + " (strides " +
                  pair(c.strideH, c.strideW) + ", padding [" +
                  std::to_string(c.padTop) + ", " + std::to_string(c.padLeft) +
                  ", " + std::to_string(c.padBottom) + ", " +
                  std::to_string(c.padRight) + "], dilation " +
                  pair(c.dilationH, c.dilationW) + ", groups " +
                  std::to_string(c.groups) + (p.channelsLast ? ", NHWC" : "") +
                  (p.filterChannelsLast ? ", KRSC" : "") + ")";
  if (p.bias)
    s += " + bias";
  if (p.relu)
    s += ", relu";
  return s;
}

/// Packed (row-major) strides of a shape, in elements.
std::vector<int64_t> packedStrides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;)
    st[i - 1] = st[i] * s[i];
  return st;
}

/// Strides of NCHW dims stored NHWC (channels innermost), in elements.
std::vector<int64_t> channelsLastStrides(const Shape& s) {
  return {s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]};
}

/// The strides of a rank-4 NCHW tensor stored as `channelsLast` says.
std::vector<int64_t> stridesOf(const Shape& s, bool channelsLast) {
  return channelsLast ? channelsLastStrides(s) : packedStrides(s);
}

/// The largest power of two up to 16 that divides the address.
int64_t alignmentOf(const void* p) {
  uintptr_t bits = reinterpret_cast<uintptr_t>(p);
  int64_t a = 16;
  while (a > 1 && (bits & uintptr_t(a - 1)))
    a >>= 1;
  return a;
}

/// Builds one graph and its plan; every failure names the call, prefixed
/// with `what` (the problem).
class GraphBuilder {
public:
  GraphBuilder(const Cudnn& dnn, PlanTarget target, std::string what)
      : dnn_(dnn), target_(target), what_(std::move(what)) {}

  Status fail(const std::string& call, cudnnStatus_t s) const {
    return Status::error(what_ + ": " + call +
                         " failed: " + statusText(dnn_, s));
  }
  /// Creates a descriptor of the graph: numbered in order of creation
  /// for the graph's signature (addresses may be reused once a
  /// descriptor is gone, so they cannot name it).
  cudnnStatus_t create(Desc& d, cudnnBackendDescriptorType_t type) const {
    cudnnStatus_t s = d.create(dnn_, type);
    if (s == CUDNN_STATUS_SUCCESS) {
      ids_[d.get()] = nextId_++;
      signature_ += "new." + std::to_string(int(type)) + ";";
    }
    return s;
  }
  template <class T>
  cudnnStatus_t set(const Desc& d, cudnnBackendAttributeName_t name,
                    cudnnBackendAttributeType_t type, const T* values,
                    int64_t count = 1) const {
    record(d.get(), name, type, values, count, sizeof(T));
    return dnn_.setAttribute(d.get(), name, type, count, values);
  }
  /// A tensor descriptor: non-virtual ones get `uid` in the variant pack.
  Status tensor(int64_t uid, cudnnDataType_t type, const Shape& dims,
                std::vector<int64_t> strides, bool isVirtual,
                int64_t alignment, Desc* out, bool byValue = false) const;
  Status pointwise(cudnnPointwiseMode_t mode, const Desc& x, const Desc* b,
                   const Desc& y, Desc* out) const;
  /// c = a b (batched over the leading dims), accumulated in f32.
  Status matmul(const Desc& a, const Desc& b, const Desc& c, Desc* out) const;
  /// y = the reduction of x over the dims where y has 1.
  Status reduction(cudnnReduceTensorOp_t mode, const Desc& x, const Desc& y,
                   Desc* out) const;
  /// An operation of TYPE whose attributes LINKS name the descriptors it
  /// reads and writes, finalized; failures name WHAT.
  Status operation(
      cudnnBackendDescriptorType_t type, const std::string& what,
      const std::vector<std::pair<cudnnBackendAttributeName_t, const Desc*>>&
          links,
      Desc* out) const;
  /// The operation graph of `ops`, then the heuristic's engine
  /// configurations, best first (mode A, then the fallback list), and the
  /// plan of the first whose numerics fit and whose plan finalizes.
  /// A plan of an identical graph still alive is returned as it is.
  Status plan(const std::vector<Desc>& ops, bool allowTensorCoresForF32,
              PlanInfo* info, std::shared_ptr<const CachedPlan>* planOut) const;

  const Cudnn& dnn() const { return dnn_; }

private:
  /// Appends one attribute to the graph's signature: the descriptor and
  /// any descriptors it links by their number of creation, the
  /// values' bytes otherwise (a handle or pointer by kind only: the target
  /// is in the cache key).
  void record(const void* d, cudnnBackendAttributeName_t name,
              cudnnBackendAttributeType_t type, const void* values,
              int64_t count, size_t size) const;
  Status planUncached(const std::vector<Desc>& ops,
                      bool allowTensorCoresForF32, PlanInfo* info,
                      Desc* planOut) const;

  const Cudnn& dnn_;
  PlanTarget target_;
  std::string what_;
  mutable std::string signature_;
  /// The graph's live descriptors by address: their number of creation.
  mutable std::map<const void*, size_t> ids_;
  mutable size_t nextId_ = 0;
};

void GraphBuilder::record(const void* d, cudnnBackendAttributeName_t name,
                          cudnnBackendAttributeType_t type,
                          const void* values, int64_t count,
                          size_t size) const {
  auto id = [&](const void* p) {
    auto it = ids_.find(p);
    if (it == ids_.end()) // made elsewhere (none is, today): numbered now
      it = ids_.emplace(p, nextId_++).first;
    return std::to_string(it->second);
  };
  signature_ += id(d) + "." + std::to_string(int(name)) + "." +
                std::to_string(int(type)) + "." + std::to_string(count) + "=";
  if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
    auto* links = static_cast<const cudnnBackendDescriptor_t*>(values);
    for (int64_t i = 0; i < count; ++i)
      signature_ += id(links[i]) + ",";
  } else if (type == CUDNN_TYPE_HANDLE || type == CUDNN_TYPE_VOID_PTR) {
    signature_ += "p";
  } else {
    static const char kHex[] = "0123456789abcdef";
    auto* bytes = static_cast<const unsigned char*>(values);
    for (size_t i = 0; i < size * size_t(count); ++i) {
      signature_ += kHex[bytes[i] >> 4];
      signature_ += kHex[bytes[i] & 15];
    }
  }
  signature_ += ";";
}

#define MC_DNN(what, call)                                                     \
  do {                                                                         \
    cudnnStatus_t _s = (call);                                                 \
    if (_s != CUDNN_STATUS_SUCCESS)                                            \
      return fail(what, _s);                                                   \
  } while (0)

Status GraphBuilder::tensor(int64_t uid, cudnnDataType_t type,
                            const Shape& dims, std::vector<int64_t> strides,
                            bool isVirtual, int64_t alignment, Desc* out,
                            bool byValue) const {
  MC_DNN("creating a tensor descriptor",
         create(*out, CUDNN_BACKEND_TENSOR_DESCRIPTOR));
  bool virt = isVirtual;
  MC_DNN("tensor data type",
         set(*out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type));
  MC_DNN("tensor dims", set(*out, CUDNN_ATTR_TENSOR_DIMENSIONS,
                            CUDNN_TYPE_INT64, dims.data(), int64_t(dims.size())));
  MC_DNN("tensor strides",
         set(*out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(),
             int64_t(strides.size())));
  MC_DNN("tensor uid",
         set(*out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid));
  MC_DNN("tensor alignment", set(*out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT,
                                 CUDNN_TYPE_INT64, &alignment));
  MC_DNN("tensor virtual",
         set(*out, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &virt));
  if (byValue)
    MC_DNN("tensor by value", set(*out, CUDNN_ATTR_TENSOR_IS_BY_VALUE,
                                  CUDNN_TYPE_BOOLEAN, &byValue));
  MC_DNN("finalizing tensor " + std::to_string(uid),
         dnn_.finalize(out->get()));
  return Status::ok();
}

Status GraphBuilder::pointwise(cudnnPointwiseMode_t mode, const Desc& x,
                              const Desc* b, const Desc& y, Desc* out) const {
  Desc pw;
  cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  MC_DNN("creating a pointwise descriptor",
         create(pw, CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
  MC_DNN("pointwise mode",
         set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode));
  MC_DNN("pointwise precision", set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC,
                                    CUDNN_TYPE_DATA_TYPE, &prec));
  MC_DNN("finalizing the pointwise descriptor", dnn_.finalize(pw.get()));
  std::vector<std::pair<cudnnBackendAttributeName_t, const Desc*>> links = {
      {CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, &pw},
      {CUDNN_ATTR_OPERATION_POINTWISE_XDESC, &x},
      {CUDNN_ATTR_OPERATION_POINTWISE_YDESC, &y}};
  if (b)
    links.push_back({CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b});
  return operation(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise",
                   links, out);
}

Status GraphBuilder::operation(
    cudnnBackendDescriptorType_t type, const std::string& what,
    const std::vector<std::pair<cudnnBackendAttributeName_t, const Desc*>>&
        links,
    Desc* out) const {
  MC_DNN("creating a " + what + " operation", create(*out, type));
  for (const auto& [name, desc] : links) {
    cudnnBackendDescriptor_t d = desc->get();
    MC_DNN(what + " operation attribute " + std::to_string(int(name)),
           set(*out, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &d));
  }
  MC_DNN("finalizing a " + what + " operation", dnn_.finalize(out->get()));
  return Status::ok();
}

Status GraphBuilder::matmul(const Desc& a, const Desc& b, const Desc& c,
                            Desc* out) const {
  Desc mm;
  cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  MC_DNN("creating a matmul descriptor",
         create(mm, CUDNN_BACKEND_MATMUL_DESCRIPTOR));
  MC_DNN("matmul compute type",
         set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &f32));
  MC_DNN("finalizing the matmul descriptor", dnn_.finalize(mm.get()));
  return operation(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul",
                   {{CUDNN_ATTR_OPERATION_MATMUL_ADESC, &a},
                    {CUDNN_ATTR_OPERATION_MATMUL_BDESC, &b},
                    {CUDNN_ATTR_OPERATION_MATMUL_CDESC, &c},
                    {CUDNN_ATTR_OPERATION_MATMUL_DESC, &mm}},
                   out);
}

Status GraphBuilder::reduction(cudnnReduceTensorOp_t mode, const Desc& x,
                               const Desc& y, Desc* out) const {
  Desc red;
  cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  MC_DNN("creating a reduction descriptor",
         create(red, CUDNN_BACKEND_REDUCTION_DESCRIPTOR));
  MC_DNN("reduction operator", set(red, CUDNN_ATTR_REDUCTION_OPERATOR,
                                   CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &mode));
  MC_DNN("reduction compute type",
         set(red, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &f32));
  MC_DNN("finalizing the reduction descriptor", dnn_.finalize(red.get()));
  return operation(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction",
                   {{CUDNN_ATTR_OPERATION_REDUCTION_XDESC, &x},
                    {CUDNN_ATTR_OPERATION_REDUCTION_YDESC, &y},
                    {CUDNN_ATTR_OPERATION_REDUCTION_DESC, &red}},
                   out);
}

// Unique ids of the variant pack's tensors; virtual ones after them.
enum : int64_t { kX = 1, kW = 2, kY = 3, kBias = 4, kConvOut = 10, kSum = 11 };

/// The convolution's graph: the convolution, then the bias add and relu as
/// pointwise ops.
Status convOps(const GraphBuilder& g, const ConvProblem& p,
               std::vector<Desc>* ops) {
  auto fail = [&](const std::string& call, cudnnStatus_t s) {
    return g.fail(call, s);
  };
  const Cudnn& dnn = g.dnn();
  const Conv2dParams& c = p.params;
  cudnnDataType_t io = dataType(p.dtype), f32 = CUDNN_DATA_FLOAT;
  bool fused = p.bias || p.relu;
  Desc x, w, y, convOut, bias, sum;
  std::vector<int64_t> yStrides = stridesOf(p.y, p.channelsLast);
  MC_RETURN_IF_ERROR(g.tensor(kX, io, p.x, stridesOf(p.x, p.channelsLast),
                              false, alignmentOf(p.xData), &x));
  MC_RETURN_IF_ERROR(g.tensor(kW, io, p.w, stridesOf(p.w, p.filterChannelsLast),
                              false, alignmentOf(p.wData), &w));
  MC_RETURN_IF_ERROR(
      g.tensor(kY, io, p.y, yStrides, false, alignmentOf(p.yData), &y));
  if (fused) // the convolution's result stays in f32, inside the graph
    MC_RETURN_IF_ERROR(
        g.tensor(kConvOut, f32, p.y, yStrides, true, 16, &convOut));
  if (p.bias)
    MC_RETURN_IF_ERROR(g.tensor(kBias, io, {1, p.y[1], 1, 1},
                              {p.y[1], 1, 1, 1}, false,
                              alignmentOf(p.bias), &bias));
  if (p.bias && p.relu)
    MC_RETURN_IF_ERROR(g.tensor(kSum, f32, p.y, yStrides, true, 16, &sum));

  // The convolution: cross-correlation, f32 accumulation; the groups are
  // the ratio of x's channels to w's input channels.
  Desc conv;
  MC_DNN("creating the convolution descriptor",
         g.create(conv, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR));
  int64_t spatial = 2;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  int64_t strides[2] = {c.strideH, c.strideW},
          pre[2] = {c.padTop, c.padLeft}, post[2] = {c.padBottom, c.padRight},
          dil[2] = {c.dilationH, c.dilationW};
  MC_DNN("convolution compute type", g.set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE,
                                         CUDNN_TYPE_DATA_TYPE, &f32));
  MC_DNN("convolution mode", g.set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE,
                                 CUDNN_TYPE_CONVOLUTION_MODE, &mode));
  MC_DNN("convolution spatial dims",
         g.set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64,
             &spatial));
  MC_DNN("convolution strides", g.set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES,
                                    CUDNN_TYPE_INT64, strides, 2));
  MC_DNN("convolution pre-paddings", g.set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS,
                                         CUDNN_TYPE_INT64, pre, 2));
  MC_DNN("convolution post-paddings",
         g.set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, post,
             2));
  MC_DNN("convolution dilations", g.set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS,
                                      CUDNN_TYPE_INT64, dil, 2));
  MC_DNN("finalizing the convolution descriptor", dnn.finalize(conv.get()));

  Desc convOp;
  MC_DNN("creating the convolution operation",
         g.create(convOp,
                 CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR));
  cudnnBackendDescriptor_t xd = x.get(), wd = w.get(),
                           yd = fused ? convOut.get() : y.get(),
                           cd = conv.get();
  float alpha = 1.0f, beta = 0.0f;
  MC_DNN("convolution x", g.set(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                              CUDNN_TYPE_BACKEND_DESCRIPTOR, &xd));
  MC_DNN("convolution w", g.set(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                              CUDNN_TYPE_BACKEND_DESCRIPTOR, &wd));
  MC_DNN("convolution y", g.set(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                              CUDNN_TYPE_BACKEND_DESCRIPTOR, &yd));
  MC_DNN("convolution descriptor",
         g.set(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
             CUDNN_TYPE_BACKEND_DESCRIPTOR, &cd));
  MC_DNN("convolution alpha",
         g.set(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
             CUDNN_TYPE_FLOAT, &alpha));
  MC_DNN("convolution beta", g.set(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
                                 CUDNN_TYPE_FLOAT, &beta));
  MC_DNN("finalizing the convolution operation", dnn.finalize(convOp.get()));

  ops->push_back(std::move(convOp));
  if (p.bias) {
    Desc add;
    MC_RETURN_IF_ERROR(
        g.pointwise(CUDNN_POINTWISE_ADD, convOut, &bias, p.relu ? sum : y, &add));
    ops->push_back(std::move(add));
  }
  if (p.relu) {
    Desc relu;
    MC_RETURN_IF_ERROR(g.pointwise(CUDNN_POINTWISE_RELU_FWD,
                                 p.bias ? sum : convOut, nullptr, y, &relu));
    ops->push_back(std::move(relu));
  }

  return Status::ok();
}

Status GraphBuilder::plan(const std::vector<Desc>& ops,
                          bool allowTensorCoresForF32, PlanInfo* info,
                          std::shared_ptr<const CachedPlan>* planOut) const {
  char target[64];
  std::snprintf(target, sizeof target, "%p/%p%s|",
                static_cast<void*>(target_.handle),
                static_cast<void*>(target_.deviceProperties),
                allowTensorCoresForF32 ? "" : " no tf32");
  std::string key = target + signature_;
  {
    std::lock_guard<std::mutex> lock(gPlansMutex);
    for (auto it = gPlans.begin(); it != gPlans.end();)
      it = it->second.expired() ? gPlans.erase(it) : std::next(it);
    auto it = gPlans.find(key);
    if (it != gPlans.end())
      if (std::shared_ptr<CachedPlan> live = it->second.lock()) {
        *info = live->info;
        info->cached = true;
        *planOut = std::move(live);
        return Status::ok();
      }
  }
  auto fresh = std::make_shared<CachedPlan>();
  MC_RETURN_IF_ERROR(
      planUncached(ops, allowTensorCoresForF32, &fresh->info, &fresh->plan));
  *info = fresh->info;
  {
    std::lock_guard<std::mutex> lock(gPlansMutex);
    gPlans[key] = fresh;
  }
  *planOut = std::move(fresh);
  return Status::ok();
}

Status GraphBuilder::planUncached(const std::vector<Desc>& ops,
                                  bool allowTensorCoresForF32, PlanInfo* info,
                                  Desc* planOut) const {
  Desc graph;
  MC_DNN("creating the operation graph",
         graph.create(dnn_, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  std::vector<cudnnBackendDescriptor_t> opList;
  for (const Desc& d : ops)
    opList.push_back(d.get());
  MC_DNN("graph ops", set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS,
                          CUDNN_TYPE_BACKEND_DESCRIPTOR, opList.data(),
                          int64_t(opList.size())));
  if (target_.handle) // else (cuDNN 9.8 and up) the device property serves
    MC_DNN("graph handle", set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE,
                               CUDNN_TYPE_HANDLE, &target_.handle));
  MC_DNN("finalizing the operation graph", dnn_.finalize(graph.get()));

  bool f32NoTf32 = !allowTensorCoresForF32;
  std::string skipped;
  cudnnStatus_t lastError = CUDNN_STATUS_SUCCESS;
  int64_t tried = 0;
  for (cudnnBackendHeurMode_t heurMode :
       {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    Desc heur;
    MC_DNN("creating the heuristic",
           heur.create(dnn_, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
    cudnnBackendDescriptor_t gd = graph.get();
    MC_DNN("heuristic graph", set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                  CUDNN_TYPE_BACKEND_DESCRIPTOR, &gd));
    MC_DNN("heuristic mode", set(heur, CUDNN_ATTR_ENGINEHEUR_MODE,
                                 CUDNN_TYPE_HEUR_MODE, &heurMode));
    if (target_.deviceProperties)
      MC_DNN("heuristic device properties",
             set(heur, CUDNN_ATTR_ENGINEHEUR_DEVICEPROP,
                 CUDNN_TYPE_BACKEND_DESCRIPTOR, &target_.deviceProperties));
    if (cudnnStatus_t s = dnn_.finalize(heur.get()); s != CUDNN_STATUS_SUCCESS) {
      lastError = s;
      continue;
    }
    int64_t count = 0;
    MC_DNN("counting the heuristic's results",
           dnn_.getAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                             CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                             nullptr));
    std::vector<Desc> cfgs(static_cast<size_t>(count));
    std::vector<cudnnBackendDescriptor_t> cfgPtrs;
    for (Desc& d : cfgs) {
      MC_DNN("creating an engine configuration",
             d.create(dnn_, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
      cfgPtrs.push_back(d.get());
    }
    int64_t got = 0;
    // A list that cannot be read is a refusal of this mode: the fallback
    // list is still tried.
    if (cudnnStatus_t s = dnn_.getAttribute(
            heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
            CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, cfgPtrs.data());
        s != CUDNN_STATUS_SUCCESS) {
      lastError = s;
      continue;
    }
    for (int64_t i = 0; i < got; ++i) {
      ++tried;
      // The engine's numerical notes.
      Desc engine;
      MC_DNN("creating an engine descriptor",
             engine.create(dnn_, CUDNN_BACKEND_ENGINE_DESCRIPTOR));
      cudnnBackendDescriptor_t ed = engine.get();
      int64_t one = 0;
      if (dnn_.getAttribute(cfgPtrs[size_t(i)], CUDNN_ATTR_ENGINECFG_ENGINE,
                            CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &one,
                            &ed) != CUDNN_STATUS_SUCCESS)
        continue;
      cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
      int64_t nNotes = 0;
      if (dnn_.getAttribute(ed, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                            CUDNN_TYPE_NUMERICAL_NOTE,
                            CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &nNotes,
                            notes) != CUDNN_STATUS_SUCCESS)
        nNotes = 0;
      const char* why = nullptr;
      for (int64_t k = 0; k < nNotes && !why; ++k) {
        if (notes[k] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)
          why = "converts its inputs down";
        else if (notes[k] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)
          why = "reduces in reduced precision";
        else if (notes[k] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE && f32NoTf32)
          why = "uses TF32 tensor cores (MODELC_CUDA_TF32=0)";
      }
      if (why) {
        if (skipped.size() < 400)
          skipped += std::string(skipped.empty() ? "" : "; ") + "engine " +
                     std::to_string(i) + " " + why;
        continue;
      }
      Desc plan;
      MC_DNN("creating an execution plan",
             plan.create(dnn_, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
      cudnnBackendDescriptor_t cfg = cfgPtrs[size_t(i)];
      if (target_.handle)
        MC_DNN("plan handle", set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                                  CUDNN_TYPE_HANDLE, &target_.handle));
      else
        MC_DNN("plan device properties",
               set(plan, CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP,
                   CUDNN_TYPE_BACKEND_DESCRIPTOR, &target_.deviceProperties));
      MC_DNN("plan engine configuration",
             set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                 CUDNN_TYPE_BACKEND_DESCRIPTOR, &cfg));
      cudnnStatus_t s = dnn_.finalize(plan.get());
      // With no GPU, a runtime-compiled engine's plan gets as far as
      // loading the kernel NVRTC compiled, which takes a driver (the
      // toolkit's stub libcuda fails it): the graph passed every check.
      bool compiledOnly = !target_.handle &&
                          s == CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER;
      if (s != CUDNN_STATUS_SUCCESS && !compiledOnly) {
        lastError = s;
        continue;
      }
      int64_t ws = 0;
      if (!compiledOnly)
        MC_DNN("reading the plan's workspace size",
               dnn_.getAttribute(plan.get(),
                                 CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                 CUDNN_TYPE_INT64, 1, &one, &ws));
      int64_t index = -1;
      if (dnn_.getAttribute(ed, CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                            CUDNN_TYPE_INT64, 1, &one,
                            &index) != CUDNN_STATUS_SUCCESS)
        index = -1;
      *planOut = std::move(plan);
      info->workspace = ws;
      info->engine = index;
      info->tried = tried;
      info->heuristic = heurMode == CUDNN_HEUR_MODE_A ? "A" : "fallback";
      info->compiledOnly = compiledOnly;
      return Status::ok();
    }
  }
  std::string why = "cuDNN has no engine for it (" + std::to_string(tried) +
                    " configurations tried";
  if (lastError != CUDNN_STATUS_SUCCESS) {
    why += "; the last refusal: " + statusText(dnn_, lastError);
  } else if (std::string last = lastErrorText(dnn_); !last.empty()) {
    // No call failed: the heuristics listed nothing. cuDNN may still say
    // why.
    why += "; cuDNN says: " + last;
  }
  if (!skipped.empty())
    why += "; skipped for their numerics: " + skipped;
  return Status::error(what_ + ": " + why + ")");
}

// The attention graph's tensors: Q, KT, V, O, the bias, the scale (by
// value), then the virtual ones.
enum : int64_t {
  kQ = 1, kKT = 2, kV = 3, kO = 4, kAttnBias = 5, kScale = 6,
  kScores = 20, kScaled, kBiased, kMax, kCentered, kExp, kSumExp, kLogSum,
  kStats, kProbs
};

/// "bf16 attention q [2, 12, 128, 64], kv 128, + bias, scale 0.125".
std::string describe(const AttentionProblem& p) {
  std::string s = std::string(dtypeName(p.dtype)) + " attention q " +
                  shapeString({p.b, p.h, p.sq, p.d}) + ", " +
                  std::to_string(p.skv) + " keys, dv " + std::to_string(p.dv);
  if (p.hasBias)
    s += ", + bias " + shapeString(p.biasDims);
  char scale[32];
  std::snprintf(scale, sizeof scale, ", scale %g", double(p.scale));
  return s + scale;
}

Status attentionOps(const GraphBuilder& g, const AttentionProblem& p,
                    std::vector<Desc>* ops) {
  cudnnDataType_t io = dataType(p.dtype), f32 = CUDNN_DATA_FLOAT;
  int64_t b = p.b, h = p.h, sq = p.sq, skv = p.skv;
  Shape scores{b, h, sq, skv}, rows{b, h, sq, 1};
  std::vector<int64_t> scoreStrides{h * sq * skv, sq * skv, skv, 1},
      rowStrides{h * sq, sq, 1, 1};
  Desc q, kt, v, o, bias, scale, s, scaled, biased, mx, centered, ex, sum,
      logSum, stats, probs;
  MC_RETURN_IF_ERROR(g.tensor(kQ, io, {b, h, sq, p.d}, p.qStrides, false,
                              alignmentOf(p.q), &q));
  MC_RETURN_IF_ERROR(g.tensor(kKT, io, {b, h, p.d, skv}, p.ktStrides, false,
                              alignmentOf(p.kt), &kt));
  MC_RETURN_IF_ERROR(g.tensor(kV, io, {b, h, skv, p.dv}, p.vStrides, false,
                              alignmentOf(p.v), &v));
  MC_RETURN_IF_ERROR(g.tensor(kO, io, {b, h, sq, p.dv}, p.oStrides, false,
                              alignmentOf(p.o), &o));
  MC_RETURN_IF_ERROR(g.tensor(kScale, f32, {1, 1, 1, 1}, {1, 1, 1, 1}, false,
                              4, &scale, /*byValue=*/true));
  if (p.hasBias)
    MC_RETURN_IF_ERROR(g.tensor(kAttnBias, dataType(p.biasType), p.biasDims,
                                p.biasStrides, false, alignmentOf(p.bias),
                                &bias));
  auto virt = [&](int64_t uid, bool row, Desc* d,
                  cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    return g.tensor(uid, type, row ? rows : scores,
                    row ? rowStrides : scoreStrides, true, 16, d);
  };
  MC_RETURN_IF_ERROR(virt(kScores, false, &s));
  MC_RETURN_IF_ERROR(virt(kScaled, false, &scaled));
  if (p.hasBias)
    MC_RETURN_IF_ERROR(virt(kBiased, false, &biased));
  MC_RETURN_IF_ERROR(virt(kMax, true, &mx));
  MC_RETURN_IF_ERROR(virt(kCentered, false, &centered));
  MC_RETURN_IF_ERROR(virt(kExp, false, &ex));
  MC_RETURN_IF_ERROR(virt(kSumExp, true, &sum));
  MC_RETURN_IF_ERROR(virt(kLogSum, true, &logSum));
  MC_RETURN_IF_ERROR(virt(kStats, true, &stats));
  MC_RETURN_IF_ERROR(virt(kProbs, false, &probs, io));
  const Desc& logits = p.hasBias ? biased : scaled;
  auto add = [&](auto&& build) -> Status {
    Desc op;
    MC_RETURN_IF_ERROR(build(&op));
    ops->push_back(std::move(op));
    return Status::ok();
  };
  MC_RETURN_IF_ERROR(add([&](Desc* d) { return g.matmul(q, kt, s, d); }));
  MC_RETURN_IF_ERROR(add([&](Desc* d) {
    return g.pointwise(CUDNN_POINTWISE_MUL, s, &scale, scaled, d);
  }));
  if (p.hasBias)
    MC_RETURN_IF_ERROR(add([&](Desc* d) {
      return g.pointwise(CUDNN_POINTWISE_ADD, scaled, &bias, biased, d);
    }));
  MC_RETURN_IF_ERROR(add([&](Desc* d) {
    return g.reduction(CUDNN_REDUCE_TENSOR_MAX, logits, mx, d);
  }));
  MC_RETURN_IF_ERROR(add([&](Desc* d) {
    return g.pointwise(CUDNN_POINTWISE_SUB, logits, &mx, centered, d);
  }));
  MC_RETURN_IF_ERROR(add([&](Desc* d) {
    return g.pointwise(CUDNN_POINTWISE_EXP, centered, nullptr, ex, d);
  }));
  MC_RETURN_IF_ERROR(add([&](Desc* d) {
    return g.reduction(CUDNN_REDUCE_TENSOR_ADD, ex, sum, d);
  }));
  MC_RETURN_IF_ERROR(add([&](Desc* d) {
    return g.pointwise(CUDNN_POINTWISE_LOG, sum, nullptr, logSum, d);
  }));
  MC_RETURN_IF_ERROR(add([&](Desc* d) {
    return g.pointwise(CUDNN_POINTWISE_ADD, mx, &logSum, stats, d);
  }));
  MC_RETURN_IF_ERROR(add([&](Desc* d) {
    return g.pointwise(CUDNN_POINTWISE_DIV, ex, &sum, probs, d);
  }));
  MC_RETURN_IF_ERROR(add([&](Desc* d) { return g.matmul(probs, v, o, d); }));
  return Status::ok();
}

bool convAllowsTf32(const ConvProblem& p) {
  return p.dtype != DType::F32 || tf32Allowed();
}

/// The device's cuDNN and handle, the graph BUILD makes, and its plan.
template <class Build>
Status planOnDevice(CudaDevice& dev, const std::string& what,
                    bool allowTf32, std::shared_ptr<PlanState>* out,
                    Build build) {
  const Cudnn* dnn = nullptr;
  cudnnHandle_t handle = nullptr;
  MC_RETURN_IF_ERROR(dev.cudnn(&dnn, &handle));
  // cuDNN plans (and NVRTC-compiles for) the context current on this
  // thread: the device's, whichever device bound last.
  MC_RETURN_IF_ERROR(dev.makeCurrent());
  auto st = std::make_shared<PlanState>();
  st->dnn = dnn;
  st->handle = handle;
  GraphBuilder g(*dnn, PlanTarget{handle, nullptr}, what);
  std::vector<Desc> ops;
  MC_RETURN_IF_ERROR(build(g, &ops));
  PlanInfo info;
  MC_RETURN_IF_ERROR(g.plan(ops, allowTf32, &info, &st->plan));
  st->workspace = info.workspace;
  *out = std::move(st);
  return Status::ok();
}

/// The step that executes a plan on the device's stream.
BoundKernel planStep(CudaDevice& dev, const KernelRequest& r,
                     std::shared_ptr<PlanState> st, std::string what) {
  return dev.step(r, [st, what](void* workspace) {
    const Cudnn& dnn = *st->dnn;
    auto fail = [&](const char* call, cudnnStatus_t s) {
      return Status::error(what + ": " + call + " failed: " +
                           statusText(dnn, s));
    };
    void* ws = st->workspace ? workspace : nullptr;
    if (!st->pack.get() || st->packWorkspace != ws) {
      // The variant pack: the tensors' pointers and the workspace, made
      // again only when the workspace moves.
      Desc pack;
      if (cudnnStatus_t s =
              pack.create(dnn, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
          s != CUDNN_STATUS_SUCCESS)
        return fail("creating the variant pack", s);
      cudnnStatus_t s = dnn.setAttribute(
          pack.get(), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
          int64_t(st->uids.size()), st->uids.data());
      if (s == CUDNN_STATUS_SUCCESS)
        s = dnn.setAttribute(pack.get(), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                             CUDNN_TYPE_VOID_PTR, int64_t(st->pointers.size()),
                             st->pointers.data());
      if (s == CUDNN_STATUS_SUCCESS)
        s = dnn.setAttribute(pack.get(), CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                             CUDNN_TYPE_VOID_PTR, 1, &ws);
      if (s == CUDNN_STATUS_SUCCESS)
        s = dnn.finalize(pack.get());
      if (s != CUDNN_STATUS_SUCCESS)
        return fail("building the variant pack", s);
      st->pack = std::move(pack);
      st->packWorkspace = ws;
    }
    if (cudnnStatus_t s = dnn.execute(st->handle, st->plan->plan.get(),
                                      st->pack.get());
        s != CUDNN_STATUS_SUCCESS)
      return fail("cudnnBackendExecute", s);
    return Status::ok();
  });
}

} // namespace

DeviceProperties::~DeviceProperties() {
  if (d_)
    dnn_->destroyDescriptor(d_);
}

Status DeviceProperties::make(const Cudnn& dnn,
                              cudnnBackendAttributeName_t attr,
                              cudnnBackendAttributeType_t type, int64_t count,
                              const void* value, const char* from,
                              DeviceProperties* out) {
  if (dnn.version < 90800)
    return Status::error("cuDNN " + std::to_string(dnn.version) +
                         " has no device properties (9.8 and up)");
  out->dnn_ = &dnn;
  cudnnStatus_t s =
      dnn.createDescriptor(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, &out->d_);
  if (s == CUDNN_STATUS_SUCCESS)
    s = dnn.setAttribute(out->d_, attr, type, count, value);
  if (s == CUDNN_STATUS_SUCCESS)
    s = dnn.finalize(out->d_);
  if (s != CUDNN_STATUS_SUCCESS)
    return Status::error(std::string("cuDNN device properties ") + from +
                         ": " + statusText(dnn, s));
  return Status::ok();
}

Status DeviceProperties::fromJson(const Cudnn& dnn, const std::string& json,
                                  DeviceProperties* out) {
  return make(dnn, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
              int64_t(json.size()), json.data(), "from JSON", out);
}

Status DeviceProperties::fromHandle(const Cudnn& dnn, cudnnHandle_t handle,
                                    DeviceProperties* out) {
  return make(dnn, CUDNN_ATTR_DEVICEPROP_HANDLE, CUDNN_TYPE_HANDLE, 1,
              &handle, "of the device", out);
}

Status DeviceProperties::json(std::string* out) const {
  int64_t n = 0;
  cudnnStatus_t s = dnn_->getAttribute(
      d_, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0, &n,
      nullptr);
  if (s == CUDNN_STATUS_SUCCESS) {
    out->assign(size_t(n), '\0');
    s = dnn_->getAttribute(d_, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION,
                           CUDNN_TYPE_CHAR, n, &n, out->data());
    out->resize(size_t(n));
    while (!out->empty() && out->back() == '\0')
      out->pop_back();
  }
  if (s != CUDNN_STATUS_SUCCESS)
    return Status::error("cuDNN device properties as JSON: " +
                         statusText(*dnn_, s));
  return Status::ok();
}

Status planConv(const Cudnn& dnn, PlanTarget target, const ConvProblem& p,
                PlanInfo* info, std::shared_ptr<const void>* keep) {
  GraphBuilder g(dnn, target, "conv2d " + describe(p));
  std::vector<Desc> ops;
  MC_RETURN_IF_ERROR(convOps(g, p, &ops));
  std::shared_ptr<const CachedPlan> plan;
  MC_RETURN_IF_ERROR(g.plan(ops, convAllowsTf32(p), info, &plan));
  if (keep)
    *keep = std::move(plan);
  return Status::ok();
}

Status planAttention(const Cudnn& dnn, PlanTarget target,
                     const AttentionProblem& p, PlanInfo* info,
                     std::shared_ptr<const void>* keep) {
  if (p.dtype != DType::F16 && p.dtype != DType::BF16)
    return Status::error(describe(p) + ": cuDNN's fused attention takes f16 "
                                       "and bf16");
  GraphBuilder g(dnn, target, describe(p));
  std::vector<Desc> ops;
  MC_RETURN_IF_ERROR(attentionOps(g, p, &ops));
  std::shared_ptr<const CachedPlan> plan;
  MC_RETURN_IF_ERROR(g.plan(ops, true, info, &plan));
  if (keep)
    *keep = std::move(plan);
  return Status::ok();
}

namespace {

/// [heads, x, y] as [1, heads, x, y]; rank 4 as it is.
void view4d(Shape* dims, std::vector<int64_t>* strides) {
  if (dims->size() == 3) {
    strides->insert(strides->begin(), (*dims)[0] * (*strides)[0]);
    dims->insert(dims->begin(), 1);
  }
}

} // namespace

Status attentionProblemOf(const AttentionRegion& m,
                          const std::vector<ConstTensor>& inputs,
                          const MutTensor& output, float scale,
                          AttentionProblem* out) {
  if (!m.ok)
    return Status::error("not an attention region cuDNN runs: " + m.why);
  const ConstTensor &q = inputs.at(m.q), &k = inputs.at(m.k),
                    &v = inputs.at(m.v);
  size_t rank = q.shape.size();
  if (rank != 3 && rank != 4)
    return Status::error("attention of rank " + std::to_string(rank));
  AttentionProblem p;
  p.dtype = output.dtype;
  Shape qd = q.shape, vd = v.shape, od = output.shape;
  std::vector<int64_t> qs = packedStrides(qd), vs = packedStrides(vd),
                       os = packedStrides(od);
  // KT [.., d, skv]: k itself, or the transposed view of k [.., skv, d].
  Shape kd = k.shape;
  std::vector<int64_t> ks = packedStrides(kd);
  if (m.kTransposed) {
    std::swap(kd[rank - 1], kd[rank - 2]);
    std::swap(ks[rank - 1], ks[rank - 2]);
  }
  view4d(&qd, &qs);
  view4d(&kd, &ks);
  view4d(&vd, &vs);
  view4d(&od, &os);
  p.b = qd[0], p.h = qd[1], p.sq = qd[2], p.d = qd[3];
  p.skv = vd[2], p.dv = vd[3];
  p.qStrides = qs, p.ktStrides = ks, p.vStrides = vs, p.oStrides = os;
  p.q = q.data, p.kt = k.data, p.v = v.data, p.o = output.data;
  p.scale = scale;
  if (m.mask >= 0) {
    const ConstTensor& mask = inputs.at(size_t(m.mask));
    // The scores' shape: the output's, with skv last.
    Shape scores = output.shape;
    scores.back() = p.skv;
    std::vector<int64_t> st(scores.size(), 0), ms = packedStrides(mask.shape);
    if (m.maskBroadcast) {
      if (m.maskDims.size() != mask.shape.size())
        return Status::error("the mask's broadcast dims do not match it");
      for (size_t i = 0; i < mask.shape.size(); ++i) {
        size_t to = size_t(m.maskDims[i]);
        if (to >= scores.size() ||
            (mask.shape[i] != 1 && mask.shape[i] != scores[to]))
          return Status::error("the mask " + shapeString(mask.shape) +
                               " does not broadcast to the scores " +
                               shapeString(scores));
        if (mask.shape[i] != 1)
          st[to] = ms[i];
      }
    } else if (mask.shape == scores) {
      st = ms;
    } else {
      return Status::error("the mask " + shapeString(mask.shape) +
                           " is not of the scores' shape " +
                           shapeString(scores));
    }
    Shape dims(scores.size());
    for (size_t i = 0; i < scores.size(); ++i)
      dims[i] = st[i] == 0 ? 1 : scores[i];
    if (dims.size() == 3) {
      dims.insert(dims.begin(), 1);
      st.insert(st.begin(), 0);
    }
    p.hasBias = true;
    p.biasType = mask.dtype;
    p.biasDims = dims;
    p.biasStrides = st;
    p.bias = mask.data;
  }
  *out = std::move(p);
  return Status::ok();
}

Status bindAttention(CudaDevice& dev, const KernelRequest& r,
                     const AttentionProblem& p, BoundKernel* out,
                     size_t* workspaceBytes) {
  *workspaceBytes = 0;
  if (p.dtype != DType::F16 && p.dtype != DType::BF16)
    return Status::error(describe(p) + ": cuDNN's fused attention takes f16 "
                                       "and bf16");
  std::shared_ptr<PlanState> st;
  MC_RETURN_IF_ERROR(planOnDevice(dev, describe(p), true, &st,
                                  [&](const GraphBuilder& g,
                                      std::vector<Desc>* ops) {
                                    return attentionOps(g, p, ops);
                                  }));
  st->byValue = p.scale;
  st->uids = {kQ, kKT, kV, kO, kScale};
  st->pointers = {const_cast<void*>(p.q), const_cast<void*>(p.kt),
                  const_cast<void*>(p.v), p.o, &st->byValue};
  if (p.hasBias) {
    st->uids.push_back(kAttnBias);
    st->pointers.push_back(const_cast<void*>(p.bias));
  }
  *workspaceBytes = size_t(st->workspace);
  *out = planStep(dev, r, st, describe(p));
  return Status::ok();
}

Status bindConv(CudaDevice& dev, const KernelRequest& r, const ConvProblem& p,
                BoundKernel* out, size_t* workspaceBytes) {
  *workspaceBytes = 0;
  if (p.dtype != DType::F32 && p.dtype != DType::F16 &&
      p.dtype != DType::BF16)
    return Status::error(std::string("conv2d: cuDNN takes f32, f16 and bf16, "
                                     "not ") +
                         dtypeName(p.dtype));
  if (numElements(p.y) == 0) {
    *out = [](void*) { return Status::ok(); };
    return Status::ok();
  }
  std::shared_ptr<PlanState> st;
  MC_RETURN_IF_ERROR(planOnDevice(dev, "conv2d " + describe(p),
                                  convAllowsTf32(p), &st,
                                  [&](const GraphBuilder& g,
                                      std::vector<Desc>* ops) {
                                    return convOps(g, p, ops);
                                  }));
  st->uids = {kX, kW, kY};
  st->pointers = {const_cast<void*>(p.xData), const_cast<void*>(p.wData),
                  p.yData};
  if (p.bias) {
    st->uids.push_back(kBias);
    st->pointers.push_back(const_cast<void*>(p.bias));
  }
  st->owned = p.owned;
  *workspaceBytes = size_t(st->workspace);
  *out = planStep(dev, r, st, "conv2d " + describe(p));
  return Status::ok();
}

Status channelsLastFilter(CudaDevice& dev, const ConstTensor& w,
                          std::shared_ptr<const void>* out) {
  if (w.shape.size() != 4 || !isFloat(w.dtype))
    return Status::error(
        "conv2d: a KRSC filter from " + std::string(dtypeName(w.dtype)) +
        shapeString(w.shape) + ": takes a rank-4 float KCRS filter");
  // The copy of these bytes, if a binding still holds one: the constant
  // stays at this address while any binding of it lives.
  char at[32];
  std::snprintf(at, sizeof at, "%p", w.data);
  std::string key = std::string("krsc ") + at + " " + dtypeName(w.dtype) +
                    shapeString(w.shape);
  if ((*out = dev.derived(key)))
    return Status::ok();
  const size_t bytes = size_t(numElements(w.shape)) * dtypeSize(w.dtype);
  DeviceMemory mem;
  MC_RETURN_IF_ERROR(dev.allocate(bytes, &mem));
  std::vector<uint8_t> from(bytes), to(bytes);
  MC_RETURN_IF_ERROR(dev.copyToHost(from.data(), w.data, bytes));
  // [k][c][r][s] -> [k][r][s][c], by the CPU's transpose kernel.
  const Shape& s = w.shape;
  MC_RETURN_IF_ERROR(transpose({w.dtype, s, from.data()}, {0, 2, 3, 1},
                               {w.dtype, {s[0], s[2], s[3], s[1]}, to.data()}));
  // Staged (`to` may go on return) and queued on the device's one
  // stream, ahead of every launch of the step.
  MC_RETURN_IF_ERROR(dev.copyToDevice(mem.get(), to.data(), bytes));
  auto held = std::make_shared<DeviceMemory>(std::move(mem));
  *out = std::shared_ptr<const void>(held, held->get());
  dev.keepDerived(key, *out);
  return Status::ok();
}

} // namespace mc::rt::cuda
