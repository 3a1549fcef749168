// The CUDA driver API, loaded at run time: dlopen("libcuda.so.1") and one
// function pointer per entry point the runtime calls. cuda.h gives the
// types only; nothing links libcuda, so the runtime starts (and runs on the
// CPU) on machines without a driver. Internal to the runtime.
#ifndef MODELC_RUNTIME_CUDA_CUDADRIVER_H
#define MODELC_RUNTIME_CUDA_CUDADRIVER_H

#include "modelc/status.h"

#include <cuda.h>

#include <string>
#include <vector>

namespace mc::rt::cuda {

// X(member, function in cuda.h, symbol in libcuda): the function's type is
// taken from cuda.h (where cuMemAlloc means cuMemAlloc_v2), and the symbol
// is the versioned name that type belongs to.
#define MC_CUDA_DRIVER_FUNCTIONS(X)                                            \
  X(init, cuInit, "cuInit")                                                    \
  X(driverGetVersion, cuDriverGetVersion, "cuDriverGetVersion")                \
  X(getErrorName, cuGetErrorName, "cuGetErrorName")                            \
  X(getErrorString, cuGetErrorString, "cuGetErrorString")                      \
  X(deviceGetCount, cuDeviceGetCount, "cuDeviceGetCount")                      \
  X(deviceGet, cuDeviceGet, "cuDeviceGet")                                     \
  X(deviceGetName, cuDeviceGetName, "cuDeviceGetName")                         \
  X(deviceGetAttribute, cuDeviceGetAttribute, "cuDeviceGetAttribute")          \
  X(primaryCtxRetain, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")    \
  X(primaryCtxRelease, cuDevicePrimaryCtxRelease,                              \
    "cuDevicePrimaryCtxRelease_v2")                                            \
  X(ctxSetCurrent, cuCtxSetCurrent, "cuCtxSetCurrent")                         \
  X(streamCreate, cuStreamCreate, "cuStreamCreate")                            \
  X(streamDestroy, cuStreamDestroy, "cuStreamDestroy_v2")                      \
  X(streamSynchronize, cuStreamSynchronize, "cuStreamSynchronize")             \
  X(memAlloc, cuMemAlloc, "cuMemAlloc_v2")                                     \
  X(memFree, cuMemFree, "cuMemFree_v2")                                        \
  X(memGetInfo, cuMemGetInfo, "cuMemGetInfo_v2")                               \
  X(memAllocHost, cuMemAllocHost, "cuMemAllocHost_v2")                         \
  X(memFreeHost, cuMemFreeHost, "cuMemFreeHost")                               \
  X(memcpyHtoDAsync, cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")                \
  X(memcpyDtoHAsync, cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")                \
  X(memcpyDtoDAsync, cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")                \
  X(memsetD8Async, cuMemsetD8Async, "cuMemsetD8Async")                         \
  X(moduleLoadDataEx, cuModuleLoadDataEx, "cuModuleLoadDataEx")                \
  X(moduleUnload, cuModuleUnload, "cuModuleUnload")                            \
  X(moduleGetFunction, cuModuleGetFunction, "cuModuleGetFunction")             \
  X(funcSetAttribute, cuFuncSetAttribute, "cuFuncSetAttribute")                \
  X(funcGetAttribute, cuFuncGetAttribute, "cuFuncGetAttribute")                \
  X(occupancyMaxActiveBlocksPerMultiprocessor,                                 \
    cuOccupancyMaxActiveBlocksPerMultiprocessor,                               \
    "cuOccupancyMaxActiveBlocksPerMultiprocessor")                             \
  X(launchKernel, cuLaunchKernel, "cuLaunchKernel")                            \
  X(streamBeginCapture, cuStreamBeginCapture, "cuStreamBeginCapture_v2")       \
  X(streamEndCapture, cuStreamEndCapture, "cuStreamEndCapture")                \
  X(graphInstantiate, cuGraphInstantiateWithFlags,                             \
    "cuGraphInstantiateWithFlags")                                             \
  X(graphLaunch, cuGraphLaunch, "cuGraphLaunch")                               \
  X(graphExecDestroy, cuGraphExecDestroy, "cuGraphExecDestroy")                \
  X(graphDestroy, cuGraphDestroy, "cuGraphDestroy")                            \
  X(eventCreate, cuEventCreate, "cuEventCreate")                               \
  X(eventDestroy, cuEventDestroy, "cuEventDestroy_v2")                         \
  X(eventRecord, cuEventRecord, "cuEventRecord")                               \
  X(eventSynchronize, cuEventSynchronize, "cuEventSynchronize")                \
  X(eventQuery, cuEventQuery, "cuEventQuery")                                  \
  X(streamWaitEvent, cuStreamWaitEvent, "cuStreamWaitEvent")                   \
  X(eventElapsedTime, cuEventElapsedTime, "cuEventElapsedTime_v2")

/// The driver's entry points; every one is set once the driver is loaded.
struct CudaDriver {
#define MC_CUDA_MEMBER(member, fn, symbol) decltype(&::fn) member = nullptr;
  MC_CUDA_DRIVER_FUNCTIONS(MC_CUDA_MEMBER)
#undef MC_CUDA_MEMBER
  int version = 0; // cuDriverGetVersion: 13000 for CUDA 13.0
};

/// The process's driver, loaded (and cuInit'ed) on the first call; null
/// when it cannot be, with `*why` saying why ("no CUDA driver: libcuda.so.1
/// not found", "cuInit failed: CUDA_ERROR_NO_DEVICE (...)"). Never prints.
/// MODELC_CUDA_DRIVER names another library to load instead (test/gpu's
/// fake driver).
const CudaDriver* driver(std::string* why = nullptr);

/// Loads a driver from `library` into `*out` and calls cuInit: what
/// driver() does once with "libcuda.so.1" (tests pass other names).
Status loadDriver(const char* library, CudaDriver* out);

/// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
std::string errorText(const CudaDriver& d, CUresult r);

/// dlopen of the first of `names` found: first the loader's own search
/// (LD_LIBRARY_PATH, the runpath, ld.so.cache), then the CUDA toolkit's
/// library folders ($CUDA_HOME/lib64, /usr/local/cuda/lib64,
/// /usr/local/cuda/targets/x86_64-linux/lib). Null when none is found,
/// with `*error` naming what was looked for and where.
void* openLibrary(const std::vector<std::string>& names, std::string* error);

/// "80.0 GiB (85899345920 bytes)".
std::string bytesText(size_t bytes);

} // namespace mc::rt::cuda

#endif // MODELC_RUNTIME_CUDA_CUDADRIVER_H
