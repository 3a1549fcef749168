// CPU kernels of the data-parallel all-reduce pair (mc.all_reduce_start,
// mc.all_reduce_wait): pack a bucket and start summing it over the ranks;
// wait for the sum and scale it. The collective itself is the process's
// Communicator's (modelc/communicator.h).
#include "KernelUtil.h"
#include "modelc/communicator.h"
#include "modelc/device.h"

#include <cstring>

namespace mc::rt {
namespace {

Status startKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  Communicator& comm = currentCommunicator();
  int64_t ranks = r.attrs.getInt("ranks");
  MC_RETURN_IF_ERROR(checkWorldForArtifact(ranks, comm));
  if (comm.memory() != "host")
    return Status::error("the all-reduce of a cpu step needs a communicator "
                         "on host memory, but this process's is " +
                         comm.name() + " (" + comm.memory() +
                         " memory): run the artifact on that device");
  comm.noteBoundRanks(ranks);
  if (r.output.dtype != DType::F32)
    return Status::error("all_reduce_start: only f32 buckets are supported");
  *out = [in = r.inputs, o = r.output, c = &comm,
          what = detail::allReduceName(r)](void*) -> Status {
    auto* dst = static_cast<uint8_t*>(o.data);
    for (const ConstTensor& t : in) {
      size_t n = size_t(numElements(t.shape)) * 4;
      std::memcpy(dst, t.data, n);
      dst += n;
    }
    return c->start(o.data, size_t(numElements(o.shape)), DType::F32,
                    ReduceOp::Sum, what);
  };
  return Status::ok();
}

Status waitKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  if (r.output.dtype != DType::F32)
    return Status::error("all_reduce_wait: only f32 buckets are supported");
  *out = [a = r.inputs[0], o = r.output, c = &currentCommunicator(),
          scale = float(r.attrs.getFloat("scale"))](void*) -> Status {
    // The bucket is the start's output: the collective runs in place there.
    MC_RETURN_IF_ERROR(c->wait(const_cast<void*>(a.data)));
    const float* x = static_cast<const float*>(a.data);
    float* y = static_cast<float*>(o.data);
    int64_t n = numElements(o.shape);
    for (int64_t i = 0; i < n; ++i)
      y[i] = x[i] * scale;
    return Status::ok();
  };
  return Status::ok();
}

} // namespace

MC_REGISTER_KERNEL(cpu, AllReduceStart, startKernel);
MC_REGISTER_KERNEL(cpu, AllReduceWait, waitKernel);

} // namespace mc::rt
