// CPU kernels of matmul, convolution and pooling (modelc/kernels.h computes
// them through BLAS; f32 convolutions through oneDNN), registered per op.
#include "CpuKernels.h"
#include "cpu/DnnlConv.h"
#include "modelc/device.h"

namespace mc::rt {
namespace {

/// [h, w] and [top, left, bottom, right] lists (lengths checked by the
/// verifier).
int64_t at(const std::vector<int64_t>& v, size_t i, int64_t dflt) {
  return i < v.size() ? v[i] : dflt;
}

/// The strides [h, w], padding [top, left, bottom, right] and dilation
/// [h, w] that conv2d and the pools share.
template <class Params> void readWindow(const OpAttrs& attrs, Params& p) {
  std::vector<int64_t> s = attrs.getInts("strides"),
                       pad = attrs.getInts("padding"),
                       d = attrs.getInts("dilation");
  p.strideH = at(s, 0, 1);
  p.strideW = at(s, 1, 1);
  p.padTop = at(pad, 0, 0);
  p.padLeft = at(pad, 1, 0);
  p.padBottom = at(pad, 2, 0);
  p.padRight = at(pad, 3, 0);
  p.dilationH = at(d, 0, 1);
  p.dilationW = at(d, 1, 1);
}

/// bf16 and f16 through oneDNN where the CPU has instructions for them;
/// else (and f32) the BLAS path of modelc/kernels.h's matmul, which widens
/// narrow operands to f32.
Status matmulKernel(const KernelRequest& r, BoundKernel* out,
                    size_t* workspaceBytes) {
  if ((r.output.dtype == DType::BF16 || r.output.dtype == DType::F16) &&
      detail::bindNarrowMatmul(r.inputs[0], r.inputs[1],
                               r.attrs.getBool("transpose_a"),
                               r.attrs.getBool("transpose_b"), r.output,
                               r.isConstant(1), out, workspaceBytes))
    return Status::ok();
  *out = [ta = r.attrs.getBool("transpose_a"),
          tb = r.attrs.getBool("transpose_b"), a = r.inputs[0],
          b = r.inputs[1], o = r.output](void*) {
    return matmul(a, b, ta, tb, o);
  };
  return Status::ok();
}

/// oneDNN's convolution where it takes the step (f32; bf16 and f16 where
/// the CPU has kernels for them), else the im2col + BLAS reference (empty
/// tensors, a runtime without oneDNN, a dtype the CPU has no kernel for).
Status conv2dKernel(const KernelRequest& r, BoundKernel* out,
                    size_t* workspaceBytes) {
  Conv2dParams c = conv2dParams(r.attrs);
  Epilogue bounds; // nothing to compute after; the bounds pass through
  bounds.inputBound = r.inputBound(0);
  bounds.resultBound = r.outputBound;
  if (bindConv2d(r.inputs[0], r.inputs[1], c, bounds, r.output, r.isConstant(1),
                 out, workspaceBytes))
    return Status::ok();
  size_t floats = conv2dWorkspaceSize(r.inputs[0].shape, r.inputs[1].shape,
                                      r.output.shape, c);
  *workspaceBytes = floats * sizeof(float);
  *out = [c, floats, in = r.inputs[0], w = r.inputs[1],
          o = r.output](void* workspace) {
    return conv2d(in, w, c, o, static_cast<float*>(workspace), floats);
  };
  return Status::ok();
}

Pool2dParams poolParams(const OpAttrs& attrs) {
  std::vector<int64_t> k = attrs.getInts("kernel");
  Pool2dParams q;
  q.kernelH = at(k, 0, 1);
  q.kernelW = at(k, 1, 1);
  readWindow(attrs, q);
  q.channelsLast = attrs.getBool("channels_last");
  return q;
}

/// Whether every window of a pooling along one axis (out positions of a
/// stride, padding, dilation and kernel over `in` positions) holds a
/// position inside the input.
bool everyWindowReal(int64_t out, int64_t stride, int64_t pad, int64_t dilation,
                     int64_t kernel, int64_t in) {
  for (int64_t i = 0; i < out; ++i) {
    bool real = false;
    for (int64_t k = 0; k < kernel && !real; ++k) {
      int64_t at = i * stride - pad + k * dilation;
      real = at >= 0 && at < in;
    }
    if (!real)
      return false;
  }
  return true;
}

/// Max pooling. Each result is the largest of input values when no window
/// lies wholly in the padding (else -inf), so the input's published bound
/// (ValueBound) is the result's too, passed on for the readers' guards.
Status maxPoolKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  Pool2dParams q = poolParams(r.attrs);
  const ConstTensor& a = r.inputs[0];
  const ValueBound* in = r.inputBound(0);
  ValueBound* published = nullptr;
  if (r.outputBound && in && in->written && a.dtype == DType::F32 &&
      a.shape.size() == 4 && r.output.shape.size() == 4) {
    size_t h = q.channelsLast ? 1 : 2, w = h + 1;
    if (everyWindowReal(r.output.shape[h], q.strideH, q.padTop, q.dilationH,
                        q.kernelH, a.shape[h]) &&
        everyWindowReal(r.output.shape[w], q.strideW, q.padLeft, q.dilationW,
                        q.kernelW, a.shape[w])) {
      published = r.outputBound;
      published->written = true;
    }
  }
  *out = [q, a, o = r.output, in, published](void*) {
    if (published) // unknown until this call has succeeded
      published->maxAbs = INFINITY;
    Status st = maxPool2d(a, q, o);
    if (st && published)
      published->maxAbs = in->maxAbs;
    return st;
  };
  return Status::ok();
}

Status avgPoolKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [q = poolParams(r.attrs),
          includePad = r.attrs.getBool("count_include_pad"), a = r.inputs[0],
          o = r.output](void*) { return avgPool2d(a, q, includePad, o); };
  return Status::ok();
}

MC_REGISTER_KERNEL(cpu, Matmul, matmulKernel);
} // namespace

Conv2dParams conv2dParams(const OpAttrs& attrs) {
  Conv2dParams c;
  readWindow(attrs, c);
  c.groups = attrs.getInt("groups", 1);
  c.channelsLast = attrs.getBool("channels_last");
  return c;
}

namespace {
MC_REGISTER_KERNEL(cpu, Conv2d, conv2dKernel);
MC_REGISTER_KERNEL(cpu, MaxPool2d, maxPoolKernel);
MC_REGISTER_KERNEL(cpu, AvgPool2d, avgPoolKernel);

} // namespace
} // namespace mc::rt
