// CPU kernels of data movement, reductions and normalizations
// (modelc/kernels.h computes them), registered per op.
#include "modelc/device.h"

#include <algorithm>

namespace mc::rt {
namespace {

Status broadcastKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [dims = r.attrs.getInts("dims"), a = r.inputs[0],
          o = r.output](void*) { return broadcastInDim(a, dims, o); };
  return Status::ok();
}

Status transposeKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [perm = r.attrs.getInts("permutation"), a = r.inputs[0],
          o = r.output](void*) { return transpose(a, perm, o); };
  return Status::ok();
}

Status concatKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [axis = r.attrs.getInt("axis"), in = r.inputs,
          o = r.output](void*) { return concat(in, axis, o); };
  return Status::ok();
}

Status sliceKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [start = r.attrs.getInts("start"),
          strides = r.attrs.getInts("strides"), a = r.inputs[0],
          o = r.output](void*) { return slice(a, start, strides, o); };
  return Status::ok();
}

Status gatherKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [axis = r.attrs.getInt("axis"), a = r.inputs[0], i = r.inputs[1],
          o = r.output](void*) { return gather(a, i, axis, o); };
  return Status::ok();
}

Status scatterAddKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [axis = r.attrs.getInt("axis"), u = r.inputs[0], i = r.inputs[1],
          o = r.output](void*) { return scatterAdd(u, i, axis, o); };
  return Status::ok();
}

Status padKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [low = r.attrs.getInts("low"), high = r.attrs.getInts("high"),
          value = r.attrs.getFloat("value"), a = r.inputs[0],
          o = r.output](void*) { return pad(a, low, high, value, o); };
  return Status::ok();
}

template <OpId Op>
Status reduceKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  // The kernel walks dims in order; the dialect allows any order.
  std::vector<int64_t> dims = r.attrs.getInts("dims");
  std::sort(dims.begin(), dims.end());
  *out = [dims, keepdim = r.attrs.getBool("keepdim"), a = r.inputs[0],
          o = r.output](void*) { return reduce(Op, a, dims, keepdim, o); };
  return Status::ok();
}

Status softmaxKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [axis = r.attrs.getInt("axis"), a = r.inputs[0],
          o = r.output](void*) { return softmax(a, axis, o); };
  return Status::ok();
}

Status logSoftmaxKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [axis = r.attrs.getInt("axis"), a = r.inputs[0],
          o = r.output](void*) { return logSoftmax(a, axis, o); };
  return Status::ok();
}

Status batchNormKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [eps = r.attrs.getFloat("epsilon"),
          axis = r.attrs.getInt("feature_axis"), in = r.inputs,
          o = r.output](void*) {
    return batchNorm(in[0], in[1], in[2], in[3], in[4], eps, axis, o);
  };
  return Status::ok();
}

Status layerNormKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [eps = r.attrs.getFloat("epsilon"), axis = r.attrs.getInt("axis"),
          in = r.inputs, o = r.output](void*) {
    return layerNorm(in[0], in[1], in[2], axis, eps, o);
  };
  return Status::ok();
}

MC_REGISTER_KERNEL(cpu, BroadcastInDim, broadcastKernel);
MC_REGISTER_KERNEL(cpu, Transpose, transposeKernel);
MC_REGISTER_KERNEL(cpu, Concat, concatKernel);
MC_REGISTER_KERNEL(cpu, Slice, sliceKernel);
MC_REGISTER_KERNEL(cpu, Gather, gatherKernel);
MC_REGISTER_KERNEL(cpu, ScatterAdd, scatterAddKernel);
MC_REGISTER_KERNEL(cpu, Pad, padKernel);
MC_REGISTER_KERNEL(cpu, ReduceSum, reduceKernel<OpId::ReduceSum>);
MC_REGISTER_KERNEL(cpu, ReduceMean, reduceKernel<OpId::ReduceMean>);
MC_REGISTER_KERNEL(cpu, ReduceMax, reduceKernel<OpId::ReduceMax>);
MC_REGISTER_KERNEL(cpu, ReduceMin, reduceKernel<OpId::ReduceMin>);
MC_REGISTER_KERNEL(cpu, Softmax, softmaxKernel);
MC_REGISTER_KERNEL(cpu, LogSoftmax, logSoftmaxKernel);
MC_REGISTER_KERNEL(cpu, BatchNorm, batchNormKernel);
MC_REGISTER_KERNEL(cpu, LayerNorm, layerNormKernel);

} // namespace
} // namespace mc::rt
