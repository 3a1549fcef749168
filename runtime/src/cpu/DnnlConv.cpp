// conv2d through oneDNN, with its epilogue (bias, residual, activation) as
// post-ops: the CPU's fast convolution, tested against the im2col
// reference (KernelsNN.cpp). Also bf16 / f16 matmuls through oneDNN's
// matmul primitive where the CPU has instructions for them
// (bindNarrowMatmul).
//
// Layouts: our tensors are plain NCHW / OIHW in the arena. Weights take
// the layout the primitive prefers (format `any`): reordered once at bind
// when constant, per call into the workspace otherwise (a reorder is
// O(weights), the convolution O(weights * N*OH*OW)); a session binds each
// batch size on its own, so each binding holds its copy. Source and
// destination: see blockedActivations.
//
// Threads: Debian's oneDNN runs on OpenMP, as the runtime's parallel-for
// does when built with it (Parallel.cpp): each call sets OpenMP's thread
// count to the runtime's (MODELC_NUM_THREADS / OMP_NUM_THREADS / cores).
// Scratch: oneDNN's scratchpad is user-managed and lives in the step
// workspace with the reordered tensors, so a call does not allocate.
#include "cpu/DnnlConv.h"
#include "KernelUtil.h"
#include "Parallel.h"
#include "modelc/kernels.h"
#include "modelc/shapes.h"

#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <unordered_map>

namespace mc::rt {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

const dnnl::engine &cpuEngine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

/// OpenMP's thread count for this thread set to the runtime's, as every
/// call does before it runs a primitive: primitive descriptors made after
/// it size their scratchpad for the threads that will run them (a binding
/// made after another kernel changed the count would otherwise ask for
/// another size than its twin made before).
void useThreads(int threads) {
  if (omp_get_max_threads() != threads)
    omp_set_num_threads(threads);
}
void useRuntimeThreads() { useThreads(int(detail::maxThreads())); }

/// A CPU stream is cheap but not meant to be shared between threads that
/// execute at once: one per thread.
dnnl::stream &threadStream() {
  thread_local dnnl::stream stream(cpuEngine());
  return stream;
}

/// Source and destination in plain NCHW (the primitive reads and writes the
/// arena directly; oneDNN then runs its own im2col + sgemm) or reordered to
/// and from the blocked layout its direct kernels want (nChw8c): see
/// docs/decisions.md, "CPU convolution through oneDNN", for the
/// measurements behind the choice (modelc-conv-bench). Blocked wins on every ResNet-18 shape with a 3x3 or 7x7 window (1.2-1.6x
/// faster than plain, reorders included); 1x1 convolutions are a plain
/// sgemm already, and their reorders cost more than the blocked kernel
/// saves.
bool blockedActivations(const Shape &weight) {
  return weight[2] * weight[3] > 1;
}

bool eltwiseOf(const Epilogue &e, dnnl::algorithm *alg) {
  switch (*e.activation) {
  case OpId::Relu:
    *alg = dnnl::algorithm::eltwise_relu;
    return true;
  case OpId::Gelu:
    *alg = e.geluTanh ? dnnl::algorithm::eltwise_gelu_tanh
                      : dnnl::algorithm::eltwise_gelu_erf;
    return true;
  case OpId::Sigmoid:
    *alg = dnnl::algorithm::eltwise_logistic;
    return true;
  case OpId::Tanh:
    *alg = dnnl::algorithm::eltwise_tanh;
    return true;
  case OpId::Hardswish:
    *alg = dnnl::algorithm::eltwise_hardswish;
    return true;
  case OpId::Exp:
    *alg = dnnl::algorithm::eltwise_exp;
    return true;
  case OpId::Abs:
    *alg = dnnl::algorithm::eltwise_abs;
    return true;
  case OpId::Clamp: // clip: min(max(x, alpha), beta); NaN stays NaN
    *alg = dnnl::algorithm::eltwise_clip;
    return true;
  default:
    return false;
  }
}

constexpr size_t kAlign = 64;
size_t alignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

/// A tensor the primitive reads or writes in another layout than ours: the
/// reorder between the two and where the reordered copy lives.
struct Staged {
  dnnl::reorder reorder;
  memory user, staged; // staged's handle: workspace + offset (per call)
  size_t offset = 0;
};

/// Everything a bound call needs, shared by the copies of its BoundKernel.
struct DnnlConv {
  dnnl::convolution_forward conv;
  std::unordered_map<int, memory> args;
  memory src, dst, scratchpad;
  std::optional<Staged> srcIn, weightIn, dstOut, residualIn;
  memory constWeights; // owned: the weights reordered at bind
  const void *residual = nullptr;
  void *out = nullptr;
  size_t outBytes = 0;
  int threads = 1;
  /// A fused activation loses NaN in oneDNN (its max-based relu and clip
  /// turn NaN into a bound), where the runtime's kernels keep it. So the
  /// call first checks the source (and residual, bias): when a NaN or inf
  /// is there, or values large enough that the sums could overflow (a
  /// bound on the weights' per-channel L1 norm times the largest input), it
  /// runs `exact` (the same convolution without the activation) and then
  /// the runtime's own activation kernel: the unfused ops' bits. A source
  /// or residual whose writer published a finite bound (ValueBound) is not
  /// read: the bound stands in for its largest |v|.
  std::optional<dnnl::convolution_forward> exact;
  Epilogue activation; // only .activation and the clamp bounds
  Shape outShape;
  const float *x = nullptr, *bias = nullptr;
  int64_t xCount = 0, biasCount = 0, outCount = 0;
  const float *w = nullptr;
  int64_t wCount = 0, wPerChannel = 0;
  double weightBound = 0; // weightNorm() of constant weights; -1: per call
  /// The bound the source's writer publishes (null: none), and this
  /// result's slot (null: nobody reads it).
  const ValueBound *xKnown = nullptr;
  ValueBound *published = nullptr;
  /// A clamp's bounds (clampLo <= clampHi; else +-inf): its result is
  /// clamp(s) for a sum s with |s| <= B, so within [clampLo, clampHi]
  /// and, where that holds 0, within B too.
  double clampLo = -INFINITY, clampHi = INFINITY;

  /// The largest |clamp(s)| over |s| <= sumBound.
  double activationBound(double sumBound) const {
    return detail::clampBound(sumBound, clampLo, clampHi);
  }

  /// A bound on every output channel's sum of |w|: the weights per channel
  /// times the largest |w| (inf when a weight is NaN or inf: then every
  /// call takes the exact path).
  double weightNorm() const {
    return double(wPerChannel) * detail::maxAbsOrInf(w, wCount);
  }
  /// The largest output channel's sum of |w| itself (each channel's
  /// weights are contiguous: O is the outermost dim), for constant weights
  /// at bind: several times tighter than weightNorm(), so the bounds
  /// published down a network grow more slowly.
  double channelL1() const {
    double most = 0;
    for (int64_t c = 0; c * wPerChannel < wCount; ++c) {
      double sum = 0;
      for (int64_t i = c * wPerChannel; i < (c + 1) * wPerChannel; ++i)
        sum += std::fabs(double(w[i]));
      if (!(sum < INFINITY)) // NaN or inf among them
        return INFINITY;
      most = std::max(most, sum);
    }
    // Each double sum is within wPerChannel * 2^-53 of its value.
    return most * (1 + double(wPerChannel) * 0x1p-52);
  }

  /// The largest |v| of a tensor: its writer's finite bound, else a scan
  /// when `scan` (inf when not).
  static double largest(const ValueBound *known, const float *v, int64_t n,
                        bool scan) {
    if (known && known->written && known->maxAbs < INFINITY)
      return known->maxAbs;
    return scan ? double(detail::maxAbsOrInf(v, n)) : INFINITY;
  }

  /// Whether the fused activation gives the unfused ops' bits on this call
  /// (every value finite and no sum near overflow), and the bound this
  /// result publishes (inf when it is not finite or was not looked at).
  /// With a guard (`exact`) the source and residual are scanned unless
  /// their writers bound them; without one nothing large is read, and the
  /// result is bounded only where every bound is known.
  bool fusedIsExact(double *resultBound) const {
    bool guard = exact.has_value();
    double mb = bias ? detail::maxAbsOrInf(bias, biasCount) : 0.0;
    double mr = residual
                    ? largest(nullptr, static_cast<const float *>(residual),
                              outCount, guard)
                    : 0.0;
    double l1 = weightBound >= 0 ? weightBound
                : guard          ? weightNorm()
                                 : INFINITY;
    double mx = largest(xKnown, x, xCount, guard);
    bool finite = detail::convSumsStayFinite(l1, mx, mb, mr);
    // A published bound is looser than the values (bounds grow layer by
    // layer): too loose to clear the sums, the guard scans before it
    // sends the call to the exact path.
    bool fromBound = xKnown && xKnown->written && xKnown->maxAbs < INFINITY;
    if (!finite && guard && fromBound) {
      mx = detail::maxAbsOrInf(x, xCount);
      finite = detail::convSumsStayFinite(l1, mx, mb, mr);
    }
    *resultBound = finite ? activationBound(detail::convResultBound(
                                l1, mx, mb, mr, wPerChannel))
                          : INFINITY;
    return finite;
  }

  Status operator()(void *workspace) {
    uint8_t *ws = static_cast<uint8_t *>(workspace);
    if (published) // unknown until this call has succeeded
      published->maxAbs = INFINITY;
    useThreads(threads);
    try {
      dnnl::stream &s = threadStream();
      scratchpad.set_data_handle(ws);
      auto stage = [&](Staged &st, bool run) {
        st.staged.set_data_handle(ws + st.offset);
        if (run)
          st.reorder.execute(s, {{DNNL_ARG_FROM, st.user},
                                 {DNNL_ARG_TO, st.staged},
                                 {DNNL_ARG_SCRATCHPAD, scratchpad}});
      };
      if (weightIn)
        stage(*weightIn, true);
      if (srcIn)
        stage(*srcIn, true);
      if (dstOut)
        stage(*dstOut, false);
      // The sum post-op adds what the destination holds: the residual.
      if (residualIn)
        stage(*residualIn, true);
      else if (residual && residual != out)
        std::memcpy(out, residual, outBytes);
      double resultBound = INFINITY;
      bool finite = (exact || published) && fusedIsExact(&resultBound);
      bool fused = !exact || finite;
      (fused ? conv : *exact).execute(s, args);
      if (dstOut)
        dstOut->reorder.execute(s, {{DNNL_ARG_FROM, dstOut->staged},
                                    {DNNL_ARG_TO, dstOut->user},
                                    {DNNL_ARG_SCRATCHPAD, scratchpad}});
      s.wait();
      if (!fused) { // the activation as the unfused step runs it
        ConstTensor y{DType::F32, outShape, out};
        MutTensor yOut{DType::F32, outShape, out};
        Status st =
            *activation.activation == OpId::Clamp
                ? clamp(y, activation.clampMin, activation.clampMax, yOut)
                : unary(*activation.activation, y, yOut, activation.geluTanh);
        if (!st)
          return st;
      }
      if (published)
        published->maxAbs = resultBound;
    } catch (const dnnl::error &e) {
      return Status::error(std::string("conv2d (oneDNN): ") + e.what());
    }
    return Status::ok();
  }
};

Status checkEpilogue(const Epilogue &e, const MutTensor &out, bool channelsLast,
                     dnnl::algorithm *alg) {
  int64_t channels = out.shape[channelsLast ? 3 : 1];
  if (e.bias &&
      (e.bias->dtype != DType::F32 || e.bias->shape != Shape{channels}))
    return Status::error("conv2d (oneDNN): bias " + shapeString(e.bias->shape) +
                         " " + dtypeName(e.bias->dtype) + ", expected f32 [" +
                         std::to_string(channels) + "]");
  if (e.residual &&
      (e.residual->dtype != DType::F32 || e.residual->shape != out.shape))
    return Status::error("conv2d (oneDNN): residual " +
                         shapeString(e.residual->shape) + " " +
                         dtypeName(e.residual->dtype) + ", expected f32 " +
                         shapeString(out.shape));
  if (e.activation && !eltwiseOf(e, alg))
    return Status::error(std::string("conv2d (oneDNN): no fused activation "
                                     "mc.") +
                         opName(*e.activation));
  return Status::ok();
}

} // namespace

namespace detail {

Status bindConv2d(const ConstTensor &input, const ConstTensor &weight,
                  const Conv2dParams &p, const Epilogue &epilogue,
                  const MutTensor &out, bool weightsConstant,
                  ConvLayout layout, BoundKernel *bound,
                  size_t *workspaceBytes) {
  // f32; bf16 and f16 too (f32 accumulation, the result rounded once, as
  // the reference's f32 convolution then cast), without an epilogue: a
  // post-op on the f32 accumulator would round once where the unfused ops
  // round twice. oneDNN has kernels for them where the CPU has the
  // instructions (AVX512_BF16, AVX512_FP16); elsewhere only its reference,
  // refused below.
  if (input.dtype != weight.dtype || input.dtype != out.dtype ||
      (input.dtype != DType::F32 && input.dtype != DType::BF16 &&
       input.dtype != DType::F16))
    return Status::error(
        std::string("conv2d (oneDNN): dtypes ") + dtypeName(input.dtype) +
        ", " + dtypeName(weight.dtype) + " -> " + dtypeName(out.dtype) +
        " are not supported (f32, bf16 or f16, all alike)");
  if (input.dtype != DType::F32 && !epilogue.empty())
    return Status::error("conv2d (oneDNN): a fused epilogue is f32 only");
  if (input.shape.size() != 4 || weight.shape.size() != 4)
    return Status::error("conv2d (oneDNN): input and weight must be rank 4");
  Shape expect;
  MC_RETURN_IF_ERROR(shapes::conv2d(
      input.shape, weight.shape, {p.strideH, p.strideW},
      {p.padTop, p.padLeft, p.padBottom, p.padRight},
      {p.dilationH, p.dilationW}, p.groups, &expect, p.channelsLast));
  if (out.shape != expect)
    return Status::error("conv2d (oneDNN): result shape " +
                         shapeString(out.shape) + ", expected " +
                         shapeString(expect));
  if (numElements(out.shape) == 0 || numElements(weight.shape) == 0)
    return Status::error("conv2d (oneDNN): empty tensors run the reference");
  dnnl::algorithm act = dnnl::algorithm::undef;
  MC_RETURN_IF_ERROR(checkEpilogue(epilogue, out, p.channelsLast, &act));

  // oneDNN's dims are NCHW whatever the layout; channels_last is the nhwc
  // tag on the same dims.
  auto logical = [&](const Shape &s) {
    return p.channelsLast ? memory::dims{s[0], s[3], s[1], s[2]}
                          : memory::dims(s.begin(), s.end());
  };
  const memory::dims srcDims = logical(input.shape),
                     dstDims = logical(out.shape);
  int64_t g = p.groups, o = weight.shape[0];
  memory::dims weiDims =
      g == 1 ? memory::dims(weight.shape.begin(), weight.shape.end())
             : memory::dims{g, o / g, weight.shape[1], weight.shape[2],
                            weight.shape[3]};
  Tag weiTag = g == 1 ? Tag::oihw : Tag::goihw;
  auto f32 = memory::data_type::f32;
  auto dt = input.dtype == DType::BF16  ? memory::data_type::bf16
            : input.dtype == DType::F16 ? memory::data_type::f16
                                        : f32;
  try {
    const dnnl::engine &eng = cpuEngine();
    Tag actTag = p.channelsLast ? Tag::nhwc : Tag::nchw;
    memory::desc srcUser(srcDims, dt, actTag), dstUser(dstDims, dt, actTag),
        weiUser(weiDims, dt, weiTag);
    // NHWC is as fast as the blocked layouts on every ResNet-18 shape
    // (docs/decisions.md, "Channels-last activations"): no reorders.
    bool plain =
        p.channelsLast || layout == ConvLayout::Plain ||
        (layout == ConvLayout::Auto && !blockedActivations(weight.shape));
    memory::desc srcAny = plain ? srcUser : memory::desc(srcDims, dt, Tag::any),
                 dstAny = plain ? dstUser : memory::desc(dstDims, dt, Tag::any),
                 weiAny(weiDims, dt, Tag::any);
    // The bias must round as conv2d then add do, so that a fused region
    // equals the unfused steps bit for bit: added once to the finished f32
    // sum. oneDNN's brgemm kernels (brgconv, brdgmm) and its gemm
    // convolution add the primitive's own bias that way, at the store; its
    // older direct kernels (jit:avx2, jit:avx512_core, ...) add it at the
    // first input-channel block's store, and the later blocks sum on top of
    // it. So the bias is the primitive's own where the kernel is one of the
    // first kind, and a binary post-op on the result elsewhere, which costs
    // more (MobileNetV2's 16 -> 96 expansion at 112x112: 1.7 ms against 1.4
    // with its relu6). DnnlConv.BiasRoundsAsTheUnfusedConvolutionThenAdd
    // checks both, the second under ONEDNN_MAX_CPU_ISA=AVX2.
    memory::desc biasMd({1, o, 1, 1}, f32, Tag::nchw),
        biasArgMd({o}, f32, Tag::a);
    auto convDesc = [&](bool withBias) {
      return dnnl::convolution_forward::desc(
          dnnl::prop_kind::forward_inference,
          dnnl::algorithm::convolution_direct, srcAny, weiAny,
          withBias ? biasArgMd : memory::desc(), dstAny, {p.strideH, p.strideW},
          {p.dilationH - 1, p.dilationW - 1}, {p.padTop, p.padLeft},
          {p.padBottom, p.padRight});
    };
    const dnnl::convolution_forward::desc desc = convDesc(false);
    bool biasArg = false; // the bias as the primitive's own
    // The primitive with the epilogue's post-ops, the activation optional
    // (the guard's `exact` primitive leaves it out).
    auto primitiveDesc = [&](bool withActivation) {
      dnnl::post_ops ops;
      if (epilogue.bias && !biasArg)
        ops.append_binary(dnnl::algorithm::binary_add, biasMd);
      if (epilogue.residual)
        ops.append_sum(1.f);
      bool clip = epilogue.activation && *epilogue.activation == OpId::Clamp;
      if (epilogue.activation && withActivation)
        ops.append_eltwise(1.f, act, clip ? epilogue.clampMin : 0.f,
                           clip ? epilogue.clampMax : 0.f);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      attr.set_post_ops(ops);
      return dnnl::convolution_forward::primitive_desc(
          biasArg ? convDesc(true) : desc, attr, eng);
    };
    auto addsBiasAtTheStore = [](const std::string &impl) {
      return impl.rfind("brgconv", 0) == 0 || impl.rfind("brdgmm", 0) == 0 ||
             impl.find("gemm") != std::string::npos;
    };
    auto isReference = [](const dnnl::convolution_forward::primitive_desc &d) {
      return std::string(d.impl_info_str()).rfind("ref", 0) == 0;
    };
    useRuntimeThreads();
    // With a bias, first the primitive's own: kept where its kernel adds
    // it at the store, else the binary post-op.
    std::optional<dnnl::convolution_forward::primitive_desc> withBiasArg;
    if (epilogue.bias) {
      biasArg = true;
      try {
        withBiasArg = primitiveDesc(true);
      } catch (const dnnl::error &) { // no kernel takes it so
      }
      biasArg = withBiasArg && addsBiasAtTheStore(withBiasArg->impl_info_str());
    }
    dnnl::convolution_forward::primitive_desc pd =
        biasArg ? *withBiasArg : primitiveDesc(true);
    // oneDNN's reference implementation is what it falls back to when no
    // optimized kernel takes this combination (a binary bias with a sum
    // post-op, on this library): orders of magnitude slower than im2col,
    // so refuse it and let the caller take its own path.
    if (isReference(pd))
      return Status::error("conv2d (oneDNN): only the reference "
                           "implementation takes this convolution and "
                           "epilogue");
    // The post-ops add to the f32 result the plain convolution (what an
    // unfused conv2d step binds) computes: the same bits only when the
    // library runs the same kernel on the same layouts for both.
    if (!epilogue.empty()) {
      dnnl::primitive_attr plainAttr;
      plainAttr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::convolution_forward::primitive_desc plain(desc, plainAttr, eng);
      if (std::string(plain.impl_info_str()) != pd.impl_info_str() ||
          plain.src_desc() != pd.src_desc() ||
          plain.weights_desc() != pd.weights_desc() ||
          plain.dst_desc() != pd.dst_desc())
        return Status::error(
            std::string("conv2d (oneDNN): with its epilogue the convolution "
                        "runs ") +
            pd.impl_info_str() + ", without it " + plain.impl_info_str() +
            " (or other layouts): fused would not equal unfused");
    }

    auto k = std::make_shared<DnnlConv>();
    k->conv = dnnl::convolution_forward(pd);
    size_t scratch = pd.scratchpad_desc().get_size();
    if (epilogue.activation) {
      // The guard (DnnlConv::exact): the same primitive without the
      // activation, on the same layouts and reordered weights.
      dnnl::convolution_forward::primitive_desc epd = primitiveDesc(false);
      if (epd.src_desc() != pd.src_desc() ||
          epd.weights_desc() != pd.weights_desc() ||
          epd.dst_desc() != pd.dst_desc() || isReference(epd))
        return Status::error("conv2d (oneDNN): the convolution without its "
                             "activation takes other layouts or only "
                             "oneDNN's reference implementation");
      // And the same kernel: another one may add the bias otherwise
      // (biasArg was chosen for pd's), or sum in another order.
      if (std::string(epd.impl_info_str()) != pd.impl_info_str())
        return Status::error(std::string("conv2d (oneDNN): without its "
                                         "activation the convolution runs ") +
                             epd.impl_info_str() + ", with it " +
                             pd.impl_info_str());
      k->exact = dnnl::convolution_forward(epd);
      scratch = std::max(scratch, epd.scratchpad_desc().get_size());
      k->activation.activation = epilogue.activation;
      k->activation.geluTanh = epilogue.geluTanh;
      k->activation.clampMin = epilogue.clampMin;
      k->activation.clampMax = epilogue.clampMax;
    }
    // A bound on the result is published for no activation, relu and a
    // clamp to a range (min > max is max everywhere), f32 only as the
    // guard. Without a guard nothing is scanned, so a finite bound needs
    // constant weights and an input whose writer publishes one; else the
    // slot is left alone (readers then see no writer and bind as without).
    OpId actOp = epilogue.activation ? *epilogue.activation : OpId::Relu;
    bool clampRange =
        actOp == OpId::Clamp && epilogue.clampMin <= epilogue.clampMax;
    bool canBound = epilogue.activation ||
                    (weightsConstant && !epilogue.residual &&
                     epilogue.inputBound && epilogue.inputBound->written);
    if (input.dtype == DType::F32 && canBound &&
        (actOp == OpId::Relu || clampRange))
      k->published = epilogue.resultBound;
    if (clampRange) {
      k->clampLo = epilogue.clampMin;
      k->clampHi = epilogue.clampMax;
    }
    if (epilogue.activation || k->published) {
      k->xKnown = epilogue.inputBound;
      k->outShape = out.shape;
      k->x = static_cast<const float *>(input.data);
      k->xCount = numElements(input.shape);
      k->outCount = numElements(out.shape);
      if (epilogue.bias) {
        k->bias = static_cast<const float *>(epilogue.bias->data);
        k->biasCount = numElements(epilogue.bias->shape);
      }
      k->w = static_cast<const float *>(weight.data);
      k->wCount = numElements(weight.shape);
      k->wPerChannel = k->wCount / std::max<int64_t>(o, 1);
      // Constant weights: their bound once, here; else at each call.
      k->weightBound = weightsConstant ? k->channelL1() : -1;
    }
    size_t offset = 0; // of the staged tensors, after the scratchpad
    // A reorder between our layout and the primitive's, its copy placed in
    // the workspace after the earlier ones.
    auto makeStage = [&](const memory::desc &from, const memory::desc &to,
                         const void *userData, bool toUser) {
      dnnl::primitive_attr rattr;
      rattr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::reorder::primitive_desc rpd(eng, from, eng, to, rattr);
      scratch = std::max(scratch, rpd.scratchpad_desc().get_size());
      const memory::desc &userMd = toUser ? to : from,
                         &stagedMd = toUser ? from : to;
      Staged st;
      st.reorder = dnnl::reorder(rpd);
      st.user = memory(userMd, eng, const_cast<void *>(userData));
      st.staged = memory(stagedMd, eng, nullptr);
      st.offset = offset;
      offset += alignUp(stagedMd.get_size());
      return st;
    };

    // Weights: reordered once now when constant, per call otherwise.
    memory weights(weiUser, eng, const_cast<void *>(weight.data));
    if (pd.weights_desc() != weiUser) {
      if (weightsConstant) {
        dnnl::reorder::primitive_desc rpd(eng, weiUser, eng, pd.weights_desc());
        k->constWeights = memory(pd.weights_desc(), eng);
        dnnl::stream s(eng);
        dnnl::reorder(rpd).execute(s, weights, k->constWeights);
        s.wait();
        weights = k->constWeights;
      } else {
        k->weightIn = makeStage(weiUser, pd.weights_desc(), weight.data, false);
        weights = k->weightIn->staged;
      }
    }
    memory src(srcUser, eng, const_cast<void *>(input.data));
    if (pd.src_desc() != srcUser) {
      k->srcIn = makeStage(srcUser, pd.src_desc(), input.data, false);
      src = k->srcIn->staged;
    }
    memory dst(dstUser, eng, out.data);
    if (pd.dst_desc() != dstUser) {
      k->dstOut = makeStage(pd.dst_desc(), dstUser, out.data, true);
      dst = k->dstOut->staged;
      if (epilogue.residual) { // into the staged destination
        k->residualIn = makeStage(dstUser, pd.dst_desc(),
                                  epilogue.residual->data, false);
        offset -= alignUp(pd.dst_desc().get_size());
        k->residualIn->offset = k->dstOut->offset;
      }
    }
    // The staged tensors follow the scratchpad in the workspace.
    size_t base = alignUp(scratch);
    for (auto *st : {&k->srcIn, &k->weightIn, &k->dstOut, &k->residualIn})
      if (*st)
        (*st)->offset += base;
    // One scratchpad, sized for the largest user: the primitive and the
    // reorders run one after the other.
    k->scratchpad =
        scratch ? memory(memory::desc({memory::dim(scratch)},
                                      memory::data_type::u8, Tag::a),
                         eng, nullptr)
                : memory(memory::desc(), eng, nullptr);
    k->args = {{DNNL_ARG_SRC, src},
               {DNNL_ARG_WEIGHTS, weights},
               {DNNL_ARG_DST, dst},
               {DNNL_ARG_SCRATCHPAD, k->scratchpad}};
    if (biasArg)
      k->args.emplace(
          DNNL_ARG_BIAS,
          memory(biasArgMd, eng, const_cast<void *>(epilogue.bias->data)));
    else if (epilogue.bias)
      k->args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                      memory(biasMd, eng,
                             const_cast<void *>(epilogue.bias->data)));
    k->residual = epilogue.residual ? epilogue.residual->data : nullptr;
    k->out = out.data;
    k->outBytes = size_t(numElements(out.shape)) * dtypeSize(out.dtype);
    k->threads = detail::maxThreads();
    if (k->published)
      k->published->written = true;
    *workspaceBytes = base + offset;
    *bound = [k](void *workspace) { return (*k)(workspace); };
  } catch (const dnnl::error &e) {
    return Status::error(std::string("conv2d (oneDNN): ") + e.what());
  }
  return Status::ok();
}

Status bindNarrowMatmul(const ConstTensor &a, const ConstTensor &b, bool transA,
                        bool transB, const MutTensor &out, bool bConstant,
                        BoundKernel *bound, size_t *workspaceBytes) {
  DType t = out.dtype;
  if ((t != DType::BF16 && t != DType::F16) || a.dtype != t || b.dtype != t)
    return Status::error("matmul (oneDNN): bf16 or f16 operands and result "
                         "only");
  detail::MatmulDims dims;
  if (!detail::matmulDims(a.shape, b.shape, out.shape, transA, transB, &dims))
    return Status::error("matmul (oneDNN): the shapes do not agree");
  int64_t batch = dims.batch, m = dims.m, n = dims.n, k = dims.k;
  if (batch * m * n * k == 0)
    return Status::error("matmul (oneDNN): an empty product");
  memory::data_type dt =
      t == DType::BF16 ? memory::data_type::bf16 : memory::data_type::f16;
  try {
    const dnnl::engine &eng = cpuEngine();
    // Row-major [batch, M, K] x [batch, K, N] -> [batch, M, N]; a
    // transposed operand is the same matrix read with swapped strides.
    memory::desc srcMd({batch, m, k}, dt,
                       transA ? memory::dims{m * k, 1, m}
                              : memory::dims{m * k, k, 1});
    memory::desc weiUser({batch, k, n}, dt,
                         transB ? memory::dims{k * n, 1, k}
                                : memory::dims{k * n, n, 1});
    memory::desc dstMd({batch, m, n}, dt, {m * n, n, 1});
    // Constant weights in the layout the kernel prefers, reordered once.
    memory::desc weiMd =
        bConstant ? memory::desc({batch, k, n}, dt, Tag::any) : weiUser;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    useRuntimeThreads();
    dnnl::matmul::primitive_desc pd;
    try {
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(srcMd, weiMd, dstMd),
                                        attr, eng);
    } catch (const dnnl::error &e) {
      return Status::error("matmul (oneDNN): no native " +
                           std::string(dtypeName(t)) + " kernel here (" +
                           e.what() + ")");
    }
    // Only the CPU's own bf16 / f16 instructions: oneDNN's reference and
    // its emulation on plain AVX-512 are slower than widening to f32.
    std::string impl = pd.impl_info_str();
    bool native =
        impl.find("amx") != std::string::npos ||
        impl.find(t == DType::BF16 ? "bf16" : "fp16") != std::string::npos;
    if (!native)
      return Status::error("matmul (oneDNN): no native " +
                           std::string(dtypeName(t)) + " kernel here (" + impl +
                           ")");
    struct State {
      dnnl::matmul prim;
      memory src, wei, dst, scratch;
      int threads = 1;
    };
    auto st = std::make_shared<State>();
    st->prim = dnnl::matmul(pd);
    st->src = memory(srcMd, eng, const_cast<void *>(a.data));
    st->dst = memory(dstMd, eng, out.data);
    memory user(weiUser, eng, const_cast<void *>(b.data));
    if (bConstant && pd.weights_desc() != weiUser) {
      st->wei = memory(pd.weights_desc(), eng); // owned
      dnnl::reorder(user, st->wei).execute(threadStream(), user, st->wei);
      threadStream().wait();
    } else {
      st->wei = user;
    }
    // The scratchpad is the step's workspace (an attention region's: its
    // thread slot's, shared by the slices the slot runs in turn).
    st->scratch = memory(pd.scratchpad_desc(), eng, nullptr);
    st->threads = detail::maxThreads();
    *workspaceBytes = pd.scratchpad_desc().get_size();
    *bound = [st](void *workspace) -> Status {
      useThreads(st->threads);
      try {
        dnnl::stream &s = threadStream();
        st->scratch.set_data_handle(workspace);
        st->prim.execute(s, {{DNNL_ARG_SRC, st->src},
                             {DNNL_ARG_WEIGHTS, st->wei},
                             {DNNL_ARG_DST, st->dst},
                             {DNNL_ARG_SCRATCHPAD, st->scratch}});
        s.wait();
      } catch (const dnnl::error &e) {
        return Status::error(std::string("matmul (oneDNN): ") + e.what());
      }
      return Status::ok();
    };
  } catch (const dnnl::error &e) {
    return Status::error(std::string("matmul (oneDNN): ") + e.what());
  }
  return Status::ok();
}

} // namespace detail

Status bindConv2d(const ConstTensor &input, const ConstTensor &weight,
                  const Conv2dParams &p, const Epilogue &epilogue,
                  const MutTensor &out, bool weightsConstant,
                  BoundKernel *bound, size_t *workspaceBytes) {
  return detail::bindConv2d(input, weight, p, epilogue, out, weightsConstant,
                            detail::ConvLayout::Auto, bound, workspaceBytes);
}

} // namespace mc::rt
