// NCCL loaded at run time, and the NCCL communicator (see Nccl.h).
#include "Nccl.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <thread>

namespace mc::rt::cuda {

std::string ncclVersionText(int v) {
  int major = v >= 10000 ? v / 10000 : v / 1000;
  int minor = v >= 10000 ? (v / 100) % 100 : (v / 100) % 10;
  int patch = v % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." +
         std::to_string(patch);
}

Status loadNccl(const std::string& library, NcclApi* out) {
  std::vector<std::string> names;
  const char* env = std::getenv("MODELC_NCCL_LIBRARY");
  if (!library.empty())
    names.push_back(library);
  else if (env && *env)
    names.push_back(env);
  else
    names = {"libnccl.so.2", "libnccl.so"};
  std::string why;
  void* h = openLibrary(names, &why);
  if (!h)
    return Status::error(
        "cannot load NCCL: " + why +
        ". Install NCCL 2 (NVIDIA's libnccl2 package, or PyTorch's "
        "nvidia-nccl wheel: add its lib folder to LD_LIBRARY_PATH), or name "
        "the library with MODELC_NCCL_LIBRARY");
  NcclApi api;
#define MC_NCCL_LOAD(member, symbol, type)                                     \
  api.member = reinterpret_cast<NcclApi::member##Fn>(dlsym(h, symbol));                       \
  if (!api.member) {                                                           \
    dlclose(h);                                                                \
    return Status::error(std::string("the NCCL library loaded (") +            \
                         names[0] + "...) lacks " + symbol +                   \
                         ": NCCL 2.13 or newer is needed");                    \
  }
  MC_NCCL_FUNCTIONS(MC_NCCL_LOAD)
#undef MC_NCCL_LOAD
  api.getVersion(&api.version);
  // The handle stays open for the life of the process.
  *out = api;
  return Status::ok();
}

NcclCommunicator::NcclCommunicator(NcclApi api, int rank, int size,
                                   nccl::UniqueId id)
    : api_(api), rank_(rank), size_(size), id_(id) {}

NcclCommunicator::~NcclCommunicator() { release(); }

void NcclCommunicator::release() {
  if (!device_)
    return;
  const CudaDriver& d = device_->driver();
  (void)device_->makeCurrent();
  if (comm_) {
    if (pending_.empty() && !aborted_)
      api_.commDestroy(comm_);
    else
      api_.commAbort(comm_); // a collective may never complete
  }
  for (auto& [data, p] : pending_)
    freeEvents_.push_back(p.done);
  for (CUevent e : freeEvents_)
    d.eventDestroy(e);
  if (ready_)
    d.eventDestroy(ready_);
  if (hostScratch_)
    d.memFree(hostScratch_);
  if (stream_)
    d.streamDestroy(stream_);
  releasedFrom_ = device_->name();
  device_ = nullptr;
  comm_ = nullptr;
  stream_ = nullptr;
  ready_ = nullptr;
  freeEvents_.clear();
  pending_.clear();
  hostScratch_ = 0;
  hostScratchBytes_ = 0;
}

Status NcclCommunicator::ncclError(nccl::Result r,
                                   const std::string& what) const {
  std::string text = api_.getErrorString ? api_.getErrorString(r) : "";
  std::string last = comm_ && api_.getLastError ? api_.getLastError(comm_)
                                                : "";
  return Status::error("rank " + std::to_string(rank_) + " of " +
                       std::to_string(size_) + ": " + what +
                       " failed: NCCL error " + std::to_string(r) + " (" +
                       text + ")" + (last.empty() ? "" : ": " + last));
}

Status NcclCommunicator::attach(CudaDevice& device) {
  if (device_ == &device)
    return Status::ok();
  if (device_)
    return Status::error("the NCCL communicator of rank " +
                         std::to_string(rank_) + " is already on " +
                         device_->name() + ", not " + device.name() +
                         ": one device per rank");
  if (!releasedFrom_.empty())
    return Status::error("the NCCL communicator of rank " +
                         std::to_string(rank_) + " was on " + releasedFrom_ +
                         ", which is gone: a communicator serves one device "
                         "for its life (make a new one for a new session)");
  MC_RETURN_IF_ERROR(device.makeCurrent());
  const CudaDriver& d = device.driver();
  device_ = &device;
  // The process's communicator may outlive the session's device: the
  // device then releases what lives in its context first.
  teardown_ = std::make_shared<std::function<void()>>([this] { release(); });
  device.atTeardown(teardown_);
  // A failure leaves the communicator on no device (a later attach tries
  // again), not half attached.
  auto failed = [&](Status st) {
    release();
    releasedFrom_.clear();
    teardown_.reset();
    return st;
  };
  if (Status st = device.check(d.streamCreate(&stream_, CU_STREAM_NON_BLOCKING),
                               "cuStreamCreate");
      !st)
    return failed(st);
  if (Status st = device.check(d.eventCreate(&ready_, CU_EVENT_DISABLE_TIMING),
                               "cuEventCreate");
      !st)
    return failed(st);
  // Collective: returns once every rank has called it (each binds its
  // first all-reduce step at the same point of its setup). NCCL uses the
  // device whose context is current: the device's primary context.
  nccl::Result r = api_.commInitRank(&comm_, size_, id_, rank_);
  if (r != nccl::kSuccess) {
    comm_ = nullptr;
    return failed(ncclError(r, "ncclCommInitRank on " + device.gpuText()));
  }
  return Status::ok();
}

Status NcclCommunicator::start(void* data, size_t count, DType dtype,
                               ReduceOp op, const std::string& what) {
  auto t0 = std::chrono::steady_clock::now();
  if (!comm_)
    return Status::error("nccl all-reduce of " + what +
                         ": the communicator is not on a CUDA device (a "
                         "cuda step binds it)" +
                         (aborted_ ? " or was aborted" : "") +
                         (releasedFrom_.empty()
                              ? ""
                              : ", its device " + releasedFrom_ + " is gone"));
  if (dtype != DType::F32)
    return Status::error("nccl all-reduce of " + what +
                         ": only f32 is supported, got " + dtypeName(dtype));
  if (pending_.count(data))
    return Status::error("nccl all-reduce of " + what +
                         ": a collective is already pending on its buffer");
  const CudaDriver& d = device_->driver();
  Pending p;
  p.what = what;
  p.started = t0;
  if (!freeEvents_.empty()) {
    p.done = freeEvents_.back();
    freeEvents_.pop_back();
  } else {
    MC_RETURN_IF_ERROR(device_->check(
        d.eventCreate(&p.done, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
  }
  // The collective stream waits for what the device's stream queued before
  // (the bucket's packing), then reduces while the device's stream goes on.
  Status st = device_->check(d.eventRecord(ready_, device_->stream()),
                             "cuEventRecord");
  if (st)
    st = device_->check(d.streamWaitEvent(stream_, ready_, 0),
                        "cuStreamWaitEvent");
  if (st) {
    nccl::Result r = api_.allReduce(data, data, count, nccl::kFloat32,
                                    op == ReduceOp::Sum ? nccl::kSum
                                                        : nccl::kMax,
                                    comm_, stream_);
    if (r != nccl::kSuccess && r != nccl::kInProgress)
      st = ncclError(r, "ncclAllReduce of " + what);
  }
  if (st)
    st = device_->check(d.eventRecord(p.done, stream_), "cuEventRecord");
  if (!st) {
    freeEvents_.push_back(p.done);
    return st;
  }
  pending_[data] = p;
  ++stats_.collectives;
  stats_.bytes += double(count * 4);
  stats_.blockedSeconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return Status::ok();
}

Status NcclCommunicator::wait(void* data) {
  auto t0 = std::chrono::steady_clock::now();
  auto it = pending_.find(data);
  if (it == pending_.end())
    return Status::error("nccl all-reduce: no collective is pending on this "
                         "buffer (a wait without its start)");
  Pending p = it->second;
  const CudaDriver& d = device_->driver();
  auto elapsed = [](std::chrono::steady_clock::time_point since) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         since)
        .count();
  };
  for (;;) {
    CUresult q = d.eventQuery(p.done);
    if (q == CUDA_SUCCESS)
      break;
    if (q != CUDA_ERROR_NOT_READY) {
      stats_.blockedSeconds += elapsed(t0);
      return device_->check(q, "rank " + std::to_string(rank_) + ": " +
                                   p.what + " (cuEventQuery)");
    }
    nccl::Result async = nccl::kSuccess;
    api_.commGetAsyncError(comm_, &async);
    if (async != nccl::kSuccess && async != nccl::kInProgress) {
      stats_.blockedSeconds += elapsed(t0);
      Status e = ncclError(async, p.what);
      api_.commAbort(comm_);
      comm_ = nullptr;
      aborted_ = true;
      return e;
    }
    if (elapsed(p.started) > timeout_) {
      stats_.blockedSeconds += elapsed(t0);
      // NCCL's kernels spin until every rank joins: abort them so that the
      // device's stream can drain, then report.
      api_.commAbort(comm_);
      comm_ = nullptr;
      aborted_ = true;
      return Status::error(
          collectiveTimeoutText(rank_, size_, p.what, timeout_) +
          " (NCCL communicator aborted)");
    }
    // The collective runs on the GPU: poll without burning the core once
    // it has taken more than a millisecond.
    if (elapsed(t0) > 1e-3)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    else
      std::this_thread::yield();
  }
  pending_.erase(it);
  freeEvents_.push_back(p.done);
  stats_.blockedSeconds += elapsed(t0);
  // Work the device's stream queues next comes after the sum (it is done
  // already; the wait keeps the order explicit for the driver).
  return device_->check(d.streamWaitEvent(device_->stream(), p.done, 0),
                        "cuStreamWaitEvent");
}

Status NcclCommunicator::allReduceHost(float* data, size_t count, ReduceOp op,
                                      const std::string& what) {
  if (!device_)
    return Status::error("nccl all-reduce of " + what +
                         ": the communicator is not on a CUDA device yet");
  MC_RETURN_IF_ERROR(device_->makeCurrent());
  const CudaDriver& d = device_->driver();
  size_t bytes = count * sizeof(float);
  if (bytes > hostScratchBytes_) {
    if (hostScratch_)
      d.memFree(hostScratch_);
    hostScratch_ = 0;
    hostScratchBytes_ = 0;
    MC_RETURN_IF_ERROR(device_->check(d.memAlloc(&hostScratch_, bytes),
                                      "cuMemAlloc"));
    hostScratchBytes_ = bytes;
  }
  // On the device's stream, as a step: in, reduce, out.
  void* buf = reinterpret_cast<void*>(hostScratch_);
  MC_RETURN_IF_ERROR(device_->check(
      d.memcpyHtoDAsync(hostScratch_, data, bytes, device_->stream()),
      "cuMemcpyHtoDAsync"));
  MC_RETURN_IF_ERROR(start(buf, count, DType::F32, op, what));
  MC_RETURN_IF_ERROR(wait(buf));
  MC_RETURN_IF_ERROR(device_->check(
      d.memcpyDtoHAsync(data, hostScratch_, bytes, device_->stream()),
      "cuMemcpyDtoHAsync"));
  return device_->check(d.streamSynchronize(device_->stream()),
                        "cuStreamSynchronize");
}

void NcclCommunicator::abort(int code) {
  if (comm_ && !aborted_)
    api_.commAbort(comm_);
  comm_ = nullptr;
  aborted_ = true;
  std::fflush(stdout);
  std::fflush(stderr);
  // The other ranks time out on their own (--dp-timeout), or the launcher
  // (torchrun, mpirun) ends them when this process exits non-zero.
  std::_Exit(code);
}

} // namespace mc::rt::cuda

namespace mc::rt {

Status makeNcclCommunicator(
    int rank, int worldSize, double timeoutSeconds,
    const std::function<Status(std::string* id)>& exchange,
    std::unique_ptr<Communicator>* out, const std::string& library) {
  cuda::NcclApi api;
  MC_RETURN_IF_ERROR(cuda::loadNccl(library, &api));
  cuda::nccl::UniqueId id{};
  std::string bytes;
  if (rank == 0) {
    cuda::nccl::Result r = api.getUniqueId(&id);
    if (r != cuda::nccl::kSuccess)
      return Status::error("rank 0: ncclGetUniqueId failed: NCCL error " +
                           std::to_string(r) + " (" + api.getErrorString(r) +
                           ")");
    bytes.assign(id.internal, sizeof id.internal);
  }
  if (worldSize > 1)
    MC_RETURN_IF_ERROR(exchange(&bytes));
  if (bytes.size() != sizeof id.internal)
    return Status::error("rank " + std::to_string(rank) +
                         ": NCCL's unique id from rank 0 has " +
                         std::to_string(bytes.size()) + " bytes, not " +
                         std::to_string(sizeof id.internal));
  std::memcpy(id.internal, bytes.data(), sizeof id.internal);
  auto comm =
      std::make_unique<cuda::NcclCommunicator>(api, rank, worldSize, id);
  comm->setTimeout(timeoutSeconds);
  *out = std::move(comm);
  return Status::ok();
}

} // namespace mc::rt
