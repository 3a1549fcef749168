// The CUDA device: memory, copies through pinned staging, the stream, CUDA
// graphs and event timing (see CudaDevice.h); the generated kernels are in
// CudaExecutables.cpp, the library kernels in CudaKernels.cpp.
#include "CudaDevice.h"

#include "CublasLt.h"
#include "Cudnn.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace mc::rt::cuda {

bool envFlag(const char* name, bool dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v)
    return dflt;
  return std::strcmp(v, "0") != 0;
}

Context::~Context() {
  if (ctx)
    d->primaryCtxRelease(device);
}

namespace {

/// Copies between host and device go through pinned chunks of at most
/// this size (a larger copy takes several).
constexpr size_t kStagingChunk = 64 << 20;
/// CUDA graphs kept per device (a session keeps at most 4 bindings).
constexpr size_t kMaxGraphs = 8;
/// Error records per block (4 KiB of device memory and of pinned host
/// memory).
constexpr size_t kRecordsPerBlock = 256;

int countCuda() {
  static int n = 0;
  static std::once_flag once;
  std::call_once(once, [] {
    if (const CudaDriver* d = driver())
      if (d->deviceGetCount(&n) != CUDA_SUCCESS)
        n = 0;
  });
  return n;
}

std::string whyNoCuda() {
  std::string why;
  const CudaDriver* d = driver(&why);
  if (!d)
    return why;
  int n = 0;
  CUresult r = d->deviceGetCount(&n);
  if (r != CUDA_SUCCESS)
    return "cuDeviceGetCount failed: " + errorText(*d, r);
  return n ? "" : "the CUDA driver reports no GPU";
}

/// MODELC_PROFILE on the GPU: an event recorded on the stream at each
/// mark, read after the run synchronized.
class EventTimer final : public StepTimer {
public:
  EventTimer(std::shared_ptr<Context> ctx, CUstream stream)
      : ctx_(std::move(ctx)), stream_(stream) {}
  ~EventTimer() override {
    ctx_->d->ctxSetCurrent(ctx_->ctx);
    for (CUevent e : events_)
      ctx_->d->eventDestroy(e);
  }
  void mark(size_t index) override {
    const CudaDriver& d = *ctx_->d;
    while (events_.size() <= index && error_ == CUDA_SUCCESS) {
      CUevent e = nullptr;
      error_ = d.eventCreate(&e, CU_EVENT_DEFAULT);
      if (error_ == CUDA_SUCCESS)
        events_.push_back(e);
    }
    if (error_ == CUDA_SUCCESS)
      error_ = d.eventRecord(events_[index], stream_);
    last_ = index;
  }
  Status collect(std::vector<double>& seconds) override {
    const CudaDriver& d = *ctx_->d;
    if (error_ == CUDA_SUCCESS && last_ < events_.size())
      error_ = d.eventSynchronize(events_[last_]);
    for (size_t i = 0; i < last_ && i < seconds.size(); ++i) {
      float ms = 0;
      if (error_ == CUDA_SUCCESS)
        error_ = d.eventElapsedTime(&ms, events_[i], events_[i + 1]);
      seconds[i] += double(ms) * 1e-3;
    }
    if (error_ != CUDA_SUCCESS)
      return Status::error("timing steps with CUDA events failed: " +
                           errorText(d, error_));
    return Status::ok();
  }

private:
  std::shared_ptr<Context> ctx_;
  CUstream stream_;
  std::vector<CUevent> events_;
  size_t last_ = 0;
  CUresult error_ = CUDA_SUCCESS;
};

} // namespace

Status CudaDevice::create(int ordinal, std::unique_ptr<Device>* out) {
  std::string why;
  const CudaDriver* d = cuda::driver(&why);
  if (!d)
    return Status::error("cuda: " + why);
  std::unique_ptr<CudaDevice> dev(new CudaDevice());
  dev->ordinal_ = ordinal;
  dev->ctx_ = std::make_shared<Context>();
  dev->ctx_->d = d;
  CUdevice cu = 0;
  MC_RETURN_IF_ERROR(dev->check(d->deviceGet(&cu, ordinal), "cuDeviceGet"));
  dev->ctx_->device = cu;
  char name[256] = {0};
  MC_RETURN_IF_ERROR(dev->check(d->deviceGetName(name, sizeof name - 1, cu),
                                "cuDeviceGetName"));
  dev->gpuName_ = name;
  int optin = 0;
  for (auto [attr, value] :
       {std::pair{CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &dev->ccMajor_},
        std::pair{CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &dev->ccMinor_},
        std::pair{CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &dev->smCount_},
        std::pair{CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                  &optin}})
    MC_RETURN_IF_ERROR(
        dev->check(d->deviceGetAttribute(value, attr, cu),
                   "cuDeviceGetAttribute"));
  dev->sharedOptin_ = size_t(std::max(optin, 48 << 10));
  MC_RETURN_IF_ERROR(dev->check(d->primaryCtxRetain(&dev->ctx_->ctx, cu),
                                "cuDevicePrimaryCtxRetain"));
  MC_RETURN_IF_ERROR(dev->makeCurrent());
  MC_RETURN_IF_ERROR(dev->check(
      d->streamCreate(&dev->stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  dev->syncEachStep_ = envFlag("MODELC_CUDA_SYNC", false);
  dev->graphs_ = envFlag("MODELC_CUDA_GRAPHS", true) && !dev->syncEachStep_;
  *out = std::move(dev);
  return Status::ok();
}

CudaDevice::~CudaDevice() {
  if (!ctx_ || !ctx_->ctx)
    return;
  const CudaDriver& d = driver();
  d.ctxSetCurrent(ctx_->ctx);
  if (stream_)
    d.streamSynchronize(stream_);
  for (const auto& weak : teardowns_)
    if (auto teardown = weak.lock())
      (*teardown)();
  for (Recorded& r : recorded_)
    if (r.exec)
      d.graphExecDestroy(r.exec);
  for (CUmodule m : modules_)
    d.moduleUnload(m);
  for (CUmodule m : runtimeModules_)
    d.moduleUnload(m);
  if (ltHandle_)
    lt_->destroy(ltHandle_);
  if (dnnHandle_)
    dnn_->destroy(dnnHandle_);
  if (pinned_)
    d.memFreeHost(pinned_);
  for (RecordBlock& b : recordBlocks_) {
    d.memFree(b.device);
    d.memFreeHost(b.host);
  }
  if (stream_)
    d.streamDestroy(stream_);
}

Status CudaDevice::runtimeKernel(const char* ptx, const std::string& entry,
                                 CUfunction* out) {
  auto it = runtimeFunctions_.find(entry);
  if (it != runtimeFunctions_.end()) {
    *out = it->second;
    return Status::ok();
  }
  MC_RETURN_IF_ERROR(makeCurrent());
  const CudaDriver& d = driver();
  CUmodule module = nullptr;
  MC_RETURN_IF_ERROR(
      check(d.moduleLoadDataEx(&module, ptx, 0, nullptr, nullptr),
            "loading the runtime's kernel " + entry + " (cuModuleLoadDataEx)"));
  CUfunction f = nullptr;
  Status st = check(d.moduleGetFunction(&f, module, entry.c_str()),
                    "cuModuleGetFunction(" + entry + ")");
  if (!st) {
    d.moduleUnload(module);
    return st;
  }
  runtimeModules_.push_back(module);
  runtimeFunctions_[entry] = f;
  *out = f;
  return Status::ok();
}

void CudaDevice::atTeardown(std::weak_ptr<std::function<void()>> teardown) {
  teardowns_.push_back(std::move(teardown));
}

Status CudaDevice::makeCurrent() const {
  return check(driver().ctxSetCurrent(ctx_->ctx), "cuCtxSetCurrent");
}

Status CudaDevice::check(CUresult r, const std::string& what) const {
  if (r == CUDA_SUCCESS)
    return Status::ok();
  return Status::error(name() + ": " + what + " failed: " +
                       errorText(*ctx_->d, r));
}

std::string CudaDevice::gpuText() const {
  return gpuName_ + " (sm_" + std::to_string(ccMajor_) +
         std::to_string(ccMinor_) + ")";
}

void CudaDevice::note(const std::string& text) {
  if (noted_)
    return;
  noted_ = true;
  std::fprintf(stderr, "modelc: %s: %s\n", name().c_str(), text.c_str());
}

Status CudaDevice::asyncError(CUresult r, const std::string& what) const {
  std::string where =
      lastStep_ ? "; the last step queued was " + *lastStep_ : "";
  return Status::error(name() + ": " + what + ": " + errorText(driver(), r) +
                       where +
                       " (set MODELC_CUDA_SYNC=1 to stop at the step that "
                       "fails)");
}

Status CudaDevice::allocate(size_t bytes, DeviceMemory* out) {
  if (!bytes) {
    *out = DeviceMemory(nullptr, [](uint8_t*) {});
    return Status::ok();
  }
  MC_RETURN_IF_ERROR(makeCurrent());
  const CudaDriver& d = driver();
  CUdeviceptr p = 0;
  CUresult r = d.memAlloc(&p, bytes);
  if (r != CUDA_SUCCESS) {
    size_t free = 0, total = 0;
    d.memGetInfo(&free, &total);
    return Status::error(name() + ": cannot allocate " + bytesText(bytes) +
                         ": " + errorText(d, r) + "; " + bytesText(free) +
                         " free of " + bytesText(total));
  }
  *out = DeviceMemory(reinterpret_cast<uint8_t*>(p), [ctx = ctx_](uint8_t* q) {
    ctx->d->ctxSetCurrent(ctx->ctx);
    ctx->d->memFree(CUdeviceptr(q));
  });
  // Zeroed, as on the CPU: a buffer read before any step wrote it is
  // deterministic.
  return check(d.memsetD8Async(p, 0, bytes, stream_), "cuMemsetD8Async");
}

Status CudaDevice::ensurePinned(size_t bytes) {
  if (pinnedFailed_ || pinnedSize_ >= bytes)
    return Status::ok();
  // A larger buffer: the old one may still feed queued copies.
  const CudaDriver& d = driver();
  CUresult r = d.streamSynchronize(stream_);
  if (r != CUDA_SUCCESS)
    return asyncError(r, "a step failed on the GPU");
  if (pinned_)
    d.memFreeHost(pinned_);
  pinned_ = nullptr;
  pinnedSize_ = pinnedUsed_ = 0;
  size_t want = std::max(bytes, std::min(kStagingChunk, size_t(4) << 20));
  void* p = nullptr;
  if (d.memAllocHost(&p, want) == CUDA_SUCCESS) {
    pinned_ = static_cast<uint8_t*>(p);
    pinnedSize_ = want;
  } else {
    pinnedFailed_ = true; // copies go from pageable memory, synchronously
  }
  return Status::ok();
}

Status CudaDevice::stage(void* dst, const void* src, size_t n) {
  const CudaDriver& d = driver();
  const uint8_t* from = static_cast<const uint8_t*>(src);
  CUdeviceptr to = CUdeviceptr(dst);
  for (size_t done = 0; done < n;) {
    size_t c = std::min(n - done, kStagingChunk);
    MC_RETURN_IF_ERROR(ensurePinned(c));
    if (pinnedFailed_) {
      MC_RETURN_IF_ERROR(check(d.memcpyHtoDAsync(to + done, from + done, c,
                                                 stream_),
                               "cuMemcpyHtoDAsync"));
      CUresult r = d.streamSynchronize(stream_);
      if (r != CUDA_SUCCESS)
        return asyncError(r, "copying to the device");
      done += c;
      continue;
    }
    if (pinnedUsed_ + c > pinnedSize_) { // the ring is full: wait
      CUresult r = d.streamSynchronize(stream_);
      if (r != CUDA_SUCCESS)
        return asyncError(r, "copying to the device");
      pinnedUsed_ = 0;
    }
    uint8_t* slot = pinned_ + pinnedUsed_;
    std::memcpy(slot, from + done, c);
    MC_RETURN_IF_ERROR(check(d.memcpyHtoDAsync(to + done, slot, c, stream_),
                             "cuMemcpyHtoDAsync"));
    pinnedUsed_ += (c + 255) / 256 * 256;
    done += c;
  }
  return Status::ok();
}

Status CudaDevice::copyToDevice(void* dst, const void* hostSrc, size_t n) {
  if (!n)
    return Status::ok();
  MC_RETURN_IF_ERROR(makeCurrent());
  return stage(dst, hostSrc, n);
}

Status CudaDevice::copyToHost(void* hostDst, const void* src, size_t n) {
  if (!n)
    return Status::ok();
  MC_RETURN_IF_ERROR(makeCurrent());
  const CudaDriver& d = driver();
  uint8_t* to = static_cast<uint8_t*>(hostDst);
  CUdeviceptr from = CUdeviceptr(src);
  for (size_t done = 0; done < n;) {
    size_t c = std::min(n - done, kStagingChunk);
    MC_RETURN_IF_ERROR(ensurePinned(c));
    // Queued after every copy that still reads the staging buffer (one
    // stream), and waited for: the buffer is free again afterwards.
    uint8_t* dst = pinnedFailed_ ? to + done : pinned_;
    MC_RETURN_IF_ERROR(check(d.memcpyDtoHAsync(dst, from + done, c, stream_),
                             "cuMemcpyDtoHAsync"));
    CUresult r = d.streamSynchronize(stream_);
    if (r != CUDA_SUCCESS)
      return asyncError(r, "copying to the host");
    pinnedUsed_ = 0;
    if (!pinnedFailed_)
      std::memcpy(to + done, pinned_, c);
    done += c;
  }
  return Status::ok();
}

std::shared_ptr<const void> CudaDevice::derived(const std::string& key) {
  for (auto it = derived_.begin(); it != derived_.end();)
    it = it->second.expired() ? derived_.erase(it) : std::next(it);
  auto it = derived_.find(key);
  return it == derived_.end() ? nullptr : it->second.lock();
}

void CudaDevice::keepDerived(const std::string& key,
                             std::weak_ptr<const void> memory) {
  derived_[key] = std::move(memory);
}

Status CudaDevice::synchronize() {
  MC_RETURN_IF_ERROR(makeCurrent());
  CUresult r = driver().streamSynchronize(stream_);
  pinnedUsed_ = 0;
  if (r != CUDA_SUCCESS)
    return asyncError(r, "a step failed on the GPU");
  return checkRecords(/*atStep=*/false);
}

/// "step N (mc.op at loc)".
std::string CudaDevice::stepText(const KernelRequest& r) {
  return "step " + std::to_string(r.stepIndex) + " (mc." + opName(r.op) +
         (r.location.empty() ? "" : " at " + r.location) + ")";
}

Status CudaDevice::errorRecord(const KernelRequest& r, CUdeviceptr* out,
                               size_t* id) {
  MC_RETURN_IF_ERROR(makeCurrent());
  const CudaDriver& d = driver();
  RecordCheck c;
  c.stepIndex = r.stepIndex;
  c.where = stepText(r);
  c.op = r.op;
  c.attrs = r.attrs;
  for (const ConstTensor& t : r.inputs)
    c.inputs.push_back(t.shape);
  // A slot a dropped binding's kernel left, else a new one (a new block of
  // them when the last is full).
  auto free = std::find_if(recordChecks_.begin(), recordChecks_.end(),
                           [](const RecordCheck& k) { return !k.live; });
  if (free != recordChecks_.end()) {
    c.block = free->block;
    c.slot = free->slot;
    *id = size_t(free - recordChecks_.begin());
  } else {
    if (recordBlocks_.empty() ||
        recordBlocks_.back().used == kRecordsPerBlock) {
      size_t bytes = kRecordsPerBlock * kErrorRecordBytes;
      RecordBlock b;
      void* host = nullptr;
      CUresult e = d.memAlloc(&b.device, bytes);
      if (e == CUDA_SUCCESS && (e = d.memAllocHost(&host, bytes)) != CUDA_SUCCESS)
        d.memFree(b.device);
      if (e != CUDA_SUCCESS)
        return Status::error(name() + ": cannot allocate " +
                             std::to_string(bytes) +
                             " bytes (device and pinned host) for the "
                             "kernels' error records: " + errorText(d, e));
      b.host = static_cast<uint64_t*>(host);
      recordBlocks_.push_back(b);
    }
    c.block = recordBlocks_.size() - 1;
    c.slot = recordBlocks_.back().used++;
    *id = recordChecks_.size();
  }
  // Zeroed (a freed slot is zero already: every run's records are read,
  // and zeroed when one failed).
  RecordBlock& b = recordBlocks_[c.block];
  *out = b.device + c.slot * kErrorRecordBytes;
  std::memset(b.host + 2 * c.slot, 0, kErrorRecordBytes);
  MC_RETURN_IF_ERROR(check(d.memsetD8Async(*out, 0, kErrorRecordBytes, stream_),
                           "cuMemsetD8Async (error record)"));
  if (*id < recordChecks_.size())
    recordChecks_[*id] = std::move(c);
  else
    recordChecks_.push_back(std::move(c));
  return Status::ok();
}

void CudaDevice::releaseErrorRecord(size_t id) {
  if (id < recordChecks_.size())
    recordChecks_[id].live = false;
}

Status CudaDevice::queueRecordCopies() {
  for (RecordBlock& b : recordBlocks_)
    if (b.used)
      MC_RETURN_IF_ERROR(check(
          driver().memcpyDtoHAsync(b.host, b.device,
                                   b.used * kErrorRecordBytes, stream_),
          "cuMemcpyDtoHAsync (error records)"));
  return Status::ok();
}

Status CudaDevice::checkRecords(bool atStep) {
  const RecordCheck* first = nullptr;
  ErrorRecord failed;
  for (const RecordCheck& c : recordChecks_) {
    if (!c.live)
      continue;
    ErrorRecord rec =
        decodeErrorRecord(recordBlocks_[c.block].host + 2 * c.slot);
    if (rec.failed && (!first || c.stepIndex < first->stepIndex)) {
      first = &c;
      failed = rec;
    }
  }
  if (!first)
    return Status::ok();
  // At a step (MODELC_CUDA_SYNC) the caller names the step, and no later
  // step has run.
  std::string what =
      kernelErrorMessage(first->op, first->attrs, first->inputs, failed);
  std::string message =
      atStep ? name() + ": " + what + " (found by the step's kernel on the GPU)"
             : name() + ": " + first->where + ": " + what +
                   " (found by the step's kernel on the GPU; the steps "
                   "after it ran anyway, so this run's outputs and any "
                   "state it updated are not valid)";
  // Zeroed, so the next run starts clean.
  const CudaDriver& d = driver();
  for (RecordBlock& b : recordBlocks_) {
    std::memset(b.host, 0, kRecordsPerBlock * kErrorRecordBytes);
    MC_RETURN_IF_ERROR(check(d.memsetD8Async(b.device, 0,
                                             kRecordsPerBlock *
                                                 kErrorRecordBytes,
                                             stream_),
                             "cuMemsetD8Async (error records)"));
  }
  return Status::error(message);
}

BoundKernel CudaDevice::step(const KernelRequest& r,
                             std::function<Status(void*)> launch) {
  auto where = std::make_shared<const std::string>(stepText(r));
  return [this, where, launch = std::move(launch)](void* workspace) {
    lastStep_ = where;
    MC_RETURN_IF_ERROR(launch(workspace));
    if (syncEachStep_) {
      CUresult e = driver().streamSynchronize(stream_);
      if (e != CUDA_SUCCESS)
        return Status::error(name() + ": the step failed on the GPU "
                             "(MODELC_CUDA_SYNC): " +
                             errorText(driver(), e));
      // The records too: a kernel's error stops the run at its step, as
      // on the CPU (the steps before it were read clean).
      if (!recordChecks_.empty()) {
        MC_RETURN_IF_ERROR(queueRecordCopies());
        e = driver().streamSynchronize(stream_);
        if (e != CUDA_SUCCESS)
          return asyncError(e, "a step failed on the GPU");
        return checkRecords(/*atStep=*/true);
      }
    }
    return Status::ok();
  };
}

Status CudaDevice::cublasLt(const CublasLt** lib, cublasLtHandle_t* handle) {
  if (!ltHandle_) {
    MC_RETURN_IF_ERROR(loadCublasLt(&lt_));
    MC_RETURN_IF_ERROR(makeCurrent());
    if (Status st = createCublasLtHandle(*lt_, &ltHandle_); !st)
      return Status::error(name() + ": " + st.message());
  }
  *lib = lt_;
  *handle = ltHandle_;
  return Status::ok();
}

Status CudaDevice::cudnn(const Cudnn** lib, cudnnHandle_t* handle) {
  if (!dnnHandle_) {
    MC_RETURN_IF_ERROR(loadCudnn(&dnn_));
    MC_RETURN_IF_ERROR(makeCurrent());
    if (Status st = createCudnnHandle(*dnn_, &dnnHandle_); !st)
      return Status::error(name() + ": " + st.message());
    cudnnStatus_t s =
        dnn_->setStream(dnnHandle_, reinterpret_cast<cudaStream_t>(stream_));
    if (s != CUDNN_STATUS_SUCCESS) {
      dnn_->destroy(dnnHandle_);
      dnnHandle_ = nullptr;
      return Status::error(name() + ": cudnnSetStream failed: " +
                           statusText(*dnn_, s));
    }
  }
  *lib = dnn_;
  *handle = dnnHandle_;
  return Status::ok();
}

Status CudaDevice::runSteps(uint64_t key,
                            const std::function<Status()>& stepList) {
  MC_RETURN_IF_ERROR(makeCurrent());
  // The steps, then the copies of the error records that synchronize()
  // reads (recorded into the graph with them).
  auto runAll = [&]() -> Status {
    MC_RETURN_IF_ERROR(stepList());
    return queueRecordCopies();
  };
  if (key == 0 || !graphs_)
    return runAll();
  auto it = std::find_if(recorded_.begin(), recorded_.end(),
                         [&](const Recorded& r) { return r.key == key; });
  if (it == recorded_.end()) {
    // The first run of these steps: as they are (it binds lazily what a
    // kernel binds on first use, which a graph could not record).
    if (recorded_.size() >= kMaxGraphs) { // forget the oldest
      auto oldest = std::min_element(
          recorded_.begin(), recorded_.end(),
          [](const Recorded& a, const Recorded& b) { return a.key < b.key; });
      if (oldest->exec)
        driver().graphExecDestroy(oldest->exec);
      recorded_.erase(oldest);
    }
    recorded_.push_back(Recorded{key});
    return runAll();
  }
  Recorded& rec = *it;
  const CudaDriver& d = driver();
  if (rec.failed)
    return runAll();
  if (!rec.exec) {
    // The second run: recorded as a graph (nothing runs while recording),
    // then launched.
    auto giveUp = [&](const std::string& why) {
      rec.failed = true;
      note("running the steps one by one, not as a CUDA graph: " + why);
      return runAll();
    };
    CUresult r = d.streamBeginCapture(stream_,
                                      CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (r != CUDA_SUCCESS)
      return giveUp("cuStreamBeginCapture failed: " + errorText(d, r));
    Status steps = runAll();
    CUgraph graph = nullptr;
    r = d.streamEndCapture(stream_, &graph);
    if (!steps || r != CUDA_SUCCESS || !graph) {
      if (graph)
        d.graphDestroy(graph);
      return giveUp(!steps ? steps.message()
                           : "cuStreamEndCapture failed: " + errorText(d, r));
    }
    r = d.graphInstantiate(&rec.exec, graph, 0);
    d.graphDestroy(graph);
    if (r != CUDA_SUCCESS) {
      rec.exec = nullptr;
      return giveUp("cuGraphInstantiate failed: " + errorText(d, r));
    }
  }
  static const auto replay =
      std::make_shared<const std::string>("a replayed CUDA graph of the steps");
  lastStep_ = replay;
  return check(d.graphLaunch(rec.exec, stream_), "cuGraphLaunch");
}

void CudaDevice::disableGraphs(const std::string& why) {
  if (!graphs_)
    return;
  graphs_ = false;
  note(why);
}

size_t CudaDevice::graphCount() const {
  return size_t(std::count_if(recorded_.begin(), recorded_.end(),
                              [](const Recorded& r) { return r.exec; }));
}

std::unique_ptr<StepTimer> CudaDevice::stepTimer() {
  return std::make_unique<EventTimer>(ctx_, stream_);
}

namespace {
DeviceKindRegistration cudaKind(DeviceKind{
    "cuda", 10, CudaDevice::create, countCuda, {"cuda"}, whyNoCuda});
} // namespace

} // namespace mc::rt::cuda
