// The CUDA device's own kernels: matmul through cuBLASLt, a fused region
// that is a matmul with a bias and relu/tanh-gelu epilogue (cuBLASLt's
// epilogues), conv2d through cuDNN, a fused region that is a conv2d with a
// channel bias and relu (one cuDNN graph), and copy. Every other op of a CUDA artifact is a generated
// kernel (Device::bindGenerated).
#include "CublasLt.h"
#include "CudaDevice.h"
#include "Cudnn.h"
#include "cpu/CpuKernels.h" // conv2dParams
#include "modelc/library_region.h"
#include "modelc/shapes.h"

#include <cstring>

namespace mc::rt::cuda {
namespace {

/// The GemmProblem of a matmul from its operands, attributes and result
/// (the CPU kernel's semantics: [..., M, K] x [..., K, N] -> [..., M, N],
/// equal batch dims, one float dtype).
Status gemmOf(const ConstTensor& a, const ConstTensor& b, const OpAttrs& attrs,
              DType dtype, const Shape& result, GemmProblem* p) {
  p->transposeA = attrs.getBool("transpose_a");
  p->transposeB = attrs.getBool("transpose_b");
  if (!isFloat(a.dtype) || a.dtype != b.dtype || a.dtype != dtype)
    return Status::error(std::string("matmul: operands ") +
                         dtypeName(a.dtype) + " and " + dtypeName(b.dtype) +
                         " and result " + dtypeName(dtype) +
                         ": cuda takes one of f32, f16, bf16 for all three");
  Shape expected;
  MC_RETURN_IF_ERROR(
      shapes::matmul(a.shape, b.shape, p->transposeA, p->transposeB, &expected));
  if (expected != result)
    return Status::error("matmul: the result is " + shapeString(result) +
                         ", the operands give " + shapeString(expected));
  size_t r = a.shape.size();
  p->dtype = dtype;
  p->batch = 1;
  for (size_t d = 0; d + 2 < r; ++d)
    p->batch *= a.shape[d];
  p->m = result[r - 2];
  p->n = result[r - 1];
  p->k = p->transposeA ? a.shape[r - 2] : a.shape[r - 1];
  p->a = a.data;
  p->b = b.data;
  return Status::ok();
}

Status matmulKernel(const KernelRequest& r, BoundKernel* out,
                    size_t* workspaceBytes) {
  GemmProblem p;
  MC_RETURN_IF_ERROR(gemmOf(r.inputs[0], r.inputs[1], r.attrs, r.output.dtype,
                            r.output.shape, &p));
  p.d = r.output.data;
  return bindGemm(cudaDevice(r), r, p, out, workspaceBytes);
}

/// "mc.fused on cuda runs ... ; <why> (the compiler splits such regions or
/// generates a kernel for them)".
Status notAnEpilogue(const std::string& why) {
  return Status::error(
      "mc.fused: the cuda device runs a fused region itself only when it is "
      "a matmul of two inputs, optionally reshaped, plus a bias (a "
      "broadcast_in_dim of an input along the last dim), then optionally "
      "relu or gelu with tanh_approximation (cuBLASLt's epilogues); " +
      why + " (the compiler generates a kernel for such regions, or splits "
      "them)");
}

/// The ConvProblem of a conv2d from its operands, attributes and result
/// (the CPU kernel's semantics: NCHW activations, or NHWC ones with
/// channels_last; OIHW weights; one float dtype).
Status convOf(const ConstTensor& x, const ConstTensor& w, const OpAttrs& attrs,
              DType dtype, const Shape& result, ConvProblem* p) {
  if (!isFloat(x.dtype) || x.dtype != w.dtype || x.dtype != dtype)
    return Status::error(std::string("conv2d: input ") + dtypeName(x.dtype) +
                         ", weight " + dtypeName(w.dtype) + " and result " +
                         dtypeName(dtype) +
                         ": cuda takes one of f32, f16, bf16 for all three");
  p->params = conv2dParams(attrs);
  const Conv2dParams& c = p->params;
  const char* layout = c.channelsLast ? "NHWC" : "NCHW";
  if (x.shape.size() != 4 || w.shape.size() != 4 || result.size() != 4)
    return Status::error("conv2d: input " + shapeString(x.shape) + ", weight " +
                         shapeString(w.shape) + " and result " +
                         shapeString(result) + " must be rank 4 (" + layout +
                         ", OIHW)");
  Shape expected;
  Status rule = shapes::conv2d(x.shape, w.shape, {c.strideH, c.strideW},
                               {c.padTop, c.padLeft, c.padBottom, c.padRight},
                               {c.dilationH, c.dilationW}, c.groups, &expected,
                               c.channelsLast);
  if (!rule)
    return Status::error("conv2d: " + rule.message());
  if (expected != result)
    return Status::error("conv2d: the result is " + shapeString(result) +
                         ", the operands give " + shapeString(expected));
  // cuDNN takes NCHW dims whatever the layout (the strides say it).
  auto nchw = [&](const Shape& s) {
    return c.channelsLast ? Shape{s[0], s[3], s[1], s[2]} : s;
  };
  p->dtype = dtype;
  p->channelsLast = c.channelsLast;
  p->x = nchw(x.shape);
  p->w = w.shape;
  p->y = nchw(result);
  p->xData = x.data;
  p->wData = w.data;
  return Status::ok();
}

/// A channels_last convolution reads its filter as KRSC: as it lies where
/// that is KCRS's order too (1x1 kernels, and one input channel per group:
/// depthwise), else a copy made once of a constant weight
/// (channelsLastFilter); any other weight stays KCRS, which cuDNN
/// transposes at each call.
Status filterLayoutOf(const KernelRequest& r, size_t wIndex, ConvProblem* p) {
  if (!p->channelsLast)
    return Status::ok();
  if (p->w[1] == 1 || p->w[2] * p->w[3] == 1) {
    p->filterChannelsLast = true;
    return Status::ok();
  }
  if (wIndex >= r.constantInputs.size() || !r.constantInputs[wIndex])
    return Status::ok();
  MC_RETURN_IF_ERROR(
      channelsLastFilter(cudaDevice(r), r.inputs[wIndex], &p->owned));
  p->wData = p->owned.get();
  p->filterChannelsLast = true;
  return Status::ok();
}

Status conv2dKernel(const KernelRequest& r, BoundKernel* out,
                    size_t* workspaceBytes) {
  ConvProblem p;
  MC_RETURN_IF_ERROR(convOf(r.inputs[0], r.inputs[1], r.attrs, r.output.dtype,
                            r.output.shape, &p));
  MC_RETURN_IF_ERROR(filterLayoutOf(r, 1, &p));
  p.yData = r.output.data;
  return bindConv(cudaDevice(r), r, p, out, workspaceBytes);
}

/// "mc.fused on cuda runs ... ; <why> (...)", for regions led by a conv2d.
Status notAConvEpilogue(const std::string& why) {
  return Status::error(
      "mc.fused: the cuda device runs a region led by a conv2d only when it "
      "is the conv2d of two inputs, then optionally the add of a bias (a "
      "broadcast_in_dim of an input [C] along the channel dim, 1 or 3 with "
      "channels_last), then optionally relu "
      "(one cuDNN graph); " +
      why +
      " (the compiler generates a kernel for such regions, or splits "
      "them)");
}

/// A fused region led by a conv2d (rt::matchLibraryRegion's
/// ConvEpilogue): one cuDNN graph with the bias and relu as pointwise ops
/// on the f32 result.
Status fusedConvKernel(const KernelRequest& r, const LibraryRegion& match,
                       BoundKernel* out, size_t* workspaceBytes) {
  const RegionOp& conv = (*r.body)[0];
  ConvProblem p;
  MC_RETURN_IF_ERROR(convOf(r.inputs[match.lhs], r.inputs[match.rhs],
                            conv.attrs, conv.dtype, conv.shape, &p));
  MC_RETURN_IF_ERROR(filterLayoutOf(r, match.rhs, &p));
  p.yData = r.output.data;
  if (match.bias >= 0)
    p.bias = r.inputs[size_t(match.bias)].data;
  p.relu = match.activation == LibraryRegion::Activation::Relu;
  return bindConv(cudaDevice(r), r, p, out, workspaceBytes);
}

/// An attention region (rt::matchAttentionRegion) as cuDNN's fused
/// attention (attentionProblemOf), the scale read once from its constant.
Status attentionKernel(const KernelRequest& r, const AttentionRegion& m,
                       BoundKernel* out, size_t* workspaceBytes) {
  float scale = 1.0f;
  if (m.scale >= 0) {
    size_t i = size_t(m.scale);
    if (i >= r.constantInputs.size() || !r.constantInputs[i])
      return Status::error("mc.fused (attention): its scale (input " +
                           std::to_string(i) +
                           ") is not a constant; cuDNN takes it by value "
                           "(the compiler keeps such regions only with a "
                           "constant scale)");
    uint32_t bits = 0;
    MC_RETURN_IF_ERROR(r.device.copyToHost(&bits, r.inputs[i].data,
                                           dtypeSize(r.inputs[i].dtype)));
    if (r.inputs[i].dtype == DType::F32)
      std::memcpy(&scale, &bits, 4);
    else if (r.inputs[i].dtype == DType::BF16)
      scale = bf16ToFloat(uint16_t(bits));
    else
      scale = halfToFloat(uint16_t(bits));
    if (m.scaleDivides)
      scale = 1.0f / scale;
  }
  AttentionProblem p;
  MC_RETURN_IF_ERROR(attentionProblemOf(m, r.inputs, r.output, scale, &p));
  return bindAttention(cudaDevice(r), r, p, out, workspaceBytes);
}

/// A fused region the device runs as one library call
/// (rt::matchLibraryRegion, the rules the cuda target keeps regions
/// whole by): a matmul with cuBLASLt's epilogue (bias along the last dim,
/// then relu or the tanh form of gelu; cuBLASLt has no erf gelu, which is
/// why PyTorch maps only approximate='tanh' to it), or a conv2d with a
/// channel bias and relu.
Status fusedKernel(const KernelRequest& r, BoundKernel* out,
                   size_t* workspaceBytes) {
  if (!r.body)
    return Status::error("mc.fused: the step has no body");
  if (!r.extraOutputs.empty())
    return Status::error("mc.fused: a region of " +
                         std::to_string(1 + r.extraOutputs.size()) +
                         " outputs runs as a generated kernel (compile with "
                         "--target=cuda), and this step has none");
  if (r.attrs.getBool("attention")) {
    AttentionRegion m = matchAttentionRegion(*r.body, r.inputs,
                                             r.output.dtype, r.output.shape);
    if (!m.ok)
      return Status::error(
          "mc.fused (attention): the CUDA device runs an attention region "
          "as cuDNN's fused attention, and this one does not fit: " +
          m.why + " (the compiler expands such regions into their ops)");
    return attentionKernel(r, m, out, workspaceBytes);
  }
  LibraryRegion match =
      matchLibraryRegion(*r.body, r.inputs, r.output.dtype, r.output.shape,
                         r.attrs.getBool("attention"));
  if (match.kind == LibraryRegion::Kind::ConvEpilogue)
    return fusedConvKernel(r, match, out, workspaceBytes);
  if (match.kind == LibraryRegion::Kind::None)
    return !r.body->empty() && (*r.body)[0].op == OpId::Conv2d
               ? notAConvEpilogue(match.why)
               : notAnEpilogue(match.why);
  const RegionOp& mm = (*r.body)[0];
  GemmProblem p;
  MC_RETURN_IF_ERROR(gemmOf(r.inputs[match.lhs], r.inputs[match.rhs],
                            mm.attrs, mm.dtype, mm.shape, &p));
  p.d = r.output.data;
  if (match.bias >= 0)
    p.bias = r.inputs[size_t(match.bias)].data;
  p.activation = match.activation == LibraryRegion::Activation::Relu
                     ? GemmActivation::Relu
                 : match.activation == LibraryRegion::Activation::GeluTanh
                     ? GemmActivation::GeluTanh
                     : GemmActivation::None;
  if (r.output.shape.back() != p.n ||
      numElements(r.output.shape) != p.batch * p.m * p.n)
    return notAnEpilogue("the output " + shapeString(r.output.shape) +
                         " is not the product " + shapeString(mm.shape) +
                         " with its last dim kept");
  return bindGemm(cudaDevice(r), r, p, out, workspaceBytes);
}

Status copyKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  size_t bytes = size_t(numElements(r.output.shape)) * dtypeSize(r.output.dtype);
  if (r.inputs[0].dtype != r.output.dtype ||
      numElements(r.inputs[0].shape) != numElements(r.output.shape))
    return Status::error("copy: " + std::string(dtypeName(r.inputs[0].dtype)) +
                         shapeString(r.inputs[0].shape) + " to " +
                         dtypeName(r.output.dtype) +
                         shapeString(r.output.shape));
  CudaDevice& dev = cudaDevice(r);
  CUdeviceptr from = CUdeviceptr(r.inputs[0].data),
              to = CUdeviceptr(r.output.data);
  if (!bytes || from == to) { // in place: nothing to move
    *out = [](void*) { return Status::ok(); };
    return Status::ok();
  }
  *out = dev.step(r, [&dev, from, to, bytes](void*) {
    return dev.check(
        dev.driver().memcpyDtoDAsync(to, from, bytes, dev.stream()),
        "cuMemcpyDtoDAsync");
  });
  return Status::ok();
}

MC_REGISTER_KERNEL(cuda, Matmul, matmulKernel);
MC_REGISTER_KERNEL(cuda, Fused, fusedKernel);
MC_REGISTER_KERNEL(cuda, Conv2d, conv2dKernel);
MC_REGISTER_KERNEL(cuda, Copy, copyKernel);

} // namespace
} // namespace mc::rt::cuda
