// CUDA kernels of the data-parallel all-reduce pair (mc.all_reduce_start,
// mc.all_reduce_wait), as the CPU's (runtime/src/cpu/CollectiveKernels.cpp)
// on device memory: the start packs the bucket with device-to-device
// copies on the device's stream and starts the NCCL all-reduce; the wait
// waits for it and scales it (an embedded PTX kernel: y = x * scale,
// rounded as the CPU rounds). With one process and no NCCL (the self
// communicator) the sum is the identity. Steps with collectives are not
// recorded as CUDA graphs: the host watches each collective against the
// timeout.
#include "CudaDevice.h"
#include "Nccl.h"
#include "KernelUtil.h"


namespace mc::rt::cuda {
namespace {

// y[i] = x[i] * s, grid-stride; mul.rn as the CPU's float multiply.
// .version 7.0 / sm_52: every driver the device supports JIT-compiles it.
const char kScalePtx[] = R"(.version 7.0
.target sm_52
.address_size 64
.visible .entry modelc_scale_f32(
	.param .u64 modelc_scale_f32_param_0,
	.param .u64 modelc_scale_f32_param_1,
	.param .f32 modelc_scale_f32_param_2,
	.param .u64 modelc_scale_f32_param_3
)
{
	.reg .pred 	%p<3>;
	.reg .f32 	%f<4>;
	.reg .b32 	%r<5>;
	.reg .b64 	%rd<18>;
	ld.param.u64 	%rd8, [modelc_scale_f32_param_0];
	ld.param.u64 	%rd9, [modelc_scale_f32_param_1];
	ld.param.f32 	%f1, [modelc_scale_f32_param_2];
	ld.param.u64 	%rd10, [modelc_scale_f32_param_3];
	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r2, %ntid.x;
	cvt.u64.u32 	%rd1, %r2;
	mul.wide.u32 	%rd11, %r1, %r2;
	mov.u32 	%r3, %tid.x;
	cvt.u64.u32 	%rd12, %r3;
	add.s64 	%rd17, %rd11, %rd12;
	setp.ge.u64 	%p1, %rd17, %rd10;
	@%p1 bra 	$L__BB0_3;
	mov.u32 	%r4, %nctaid.x;
	cvt.u64.u32 	%rd13, %r4;
	mul.lo.s64 	%rd3, %rd13, %rd1;
	cvta.to.global.u64 	%rd4, %rd8;
	cvta.to.global.u64 	%rd5, %rd9;
$L__BB0_2:
	shl.b64 	%rd14, %rd17, 2;
	add.s64 	%rd15, %rd4, %rd14;
	ld.global.f32 	%f2, [%rd15];
	mul.rn.f32 	%f3, %f2, %f1;
	add.s64 	%rd16, %rd5, %rd14;
	st.global.f32 	[%rd16], %f3;
	add.s64 	%rd17, %rd17, %rd3;
	setp.lt.u64 	%p2, %rd17, %rd10;
	@%p2 bra 	$L__BB0_2;
$L__BB0_3:
	ret;
}
)";

/// The process's communicator, ready for this device: NCCL attached to it,
/// or the self communicator of one process. MPI cannot take device memory.
Status deviceCommunicator(CudaDevice& dev, Communicator** out) {
  Communicator& comm = currentCommunicator();
  if (auto* nc = dynamic_cast<NcclCommunicator*>(&comm))
    MC_RETURN_IF_ERROR(nc->attach(dev));
  else if (comm.memory() != "cuda" && comm.size() > 1)
    return Status::error(
        "the all-reduce of a cuda step needs the NCCL communicator, but this "
        "process's is " + comm.name() +
        " (host memory): modelc-run --train --device cuda makes one under "
        "mpirun or a torchrun-style launch");
  // Graph replay would run the collective without the host watching it.
  dev.disableGraphs("steps with collectives run one by one, not as a CUDA "
                    "graph (the host watches each all-reduce against "
                    "--dp-timeout)");
  *out = &comm;
  return Status::ok();
}

Status startKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  CudaDevice& dev = cudaDevice(r);
  Communicator* comm = nullptr;
  MC_RETURN_IF_ERROR(
      checkWorldForArtifact(r.attrs.getInt("ranks"), currentCommunicator()));
  MC_RETURN_IF_ERROR(deviceCommunicator(dev, &comm));
  comm->noteBoundRanks(r.attrs.getInt("ranks"));
  if (r.output.dtype != DType::F32)
    return Status::error("all_reduce_start: only f32 buckets are supported");
  *out = dev.step(r, [in = r.inputs, o = r.output, c = comm, d = &dev,
                      what = detail::allReduceName(r)](void*) -> Status {
    const CudaDriver& drv = d->driver();
    CUdeviceptr dst = CUdeviceptr(o.data);
    for (const ConstTensor& t : in) {
      size_t n = size_t(numElements(t.shape)) * 4;
      if (n)
        MC_RETURN_IF_ERROR(d->check(
            drv.memcpyDtoDAsync(dst, CUdeviceptr(t.data), n, d->stream()),
            "packing " + what + " (cuMemcpyDtoDAsync)"));
      dst += n;
    }
    return c->start(o.data, size_t(numElements(o.shape)), DType::F32,
                    ReduceOp::Sum, what);
  });
  return Status::ok();
}

Status waitKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  CudaDevice& dev = cudaDevice(r);
  if (r.output.dtype != DType::F32)
    return Status::error("all_reduce_wait: only f32 buckets are supported");
  Communicator* comm = nullptr;
  MC_RETURN_IF_ERROR(deviceCommunicator(dev, &comm));
  CUfunction scale = nullptr;
  MC_RETURN_IF_ERROR(dev.runtimeKernel(kScalePtx, "modelc_scale_f32", &scale));
  unsigned grid = 1;
  uint64_t n = uint64_t(numElements(r.output.shape));
  {
    uint64_t blocks = (n + 255) / 256;
    uint64_t cap = uint64_t(std::max(dev.smCount(), 1)) * 32;
    grid = unsigned(std::max<uint64_t>(1, std::min(blocks, cap)));
  }
  *out = dev.step(r, [a = r.inputs[0], o = r.output, c = comm, d = &dev,
                      f = scale, grid, n,
                      s = float(r.attrs.getFloat("scale"))](void*) -> Status {
    // The bucket is the start's output: the collective runs in place there.
    MC_RETURN_IF_ERROR(c->wait(const_cast<void*>(a.data)));
    if (n == 0)
      return Status::ok();
    CUdeviceptr x = CUdeviceptr(a.data), y = CUdeviceptr(o.data);
    float scale = s;
    uint64_t count = n;
    void* params[] = {&x, &y, &scale, &count};
    return d->check(d->driver().launchKernel(f, grid, 1, 1, 256, 1, 1, 0,
                                             d->stream(), params, nullptr),
                    "the all-reduce scale kernel (cuLaunchKernel)");
  });
  return Status::ok();
}

} // namespace

MC_REGISTER_KERNEL(cuda, AllReduceStart, startKernel);
MC_REGISTER_KERNEL(cuda, AllReduceWait, waitKernel);

} // namespace mc::rt::cuda
