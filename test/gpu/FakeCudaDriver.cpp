// A fake CUDA driver (libmodelc_fake_cuda.so) for machines without a GPU:
// the entry points the runtime's CUDA device loads, over host memory, with
// a stream that runs everything at once, the kernels of kernels.ptx and
// the runtime's all-reduce scale kernel emulated in C++ (their grid-stride
// loops over the launch's real grid and block), and a primary context that
// resets, unloading its modules, when its last reference goes. Stream capture records the work and a graph launch
// replays it. The runtime loads it through MODELC_CUDA_DRIVER, so the
// device's own logic (memory, staging, executable choice, launches and
// their parameters, graphs, events, errors) runs in CI; test/gpu covers
// the real driver on a GPU.
#include <cuda.h>

#include "modelc/error_record.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace {

constexpr size_t kTotalMemory = size_t(1) << 30;
constexpr int kSmCount = 4;

/// Live device allocations: base -> size.
std::map<uintptr_t, size_t> &allocations() {
  static std::map<uintptr_t, size_t> a;
  return a;
}
size_t used = 0;

/// Whether [p, p + n) lies inside one device allocation.
bool onDevice(CUdeviceptr p, size_t n) {
  auto &a = allocations();
  auto it = a.upper_bound(uintptr_t(p));
  if (it == a.begin())
    return false;
  --it;
  return uintptr_t(p) + n <= it->first + it->second;
}

struct Stream {
  bool capturing = false, invalidated = false;
  std::vector<std::function<void()>> captured;
};
struct Graph {
  std::vector<std::function<void()>> work;
};
struct Function {
  std::string name;
  int maxDynamicShared = 48 << 10;
};
struct Module {
  std::vector<std::unique_ptr<Function>> functions;
};

/// Statistics the tests read (modelcFakeCudaStats).
struct Stats {
  long launches = 0;      // cuLaunchKernel calls (captured or not)
  long kernelsRun = 0;    // kernels executed (eagerly or by a graph)
  long graphLaunches = 0; // cuGraphLaunch calls
  long graphsLive = 0;    // instantiated and not destroyed
};
Stats stats;

/// Runs `work` now, or records it when `s` is capturing.
CUresult enqueue(CUstream s, std::function<void()> work) {
  Stream *st = reinterpret_cast<Stream *>(s);
  if (st && st->capturing) {
    st->captured.push_back(std::move(work));
    return CUDA_SUCCESS;
  }
  work();
  return CUDA_SUCCESS;
}

/// A call a capturing stream may not see: invalidates the capture.
CUresult forbiddenWhileCapturing(CUstream s) {
  Stream *st = reinterpret_cast<Stream *>(s);
  if (st && st->capturing) {
    st->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return CUDA_SUCCESS;
}

int fakeContext = 0;
/// Primary context references; at 0 the context resets, and with it go
/// its modules (a function handle from before is then invalid).
int contextRefs = 0;
std::set<Module *> liveModules;

bool liveFunction(const Function *f) {
  for (Module *m : liveModules)
    for (auto &fn : m->functions)
      if (fn.get() == f)
        return true;
  return false;
}

} // namespace

extern "C" {

struct ModelcFakeCudaStats {
  long launches, kernelsRun, graphLaunches, graphsLive;
};
__attribute__((visibility("default"))) ModelcFakeCudaStats
modelcFakeCudaStats() {
  return {stats.launches, stats.kernelsRun, stats.graphLaunches,
          stats.graphsLive};
}

CUresult CUDAAPI cuInit(unsigned int) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuDriverGetVersion(int *v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorName(CUresult r, const char **s) {
  switch (r) {
  case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
  case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
  case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
  case CUDA_ERROR_INVALID_IMAGE: *s = "CUDA_ERROR_INVALID_IMAGE"; break;
  case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
  case CUDA_ERROR_INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; break;
  case CUDA_ERROR_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
  case CUDA_ERROR_ILLEGAL_ADDRESS: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
  case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
    *s = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    break;
  case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    *s = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
    break;
  default: *s = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorString(CUresult r, const char **s) {
  *s = r == CUDA_SUCCESS ? "no error" : "fake driver error";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetCount(int *n) {
  *n = 1;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGet(CUdevice *d, int ordinal) {
  if (ordinal != 0)
    return CUDA_ERROR_INVALID_VALUE;
  *d = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice) {
  std::strncpy(name, "Fake GPU", size_t(len));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice) {
  switch (a) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = kSmCount; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
    *v = 227 << 10;
    break;
  default: *v = 0;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice) {
  *c = reinterpret_cast<CUcontext>(&fakeContext);
  ++contextRefs;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice) {
  if (contextRefs <= 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (--contextRefs == 0) {
    for (Module *m : liveModules)
      delete m;
    liveModules.clear();
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamCreate(CUstream *s, unsigned int) {
  *s = reinterpret_cast<CUstream>(new Stream());
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy_v2(CUstream s) {
  delete reinterpret_cast<Stream *>(s);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamSynchronize(CUstream s) {
  return forbiddenWhileCapturing(s);
}
CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
  if (n == 0 || n > kTotalMemory - used)
    return n ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
  void *q = std::aligned_alloc(256, (n + 255) / 256 * 256);
  if (!q)
    return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(q, 0xab, n); // garbage, as a GPU's fresh memory
  allocations()[uintptr_t(q)] = n;
  used += n;
  *p = CUdeviceptr(q);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemFree_v2(CUdeviceptr p) {
  auto it = allocations().find(uintptr_t(p));
  if (it == allocations().end())
    return CUDA_ERROR_INVALID_VALUE;
  used -= it->second;
  allocations().erase(it);
  std::free(reinterpret_cast<void *>(p));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemGetInfo_v2(size_t *free, size_t *total) {
  *free = kTotalMemory - used;
  *total = kTotalMemory;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemAllocHost_v2(void **p, size_t n) {
  *p = std::malloc(n);
  return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult CUDAAPI cuMemFreeHost(void *p) {
  std::free(p);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n,
                                      CUstream s) {
  if (!onDevice(d, n))
    return CUDA_ERROR_INVALID_VALUE;
  return enqueue(s, [=] { std::memcpy(reinterpret_cast<void *>(d), h, n); });
}
CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n,
                                      CUstream s) {
  if (!onDevice(d, n))
    return CUDA_ERROR_INVALID_VALUE;
  return enqueue(s, [=] { std::memcpy(h, reinterpret_cast<void *>(d), n); });
}
CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr src,
                                      size_t n, CUstream s) {
  if (!onDevice(d, n) || !onDevice(src, n))
    return CUDA_ERROR_INVALID_VALUE;
  return enqueue(s, [=] {
    std::memmove(reinterpret_cast<void *>(d), reinterpret_cast<void *>(src),
                 n);
  });
}
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n,
                                 CUstream s) {
  if (!onDevice(d, n))
    return CUDA_ERROR_INVALID_VALUE;
  return enqueue(s, [=] { std::memset(reinterpret_cast<void *>(d), v, n); });
}

/// A module holds the kernels of kernels.ptx whose names its image has
/// (PTX text or a cubin's string table); an image with neither is invalid.
CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *m, const void *image,
                                    unsigned int, CUjit_option *, void **) {
  const char *bytes = static_cast<const char *>(image);
  // The image's own length is unknown: PTX ends at its NUL, a cubin's ELF
  // header says its size.
  size_t size = std::strlen(bytes);
  if (size >= 4 && std::memcmp(bytes, "\x7f" "ELF", 4) == 0) {
    uint64_t shoff;
    uint16_t shentsize, shnum;
    std::memcpy(&shoff, bytes + 0x28, 8);
    std::memcpy(&shentsize, bytes + 0x3a, 2);
    std::memcpy(&shnum, bytes + 0x3c, 2);
    size = size_t(shoff) + size_t(shentsize) * shnum;
  }
  std::string text(bytes, size);
  auto mod = std::make_unique<Module>();
  for (const char *name :
       {"add_f32", "copy_via_shared", "div_i32", "modelc_scale_f32"})
    if (text.find(name) != std::string::npos)
      mod->functions.push_back(std::make_unique<Function>(Function{name}));
  if (mod->functions.empty())
    return CUDA_ERROR_INVALID_IMAGE;
  liveModules.insert(mod.get());
  *m = reinterpret_cast<CUmodule>(mod.release());
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleUnload(CUmodule m) {
  Module *mod = reinterpret_cast<Module *>(m);
  if (!liveModules.erase(mod))
    return CUDA_ERROR_INVALID_HANDLE; // unloaded, or gone with its context
  delete mod;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleGetFunction(CUfunction *f, CUmodule m,
                                     const char *name) {
  if (!liveModules.count(reinterpret_cast<Module *>(m)))
    return CUDA_ERROR_INVALID_HANDLE;
  for (auto &fn : reinterpret_cast<Module *>(m)->functions)
    if (fn->name == name) {
      *f = reinterpret_cast<CUfunction>(fn.get());
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction f, CUfunction_attribute a,
                                    int v) {
  if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    if (v > (227 << 10))
      return CUDA_ERROR_INVALID_VALUE;
    reinterpret_cast<Function *>(f)->maxDynamicShared = v;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncGetAttribute(int *v, CUfunction_attribute a,
                                    CUfunction) {
  *v = a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(
    int *n, CUfunction f, int block, size_t shared) {
  *n = int(shared) > reinterpret_cast<Function *>(f)->maxDynamicShared
           ? 0
           : std::max(1, 2048 / std::max(block, 1));
  return CUDA_SUCCESS;
}

/// The kernels of kernels.ptx: each thread (b, t) of the grid takes
/// elements b * block + t, then strides by grid * block.
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy,
                                unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned shared, CUstream s,
                                void **params, void **extra) {
  Function *fn = reinterpret_cast<Function *>(f);
  if (!liveFunction(fn))
    return CUDA_ERROR_INVALID_HANDLE;
  if (!gx || !bx || gy != 1 || gz != 1 || by != 1 || bz != 1 || bx > 1024 ||
      extra || int(shared) > fn->maxDynamicShared)
    return CUDA_ERROR_INVALID_VALUE;
  ++stats.launches;
  if (fn->name == "modelc_scale_f32") {
    // modelc_scale_f32 (x, y, scale, n): y = x * scale.
    float *x = reinterpret_cast<float *>(*static_cast<CUdeviceptr *>(params[0]));
    float *y = reinterpret_cast<float *>(*static_cast<CUdeviceptr *>(params[1]));
    float scale = *static_cast<float *>(params[2]);
    uint64_t n = *static_cast<uint64_t *>(params[3]);
    if (!onDevice(CUdeviceptr(x), n * 4) || !onDevice(CUdeviceptr(y), n * 4))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return enqueue(s, [=] {
      ++stats.kernelsRun;
      for (uint64_t i = 0; i < n; ++i)
        y[i] = x[i] * scale;
    });
  }
  if (fn->name == "div_i32") {
    // div_i32 (a, b, out, batch, record): the CPU's integer division, a
    // zero divisor recorded as kernels.ptx does (the atomics' max).
    auto iptr = [&](int i) {
      return reinterpret_cast<int32_t *>(*static_cast<CUdeviceptr *>(params[i]));
    };
    int32_t *a = iptr(0), *b = iptr(1), *out = iptr(2);
    int64_t n = 5 + 37 * *static_cast<int64_t *>(params[3]);
    auto *record =
        reinterpret_cast<uint64_t *>(*static_cast<CUdeviceptr *>(params[4]));
    uint64_t bytes = uint64_t(n) * 4;
    if (!onDevice(CUdeviceptr(a), bytes) || !onDevice(CUdeviceptr(b), bytes) ||
        !onDevice(CUdeviceptr(out), bytes) || !onDevice(CUdeviceptr(record), 16))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return enqueue(s, [=] {
      ++stats.kernelsRun;
      int64_t stride = int64_t(gx) * bx;
      for (int64_t first = 0; first < stride; ++first)
        for (int64_t i = first; i < n; i += stride) {
          if (b[i] == 0) {
            out[i] = 0;
            uint64_t words[2];
            mc::rt::encodeErrorRecord(uint64_t(i), 0, words);
            record[0] = std::max(record[0], words[0]);
            record[1] = std::max(record[1], words[1]);
          } else {
            out[i] = b[i] == -1 ? int32_t(0u - uint32_t(a[i])) : a[i] / b[i];
          }
        }
    });
  }
  bool add = fn->name == "add_f32";
  // Parameters: the pointers, then the batch (the ABI of Launch).
  auto ptr = [&](int i) {
    return reinterpret_cast<float *>(*static_cast<CUdeviceptr *>(params[i]));
  };
  float *a = ptr(0), *b = add ? ptr(1) : nullptr, *out = ptr(add ? 2 : 1);
  int64_t batch = *static_cast<int64_t *>(params[add ? 3 : 2]);
  int64_t n = add ? 5 + 37 * batch : 4096;
  uint64_t bytes = uint64_t(n) * 4;
  if (!onDevice(CUdeviceptr(a), bytes) || !onDevice(CUdeviceptr(out), bytes) ||
      (add && !onDevice(CUdeviceptr(b), bytes)))
    return CUDA_ERROR_ILLEGAL_ADDRESS;
  return enqueue(s, [=] {
    ++stats.kernelsRun;
    int64_t stride = int64_t(gx) * bx;
    for (int64_t first = 0; first < stride; ++first)
      for (int64_t i = first; i < n; i += stride)
        out[i] = add ? a[i] + b[i] : a[i];
  });
}
CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode) {
  Stream *st = reinterpret_cast<Stream *>(s);
  if (st->capturing)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  st->capturing = true;
  st->invalidated = false;
  st->captured.clear();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamEndCapture(CUstream s, CUgraph *g) {
  Stream *st = reinterpret_cast<Stream *>(s);
  if (!st->capturing)
    return CUDA_ERROR_INVALID_VALUE;
  st->capturing = false;
  *g = nullptr;
  if (st->invalidated)
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  *g = reinterpret_cast<CUgraph>(new Graph{std::move(st->captured)});
  st->captured.clear();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g,
                                             unsigned long long) {
  *e = reinterpret_cast<CUgraphExec>(new Graph(*reinterpret_cast<Graph *>(g)));
  ++stats.graphsLive;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphLaunch(CUgraphExec e, CUstream s) {
  if (CUresult r = forbiddenWhileCapturing(s))
    return r;
  ++stats.graphLaunches;
  for (auto &w : reinterpret_cast<Graph *>(e)->work)
    w();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec e) {
  delete reinterpret_cast<Graph *>(e);
  --stats.graphsLive;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphDestroy(CUgraph g) {
  delete reinterpret_cast<Graph *>(g);
  return CUDA_SUCCESS;
}

using Clock = std::chrono::steady_clock;
CUresult CUDAAPI cuEventCreate(CUevent *e, unsigned int) {
  *e = reinterpret_cast<CUevent>(new Clock::time_point());
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventDestroy_v2(CUevent e) {
  delete reinterpret_cast<Clock::time_point *>(e);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) {
  if (CUresult r = forbiddenWhileCapturing(s))
    return r;
  *reinterpret_cast<Clock::time_point *>(e) = Clock::now();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventSynchronize(CUevent) { return CUDA_SUCCESS; }
// Work runs when it is queued here: every event has completed.
CUresult CUDAAPI cuEventQuery(CUevent) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamWaitEvent(CUstream, CUevent, unsigned int) {
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) {
  *ms = std::chrono::duration<float, std::milli>(
            *reinterpret_cast<Clock::time_point *>(b) -
            *reinterpret_cast<Clock::time_point *>(a))
            .count();
  return CUDA_SUCCESS;
}

} // extern "C"
