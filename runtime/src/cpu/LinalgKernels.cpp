// CPU kernels of matmul, convolution and pooling (modelc/kernels.h computes
// them through BLAS), registered per op.
#include "modelc/device.h"

namespace mc::rt {
namespace {

/// [h, w] and [top, left, bottom, right] lists (lengths checked by the
/// verifier).
int64_t at(const std::vector<int64_t>& v, size_t i, int64_t dflt) {
  return i < v.size() ? v[i] : dflt;
}

Status matmulKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [ta = r.attrs.getBool("transpose_a"),
          tb = r.attrs.getBool("transpose_b"), a = r.inputs[0],
          b = r.inputs[1], o = r.output](void*) {
    return matmul(a, b, ta, tb, o);
  };
  return Status::ok();
}

Status conv2dKernel(const KernelRequest& r, BoundKernel* out,
                    size_t* workspaceBytes) {
  std::vector<int64_t> s = r.attrs.getInts("strides"),
                       p = r.attrs.getInts("padding"),
                       d = r.attrs.getInts("dilation");
  Conv2dParams c;
  c.strideH = at(s, 0, 1);
  c.strideW = at(s, 1, 1);
  c.padTop = at(p, 0, 0);
  c.padLeft = at(p, 1, 0);
  c.padBottom = at(p, 2, 0);
  c.padRight = at(p, 3, 0);
  c.dilationH = at(d, 0, 1);
  c.dilationW = at(d, 1, 1);
  c.groups = r.attrs.getInt("groups", 1);
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
  std::vector<int64_t> k = attrs.getInts("kernel"), s = attrs.getInts("strides"),
                       p = attrs.getInts("padding"),
                       d = attrs.getInts("dilation");
  Pool2dParams q;
  q.kernelH = at(k, 0, 1);
  q.kernelW = at(k, 1, 1);
  q.strideH = at(s, 0, 1);
  q.strideW = at(s, 1, 1);
  q.padTop = at(p, 0, 0);
  q.padLeft = at(p, 1, 0);
  q.padBottom = at(p, 2, 0);
  q.padRight = at(p, 3, 0);
  q.dilationH = at(d, 0, 1);
  q.dilationW = at(d, 1, 1);
  return q;
}

Status maxPoolKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [q = poolParams(r.attrs), a = r.inputs[0], o = r.output](void*) {
    return maxPool2d(a, q, o);
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
MC_REGISTER_KERNEL(cpu, Conv2d, conv2dKernel);
MC_REGISTER_KERNEL(cpu, MaxPool2d, maxPoolKernel);
MC_REGISTER_KERNEL(cpu, AvgPool2d, avgPoolKernel);

} // namespace
} // namespace mc::rt
